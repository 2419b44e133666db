/*
 * Queue pairs: create/destroy, the state machine (modify_qp with the
 * kernel's attribute masks per transition and QP type), query_qp, and the
 * multicast verbs this device lacks; the XRC QPs (XRC_SEND, XRC_RECV) and
 * ibv_open_qp (a handle of another process's TGT QP goes through xctl.c).
 * Owns: struct srd_qp's life and its attributes.
 * Calls: xctl (handles of other processes' QPs), agent (start), requester and
 * responder (reset), sq (flush), rq, net (QPN, kick), device (addresses),
 * events, xrc (TGT QPs).
 */
#include "xctl.h"
#include "agent.h"
#include "requester.h"
#include "responder.h"
#include "sq.h"
#include "rq.h"
#include "net.h"
#include "device.h"
#include "events.h"
#include "xrc.h"
#include "qp.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

/* Creates a QP: RC, UC, UD and XRC_SEND on pd; XRC_RECV (pd NULL) in xrcd. */
struct ibv_qp *srd_qp_create(struct ibv_context *context, struct ibv_pd *pd,
			     struct ibv_qp_init_attr *init, struct srd_xrcd *xrcd)
{
	if (!init) {
		errno = EINVAL;
		return NULL;
	}
	enum ibv_qp_type type = init->qp_type;
	if (type != IBV_QPT_RC && type != IBV_QPT_UC && type != IBV_QPT_UD && type != IBV_QPT_XRC_SEND &&
	    type != IBV_QPT_XRC_RECV) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	bool tgt = type == IBV_QPT_XRC_RECV, ini = type == IBV_QPT_XRC_SEND;
	/* XRC_SEND: a send queue only (recv_cq and srq are ignored); XRC_RECV: no queues at all */
	if (tgt ? !xrcd : (!pd || !init->send_cq || (!ini && !init->recv_cq))) {
		errno = EINVAL;
		return NULL;
	}
	struct ibv_qp_cap *c = &init->cap;
	/* what the QP type takes of init: XRC QPs have no receive side, a TGT QP nothing */
	struct ibv_cq *scq = tgt ? NULL : init->send_cq;
	struct ibv_cq *rcq = ini || tgt ? NULL : init->recv_cq;
	struct ibv_srq *isrq = ini || tgt ? NULL : init->srq;
	if (tgt)
		memset(c, 0, sizeof(*c));
	if (ini)
		c->max_recv_wr = c->max_recv_sge = 0;
	if (c->max_send_wr > SRD_MAX_QP_WR || c->max_send_sge > SRD_MAX_SGE ||
	    c->max_inline_data > SRD_MAX_INLINE ||
	    (!isrq && (c->max_recv_wr > SRD_MAX_QP_WR || c->max_recv_sge > SRD_MAX_SGE))) {
		errno = EINVAL;
		return NULL;
	}
	struct srd_qp *qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	qp->cap = *c;
	if (qp->cap.max_send_sge < 1)
		qp->cap.max_send_sge = 1;
	if (isrq) {
		qp->cap.max_recv_wr = 0;
		qp->cap.max_recv_sge = 0;
	}
	if (tgt)
		qp->cap.max_send_sge = 0;
	qp->sq_depth = (int)(qp->cap.max_send_wr ? qp->cap.max_send_wr : 1);
	qp->sq_cap = 1;
	while (qp->sq_cap < qp->sq_depth)
		qp->sq_cap <<= 1;
	size_t nsge = qp->cap.max_send_sge ? qp->cap.max_send_sge : 1;
	qp->sq = calloc((size_t)qp->sq_cap, sizeof(*qp->sq));
	qp->sq_sges = calloc((size_t)qp->sq_cap * nsge, sizeof(struct ibv_sge));
	qp->sq_inline = qp->cap.max_inline_data ?
		malloc((size_t)qp->sq_cap * qp->cap.max_inline_data) : NULL;
	if (!qp->sq || !qp->sq_sges || (qp->cap.max_inline_data && !qp->sq_inline) ||
	    (!isrq && srd_rq_init(&qp->rq, (int)qp->cap.max_recv_wr, (int)qp->cap.max_recv_sge))) {
		free(qp->sq);
		free(qp->sq_sges);
		free(qp->sq_inline);
		free(qp);
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < qp->sq_cap; i++) {
		qp->sq[i].sge = qp->sq_sges + (size_t)i * nsge;
		qp->sq[i].inline_buf = qp->sq_inline ? qp->sq_inline + (size_t)i * qp->cap.max_inline_data : NULL;
	}
	srd_lock_init(&qp->sq_lock);
	qp->srq = isrq ? container_of(isrq, struct srd_srq, ibsrq) : NULL;
	qp->dev = container_of(context, struct srd_context, vctx.context)->dev;
	qp->sq_sig_all = init->sq_sig_all;
	qp->ttype = ini || tgt ? IBV_QPT_RC : type;
	qp->xrc = ini ? SRD_XRC_INI : tgt ? SRD_XRC_TGT : SRD_XRC_NONE;
	qp->xrcd = tgt ? xrcd : NULL;
	qp->rpd = pd;
	qp->ibqp.context = context;
	qp->ibqp.qp_context = init->qp_context;
	qp->ibqp.pd = pd;
	qp->ibqp.send_cq = scq;
	qp->ibqp.recv_cq = rcq;
	qp->ibqp.srq = isrq;
	qp->ibqp.qp_type = type;
	qp->ibqp.state = IBV_QPS_RESET;
	qp->ibqp.events_completed = 0;
	pthread_mutex_init(&qp->ibqp.mutex, NULL);
	pthread_cond_init(&qp->ibqp.cond, NULL);
	qp->state = IBV_QPS_RESET;
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->attr.path_mtu = IBV_MTU_1024;
	qp->attr.port_num = 1;
	srd_lock_init(&qp->resp_lock);
	srd_agent_start();
	int rc = srd_net_alloc_qpn(qp);
	if (rc) {
		if (!qp->srq)
			srd_rq_free(&qp->rq);
		free(qp->sq);
		free(qp->sq_sges);
		free(qp->sq_inline);
		free(qp);
		errno = rc;
		return NULL;
	}
	init->cap = qp->cap;
	if (pd)
		REF(PD_OF(pd));
	if (scq)
		REF(srd_cq_of(scq));
	if (rcq)
		REF(srd_cq_of(rcq));
	if (qp->srq)
		REF(qp->srq);
	if (tgt) {
		__atomic_store_n(&srd_xrc_ctrl_hook, srd_xctl_rx, __ATOMIC_RELEASE); /* other processes may open it */
		srd_xrc_tgt_add(qp);
	}
	return &qp->ibqp;
}

SRD_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	return srd_qp_create(pd->context, pd, init, NULL);
}

SRD_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct srd_qp *qp = srd_qp_of(ibqp);
	if (qp->real || qp->rport) {
		/* a handle of ibv_open_qp: closing it leaves the QP to its creator */
		if (qp->real)
			srd_xrc_tgt_close(qp->real);
		else
			srd_xctl_close_remote(qp);
		free(qp);
		return 0;
	}
	bool checking = srd_close_race_checking();
	if (checking && !srd_close_race_destroy(&qp->inside, "ibv_destroy_qp"))
		return EBUSY;
	if (qp->xrc == SRD_XRC_TGT) {
		int rc = srd_xrc_tgt_remove(qp);
		if (rc)
			return rc;
	}
	if (qp->xb) {
		free(qp->xb->wr);
		free(qp->xb->sge);
		free(qp->xb->inl);
		free(qp->xb);
	}
	srd_net_free_qpn(qp); /* after this neither the agent nor peers can find it */
	srd_relay_free(qp);
	if (ibqp->pd)
		UNREF(PD_OF(ibqp->pd));
	if (ibqp->send_cq)
		UNREF(srd_cq_of(ibqp->send_cq));
	if (ibqp->recv_cq)
		UNREF(srd_cq_of(ibqp->recv_cq));
	if (qp->srq && qp->xrc != SRD_XRC_TGT) /* a TGT QP's is the last request's, not held */
		UNREF(qp->srq);
	if (!qp->srq || qp->xrc == SRD_XRC_TGT)
		srd_rq_free(&qp->rq);
	free(qp->sq);
	free(qp->sq_sges);
	free(qp->sq_inline);
	if (!checking) /* checked: a late call reads the struct's mark (closerace.h) */
		free(qp);
	return 0;
}

/*
 * verbs_context->open_qp: a handle to a TGT (XRC_RECV) QP of the same XRC domain; modify and
 * query through it act on that QP, destroy closes the handle (the QP's own ibv_destroy_qp is
 * EBUSY while handles are open). A TGT QP created by another process of the domain is
 * reached through that process (srd_xctl_open_remote, xctl.c); a number no TGT QP of the domain has is
 * EINVAL.
 */
struct ibv_qp *srd_open_qp(struct ibv_context *context, struct ibv_qp_open_attr *attr)
{
	const uint32_t need = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
	if (!attr || (attr->comp_mask & need) != need || (attr->comp_mask & ~(IBV_QP_OPEN_ATTR_RESERVED - 1)) ||
	    attr->qp_type != IBV_QPT_XRC_RECV || !attr->xrcd || attr->xrcd->context != context) {
		errno = EINVAL;
		return NULL;
	}
	struct srd_xrcd *x = container_of(attr->xrcd, struct srd_xrcd, ibxrcd);
	struct srd_qp *h = calloc(1, sizeof(*h));
	if (!h) {
		errno = ENOMEM;
		return NULL;
	}
	h->xrc = SRD_XRC_TGT;
	h->ttype = IBV_QPT_RC;
	h->xrcd = x;
	h->ibqp.context = context;
	h->ibqp.qp_context = (attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? attr->qp_context : NULL;
	h->ibqp.qp_type = IBV_QPT_XRC_RECV;
	pthread_mutex_init(&h->ibqp.mutex, NULL);
	pthread_cond_init(&h->ibqp.cond, NULL);
	srd_lock_init(&h->sq_lock);
	srd_lock_init(&h->resp_lock);
	struct srd_qp *real = srd_xrc_tgt_open(x, attr->qp_num);
	if (!real) {
		if (!srd_xrc_tgt_elsewhere(x, attr->qp_num)) {
			errno = EINVAL;
			free(h);
			return NULL;
		}
		h->dev = srd_ctx_of(context)->dev;
		struct ibv_qp *q = srd_xctl_open_remote(h, x, attr->qp_num);
		if (!q)
			free(h);
		return q;
	}
	h->real = real;
	h->dev = real->dev;
	h->ibqp.qp_num = real->ibqp.qp_num;
	h->ibqp.state = (enum ibv_qp_state)__atomic_load_n(&real->state, __ATOMIC_ACQUIRE);
	h->state = h->ibqp.state;
	return &h->ibqp;
}

/*
 * Attribute masks per transition and QP type, as the kernel's
 * ib_modify_qp_is_ok() table defines them (UD, UC, RC).
 */
enum { T_UD, T_UC, T_RC, T_XI, T_XT, T_N };
struct trans { bool valid; int req[T_N]; int opt[T_N]; };

static int type_ix(enum ibv_qp_type t)
{
	return t == IBV_QPT_UD ? T_UD : t == IBV_QPT_UC ? T_UC : t == IBV_QPT_XRC_SEND ? T_XI :
	       t == IBV_QPT_XRC_RECV ? T_XT : T_RC;
}

static const struct trans *transition(enum ibv_qp_state cur, enum ibv_qp_state next)
{
	static struct trans tab[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1];
	static bool built;
	if (!built) {
		for (int s = 0; s <= IBV_QPS_ERR; s++) {
			tab[s][IBV_QPS_RESET].valid = true;
			tab[s][IBV_QPS_ERR].valid = true;
		}
		struct trans *t = &tab[IBV_QPS_RESET][IBV_QPS_INIT];
		t->valid = true;
		t->req[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
		t->req[T_UC] = t->req[T_RC] = t->req[T_XI] = t->req[T_XT] =
			IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;

		t = &tab[IBV_QPS_INIT][IBV_QPS_INIT];
		t->valid = true;
		t->opt[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
		t->opt[T_UC] = t->opt[T_RC] = t->opt[T_XI] = t->opt[T_XT] =
			IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;

		t = &tab[IBV_QPS_INIT][IBV_QPS_RTR];
		t->valid = true;
		t->req[T_UC] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		t->req[T_RC] = t->req[T_XT] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		t->req[T_XI] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		t->opt[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
		t->opt[T_UC] = t->opt[T_RC] = t->opt[T_XI] = t->opt[T_XT] =
			IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;

		t = &tab[IBV_QPS_RTR][IBV_QPS_RTS];
		t->valid = true;
		t->req[T_UD] = t->req[T_UC] = IBV_QP_SQ_PSN;
		t->req[T_RC] = t->req[T_XI] = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
		t->req[T_XT] = IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
		t->opt[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY;
		t->opt[T_UC] = t->opt[T_XI] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
			       IBV_QP_PATH_MIG_STATE;
		t->opt[T_RC] = t->opt[T_XT] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
			       IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;

		t = &tab[IBV_QPS_RTS][IBV_QPS_RTS];
		t->valid = true;
		t->opt[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY;
		t->opt[T_UC] = t->opt[T_XI] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
			       IBV_QP_PATH_MIG_STATE;
		t->opt[T_RC] = t->opt[T_XT] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
			       IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER;

		t = &tab[IBV_QPS_RTS][IBV_QPS_SQD];
		t->valid = true;
		t->opt[T_UD] = t->opt[T_UC] = t->opt[T_RC] = t->opt[T_XI] = t->opt[T_XT] =
			IBV_QP_EN_SQD_ASYNC_NOTIFY;

		t = &tab[IBV_QPS_SQD][IBV_QPS_RTS];
		t->valid = true;
		t->opt[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY;
		t->opt[T_UC] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE;
		t->opt[T_RC] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
			       IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;

		t = &tab[IBV_QPS_SQD][IBV_QPS_SQD];
		t->valid = true;
		t->opt[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
		t->opt[T_UC] = IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
			       IBV_QP_PATH_MIG_STATE;
		t->opt[T_RC] = IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC |
			       IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
			       IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;

		t = &tab[IBV_QPS_SQE][IBV_QPS_RTS];
		t->valid = true;
		t->opt[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY;
		t->opt[T_UC] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS;
		/* SQE does not exist for RC: leave req/opt empty and reject below */
		built = true;
	}
	if (cur > IBV_QPS_ERR || next > IBV_QPS_ERR)
		return NULL;
	return &tab[cur][next];
}

static pthread_mutex_t g_trans_once = PTHREAD_MUTEX_INITIALIZER;

#define QP_ATTR_ALL ((1 << 21) - 1)

SRD_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct srd_qp *qp = srd_qp_of(ibqp);
	if (!attr || (mask & ~QP_ATTR_ALL))
		return EINVAL;
	if (qp->real) {
		/* an ibv_open_qp handle: the QP it opens changes */
		int rc = ibv_modify_qp(&qp->real->ibqp, attr, mask);
		if (!rc) {
			ibqp->state = qp->real->ibqp.state;
			qp->state = qp->real->state;
		}
		return rc;
	}
	if (qp->rport) {
		/* a handle of another process's QP: that process changes it */
		struct xwait w;
		return srd_xctl_verb(qp, XCTL_MODIFY, (uint32_t)mask, attr, &w);
	}
	pthread_mutex_lock(&g_trans_once);
	srd_lock(&qp->sq_lock);
	enum ibv_qp_state cur = (enum ibv_qp_state)qp->state;
	int rc = 0;
	enum ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur) {
		rc = EINVAL;
		goto out;
	}
	const struct trans *t = transition(cur, next);
	if (!t || !t->valid) {
		rc = EINVAL;
		goto out;
	}
	if (cur == IBV_QPS_SQE && ibqp->qp_type == IBV_QPT_RC && next == IBV_QPS_RTS) {
		rc = EINVAL;
		goto out;
	}
	int ti = type_ix(ibqp->qp_type);
	int req = t->req[ti], opt = t->opt[ti];
	int given = mask & ~IBV_QP_STATE;
	if ((given & req) != req || (given & ~(req | opt | IBV_QP_CUR_STATE))) {
		rc = EINVAL;
		goto out;
	}
	/* value checks */
	if ((mask & IBV_QP_PORT) && attr->port_num != 1) { rc = EINVAL; goto out; }
	if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index != 0) { rc = EINVAL; goto out; }
	if ((mask & IBV_QP_PATH_MTU) && (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096)) {
		rc = EINVAL;
		goto out;
	}
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > SRD_MAX_RD_ATOM) { rc = EINVAL; goto out; }
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && attr->max_dest_rd_atomic > SRD_MAX_RD_ATOM) { rc = EINVAL; goto out; }
	if ((mask & IBV_QP_RETRY_CNT) && attr->retry_cnt > 7) { rc = EINVAL; goto out; }
	if ((mask & IBV_QP_RNR_RETRY) && attr->rnr_retry > 7) { rc = EINVAL; goto out; }
	if ((mask & IBV_QP_TIMEOUT) && attr->timeout > 31) { rc = EINVAL; goto out; }
	if ((mask & IBV_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31) { rc = EINVAL; goto out; }
	if ((mask & IBV_QP_DEST_QPN) && attr->dest_qp_num > SRD_HDR_PSN_MASK) { rc = EINVAL; goto out; }
	if (mask & IBV_QP_AV) {
		/* RoCE: every connected QP's path needs a GRH */
		if (!attr->ah_attr.is_global || attr->ah_attr.grh.sgid_index >= qp->dev->ngids ||
		    (attr->ah_attr.port_num && attr->ah_attr.port_num != 1)) {
			rc = EINVAL;
			goto out;
		}
	}
	/* apply */
	struct ibv_qp_attr *a = &qp->attr;
	if (mask & IBV_QP_PKEY_INDEX) a->pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PORT) a->port_num = attr->port_num;
	if (mask & IBV_QP_QKEY) a->qkey = attr->qkey;
	/* any bits, as the kernel takes them (rdma-core's ODP tests give a QP their regions'
	 * ON_DEMAND flag): only the remote rights are ever read */
	if (mask & IBV_QP_ACCESS_FLAGS) a->qp_access_flags = attr->qp_access_flags;
	if (mask & IBV_QP_AV) a->ah_attr = attr->ah_attr;
	if (mask & IBV_QP_PATH_MTU) a->path_mtu = attr->path_mtu;
	if (mask & IBV_QP_DEST_QPN) a->dest_qp_num = attr->dest_qp_num;
	if (mask & IBV_QP_RQ_PSN) a->rq_psn = attr->rq_psn & SRD_HDR_PSN_MASK;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) a->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER) a->min_rnr_timer = attr->min_rnr_timer;
	if (mask & IBV_QP_SQ_PSN) a->sq_psn = attr->sq_psn & SRD_HDR_PSN_MASK;
	if (mask & IBV_QP_TIMEOUT) a->timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT) a->retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY) a->rnr_retry = attr->rnr_retry;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC) a->max_rd_atomic = attr->max_rd_atomic;
	if (mask & IBV_QP_ALT_PATH) {
		a->alt_ah_attr = attr->alt_ah_attr;
		a->alt_pkey_index = attr->alt_pkey_index;
		a->alt_port_num = attr->alt_port_num;
		a->alt_timeout = attr->alt_timeout;
	}
	if (mask & IBV_QP_PATH_MIG_STATE) a->path_mig_state = attr->path_mig_state;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) a->en_sqd_async_notify = attr->en_sqd_async_notify;

	if (next == IBV_QPS_RTR && cur == IBV_QPS_INIT) {
		qp->epsn = a->rq_psn;
		qp->msn = 0;
		qp->nak_sent = false;
		qp->recv_in_progress = false;
		qp->write_in_progress = false;
		if (ibqp->qp_type != IBV_QPT_UD) {
			srd_gid_to_sockaddr(&a->ah_attr.grh.dgid, (uint16_t)(a->dest_qp_num >> 8),
					    qp->dev->ifindex, &qp->peer);
			/* an INI QP's requests may name an XRC SRQ of another process, which the TGT QP
			 * reaches by relaying packets: XRC always takes the packet path */
			qp->peer_local = srd_gid_is_local(&a->ah_attr.grh.dgid) &&
					 srd_net_owns_qpn(a->dest_qp_num) && qp->xrc == SRD_XRC_NONE;
		}
	}
	if (next == IBV_QPS_RTS && cur == IBV_QPS_RTR) {
		qp->snd_psn = a->sq_psn;
		qp->una_psn = a->sq_psn;
		qp->sent_psn = a->sq_psn;
		qp->retry_left = a->retry_cnt;
		qp->rnr_left = a->rnr_retry;
	}
	if ((mask & IBV_QP_SQ_PSN) && cur != IBV_QPS_RTR) {
		qp->snd_psn = qp->una_psn = qp->sent_psn = a->sq_psn;
	}
	if (next == IBV_QPS_RESET && cur != IBV_QPS_RESET) {
		srd_req_reset(qp);
		srd_resp_reset(qp);
		qp->sq_head = qp->sq_tail = qp->sq_next_tx = 0;
		if (!qp->srq) {
			srd_mutex_lock(&qp->rq.lock);
			qp->rq.head = qp->rq.count = 0;
			srd_mutex_unlock(&qp->rq.lock);
		}
	}
	a->qp_state = next;
	a->cur_qp_state = next;
	ibqp->state = next;
	__atomic_store_n(&qp->state, (int)next, __ATOMIC_RELEASE);
	if (next == IBV_QPS_SQD && (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) && attr->en_sqd_async_notify) {
		/* nothing is ever in flight across a state change here: drained at once */
		struct ibv_async_event ev = { .element.qp = ibqp, .event_type = IBV_EVENT_SQ_DRAINED };
		srd_async_post(srd_ctx_of(ibqp->context), &ev);
	}
	if (next == IBV_QPS_ERR && cur != IBV_QPS_ERR) {
		srd_flush_sq_locked(qp);
		srd_unlock(&qp->sq_lock);
		pthread_mutex_unlock(&g_trans_once);
		/* under resp_lock: a receive the responder took and acknowledged but has not
		 * completed yet (it completes after the ACK) completes before the flushes of the
		 * receives behind it, so the receive queue completes in order (ERR is already
		 * set: a packet taken after this waits is dropped, not executed) */
		srd_lock(&qp->resp_lock);
		srd_flush_rq(qp);
		srd_unlock(&qp->resp_lock);
		return 0;
	}
out:;
	/* WQEs posted while in SQD go now; with none waiting the agent need not visit (its take
	 * of sq_lock would end the lock's bias to the posting thread, lock.h) */
	bool waiting = qp->sq_next_tx != qp->sq_head;
	srd_unlock(&qp->sq_lock);
	pthread_mutex_unlock(&g_trans_once);
	if (!rc && next == IBV_QPS_RTS && waiting)
		srd_qp_kick(qp);
	return rc;
}

SRD_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
			    struct ibv_qp_init_attr *init)
{
	struct srd_qp *qp = srd_qp_of(ibqp);
	(void)mask;
	if (qp->real) {
		int rc = ibv_query_qp(&qp->real->ibqp, attr, mask, init);
		if (!rc && init)
			init->qp_context = ibqp->qp_context;
		return rc;
	}
	if (qp->rport) {
		struct xwait w;
		int rc = srd_xctl_verb(qp, XCTL_QUERY, 0, NULL, &w);
		if (rc)
			return rc;
		if (!w.has_attr)
			return EIO;
		*attr = w.attr;
		if (init) {
			memset(init, 0, sizeof(*init));
			init->qp_context = ibqp->qp_context;
			init->qp_type = IBV_QPT_XRC_RECV;
		}
		return 0;
	}
	srd_lock(&qp->sq_lock);
	*attr = qp->attr;
	attr->qp_state = (enum ibv_qp_state)qp->state;
	attr->cur_qp_state = attr->qp_state;
	attr->sq_draining = 0;
	attr->cap = qp->cap;
	attr->sq_psn = qp->snd_psn;
	srd_unlock(&qp->sq_lock);
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = ibqp->qp_context;
		init->send_cq = ibqp->send_cq;
		init->recv_cq = ibqp->recv_cq;
		init->srq = ibqp->srq;
		init->cap = qp->cap;
		init->qp_type = ibqp->qp_type;
		init->sq_sig_all = qp->sq_sig_all;
	}
	return 0;
}

/* ---------------------------------------------------------------- unsupported object types */

SRD_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp; (void)gid; (void)lid;
	return EOPNOTSUPP;
}

SRD_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp; (void)gid; (void)lid;
	return EOPNOTSUPP;
}
