/* qp.c: queue pairs; the extended QP behind verbs_context->create_qp_ex. */
#ifndef SRD_QP_H
#define SRD_QP_H
#include "srd.h"

struct ibv_qp *srd_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr);
/* verbs_context->open_qp: a handle to an XRC_RECV QP of the domain */
struct ibv_qp *srd_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *attr);

#endif
