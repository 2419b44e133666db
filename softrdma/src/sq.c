/*
 * Send-queue completions and the data path's move of a QP to ERR: completing
 * the oldest send WQE, flushing the send queue, and srd_qp_to_error (flushes
 * both queues), which the requester and the responder share.
 * Owns: the completion side of struct srd_qp's send ring.
 * Calls: cq, rq (flush), net (kick the agent).
 */
#include "sq.h"
#include "cq.h"
#include "rq.h"
#include "net.h"

/* Completes the oldest WQE of the send queue; sq_lock held. */
void srd_sq_complete_tail(struct srd_qp *qp, enum ibv_wc_status st)
{
	struct srd_swqe *w = &qp->sq[qp->sq_tail & (unsigned)(qp->sq_cap - 1)];
	if (w->psn_assigned && srd_is_rd(w) && qp->outstanding_rd > 0)
		qp->outstanding_rd--;
	if (w->signaled || st != IBV_WC_SUCCESS) {
		uint32_t len = 0;
		if (st == IBV_WC_SUCCESS) {
			if (w->opcode == IBV_WR_RDMA_READ)
				len = w->length;
			else if (srd_is_rd(w))
				len = 8;
		}
		/* written in place (cq.h): no completion built on the stack and copied */
		srd_sq_cqe(qp, w->wr_id, st, srd_wc_opcode(w->opcode), len);
	}
	qp->sq_tail++;
	if ((int)(qp->sq_next_tx - qp->sq_tail) < 0)
		qp->sq_next_tx = qp->sq_tail;
}

void srd_flush_sq_locked(struct srd_qp *qp)
{
	while (qp->sq_tail != qp->sq_head)
		srd_sq_complete_tail(qp, IBV_WC_WR_FLUSH_ERR);
	qp->sq_next_tx = qp->sq_tail;
	qp->outstanding_rd = 0;
	qp->timer_deadline_ns = 0;
	qp->rnr_wait = false;
}


/*
 * Moves a QP to ERR from the data path (responder-detected errors, retry exhaustion, local
 * errors of the send queue). The receive queue is flushed under resp_lock, in the order
 * sq_lock < resp_lock the data path keeps (responder.c): the responder takes a receive WQE
 * and writes its completion under resp_lock, after the ACK, so a flush without it could
 * complete the receives behind that WQE before it.
 */
void srd_qp_to_error(struct srd_qp *qp, bool requester)
{
	int old = __atomic_exchange_n(&qp->state, IBV_QPS_ERR, __ATOMIC_ACQ_REL);
	qp->ibqp.state = IBV_QPS_ERR;
	qp->attr.qp_state = IBV_QPS_ERR;
	if (old == IBV_QPS_ERR)
		return;
	if (requester) {
		srd_flush_sq_locked(qp);
		srd_lock(&qp->resp_lock);
		srd_flush_rq(qp);
		srd_unlock(&qp->resp_lock);
	} else {
		srd_qp_kick(qp);
		srd_flush_rq(qp);
	}
}
