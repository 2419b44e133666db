/*
 * Receive queues: a QP's own RQ and shared receive queues (create, modify,
 * query, destroy, post_recv, post_srq_recv), taking a receive WQE for an
 * incoming message (with the SRQ limit event), writing receive completions,
 * and flushing a QP's RQ.
 * XRC SRQs (ibv_create_srq_ex with IBV_SRQT_XRC, ibv_get_srq_num) join their domain in xrc.c.
 * Owns: struct srd_rq, srd_srq, srd_rwqe. Calls: cq, events, xrc, net (XRC SRQ numbers).
 */
#include "rq.h"
#include "cq.h"
#include "events.h"
#include "xrc.h"
#include "net.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- receive queues */

int srd_rq_init(struct srd_rq *rq, int cap, int max_sge)
{
	srd_mutex_init(&rq->lock);
	rq->cap = cap > 0 ? cap : 1;
	rq->max_sge = max_sge > 0 ? max_sge : 1;
	rq->ring = calloc((size_t)rq->cap, sizeof(*rq->ring));
	rq->sges = calloc((size_t)rq->cap * (size_t)rq->max_sge, sizeof(*rq->sges));
	if (!rq->ring || !rq->sges) {
		free(rq->ring);
		free(rq->sges);
		return ENOMEM;
	}
	for (int i = 0; i < rq->cap; i++)
		rq->ring[i].sge = rq->sges + (size_t)i * (size_t)rq->max_sge;
	return 0;
}

void srd_rq_free(struct srd_rq *rq)
{
	free(rq->ring);
	free(rq->sges);
}

/* caller holds rq->lock */
static int rq_pop(struct srd_rq *rq, struct srd_rwqe *out, struct ibv_sge *sges)
{
	if (!rq->count)
		return -1;
	struct srd_rwqe *w = &rq->ring[rq->head];
	out->wr_id = w->wr_id;
	out->num_sge = w->num_sge;
	memcpy(sges, w->sge, (size_t)w->num_sge * sizeof(*sges));
	out->sge = sges;
	rq->head = rq->head + 1 == rq->cap ? 0 : rq->head + 1;
	rq->count--;
	return 0;
}

/* ---------------------------------------------------------------- SRQ */

SRD_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	if (!attr || attr->attr.max_wr < 1 || attr->attr.max_wr > SRD_MAX_QP_WR ||
	    attr->attr.max_sge > SRD_MAX_SGE || attr->attr.srq_limit > attr->attr.max_wr) {
		errno = EINVAL;
		return NULL;
	}
	struct srd_srq *srq = calloc(1, sizeof(*srq));
	if (!srq || srd_rq_init(&srq->rq, (int)attr->attr.max_wr, (int)attr->attr.max_sge)) {
		free(srq);
		errno = ENOMEM;
		return NULL;
	}
	srq->limit = attr->attr.srq_limit;
	REF(PD_OF(pd));
	srq->ibsrq.context = pd->context;
	srq->ibsrq.srq_context = attr->srq_context;
	srq->ibsrq.pd = pd;
	pthread_mutex_init(&srq->ibsrq.mutex, NULL);
	pthread_cond_init(&srq->ibsrq.cond, NULL);
	return &srq->ibsrq;
}

SRD_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct srd_srq *srq = container_of(ibsrq, struct srd_srq, ibsrq);
	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return EINVAL;
	srd_mutex_lock(&srq->rq.lock);
	int rc = 0;
	if (mask & IBV_SRQ_MAX_WR) {
		if (attr->max_wr < 1 || attr->max_wr > SRD_MAX_QP_WR || (int)attr->max_wr < srq->rq.count) {
			rc = EINVAL;
		} else {
			struct srd_rq n;
			if (srd_rq_init(&n, (int)attr->max_wr, srq->rq.max_sge)) {
				rc = ENOMEM;
			} else {
				for (int i = 0; i < srq->rq.count; i++) {
					struct srd_rwqe *w = &srq->rq.ring[(srq->rq.head + i) % srq->rq.cap];
					n.ring[i].wr_id = w->wr_id;
					n.ring[i].num_sge = w->num_sge;
					memcpy(n.ring[i].sge, w->sge, (size_t)w->num_sge * sizeof(struct ibv_sge));
				}
				n.count = srq->rq.count;
				srd_rq_free(&srq->rq);
				srq->rq.ring = n.ring;
				srq->rq.sges = n.sges;
				srq->rq.cap = n.cap;
				srq->rq.head = 0;
			}
		}
	}
	if (!rc && (mask & IBV_SRQ_LIMIT)) {
		if (attr->srq_limit > (unsigned)srq->rq.cap)
			rc = EINVAL;
		else
			srq->limit = attr->srq_limit;
	}
	srd_mutex_unlock(&srq->rq.lock);
	return rc;
}

SRD_EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct srd_srq *srq = container_of(ibsrq, struct srd_srq, ibsrq);
	srd_mutex_lock(&srq->rq.lock);
	attr->max_wr = (uint32_t)srq->rq.cap;
	attr->max_sge = (uint32_t)srq->rq.max_sge;
	attr->srq_limit = srq->limit;
	srd_mutex_unlock(&srq->rq.lock);
	return 0;
}

SRD_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct srd_srq *srq = container_of(ibsrq, struct srd_srq, ibsrq);
	if (__atomic_load_n(&srq->refs, __ATOMIC_ACQUIRE))
		return EBUSY;
	bool checking = srd_close_race_checking();
	if (checking && !srd_close_race_destroy(&srq->inside, "ibv_destroy_srq"))
		return EBUSY;
	if (srq->xrcd) {
		srd_xrc_srq_remove(srq);
		srd_net_free_srqn(srq->srqn);
		UNREF(srd_cq_of(srq->xcq));
	}
	UNREF(PD_OF(ibsrq->pd));
	srd_rq_free(&srq->rq);
	if (!checking) /* checked: a late call reads the struct's mark (closerace.h) */
		free(srq);
	return 0;
}

/* verbs_context->create_srq_ex: an XRC SRQ (PD, XRC domain and CQ all given), or a basic
 * one; tag matching SRQs are not supported (EOPNOTSUPP). */
struct ibv_srq *srd_create_srq_ex(struct ibv_context *context, struct ibv_srq_init_attr_ex *attr)
{
	const uint32_t xrc_need = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
				  IBV_SRQ_INIT_ATTR_CQ;
	if (!attr || (attr->comp_mask & ~(IBV_SRQ_INIT_ATTR_RESERVED - 1))) {
		errno = EINVAL;
		return NULL;
	}
	enum ibv_srq_type type = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? attr->srq_type : IBV_SRQT_BASIC;
	if (type == IBV_SRQT_TM || (attr->comp_mask & IBV_SRQ_INIT_ATTR_TM)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (type != IBV_SRQT_BASIC && type != IBV_SRQT_XRC) {
		errno = EINVAL;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd || attr->pd->context != context ||
	    (type == IBV_SRQT_XRC && ((attr->comp_mask & xrc_need) != xrc_need || !attr->xrcd ||
				      !attr->cq || attr->xrcd->context != context ||
				      attr->cq->context != context))) {
		errno = EINVAL;
		return NULL;
	}
	struct ibv_srq *ibsrq = ibv_create_srq(attr->pd, (struct ibv_srq_init_attr *)attr);
	if (!ibsrq || type != IBV_SRQT_XRC)
		return ibsrq;
	/* its number names this process to the host: a TGT QP of another process relays to us */
	uint32_t srqn;
	int e = srd_net_alloc_srqn(srd_ctx_of(context)->dev, &srqn);
	if (e) {
		ibv_destroy_srq(ibsrq);
		errno = e;
		return NULL;
	}
	struct srd_srq *srq = container_of(ibsrq, struct srd_srq, ibsrq);
	srq->xcq = attr->cq;
	REF(srd_cq_of(attr->cq));
	srd_xrc_srq_add(srq, container_of(attr->xrcd, struct srd_xrcd, ibxrcd), srqn);
	return ibsrq;
}

/* verbs_context->get_srq_num: the number XRC_SEND requests name the SRQ by (XRC SRQs only). */
int srd_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	struct srd_srq *srq = container_of(ibsrq, struct srd_srq, ibsrq);
	if (!srq->xrcd || !srq_num)
		return EINVAL;
	*srq_num = srq->srqn;
	return 0;
}

/* called with srq->rq.lock held, after a WQE was consumed */
static void srq_check_limit(struct srd_srq *srq)
{
	if (srq->limit && (unsigned)srq->rq.count < srq->limit) {
		srq->limit = 0; /* the limit event is one-shot until re-armed */
		struct ibv_async_event ev = { .element.srq = &srq->ibsrq,
					      .event_type = IBV_EVENT_SRQ_LIMIT_REACHED };
		srd_async_post(srd_ctx_of(srq->ibsrq.context), &ev);
	}
}

/* Appends a chain of receive WRs to rq: at most max_sge SGEs each, max_wr WQEs queued. */
static int rq_post(struct srd_rq *rq, struct ibv_recv_wr *wr, int max_sge, int max_wr,
		   struct ibv_recv_wr **bad)
{
	int rc = 0;
	srd_mutex_lock(&rq->lock);
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || wr->num_sge > max_sge) {
			rc = EINVAL;
			break;
		}
		if (rq->count >= max_wr) {
			rc = ENOMEM;
			break;
		}
		int i = rq->head + rq->count;
		struct srd_rwqe *w = &rq->ring[i >= rq->cap ? i - rq->cap : i];
		w->wr_id = wr->wr_id;
		w->num_sge = wr->num_sge;
		memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
		rq->count++;
	}
	srd_mutex_unlock(&rq->lock);
	if (rc)
		*bad = wr;
	return rc;
}

int srd_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct srd_srq *srq = container_of(ibsrq, struct srd_srq, ibsrq);
	if (srd_close_race_checking()) {
		if (!srd_close_race_enter(&srq->inside, "post_srq_recv")) {
			*bad = wr;
			return EINVAL;
		}
		int rc = rq_post(&srq->rq, wr, srq->rq.max_sge, srq->rq.cap, bad);
		srd_close_race_exit(&srq->inside);
		return rc;
	}
	return rq_post(&srq->rq, wr, srq->rq.max_sge, srq->rq.cap, bad);
}

static struct srd_rq *recv_queue(struct srd_qp *qp)
{
	return qp->srq ? &qp->srq->rq : &qp->rq;
}

/* Takes one receive WQE (own RQ or SRQ); false when none is posted. resp_lock held. */
bool srd_take_rwqe(struct srd_qp *qp, struct srd_rwqe *out, struct ibv_sge *sges)
{
	struct srd_rq *rq = recv_queue(qp);
	srd_mutex_lock(&rq->lock);
	int r = rq_pop(rq, out, sges);
	if (!r && qp->srq)
		srq_check_limit(qp->srq);
	srd_mutex_unlock(&rq->lock);
	return r == 0;
}

void srd_recv_complete(struct srd_qp *qp, const struct srd_rwqe *rw, enum ibv_wc_status st,
			  enum ibv_wc_opcode op, uint32_t len, int imm, uint32_t imm_data,
			  uint32_t src_qp, bool grh, bool solicited)
{
	/* an XRC SRQ's completions go to its own CQ (a TGT QP has none) */
	struct ibv_cq *ibcq = qp->srq && qp->srq->xcq ? qp->srq->xcq : qp->ibqp.recv_cq;
	if (!ibcq)
		return;
	unsigned flags = grh ? IBV_WC_GRH : 0;
	if (imm == SRD_WC_INV)
		flags |= IBV_WC_WITH_INV;
	else if (imm)
		flags |= IBV_WC_WITH_IMM;
	else
		imm_data = 0;
	/* written in place (cq.h): no completion built on the stack and copied */
	uint64_t wr_id = rw->wr_id;
	uint32_t qpn = qp->ibqp.qp_num;
	struct srd_cq *cq = srd_cq_of(ibcq);
	struct ibv_wc *wc = srd_cq_begin(cq);
	if (wc)
		srd_wc_put(wc, wr_id, st, op, len, imm_data, qpn, src_qp, flags);
	srd_cq_commit(cq, wc, solicited);
}

static int post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

int srd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	if (srd_close_race_checking()) {
		struct srd_qp *qp = srd_qp_of(ibqp);
		if (!srd_close_race_enter(&qp->inside, "post_recv")) {
			*bad = wr;
			return EINVAL;
		}
		int rc = post_recv(ibqp, wr, bad);
		srd_close_race_exit(&qp->inside);
		return rc;
	}
	return post_recv(ibqp, wr, bad);
}

static int post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct srd_qp *qp = srd_qp_of(ibqp);
	if (qp->srq || qp->xrc || qp->state == IBV_QPS_RESET) { /* XRC QPs have no receive queue */
		*bad = wr;
		return EINVAL;
	}
	int max_sge = qp->rq.max_sge < (int)qp->cap.max_recv_sge ? qp->rq.max_sge : (int)qp->cap.max_recv_sge;
	int max_wr = qp->rq.cap < (int)qp->cap.max_recv_wr ? qp->rq.cap : (int)qp->cap.max_recv_wr;
	int rc = rq_post(&qp->rq, wr, max_sge, max_wr, bad);
	if (__atomic_load_n(&qp->state, __ATOMIC_ACQUIRE) == IBV_QPS_ERR) {
		/* under resp_lock as every flush: the move to ERR that set the state may still be
		 * waiting for it, behind a receive the responder completes first */
		srd_lock(&qp->resp_lock);
		srd_flush_rq(qp);
		srd_unlock(&qp->resp_lock);
	}
	return rc;
}


/*
 * resp_lock held, which orders the flush after any receive the responder took and completes
 * under it: the receives complete in the order they were posted. First the WQE of a SEND in
 * progress (a multi-packet SEND whose first packets were placed): the responder took it from
 * the queue, and in ERR no packet of that SEND is accepted any more, so nothing else would
 * complete it.
 */
void srd_flush_rq(struct srd_qp *qp)
{
	if (qp->recv_in_progress) {
		srd_recv_complete(qp, &qp->cur_rwqe, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, false, 0, 0, false,
				  false);
		qp->recv_in_progress = false;
	}
	if (qp->srq)
		return; /* SRQ WQEs stay with the SRQ */
	struct srd_cq *cq = srd_cq_of(qp->ibqp.recv_cq);
	srd_mutex_lock(&qp->rq.lock);
	while (qp->rq.count) {
		struct srd_rwqe *w = &qp->rq.ring[qp->rq.head];
		struct ibv_wc wc = { .wr_id = w->wr_id, .status = IBV_WC_WR_FLUSH_ERR,
				     .opcode = IBV_WC_RECV, .qp_num = qp->ibqp.qp_num };
		qp->rq.head = qp->rq.head + 1 == qp->rq.cap ? 0 : qp->rq.head + 1;
		qp->rq.count--;
		srd_cq_push(cq, &wc, false);
	}
	srd_mutex_unlock(&qp->rq.lock);
}
