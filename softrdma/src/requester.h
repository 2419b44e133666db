/* requester.c: posting sends, the send queue, in-process delivery, the RC requester. */
#ifndef SRD_REQUESTER_H
#define SRD_REQUESTER_H
#include "srd.h"
#include "wire.h"

int srd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int srd_post_send_wrs(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad, bool whole);
void srd_sq_progress(struct srd_qp *qp); /* sq_lock held */
/* The packet path: an ACK/NAK or a READ/atomic response for qp (QPN table read lock held). */
void srd_requester_rx(struct srd_qp *qp, const struct pkt_hdr *h, const uint8_t *payload);
bool srd_requester_service(struct srd_qp *qp, bool kick, uint64_t now);
void srd_req_reset(struct srd_qp *qp); /* sq_lock held */

#endif
