/* qp.c: queue pairs, their state machine, ibv_open_qp. */
#ifndef SRD_QP_H
#define SRD_QP_H
#include "srd.h"

/* Creates a QP: RC, UC, UD and XRC_SEND on pd; XRC_RECV (pd NULL) in xrcd (ibv_create_qp,
 * and create_qp_ex in qpx.c). NULL and errno on failure. */
struct ibv_qp *srd_qp_create(struct ibv_context *context, struct ibv_pd *pd,
			     struct ibv_qp_init_attr *init, struct srd_xrcd *xrcd);
/* verbs_context->open_qp: a handle to an XRC_RECV QP of the domain */
struct ibv_qp *srd_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *attr);

#endif
