/* rq.c: receive queues (a QP's own and shared ones) and receive completions. */
#ifndef SRD_RQ_H
#define SRD_RQ_H
#include "srd.h"

int srd_rq_init(struct srd_rq *rq, int cap, int max_sge);
void srd_rq_free(struct srd_rq *rq);
/* Takes one receive WQE (own RQ or SRQ) into out/sges; false when none is posted. */
bool srd_take_rwqe(struct srd_qp *qp, struct srd_rwqe *out, struct ibv_sge *sges);
/* imm: 0, 1 (imm_data is immediate data) or SRD_WC_INV (imm_data is the invalidated rkey) */
#define SRD_WC_INV 2
void srd_recv_complete(struct srd_qp *qp, const struct srd_rwqe *rw, enum ibv_wc_status st,
		       enum ibv_wc_opcode op, uint32_t len, int imm, uint32_t imm_data,
		       uint32_t src_qp, bool grh, bool solicited);
/* The receive side's part of a move to ERR, resp_lock held: the receive WQE the responder
 * holds for a SEND in progress, then the QP's posted receives, complete with WR_FLUSH_ERR. */
void srd_flush_rq(struct srd_qp *qp);
int srd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
struct ibv_srq *srd_create_srq_ex(struct ibv_context *context, struct ibv_srq_init_attr_ex *attr);
int srd_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num);
int srd_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

#endif
