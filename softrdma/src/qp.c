/*
 * Queue pairs: create/destroy, the state machine (modify_qp with the
 * kernel's attribute masks per transition and QP type), query_qp, the
 * extended QP (ibv_create_qp_ex, ibv_qp_to_qp_ex and the ibv_wr_* post-send
 * API, which builds classic send WRs and posts them through post_send), and
 * the multicast verbs this device lacks; the XRC QPs (XRC_SEND, XRC_RECV) and
 * ibv_open_qp.
 * Owns: struct srd_qp's life and its attributes.
 * Calls: agent (start), requester and responder (reset), sq (flush), rq,
 * net (QPN, kick), device (addresses), events, xrc (TGT QPs).
 */
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
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

/* ---------------------------------------------------------------- ibv_open_qp across processes */

/*
 * A handle of ibv_open_qp on a TGT QP another process of the domain created: every verb on it
 * is a request (OP_XRC_CTRL) to that process, which runs it on the QP and answers; the calling
 * thread waits for the answer (up to XCTL_WAIT_NS). Only application threads wait, never the
 * agent, which answers such requests without waiting for anything: two processes opening each
 * other's QPs cannot deadlock. The creator forwards the QP's async events to every handle
 * (XCTL_EVENT), and keeps the QP from being destroyed (EBUSY) while a live process holds one.
 * A handle whose QP's process is gone (not in the domain's registry) answers EIO.
 */
#define XCTL_WAIT_NS 5000000000ull
#define XCTL_RESEND_NS 100000000ull

struct xwait {
	struct xwait *next;
	uint32_t id;
	bool done;
	int rc, state;
	bool has_attr;
	struct ibv_qp_attr attr;
};
static pthread_mutex_t g_x_lock = PTHREAD_MUTEX_INITIALIZER; /* waits, handles */
static pthread_cond_t g_x_cond = PTHREAD_COND_INITIALIZER;
static struct xwait *g_xwaits;
static struct srd_qp *g_rhandles;
static uint32_t g_x_next;

static uint32_t xctl_id(void)
{
	uint32_t v;
	do
		v = __atomic_add_fetch(&g_x_next, 1, __ATOMIC_RELAXED) & 0xffffffu;
	while (!v);
	return v;
}

static bool xctl_loopback(const struct sockaddr_in6 *a)
{
	return a->sin6_family == AF_INET6 && (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr) ||
					      (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr) && a->sin6_addr.s6_addr[12] == 127));
}

/* Request kind for TGT QP qpn (its process's port is qpn >> 8) and wait for the answer in *w:
 * 0 when answered, ETIMEDOUT or ENOMEM otherwise. */
static int xctl_call(struct srd_device *dev, uint32_t qpn, uint32_t hid, int kind, uint32_t imm,
		     const uint8_t key[16], const struct ibv_qp_attr *in, struct xwait *w)
{
	uint16_t mine = srd_net_any_port(dev);
	if (!mine)
		return ENOMEM;
	memset(w, 0, sizeof(*w));
	w->id = xctl_id();
	pthread_mutex_lock(&g_x_lock);
	w->next = g_xwaits;
	g_xwaits = w;
	pthread_mutex_unlock(&g_x_lock);
	struct pkt_hdr h;
	memset(&h, 0, sizeof(h));
	h.op = OP_XRC_CTRL;
	h.syndrome = (uint8_t)kind;
	h.dqpn = qpn;
	h.sqpn = hid;
	h.psn = w->id;
	h.imm = imm;
	h.len = in ? (uint32_t)sizeof(*in) : 0;
	memcpy(h.sgid, key, 16);
	static const struct in6_addr lo4 = { .s6_addr = { [10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1 } };
	struct sockaddr_in6 to = { .sin6_family = AF_INET6, .sin6_addr = lo4, .sin6_port = htons((uint16_t)(qpn >> 8)) };
	/* sent again every XCTL_RESEND_NS while unanswered (a lost packet); the other side runs
	 * a request once (srd_xrc_ropen_answered) */
	pthread_mutex_lock(&g_x_lock);
	for (uint64_t waited = 0; !w->done && waited < XCTL_WAIT_NS; waited += XCTL_RESEND_NS) {
		pthread_mutex_unlock(&g_x_lock);
		srd_net_rdlock();
		srd_xmit_port(mine, &to, &h, in, h.len);
		srd_net_unlock();
		struct timespec dl;
		clock_gettime(CLOCK_REALTIME, &dl);
		uint64_t ns = (uint64_t)dl.tv_nsec + XCTL_RESEND_NS;
		dl.tv_sec += (time_t)(ns / 1000000000ull);
		dl.tv_nsec = (long)(ns % 1000000000ull);
		pthread_mutex_lock(&g_x_lock);
		while (!w->done && pthread_cond_timedwait(&g_x_cond, &g_x_lock, &dl) != ETIMEDOUT)
			;
	}
	for (struct xwait **p = &g_xwaits; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			break;
		}
	bool done = w->done;
	pthread_mutex_unlock(&g_x_lock);
	return done ? 0 : ETIMEDOUT;
}

/* A verb on a handle of another process's QP: the QP's errno, or EIO when its process is gone. */
static int xctl_verb(struct srd_qp *hq, int kind, uint32_t imm, const struct ibv_qp_attr *in, struct xwait *w)
{
	if (!srd_xrc_tgt_elsewhere(hq->xrcd, hq->ibqp.qp_num))
		return EIO;
	uint8_t key[16];
	srd_xrc_dom_key(hq->xrcd, key);
	int rc = xctl_call(hq->dev, hq->ibqp.qp_num, hq->rid, kind, imm, key, in, w);
	if (rc)
		return rc == ETIMEDOUT ? EIO : rc;
	if (!w->rc) {
		hq->state = w->state;
		hq->ibqp.state = (enum ibv_qp_state)w->state;
	}
	return w->rc;
}

/* The agent's (or a polling thread's) OP_XRC_CTRL and OP_XRC_CTRL_RESP: answers, events for
 * our handles, and the requests of other processes' handles on our TGT QPs. */
static void xctl_rx(const struct pkt_hdr *h, const uint8_t *payload, const struct sockaddr_in6 *from)
{
	if (!xctl_loopback(from))
		return;
	uint16_t fport = ntohs(from->sin6_port);
	if (h->op == OP_XRC_CTRL_RESP) {
		pthread_mutex_lock(&g_x_lock);
		for (struct xwait *w = g_xwaits; w; w = w->next)
			if (w->id == h->psn && !w->done) {
				w->rc = (int)h->rkey;
				w->state = (int)h->imm;
				if (h->len == sizeof(w->attr)) {
					memcpy(&w->attr, payload, sizeof(w->attr));
					w->has_attr = true;
				}
				w->done = true;
				pthread_cond_broadcast(&g_x_cond);
			}
		pthread_mutex_unlock(&g_x_lock);
		return;
	}
	if (h->syndrome == XCTL_EVENT) {
		pthread_mutex_lock(&g_x_lock);
		for (struct srd_qp *q = g_rhandles; q; q = q->rnext)
			if (q->rid == h->dqpn && q->ibqp.qp_num == h->sqpn && q->rport == fport) {
				struct ibv_async_event ev = { .element.qp = &q->ibqp, .event_type = (enum ibv_event_type)h->imm };
				srd_async_post(srd_ctx_of(q->ibqp.context), &ev);
			}
		pthread_mutex_unlock(&g_x_lock);
		return;
	}
	struct srd_qp *real = srd_xrc_tgt_open_key(h->dqpn, h->sgid);
	struct ibv_qp_attr attr;
	memset(&attr, 0, sizeof(attr));
	uint32_t alen = 0;
	int rc = 0;
	if (!real) {
		rc = EINVAL;
	} else if (h->syndrome == XCTL_OPEN) {
		rc = srd_xrc_ropen_add(real, fport, h->sqpn, (int32_t)h->imm);
	} else if (h->syndrome == XCTL_QUERY) {
		struct ibv_qp_init_attr ia;
		rc = ibv_query_qp(&real->ibqp, &attr, 0, &ia);
		alen = rc ? 0 : (uint32_t)sizeof(attr);
	} else if (h->syndrome == XCTL_MODIFY && h->len == sizeof(attr)) {
		if (!srd_xrc_ropen_answered(real, fport, h->sqpn, h->psn, &rc)) {
			memcpy(&attr, payload, sizeof(attr));
			rc = ibv_modify_qp(&real->ibqp, &attr, (int)h->imm);
			srd_xrc_ropen_record(real, fport, h->sqpn, h->psn, rc);
		}
	} else if (h->syndrome == XCTL_CLOSE) {
		srd_xrc_ropen_del(real, fport, h->sqpn);
	} else {
		rc = EINVAL;
	}
	struct pkt_hdr r;
	memset(&r, 0, sizeof(r));
	r.op = OP_XRC_CTRL_RESP;
	r.dqpn = h->sqpn;
	r.sqpn = h->dqpn;
	r.psn = h->psn;
	r.rkey = (uint32_t)rc;
	r.len = alen;
	if (real) {
		r.imm = (uint32_t)__atomic_load_n(&real->state, __ATOMIC_ACQUIRE);
		srd_xrc_tgt_close(real);
	}
	srd_net_rdlock();
	if (srd_net_port_ours((uint16_t)(h->dqpn >> 8)))
		srd_xmit_port((uint16_t)(h->dqpn >> 8), from, &r, alen ? &attr : NULL, alen);
	srd_net_unlock();
}

/* ibv_open_qp of TGT QP qpn, which another live process of x's domain created: handle h. */
static struct ibv_qp *open_remote(struct srd_qp *h, struct srd_xrcd *x, uint32_t qpn)
{
	__atomic_store_n(&srd_xrc_ctrl_hook, xctl_rx, __ATOMIC_RELEASE);
	h->rport = (uint16_t)(qpn >> 8);
	h->rid = xctl_id();
	h->ibqp.qp_num = qpn;
	h->xrcd = x;
	/* listed before the request, so no event of the QP's can pass the handle by */
	pthread_mutex_lock(&g_x_lock);
	h->rnext = g_rhandles;
	g_rhandles = h;
	pthread_mutex_unlock(&g_x_lock);
	struct xwait w;
	int rc = xctl_verb(h, XCTL_OPEN, (uint32_t)getpid(), NULL, &w);
	if (!rc)
		return &h->ibqp;
	pthread_mutex_lock(&g_x_lock);
	for (struct srd_qp **p = &g_rhandles; *p; p = &(*p)->rnext)
		if (*p == h) {
			*p = h->rnext;
			break;
		}
	pthread_mutex_unlock(&g_x_lock);
	errno = rc == EIO ? EINVAL : rc; /* gone meanwhile: no such QP */
	return NULL;
}

/* Closes a handle of another process's QP (ibv_destroy_qp on it). */
static void close_remote(struct srd_qp *h)
{
	struct xwait w;
	xctl_verb(h, XCTL_CLOSE, 0, NULL, &w); /* (a process gone has nothing to forget) */
	pthread_mutex_lock(&g_x_lock);
	for (struct srd_qp **p = &g_rhandles; *p; p = &(*p)->rnext)
		if (*p == h) {
			*p = h->rnext;
			break;
		}
	pthread_mutex_unlock(&g_x_lock);
}

/* Creates a QP: RC, UC, UD and XRC_SEND on pd; XRC_RECV (pd NULL) in xrcd. */
static struct ibv_qp *qp_create(struct ibv_context *context, struct ibv_pd *pd,
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
		__atomic_store_n(&srd_xrc_ctrl_hook, xctl_rx, __ATOMIC_RELEASE); /* other processes may open it */
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
	return qp_create(pd->context, pd, init, NULL);
}

SRD_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct srd_qp *qp = srd_qp_of(ibqp);
	if (qp->real || qp->rport) {
		/* a handle of ibv_open_qp: closing it leaves the QP to its creator */
		if (qp->real)
			srd_xrc_tgt_close(qp->real);
		else
			close_remote(qp);
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
 * reached through that process (open_remote above); a number no TGT QP of the domain has is
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
		struct ibv_qp *q = open_remote(h, x, attr->qp_num);
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
		return xctl_verb(qp, XCTL_MODIFY, (uint32_t)mask, attr, &w);
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
		int rc = xctl_verb(qp, XCTL_QUERY, 0, NULL, &w);
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


/* ---------------------------------------------------------------- extended QP, ibv_wr_* */

/* What rxe accepts per QP type (IBV_QP_EX_WITH_*). */
#define XOPS_RC (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND | \
		 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
		 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | \
		 IBV_QP_EX_WITH_SEND_WITH_INV)
#define XOPS_UC (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND | \
		 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV)
#define XOPS_UD (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)

static inline struct srd_xbatch *xb_of(struct ibv_qp_ex *qx)
{
	return container_of(qx, struct srd_qp, qpx)->xb;
}

/* A builder's new WR: wr_id and send flags come from the ibv_qp_ex fields. NULL (and
 * the batch's error set) when the batch is not open or the send queue has no room. */
static struct ibv_send_wr *x_new(struct ibv_qp_ex *qx, enum ibv_wr_opcode op)
{
	struct srd_qp *qp = container_of(qx, struct srd_qp, qpx);
	struct srd_xbatch *b = qp->xb;
	if (!b->open) {
		return NULL; /* a builder outside wr_start..wr_complete: ignored */
	}
	if (b->err)
		return NULL;
	if (b->n >= qp->sq_depth) {
		b->err = ENOSPC; /* more WRs than the send queue holds */
		return NULL;
	}
	struct ibv_send_wr *w = &b->wr[b->n];
	struct ibv_sge *sg = w->sg_list;
	memset(w, 0, sizeof(*w));
	w->sg_list = sg;
	w->wr_id = qx->wr_id;
	w->send_flags = qx->wr_flags & ~(unsigned)IBV_SEND_INLINE;
	w->opcode = op;
	b->n++;
	return w;
}

/* The WR the setters apply to: the newest one built. */
static struct ibv_send_wr *x_cur(struct ibv_qp_ex *qx)
{
	struct srd_xbatch *b = xb_of(qx);
	if (!b->open || b->err || !b->n)
		return NULL;
	return &b->wr[b->n - 1];
}

static void x_atomic_cmp_swp(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, uint64_t compare,
			     uint64_t swap)
{
	struct ibv_send_wr *w = x_new(qx, IBV_WR_ATOMIC_CMP_AND_SWP);
	if (w) {
		w->wr.atomic.rkey = rkey;
		w->wr.atomic.remote_addr = addr;
		w->wr.atomic.compare_add = compare;
		w->wr.atomic.swap = swap;
	}
}

static void x_atomic_fetch_add(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, uint64_t add)
{
	struct ibv_send_wr *w = x_new(qx, IBV_WR_ATOMIC_FETCH_AND_ADD);
	if (w) {
		w->wr.atomic.rkey = rkey;
		w->wr.atomic.remote_addr = addr;
		w->wr.atomic.compare_add = add;
	}
}

static void x_bind_mw(struct ibv_qp_ex *qx, struct ibv_mw *mw, uint32_t rkey,
		      const struct ibv_mw_bind_info *info)
{
	struct ibv_send_wr *w = x_new(qx, IBV_WR_BIND_MW);
	if (w) {
		w->bind_mw.mw = mw;
		w->bind_mw.rkey = rkey;
		if (info)
			w->bind_mw.bind_info = *info;
	}
}

static void x_local_inv(struct ibv_qp_ex *qx, uint32_t rkey)
{
	struct ibv_send_wr *w = x_new(qx, IBV_WR_LOCAL_INV);
	if (w)
		w->invalidate_rkey = rkey;
}

static void x_rdma(struct ibv_qp_ex *qx, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr, __be32 imm)
{
	struct ibv_send_wr *w = x_new(qx, op);
	if (w) {
		w->wr.rdma.rkey = rkey;
		w->wr.rdma.remote_addr = addr;
		w->imm_data = imm;
	}
}

static void x_rdma_read(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr)
{
	x_rdma(qx, IBV_WR_RDMA_READ, rkey, addr, 0);
}

static void x_rdma_write(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr)
{
	x_rdma(qx, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}

static void x_rdma_write_imm(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, __be32 imm)
{
	x_rdma(qx, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}

static void x_send(struct ibv_qp_ex *qx)
{
	x_new(qx, IBV_WR_SEND);
}

static void x_send_imm(struct ibv_qp_ex *qx, __be32 imm)
{
	struct ibv_send_wr *w = x_new(qx, IBV_WR_SEND_WITH_IMM);
	if (w)
		w->imm_data = imm;
}

static void x_send_inv(struct ibv_qp_ex *qx, uint32_t rkey)
{
	struct ibv_send_wr *w = x_new(qx, IBV_WR_SEND_WITH_INV);
	if (w)
		w->invalidate_rkey = rkey;
}

static void x_set_ud_addr(struct ibv_qp_ex *qx, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct ibv_send_wr *w = x_cur(qx);
	if (w) {
		w->wr.ud.ah = ah;
		w->wr.ud.remote_qpn = qpn;
		w->wr.ud.remote_qkey = qkey;
	}
}

static void x_set_xrc_srqn(struct ibv_qp_ex *qx, uint32_t remote_srqn)
{
	struct ibv_send_wr *w = x_cur(qx);
	if (w)
		w->qp_type.xrc.remote_srqn = remote_srqn;
}

static void x_set_sge_list(struct ibv_qp_ex *qx, size_t n, const struct ibv_sge *list)
{
	struct srd_qp *qp = container_of(qx, struct srd_qp, qpx);
	struct ibv_send_wr *w = x_cur(qx);
	if (!w)
		return;
	if (n > qp->cap.max_send_sge) {
		qp->xb->err = ENOSPC;
		return;
	}
	if (n)
		memcpy(w->sg_list, list, n * sizeof(*list));
	w->num_sge = (int)n;
	w->send_flags &= ~(unsigned)IBV_SEND_INLINE;
}

static void x_set_sge(struct ibv_qp_ex *qx, uint32_t lkey, uint64_t addr, uint32_t length)
{
	/* a zero length means no data (no SGE), as on rxe */
	struct ibv_sge s = { .addr = addr, .length = length, .lkey = lkey };
	x_set_sge_list(qx, length ? 1 : 0, &s);
}

static void x_set_inline_data_list(struct ibv_qp_ex *qx, size_t n, const struct ibv_data_buf *bufs)
{
	struct srd_qp *qp = container_of(qx, struct srd_qp, qpx);
	struct ibv_send_wr *w = x_cur(qx);
	if (!w)
		return;
	/* copied now: the caller may reuse its buffers as soon as this returns */
	uint8_t *dst = qp->xb->inl + (size_t)(w - qp->xb->wr) * qp->cap.max_inline_data;
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		if (total + bufs[i].length > qp->cap.max_inline_data) {
			qp->xb->err = ENOSPC;
			return;
		}
		if (bufs[i].length)
			memcpy(dst + total, bufs[i].addr, bufs[i].length);
		total += bufs[i].length;
	}
	w->sg_list[0].addr = (uintptr_t)dst;
	w->sg_list[0].length = (uint32_t)total;
	w->sg_list[0].lkey = 0;
	w->num_sge = total ? 1 : 0;
	w->send_flags |= IBV_SEND_INLINE;
}

static void x_set_inline_data(struct ibv_qp_ex *qx, void *addr, size_t length)
{
	struct ibv_data_buf b = { .addr = addr, .length = length };
	x_set_inline_data_list(qx, 1, &b);
}

static void x_start(struct ibv_qp_ex *qx)
{
	struct srd_xbatch *b = xb_of(qx);
	b->n = 0;
	b->err = 0;
	b->open = true;
	if (srd_close_race_checking() && !b->inside) {
		/* the session is inside the QP from wr_start to wr_complete/wr_abort (closerace.h);
		 * on a destroyed QP it is refused: wr_complete answers EINVAL */
		struct srd_qp *qp = container_of(qx, struct srd_qp, qpx);
		if (srd_close_race_enter(&qp->inside, "wr_start"))
			b->inside = true;
		else
			b->err = EINVAL;
	}
}

/* the session ends: out of the QP for the close-race check */
static void x_session_end(struct ibv_qp_ex *qx, struct srd_xbatch *b)
{
	if (b->inside) {
		b->inside = false;
		srd_close_race_exit(&container_of(qx, struct srd_qp, qpx)->inside);
	}
}

static int x_complete(struct ibv_qp_ex *qx)
{
	struct srd_xbatch *b = xb_of(qx);
	if (!b->open)
		return EINVAL;
	b->open = false;
	int rc = 0;
	if (b->err) {
		rc = b->err;
	} else if (b->n) {
		for (int i = 0; i < b->n; i++)
			b->wr[i].next = i + 1 < b->n ? &b->wr[i + 1] : NULL;
		struct ibv_send_wr *bad = NULL;
		rc = srd_post_send_wrs(&qx->qp_base, b->wr, &bad, true);
	}
	x_session_end(qx, b);
	return rc;
}

static void x_abort(struct ibv_qp_ex *qx)
{
	struct srd_xbatch *b = xb_of(qx);
	b->open = false;
	b->n = 0;
	x_session_end(qx, b);
}

static struct srd_xbatch *xbatch_new(struct srd_qp *qp, uint64_t ops)
{
	struct srd_xbatch *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->ops = ops;
	size_t nsge = qp->cap.max_send_sge ? qp->cap.max_send_sge : 1;
	b->wr = calloc((size_t)qp->sq_cap, sizeof(*b->wr));
	b->sge = calloc((size_t)qp->sq_cap * nsge, sizeof(*b->sge));
	b->inl = qp->cap.max_inline_data ? malloc((size_t)qp->sq_cap * qp->cap.max_inline_data) : NULL;
	if (!b->wr || !b->sge || (qp->cap.max_inline_data && !b->inl)) {
		free(b->wr);
		free(b->sge);
		free(b->inl);
		free(b);
		return NULL;
	}
	for (int i = 0; i < qp->sq_cap; i++)
		b->wr[i].sg_list = b->sge + (size_t)i * nsge;
	struct ibv_qp_ex *x = &qp->qpx;
	/* as rxe: only the opcodes asked for get a builder; the setters are always there */
	if (ops & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP) x->wr_atomic_cmp_swp = x_atomic_cmp_swp;
	if (ops & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) x->wr_atomic_fetch_add = x_atomic_fetch_add;
	if (ops & IBV_QP_EX_WITH_BIND_MW) x->wr_bind_mw = x_bind_mw;
	if (ops & IBV_QP_EX_WITH_LOCAL_INV) x->wr_local_inv = x_local_inv;
	if (ops & IBV_QP_EX_WITH_RDMA_READ) x->wr_rdma_read = x_rdma_read;
	if (ops & IBV_QP_EX_WITH_RDMA_WRITE) x->wr_rdma_write = x_rdma_write;
	if (ops & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) x->wr_rdma_write_imm = x_rdma_write_imm;
	if (ops & IBV_QP_EX_WITH_SEND) x->wr_send = x_send;
	if (ops & IBV_QP_EX_WITH_SEND_WITH_IMM) x->wr_send_imm = x_send_imm;
	if (ops & IBV_QP_EX_WITH_SEND_WITH_INV) x->wr_send_inv = x_send_inv;
	x->wr_set_ud_addr = x_set_ud_addr;
	x->wr_set_xrc_srqn = x_set_xrc_srqn;
	x->wr_set_inline_data = x_set_inline_data;
	x->wr_set_inline_data_list = x_set_inline_data_list;
	x->wr_set_sge = x_set_sge;
	x->wr_set_sge_list = x_set_sge_list;
	x->wr_start = x_start;
	x->wr_complete = x_complete;
	x->wr_abort = x_abort;
	return b;
}

/* verbs_context->create_qp_ex (ibv_create_qp_ex with more than IBV_QP_INIT_ATTR_PD). */
struct ibv_qp *srd_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr)
{
	if (!attr) {
		errno = EINVAL;
		return NULL;
	}
	const uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
			       IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	if ((attr->comp_mask & ~known) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	uint64_t ops = 0;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		ops = attr->send_ops_flags;
		uint64_t sup = attr->qp_type == IBV_QPT_RC || attr->qp_type == IBV_QPT_XRC_SEND ? XOPS_RC :
			       attr->qp_type == IBV_QPT_UC ? XOPS_UC : attr->qp_type == IBV_QPT_UD ? XOPS_UD : 0;
		if (ops & ~sup) {
			errno = EOPNOTSUPP;
			return NULL;
		}
	}
	struct ibv_qp *ibqp;
	if (attr->qp_type == IBV_QPT_XRC_RECV) {
		/* a TGT QP: in an XRC domain, no PD, no queues */
		if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd || attr->xrcd->context != context ||
		    (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
			errno = EINVAL;
			return NULL;
		}
		return qp_create(context, NULL, (struct ibv_qp_init_attr *)attr,
				 container_of(attr->xrcd, struct srd_xrcd, ibxrcd));
	}
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd || attr->pd->context != context) {
		errno = EINVAL;
		return NULL;
	}
	ibqp = qp_create(context, attr->pd, (struct ibv_qp_init_attr *)attr, NULL);
	if (!ibqp || !(attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return ibqp;
	struct srd_qp *qp = srd_qp_of(ibqp);
	qp->xb = xbatch_new(qp, ops);
	if (!qp->xb) {
		ibv_destroy_qp(ibqp);
		errno = ENOMEM;
		return NULL;
	}
	return ibqp;
}

SRD_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *ibqp)
{
	/* as libibverbs: only a QP created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS has one */
	struct srd_qp *qp = srd_qp_of(ibqp);
	return qp->xb ? &qp->qpx : NULL;
}
