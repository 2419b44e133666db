/* qp.c: queue pairs; the extended QP behind verbs_context->create_qp_ex. */
#ifndef SRD_QP_H
#define SRD_QP_H
#include "srd.h"

struct ibv_qp *srd_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr);

#endif
