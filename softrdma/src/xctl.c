/*
 * XRC control: ibv_open_qp of a TGT QP that another process of the XRC domain created, and
 * every verb on such a handle, as requests (OP_XRC_CTRL) to that process and their answers;
 * the requests of other processes' handles on this process's TGT QPs, served here; the async
 * events of other processes' QPs, raised on this process's handles.
 * Owns: the waits for answers and the list of this process's handles of other processes' QPs.
 * Calls: net (ports, xmit), xrc (registry, TGT QPs, remote openers), events, agent (its hook).
 * Serving another process's request runs ibv_query_qp or ibv_modify_qp on the TGT QP through
 * the public verbs, as that process's application would: the one call up to qp.c, allowed by
 * name in tests/layering.sh. It is reached only from the agent's run-time hook
 * (srd_xrc_ctrl_hook), on a packet, never from qp.c's calls into this unit.
 */
#include "agent.h"
#include "net.h"
#include "events.h"
#include "xrc.h"
#include "xctl.h"
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

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
int srd_xctl_verb(struct srd_qp *hq, int kind, uint32_t imm, const struct ibv_qp_attr *in, struct xwait *w)
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
void srd_xctl_rx(const struct pkt_hdr *h, const uint8_t *payload, const struct sockaddr_in6 *from)
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
struct ibv_qp *srd_xctl_open_remote(struct srd_qp *h, struct srd_xrcd *x, uint32_t qpn)
{
	__atomic_store_n(&srd_xrc_ctrl_hook, srd_xctl_rx, __ATOMIC_RELEASE);
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
	int rc = srd_xctl_verb(h, XCTL_OPEN, (uint32_t)getpid(), NULL, &w);
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
void srd_xctl_close_remote(struct srd_qp *h)
{
	struct xwait w;
	srd_xctl_verb(h, XCTL_CLOSE, 0, NULL, &w); /* (a process gone has nothing to forget) */
	pthread_mutex_lock(&g_x_lock);
	for (struct srd_qp **p = &g_rhandles; *p; p = &(*p)->rnext)
		if (*p == h) {
			*p = h->rnext;
			break;
		}
	pthread_mutex_unlock(&g_x_lock);
}
