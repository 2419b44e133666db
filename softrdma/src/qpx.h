/* qpx.c: the extended QP (ibv_qp_ex and its ibv_wr_* builders). */
#ifndef SRD_QPX_H
#define SRD_QPX_H
#include "srd.h"

/* verbs_context->create_qp_ex */
struct ibv_qp *srd_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr);

#endif
