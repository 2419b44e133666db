/* sq.c: send-queue completions and the data path's move of a QP to ERR. */
#ifndef SRD_SQ_H
#define SRD_SQ_H
#include "srd.h"
#include "cq.h"

/* READ and atomics: the WQEs that wait for responses. */
static inline bool srd_is_rd(const struct srd_swqe *w)
{
	return w->opcode == IBV_WR_RDMA_READ || w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* The completion opcode of a send WR's opcode. */
static inline enum ibv_wc_opcode srd_wc_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
	case IBV_WR_BIND_MW: return IBV_WC_BIND_MW;
	case IBV_WR_LOCAL_INV: return IBV_WC_LOCAL_INV;
	default: return IBV_WC_SEND;
	}
}

/* Writes a send completion of qp into its send CQ (in place, cq.h); sq_lock held. */
static inline void srd_sq_cqe(struct srd_qp *qp, uint64_t wr_id, enum ibv_wc_status st,
			      enum ibv_wc_opcode op, uint32_t len)
{
	uint32_t qpn = qp->ibqp.qp_num;
	struct srd_cq *cq = srd_cq_of(qp->ibqp.send_cq);
	struct ibv_wc *wc = srd_cq_begin(cq);
	if (wc)
		srd_wc_put(wc, wr_id, st, op, len, 0, qpn, 0, 0);
	srd_cq_commit(cq, wc, false);
}

/* sq_lock held for these two */
void srd_sq_complete_tail(struct srd_qp *qp, enum ibv_wc_status st);
void srd_flush_sq_locked(struct srd_qp *qp);
/* requester: the caller is the QP's requester and holds sq_lock (the SQ is flushed now; the
 * RQ under resp_lock, taken here after sq_lock); else its responder, holding resp_lock (the
 * RQ is flushed now; the SQ by the agent's visit, as sq_lock may not be taken under it) */
void srd_qp_to_error(struct srd_qp *qp, bool requester);

#endif
