/* sq.c: send-queue completions and the data path's move of a QP to ERR. */
#ifndef SRD_SQ_H
#define SRD_SQ_H
#include "srd.h"

/* READ and atomics: the WQEs that wait for responses. */
static inline bool srd_is_rd(const struct srd_swqe *w)
{
	return w->opcode == IBV_WR_RDMA_READ || w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* sq_lock held for these two */
void srd_sq_complete_tail(struct srd_qp *qp, enum ibv_wc_status st);
void srd_flush_sq_locked(struct srd_qp *qp);
/* flush_sq_now: the caller holds sq_lock (else the agent flushes the SQ later) */
void srd_qp_to_error(struct srd_qp *qp, bool flush_sq_now);

#endif
