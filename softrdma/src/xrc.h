/* xrc.c: XRC domains (ibv_open_xrcd over a file, known node-wide), the numbers of this
 * process's XRC SRQs, and its XRC_RECV (TGT) QPs. */
#ifndef SRD_XRC_H
#define SRD_XRC_H
#include "srd.h"

/* verbs_context->open_xrcd, ->close_xrcd */
struct ibv_xrcd *srd_open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *attr);
int srd_close_xrcd(struct ibv_xrcd *ibxrcd);
/* An XRC SRQ joins its domain (numbered, findable by requests) / leaves it: after
 * srd_xrc_srq_remove no responder holds it. */
void srd_xrc_srq_add(struct srd_srq *srq, struct srd_xrcd *xrcd);
void srd_xrc_srq_remove(struct srd_srq *srq);
/* TGT QPs: add at creation; remove at destruction, EBUSY while ibv_open_qp handles of it
 * are open. find: the TGT QP qpn of this process in xrcd's domain, its open count raised. */
void srd_xrc_tgt_add(struct srd_qp *qp);
int srd_xrc_tgt_remove(struct srd_qp *qp);
struct srd_qp *srd_xrc_tgt_open(struct srd_xrcd *xrcd, uint32_t qpn);
void srd_xrc_tgt_close(struct srd_qp *real);
/* Whether another live process of xrcd's domain created TGT QP qpn. */
bool srd_xrc_tgt_elsewhere(struct srd_xrcd *xrcd, uint32_t qpn);
/* The responder's selection of the XRC SRQ a request to qp names (resp_lock held): SYN_ACK
 * with qp->srq and qp->rpd set, or the NAK syndrome with the async event to raise: a
 * request that is not XRC to a TGT QP or XRC to another QP, or an SRQ number that names
 * no XRC SRQ: invalid request; an SRQ of another domain: remote access error. */
int srd_xrc_select(struct srd_qp *qp, bool xrc, uint32_t srqn, enum ibv_event_type *ev);

#endif
