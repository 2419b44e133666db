/*
 * softrdma librdmacm: the rdma_cm connection manager in user space.
 *
 * Sits on the public verbs API only (like rdma-core's librdmacm sits on
 * libibverbs), so it works over any libibverbs that has devices. The CM
 * messages (REQ, REP, RTU, REJ, DREQ, DREP, SIDR REQ/REP) travel over one
 * TCP connection per rdma_cm connection, between the peers' real IP
 * addresses. A listener on rdma_cm port P listens on TCP port P of its bound
 * address. One background thread per process drives the sockets, the
 * timeouts and the state machine, and queues events on the event channels.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/random.h>

#include "cm_units.h"

static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static struct cm_id *g_ids;
static int g_thread_started;
static int g_wake[2] = { -1, -1 };
static uint64_t g_gen;
static int g_timeout_ms = 15000;
static int g_refused_retry_ms = 3000;

/* Connections a listener holds before their request arrives: the backlog
 * given to rdma_listen, this many when it gave none, never more than the max. */
#define DEFAULT_PENDING 128
#define MAX_PENDING 1024
/* How long a listener stops accepting when the process is out of descriptors. */
#define ACCEPT_PAUSE_MS 100

#define DEFAULT_ACK_TIMEOUT 14
#define DEFAULT_HOP_LIMIT 64

/* ----------------------------------------------------------------- thread */

static void wake_thread(void)
{
	char c = 'w';

	if (g_wake[1] >= 0 && write(g_wake[1], &c, 1) < 0) {
		/* a full pipe already guarantees a wake-up */
	}
}

/* Wait until the thread has re-scanned the id list (g_lock held). */
static void wait_thread_pass(void)
{
	uint64_t g0;

	if (!g_thread_started)
		return;
	g0 = g_gen;
	wake_thread();
	while (g_gen == g0)
		pthread_cond_wait(&g_cond, &g_lock);
}

static void *cm_thread(void *arg);

/*
 * The CM thread does not survive fork(). The child forgets the parent's ids
 * and devices (closing its copies of their sockets, so a parent's listener
 * or connection does not outlive the parent in the child) and starts afresh.
 */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&g_lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&g_lock);
}

static void atfork_child(void)
{
	for (struct cm_id *i = g_ids; i; i = i->next)
		if (i->sock >= 0)
			close(i->sock);
	g_ids = NULL;
	if (g_wake[0] >= 0) {
		close(g_wake[0]);
		close(g_wake[1]);
	}
	g_wake[0] = g_wake[1] = -1;
	g_thread_started = 0;
	devices_forget();
	pthread_mutex_init(&g_lock, NULL);
	pthread_cond_init(&g_cond, NULL);
}

__attribute__((constructor)) static void cm_register_atfork(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static int start_thread(void)
{
	pthread_t t;
	sigset_t all, old;
	int rc;

	const char *tmo = getenv("SOFTRDMA_CM_TIMEOUT_MS");

	if (g_thread_started)
		return 0;
	/* read when the first id or channel appears, so a test can set it late */
	const char *rr = getenv("SOFTRDMA_CM_REFUSED_RETRY_MS");

	if (tmo && atoi(tmo) > 0)
		g_timeout_ms = atoi(tmo);
	if (rr && atoi(rr) >= 0)
		g_refused_retry_ms = atoi(rr);
	if (pipe2(g_wake, O_NONBLOCK | O_CLOEXEC))
		return -1;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t, NULL, cm_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		close(g_wake[0]);
		close(g_wake[1]);
		g_wake[0] = g_wake[1] = -1;
		return fail(rc);
	}
	pthread_detach(t);
	g_thread_started = 1;
	return 0;
}

/* --------------------------------------------------------------- channels */

static struct cm_channel *channel_new(void)
{
	struct cm_channel *ch = calloc(1, sizeof(*ch));
	int fds[2];

	if (!ch)
		return NULL;
	if (pipe2(fds, O_CLOEXEC)) {
		free(ch);
		return NULL;
	}
	ch->ch.fd = fds[0];
	ch->wfd = fds[1];
	return ch;
}

/*
 * A thread blocked in rdma_get_cm_event on a channel being destroyed stays
 * blocked, as a read() of the kernel's rdma_cm fd would (rping's CM thread
 * is still waiting when its main thread tears down and returns). The
 * structure is then kept, so the sleeper never touches freed memory.
 */
static void channel_free(struct cm_channel *ch)
{
	struct cm_event *e = ch->head, *n;

	for (; e; e = n) {
		n = e->next;
		free(e);
	}
	ch->head = ch->tail = NULL;
	ch->queued = 0;
	close(ch->ch.fd);
	close(ch->wfd);
	if (ch->waiters) {
		ch->closed = 1;
		return;
	}
	free(ch);
}

CM_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct cm_channel *ch;

	pthread_mutex_lock(&g_lock);
	if (devices_init() <= 0) {
		pthread_mutex_unlock(&g_lock);
		errno = ENODEV;
		return NULL;
	}
	if (start_thread()) {
		pthread_mutex_unlock(&g_lock);
		return NULL;
	}
	ch = channel_new();
	pthread_mutex_unlock(&g_lock);
	return ch ? &ch->ch : NULL;
}

CM_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (!channel)
		return;
	pthread_mutex_lock(&g_lock);
	for (struct cm_id *i = g_ids; i; i = i->next)
		if (i->chan == (struct cm_channel *)channel)
			i->chan = NULL;
	channel_free((struct cm_channel *)channel);
	pthread_mutex_unlock(&g_lock);
}

/* The channel's pipe holds one byte per queued event: the fd is readable
 * exactly while events wait, and every new event is a new edge for
 * edge-triggered pollers, as with the kernel's rdma_cm fd. */
static void channel_push(struct cm_channel *ch, struct cm_event *e)
{
	char c = 'e';

	e->next = NULL;
	if (ch->tail)
		ch->tail->next = e;
	else
		ch->head = e;
	ch->tail = e;
	ch->queued++;
	if (write(ch->wfd, &c, 1) != 1) {
		/* cannot happen short of 64 KiB unread events */
	}
	e->owner->events_queued++;
	pthread_cond_broadcast(&g_cond);
}

static void channel_unlink(struct cm_channel *ch, struct cm_event *e, struct cm_event *prev)
{
	char c;

	if (prev)
		prev->next = e->next;
	else
		ch->head = e->next;
	if (ch->tail == e)
		ch->tail = prev;
	e->next = NULL;
	ch->queued--;
	if (read(ch->ch.fd, &c, 1) != 1) {
		/* cannot happen: each queued event wrote its byte */
	}
	e->owner->events_queued--;
}

static struct cm_event *event_new(struct cm_id *idp, enum rdma_cm_event_type type, int status)
{
	struct cm_event *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->owner = idp;
	e->ev.id = &idp->id;
	e->ev.event = type;
	e->ev.status = status;
	return e;
}

static void post_event(struct cm_id *idp, enum rdma_cm_event_type type, int status)
{
	struct cm_event *e;

	if (!idp->chan)
		return;
	e = event_new(idp, type, status);
	if (e)
		channel_push(idp->chan, e);
}

/* Event data seen from the receiver: the peer's initiator depth is our
 * responder resources and vice versa, as the kernel's ib_cm reports them. */
static void event_conn(struct cm_event *e, const struct wire_msg *m, int size)
{
	int n = m->pdata_len < size ? m->pdata_len : size;

	memcpy(e->pdata, m->pdata, n);
	e->ev.param.conn.private_data = e->pdata;
	e->ev.param.conn.private_data_len = size;
	e->ev.param.conn.responder_resources = m->initiator_depth;
	e->ev.param.conn.initiator_depth = m->responder_resources;
	e->ev.param.conn.flow_control = m->flow_control;
	e->ev.param.conn.retry_count = m->retry_count;
	e->ev.param.conn.rnr_retry_count = m->rnr_retry_count;
	e->ev.param.conn.srq = m->srq;
	e->ev.param.conn.qp_num = ntohl(m->qpn);
}

static void event_pdata_only(struct cm_event *e, const struct wire_msg *m, int size)
{
	int n = m->pdata_len < size ? m->pdata_len : size;

	memcpy(e->pdata, m->pdata, n);
	e->ev.param.conn.private_data = e->pdata;
	e->ev.param.conn.private_data_len = size;
}

static void get_event_cleanup(void *arg)
{
	struct cm_channel *ch = arg;

	ch->waiters--;
	pthread_mutex_unlock(&g_lock);
}

CM_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct cm_channel *ch = (struct cm_channel *)channel;
	struct cm_event *e = NULL;
	volatile int rc = 0;	/* survives the cleanup handler's setjmp */

	if (!channel || !event)
		return fail(EINVAL);
	pthread_mutex_lock(&g_lock);
	ch->waiters++;
	/* blocking here is a cancellation point, like the read() it stands for */
	pthread_cleanup_push(get_event_cleanup, ch);
	while (!ch->head) {
		int fl;

		if (ch->closed) {
			pthread_cond_wait(&g_cond, &g_lock);
			continue;
		}
		fl = fcntl(ch->ch.fd, F_GETFL);
		if (fl >= 0 && (fl & O_NONBLOCK)) {
			rc = EAGAIN;
			break;
		}
		pthread_cond_wait(&g_cond, &g_lock);
	}
	if (!rc) {
		e = ch->head;
		channel_unlink(ch, e, NULL);
		e->owner->reported++;
		*event = &e->ev;
	}
	pthread_cleanup_pop(1);
	return rc ? fail(rc) : 0;
}

CM_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct cm_event *e = (struct cm_event *)event;

	if (!event)
		return fail(EINVAL);
	pthread_mutex_lock(&g_lock);
	e->owner->acked++;
	pthread_cond_broadcast(&g_cond);
	pthread_mutex_unlock(&g_lock);
	free(e);
	return 0;
}

CM_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	switch (event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
	case RDMA_CM_EVENT_ADDR_ERROR: return "RDMA_CM_EVENT_ADDR_ERROR";
	case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
	case RDMA_CM_EVENT_ROUTE_ERROR: return "RDMA_CM_EVENT_ROUTE_ERROR";
	case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
	case RDMA_CM_EVENT_CONNECT_RESPONSE: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
	case RDMA_CM_EVENT_CONNECT_ERROR: return "RDMA_CM_EVENT_CONNECT_ERROR";
	case RDMA_CM_EVENT_UNREACHABLE: return "RDMA_CM_EVENT_UNREACHABLE";
	case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
	case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
	case RDMA_CM_EVENT_DISCONNECTED: return "RDMA_CM_EVENT_DISCONNECTED";
	case RDMA_CM_EVENT_DEVICE_REMOVAL: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
	case RDMA_CM_EVENT_MULTICAST_JOIN: return "RDMA_CM_EVENT_MULTICAST_JOIN";
	case RDMA_CM_EVENT_MULTICAST_ERROR: return "RDMA_CM_EVENT_MULTICAST_ERROR";
	case RDMA_CM_EVENT_ADDR_CHANGE: return "RDMA_CM_EVENT_ADDR_CHANGE";
	case RDMA_CM_EVENT_TIMEWAIT_EXIT: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
	default: return "UNKNOWN EVENT";
	}
}

/* -------------------------------------------------------------------- ids */

static struct cm_id *id_new(struct cm_channel *ch, void *context,
			    enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	struct cm_id *idp = calloc(1, sizeof(*idp));

	if (!idp)
		return NULL;
	idp->id.context = context;
	idp->id.ps = ps;
	idp->id.qp_type = qp_type;
	idp->chan = ch;
	idp->id.channel = ch ? &ch->ch : NULL;
	idp->sock = -1;
	idp->gid_index = -1;
	idp->ack_timeout = DEFAULT_ACK_TIMEOUT;
	idp->qkey = RDMA_UDP_QKEY;
	idp->retry_count = 7;
	idp->rnr_retry_count = 7;
	idp->psn = random_psn();
	idp->next = g_ids;
	g_ids = idp;
	return idp;
}

static void id_unlink(struct cm_id *idp)
{
	for (struct cm_id **pp = &g_ids; *pp; pp = &(*pp)->next)
		if (*pp == idp) {
			*pp = idp->next;
			return;
		}
}

static int id_valid(struct cm_id *idp)
{
	for (struct cm_id *i = g_ids; i; i = i->next)
		if (i == idp)
			return 1;
	return 0;
}

static void close_sock(struct cm_id *idp)
{
	if (idp->sock >= 0) {
		close(idp->sock);
		idp->sock = -1;
	}
	idp->connect_pending = 0;
	idp->req_unanswered = 0;
	idp->out_pending = 0;
	idp->rlen = 0;
	idp->deadline_ms = 0;
	idp->retry_at = 0;
}

static int qp_type_of_ps(enum rdma_port_space ps, enum ibv_qp_type *qt)
{
	switch (ps) {
	case RDMA_PS_TCP:
	case RDMA_PS_IB:
		*qt = IBV_QPT_RC;
		return 0;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		*qt = IBV_QPT_UD;
		return 0;
	default:
		return -1;
	}
}

static int is_ud(struct cm_id *idp)
{
	return idp->id.qp_type == IBV_QPT_UD;
}

CM_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
			     void *context, enum rdma_port_space ps)
{
	struct cm_channel *ch = (struct cm_channel *)channel;
	enum ibv_qp_type qt;
	struct cm_id *idp;
	int sync = 0;

	if (!id || qp_type_of_ps(ps, &qt))
		return fail(EINVAL);
	pthread_mutex_lock(&g_lock);
	if (devices_init() <= 0) {
		pthread_mutex_unlock(&g_lock);
		return fail(ENODEV);
	}
	if (start_thread()) {
		pthread_mutex_unlock(&g_lock);
		return -1;
	}
	if (!ch) {
		ch = channel_new();
		if (!ch) {
			pthread_mutex_unlock(&g_lock);
			return fail(ENOMEM);
		}
		ch->private_to_id = 1;
		sync = 1;
	}
	idp = id_new(ch, context, ps, qt);
	if (!idp) {
		if (sync)
			channel_free(ch);
		pthread_mutex_unlock(&g_lock);
		return fail(ENOMEM);
	}
	idp->sync = sync;
	if (ps == RDMA_PS_IPOIB)
		idp->qkey = 0;
	*id = &idp->id;
	pthread_mutex_unlock(&g_lock);
	return 0;
}

/* ------------------------------------------------------------ QP helpers */

static uint8_t clamp_u8(unsigned v, unsigned max)
{
	return v > max ? max : v;
}

static int init_qp_attr_locked(struct cm_id *idp, struct ibv_qp_attr *a, int *mask)
{
	enum ibv_qp_state st = a->qp_state;

	if (!idp->dev)
		return fail(EINVAL);
	memset(a, 0, sizeof(*a));
	a->qp_state = st;
	*mask = IBV_QP_STATE;
	switch (st) {
	case IBV_QPS_INIT:
		a->pkey_index = 0;
		a->port_num = idp->id.port_num;
		*mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (is_ud(idp)) {
			a->qkey = idp->qkey;
			*mask |= IBV_QP_QKEY;
		} else {
			if (!idp->remote_known)
				a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
			else
				a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
					(idp->responder_resources ?
					 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC : 0);
			*mask |= IBV_QP_ACCESS_FLAGS;
		}
		return 0;
	case IBV_QPS_RTR:
		if (is_ud(idp))
			return 0;
		if (!idp->remote_known)
			return fail(EINVAL);
		a->path_mtu = idp->remote_mtu && idp->remote_mtu < idp->mtu ? idp->remote_mtu : idp->mtu;
		a->dest_qp_num = idp->remote_qpn;
		a->rq_psn = idp->remote_psn;
		a->ah_attr.is_global = 1;
		a->ah_attr.grh.dgid = idp->dgid;
		a->ah_attr.grh.sgid_index = idp->gid_index;
		a->ah_attr.grh.hop_limit = DEFAULT_HOP_LIMIT;
		a->ah_attr.grh.traffic_class = idp->tos;
		a->ah_attr.port_num = idp->id.port_num;
		*mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (idp->id.qp_type == IBV_QPT_RC) {
			a->max_dest_rd_atomic = idp->responder_resources;
			a->min_rnr_timer = 0;
			*mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
		return 0;
	case IBV_QPS_RTS:
		a->sq_psn = idp->psn;
		*mask |= IBV_QP_SQ_PSN;
		if (idp->id.qp_type == IBV_QPT_RC) {
			if (!idp->remote_known)
				return fail(EINVAL);
			a->timeout = idp->ack_timeout;
			a->retry_cnt = idp->retry_count;
			a->rnr_retry = idp->rnr_retry_count;
			a->max_rd_atomic = idp->initiator_depth;
			*mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_MAX_QP_RD_ATOMIC;
		}
		return 0;
	default:
		return fail(EINVAL);
	}
}

static int modify_qp_to(struct cm_id *idp, enum ibv_qp_state st)
{
	struct ibv_qp_attr a;
	int mask, rc;

	a.qp_state = st;
	if (init_qp_attr_locked(idp, &a, &mask))
		return -1;
	rc = ibv_modify_qp(idp->id.qp, &a, mask);
	if (rc)
		return fail(rc > 0 ? rc : EINVAL);
	return 0;
}

/* INIT again (access flags now known), then RTR and RTS, as librdmacm does. */
static int qp_connect(struct cm_id *idp)
{
	if (!idp->id.qp)
		return 0;
	if (modify_qp_to(idp, IBV_QPS_INIT) || modify_qp_to(idp, IBV_QPS_RTR) ||
	    modify_qp_to(idp, IBV_QPS_RTS))
		return -1;
	return 0;
}

static void qp_to_err(struct cm_id *idp)
{
	struct ibv_qp_attr a;

	if (!idp->id.qp)
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	ibv_modify_qp(idp->id.qp, &a, IBV_QP_STATE);
}

/* -------------------------------------------------------------- messaging */

static void msg_init(struct cm_id *idp, struct wire_msg *m, enum wire_type type)
{
	memset(m, 0, sizeof(*m));
	m->magic = htonl(WIRE_MAGIC);
	m->type = type;
	m->version = WIRE_VERSION;
	m->qp_type = idp->id.qp_type;
	m->psn = htonl(idp->psn);
	m->qkey = htonl(idp->qkey);
	memcpy(m->gid, idp->sgid.raw, 16);
	m->mtu = idp->mtu;
}

static int msg_pdata(struct wire_msg *m, const void *pd, unsigned len, unsigned max)
{
	if (len > max || (len && !pd))
		return -1;
	if (len)
		memcpy(m->pdata, pd, len);
	m->pdata_len = len;
	return 0;
}

/* Messages are small and the socket buffer nearly empty: one send suffices. */
static int msg_send(struct cm_id *idp, const struct wire_msg *m)
{
	size_t off = 0;

	if (idp->sock < 0)
		return -1;
	while (off < sizeof(*m)) {
		ssize_t n = send(idp->sock, (const char *)m + off, sizeof(*m) - off, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd p = { .fd = idp->sock, .events = POLLOUT };

				if (poll(&p, 1, 1000) > 0)
					continue;
			}
			return -1;
		}
		off += n;
	}
	return 0;
}

static void send_simple(struct cm_id *idp, enum wire_type type, uint8_t status)
{
	struct wire_msg m;

	msg_init(idp, &m, type);
	m.status = status;
	msg_send(idp, &m);
}

/* ---------------------------------------------------------- route filling */

static void fill_route(struct cm_id *idp)
{
	struct rdma_route *r = &idp->id.route;
	struct ibv_sa_path_rec *p = &idp->path;

	r->addr.addr.ibaddr.sgid = idp->sgid;
	if (gid_is_loopback(&r->addr.addr.ibaddr.dgid) || gid_is_zero(&r->addr.addr.ibaddr.dgid))
		r->addr.addr.ibaddr.dgid = idp->sgid;
	r->addr.addr.ibaddr.pkey = htons(0xffff);
	memset(p, 0, sizeof(*p));
	p->dgid = r->addr.addr.ibaddr.dgid;
	p->sgid = idp->sgid;
	p->hop_limit = DEFAULT_HOP_LIMIT;
	p->traffic_class = idp->tos;
	p->reversible = 1;
	p->numb_path = 1;
	p->pkey = htons(0xffff);
	p->mtu_selector = 2;
	p->mtu = idp->mtu;
	p->rate_selector = 2;
	p->rate = 3;
	p->packet_life_time_selector = 2;
	p->packet_life_time = 16;
	r->path_rec = p;
	r->num_paths = 1;
}

/* -------------------------------------------------------- state machine */

static void fail_connection(struct cm_id *idp, enum rdma_cm_event_type type, int status,
			    const struct wire_msg *m, int pdata_size)
{
	struct cm_event *e;

	qp_to_err(idp);
	close_sock(idp);
	idp->state = ST_ERROR;
	if (!idp->chan)
		return;
	e = event_new(idp, type, status);
	if (!e)
		return;
	if (m)
		event_pdata_only(e, m, pdata_size);
	channel_push(idp->chan, e);
}

static void remote_from_msg(struct cm_id *idp, const struct wire_msg *m)
{
	idp->remote_qpn = ntohl(m->qpn) & 0xffffff;
	idp->remote_psn = ntohl(m->psn) & 0xffffff;
	idp->remote_qkey = ntohl(m->qkey);
	memcpy(idp->dgid.raw, m->gid, 16);
	idp->remote_mtu = m->mtu;
	idp->remote_known = 1;
}

static void destroy_internal(struct cm_id *idp)
{
	id_unlink(idp);
	close_sock(idp);
	free(idp);
}

/* A REQ (or SIDR REQ) arrived on a socket accepted by a listener. */
static void handle_req(struct cm_id *idp, const struct wire_msg *m)
{
	struct cm_id *l = idp->listener;
	struct sockaddr_storage local, peer;
	socklen_t ll = sizeof(local), pl = sizeof(peer);
	int ud = m->type == MSG_SIDR_REQ;
	struct cm_event *e;

	if (!l || !id_valid(l) || l->state != ST_LISTEN || !l->chan || ud != is_ud(l) ||
	    (ud ? m->qp_type != IBV_QPT_UD : m->qp_type != IBV_QPT_RC && m->qp_type != IBV_QPT_UC)) {
		msg_init(idp, (struct wire_msg *)&idp->out, ud ? MSG_SIDR_REP : MSG_REJ);
		idp->out.status = ud ? 1 /* SIDR unsupported */ : REJ_INVALID_SERVICE_ID;
		msg_send(idp, &idp->out);
		destroy_internal(idp);
		return;
	}
	if (getsockname(idp->sock, (struct sockaddr *)&local, &ll) ||
	    getpeername(idp->sock, (struct sockaddr *)&peer, &pl)) {
		destroy_internal(idp);
		return;
	}
	idp->id.ps = l->id.ps;
	idp->id.qp_type = m->qp_type;	/* RC or UC as the requester's QP */
	idp->id.context = l->id.context;
	idp->qkey = l->qkey;
	idp->tos = l->tos;
	idp->ack_timeout = l->ack_timeout;
	if (find_dev((struct sockaddr *)&local, idp)) {
		if (l->dev) {
			idp->dev = l->dev;
			idp->id.verbs = l->id.verbs;
			idp->id.port_num = l->id.port_num;
			idp->gid_index = l->gid_index;
			idp->sgid = l->sgid;
			idp->mtu = l->mtu;
		} else {
			msg_init(idp, &idp->out, ud ? MSG_SIDR_REP : MSG_REJ);
			idp->out.status = ud ? 1 : REJ_INVALID_SERVICE_ID;
			msg_send(idp, &idp->out);
			destroy_internal(idp);
			return;
		}
	}
	memcpy(&idp->id.route.addr.src_storage, &local, ll);
	memcpy(&idp->id.route.addr.dst_storage, &peer, pl);
	memcpy(idp->id.route.addr.addr.ibaddr.dgid.raw, m->gid, 16);
	fill_route(idp);
	remote_from_msg(idp, m);
	idp->responder_resources = clamp_u8(m->initiator_depth, idp->dev->attr.max_qp_rd_atom);
	idp->initiator_depth = clamp_u8(m->responder_resources, idp->dev->attr.max_qp_init_rd_atom);
	idp->retry_count = m->retry_count & 7;
	idp->rnr_retry_count = m->rnr_retry_count & 7;
	idp->internal = 0;
	idp->listener = NULL;
	idp->deadline_ms = 0;
	idp->state = ST_REQ_RCVD;
	idp->chan = l->chan;
	idp->id.channel = &l->chan->ch;
	if (l->sync) {
		/* a synchronous listener's children get their own channel, as in librdmacm */
		struct cm_channel *ch = channel_new();

		if (ch) {
			ch->private_to_id = 1;
			idp->sync = 1;
			idp->chan = ch;
			idp->id.channel = &ch->ch;
		}
	}
	e = event_new(l, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	if (!e) {
		destroy_internal(idp);
		return;
	}
	e->ev.id = &idp->id;
	e->ev.listen_id = &l->id;
	if (ud) {
		int n = m->pdata_len < PDATA_SIDR_REQ ? m->pdata_len : PDATA_SIDR_REQ;

		memcpy(e->pdata, m->pdata, n);
		e->ev.param.ud.private_data = e->pdata;
		e->ev.param.ud.private_data_len = PDATA_SIDR_REQ;
	} else {
		event_conn(e, m, PDATA_REQ);
	}
	channel_push(l->chan, e);
}

static void handle_rep(struct cm_id *idp, const struct wire_msg *m)
{
	struct cm_event *e;

	remote_from_msg(idp, m);
	idp->responder_resources = clamp_u8(m->initiator_depth, idp->dev->attr.max_qp_rd_atom);
	idp->initiator_depth = clamp_u8(m->responder_resources, idp->dev->attr.max_qp_init_rd_atom);
	idp->rnr_retry_count = m->rnr_retry_count & 7;
	idp->deadline_ms = 0;
	if (!idp->id.qp) {
		idp->state = ST_RESP_WAIT;
		e = event_new(idp, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
	} else if (qp_connect(idp)) {
		int err = errno;

		send_simple(idp, MSG_REJ, REJ_CONSUMER_DEFINED);
		fail_connection(idp, RDMA_CM_EVENT_CONNECT_ERROR, -err, NULL, 0);
		return;
	} else {
		send_simple(idp, MSG_RTU, 0);
		idp->state = ST_ESTABLISHED;
		e = event_new(idp, RDMA_CM_EVENT_ESTABLISHED, 0);
	}
	if (e && idp->chan) {
		event_conn(e, m, PDATA_REP);
		channel_push(idp->chan, e);
	} else {
		free(e);
	}
}

static void handle_sidr_rep(struct cm_id *idp, const struct wire_msg *m)
{
	struct cm_event *e;
	int n = m->pdata_len < PDATA_SIDR_REP ? m->pdata_len : PDATA_SIDR_REP;

	if (m->status) {
		e = event_new(idp, RDMA_CM_EVENT_UNREACHABLE, m->status);
		idp->state = ST_ERROR;
	} else {
		remote_from_msg(idp, m);
		e = event_new(idp, RDMA_CM_EVENT_ESTABLISHED, 0);
		idp->state = ST_UD_DONE;
	}
	close_sock(idp);
	if (!e)
		return;
	memcpy(e->pdata, m->pdata, n);
	e->ev.param.ud.private_data = e->pdata;
	e->ev.param.ud.private_data_len = PDATA_SIDR_REP;
	if (!m->status) {
		struct ibv_ah_attr *ah = &e->ev.param.ud.ah_attr;

		ah->is_global = 1;
		memcpy(ah->grh.dgid.raw, m->gid, 16);
		ah->grh.sgid_index = idp->gid_index;
		ah->grh.hop_limit = DEFAULT_HOP_LIMIT;
		ah->grh.traffic_class = idp->tos;
		ah->port_num = idp->id.port_num;
		e->ev.param.ud.qp_num = ntohl(m->qpn) & 0xffffff;
		e->ev.param.ud.qkey = ntohl(m->qkey);
	}
	if (idp->chan)
		channel_push(idp->chan, e);
	else
		free(e);
}

/* The peer ended an established (or disconnecting) connection. */
static void disconnected(struct cm_id *idp)
{
	close_sock(idp);
	idp->state = ST_DISCONNECTED;
	post_event(idp, RDMA_CM_EVENT_DISCONNECTED, 0);
}

/*
 * The connection to the peer is gone (closed, reset, or unusable because the
 * peer broke the protocol): each state ends the way the kernel's CM ends it
 * when the peer stops answering, so no id is left waiting for nothing.
 */
static void peer_closed(struct cm_id *idp)
{
	switch (idp->state) {
	case ST_PENDING:
		destroy_internal(idp);
		return;
	case ST_CONNECTING:
	case ST_RESP_WAIT:
	case ST_ACCEPTED:
		fail_connection(idp, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0);
		return;
	case ST_REQ_RCVD:
		idp->peer_gone = 1;
		close_sock(idp);
		return;
	case ST_ESTABLISHED:
	case ST_DISC_SENT:
		disconnected(idp);
		return;
	default:
		close_sock(idp);
		return;
	}
}

/* A record this library could have sent: right magic and version, a known
 * type, a QP type, MTU and private data length within their ranges. */
static int msg_well_formed(const struct wire_msg *m)
{
	if (ntohl(m->magic) != WIRE_MAGIC || m->version != WIRE_VERSION)
		return 0;
	if (m->type < MSG_REQ || m->type > MSG_SIDR_REP || m->pdata_len > PDATA_MAX)
		return 0;
	switch (m->type) {
	case MSG_REQ:
	case MSG_REP:
		return (m->qp_type == IBV_QPT_RC || m->qp_type == IBV_QPT_UC) &&
		       m->mtu >= IBV_MTU_256 && m->mtu <= IBV_MTU_4096;
	case MSG_SIDR_REQ:
	case MSG_SIDR_REP:
		return m->qp_type == IBV_QPT_UD;
	default:
		return 1;
	}
}

static void handle_msg(struct cm_id *idp, const struct wire_msg *m)
{
	if (!msg_well_formed(m)) {
		/* a peer that breaks the protocol is treated as one that went away */
		peer_closed(idp);
		return;
	}
	switch (idp->state) {
	case ST_PENDING:
		if (m->type == MSG_REQ || m->type == MSG_SIDR_REQ)
			handle_req(idp, m);
		else
			destroy_internal(idp);
		return;
	case ST_CONNECTING:
		if (m->type == MSG_REP && !is_ud(idp))
			handle_rep(idp, m);
		else if (m->type == MSG_SIDR_REP && is_ud(idp))
			handle_sidr_rep(idp, m);
		else if (m->type == MSG_REJ)
			fail_connection(idp, RDMA_CM_EVENT_REJECTED, m->status, m, PDATA_REJ);
		else
			peer_closed(idp);
		return;
	case ST_RESP_WAIT:
		if (m->type == MSG_REJ)
			fail_connection(idp, RDMA_CM_EVENT_REJECTED, m->status, m, PDATA_REJ);
		else if (m->type == MSG_DREQ) {
			send_simple(idp, MSG_DREP, 0);
			disconnected(idp);
		} else {
			peer_closed(idp);
		}
		return;
	case ST_REQ_RCVD:
		/* the requester gave up (REJ) or broke the protocol: accept will report it */
		peer_closed(idp);
		return;
	case ST_ACCEPTED:
		if (m->type == MSG_RTU) {
			idp->state = ST_ESTABLISHED;
			idp->deadline_ms = 0;
			post_event(idp, RDMA_CM_EVENT_ESTABLISHED, 0);
		} else if (m->type == MSG_REJ) {
			fail_connection(idp, RDMA_CM_EVENT_REJECTED, m->status, m, PDATA_REJ);
		} else if (m->type == MSG_DREQ) {
			/* a requester without a QP disconnecting before rdma_establish */
			send_simple(idp, MSG_DREP, 0);
			disconnected(idp);
		} else {
			peer_closed(idp);
		}
		return;
	case ST_ESTABLISHED:
	case ST_DISC_SENT:
		/* an RTU may trail rdma_notify(COMM_EST) or our own early DREQ */
		if (m->type == MSG_RTU)
			return;
		if (m->type == MSG_DREQ)
			send_simple(idp, MSG_DREP, 0);
		/* DREQ, DREP, or a record that has no place here */
		disconnected(idp);
		return;
	default:
		return;
	}
}

static void connect_done(struct cm_id *idp, int err);
static int new_socket(struct cm_id *idp, int family);
static int peer_allowed(const struct sockaddr *sa);

/*
 * Connect the id's socket to its destination and send the queued REQ.
 *
 * A destination on another host has no softrdma device answering for it unless
 * SOFTRDMA_REMOTE is set (peer_allowed). The kernel's CM sends its REQ to such an
 * address all the same (its route and neighbour, the gateway, resolved) and retries
 * it unanswered until the CM timeout gives UNREACHABLE -ETIMEDOUT. So does this
 * one: no TCP connection is tried (a proxy or a stranger's port could answer it),
 * the id waits for its deadline, and rdma_destroy_id cancels it meanwhile.
 */
static void start_connect(struct cm_id *idp)
{
	struct sockaddr *src = &idp->id.route.addr.src_addr;
	struct sockaddr *dst = &idp->id.route.addr.dst_addr;
	int rc;

	idp->retry_at = 0;
	if (!peer_allowed(dst)) {
		idp->req_unanswered = 1;
		return;
	}
	if (idp->sock < 0) {
		idp->sock = new_socket(idp, dst->sa_family);
		if (idp->sock < 0 || bind(idp->sock, src, sa_len(src))) {
			connect_done(idp, errno);
			return;
		}
	}
	rc = connect(idp->sock, dst, sa_len(dst));
	if (rc == 0) {
		if (msg_send(idp, &idp->out))
			peer_closed(idp);
	} else if (errno == EINPROGRESS) {
		idp->connect_pending = 1;
		idp->out_pending = 1;
	} else {
		connect_done(idp, errno);
	}
}

static void connect_done(struct cm_id *idp, int err)
{
	idp->connect_pending = 0;
	if (!err) {
		if (idp->out_pending) {
			idp->out_pending = 0;
			if (msg_send(idp, &idp->out))
				peer_closed(idp);
		}
		return;
	}
	if (err == ECONNREFUSED && now_ms() < idp->refused_until) {
		/* the listener may be moments away (a server re-listening on its
		 * port): try again shortly, on a fresh socket with the same address */
		close(idp->sock);
		idp->sock = -1;
		idp->retry_at = now_ms() + 20;
		return;
	}
	if (err == ECONNREFUSED) {
		/* a live host without a listener: its CM answers REJ "invalid service ID" */
		struct wire_msg m;

		memset(&m, 0, sizeof(m));
		fail_connection(idp, RDMA_CM_EVENT_REJECTED, REJ_INVALID_SERVICE_ID, &m, PDATA_REJ);
	} else {
		fail_connection(idp, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0);
	}
}

/* A deadline passed: the peer is as good as gone (a pending request never
 * came, a REP or RTU never came, a DREQ went unanswered). */
static void handle_timeout(struct cm_id *idp)
{
	idp->deadline_ms = 0;
	switch (idp->state) {
	case ST_PENDING:
	case ST_CONNECTING:
	case ST_ACCEPTED:
	case ST_DISC_SENT:
		peer_closed(idp);
		return;
	default:
		return;
	}
}

/*
 * Whether a connection from sa may go on. softrdma's QPs are reachable from other
 * hosts only with SOFTRDMA_REMOTE=1 (docs/softrdma.md), so the CM takes connections
 * from other hosts only then too: by default a listener bound to the wildcard address
 * still answers only its own host (loopback or one of the host's addresses).
 */
static int peer_allowed(const struct sockaddr *sa)
{
	const char *e = getenv("SOFTRDMA_REMOTE");
	union ibv_gid want, g;
	struct ifaddrs *ifs = NULL;
	int ok = 0;

	if (e && *e && strcmp(e, "0"))
		return 1;
	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
		return 0;
	sa_to_gid(sa, &want);
	if (gid_is_loopback(&want))
		return 1;
	if (getifaddrs(&ifs))
		return 0;
	for (struct ifaddrs *i = ifs; i && !ok; i = i->ifa_next) {
		if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
			continue;
		sa_to_gid(i->ifa_addr, &g);
		ok = !memcmp(g.raw, want.raw, 16);
	}
	freeifaddrs(ifs);
	return ok;
}

/*
 * Take the connections waiting on a listener's socket, up to its backlog of
 * pending ids (the rest wait in the kernel's queue until a pending request
 * arrives or times out). Out of descriptors (EMFILE and the like), the
 * listener stops accepting for a moment instead of polling readable forever.
 * A connection from another host is closed at once unless SOFTRDMA_REMOTE is set.
 */
static void accept_new(struct cm_id *l)
{
	while (l->npending < l->backlog) {
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		int s = accept4(l->sock, (struct sockaddr *)&from, &fl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct cm_id *c;
		int one = 1;

		if (s < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				l->accept_paused_until = now_ms() + ACCEPT_PAUSE_MS;
			return;
		}
		if (!peer_allowed((struct sockaddr *)&from)) {
			close(s); /* another host, not opted in: no event, no pending id */
			continue;
		}
		setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = id_new(NULL, NULL, l->id.ps, l->id.qp_type);
		if (!c) {
			close(s);
			l->accept_paused_until = now_ms() + ACCEPT_PAUSE_MS;
			return;
		}
		c->internal = 1;
		c->listener = l;
		c->sock = s;
		c->state = ST_PENDING;
		c->deadline_ms = now_ms() + g_timeout_ms;
		l->npending++;
	}
}

/* Whether the CM thread polls a listener's socket now; otherwise, when to look again (0: when a pending id ends). */
static int listener_polled(struct cm_id *l, uint64_t now, uint64_t *again)
{
	*again = 0;
	if (l->accept_paused_until > now) {
		*again = l->accept_paused_until;
		return 0;
	}
	return l->npending < l->backlog;
}

static void read_sock(struct cm_id *idp)
{
	int fd = idp->sock;

	while (idp->sock == fd && fd >= 0) {
		ssize_t n = recv(fd, idp->rbuf + idp->rlen, sizeof(idp->rbuf) - idp->rlen, 0);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			peer_closed(idp);
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		idp->rlen += n;
		if (idp->rlen == sizeof(idp->rbuf)) {
			struct wire_msg m;

			memcpy(&m, idp->rbuf, sizeof(m));
			idp->rlen = 0;
			handle_msg(idp, &m);
			/* handle_msg may have freed an internal id */
			if (!id_valid(idp))
				return;
		}
	}
}

/* States whose socket carries (or awaits) a CM conversation. A bound but
 * unconnected TCP socket polls as hung up, so the others are left out. */
static int polled_state(enum id_state st)
{
	switch (st) {
	case ST_LISTEN:
	case ST_PENDING:
	case ST_CONNECTING:
	case ST_RESP_WAIT:
	case ST_REQ_RCVD:
	case ST_ACCEPTED:
	case ST_ESTABLISHED:
	case ST_DISC_SENT:
		return 1;
	default:
		return 0;
	}
}

static void *cm_thread(void *arg)
{
	struct pollfd *pfd = NULL;
	struct cm_id **map = NULL;
	int cap = 0;

	(void)arg;
	pthread_mutex_lock(&g_lock);
	for (;;) {
		int n = 0, timeout = -1, rc;
		uint64_t now = now_ms();
		char buf[64];

		int count = 1;
		for (struct cm_id *i = g_ids; i; i = i->next)
			count++;
		if (count > cap) {
			cap = count * 2;
			free(pfd);
			free(map);
			pfd = calloc(cap, sizeof(*pfd));
			map = calloc(cap, sizeof(*map));
			if (!pfd || !map)
				abort();
		}
		pfd[n].fd = g_wake[0];
		pfd[n].events = POLLIN;
		map[n++] = NULL;
		for (struct cm_id *i = g_ids; i; i = i->next)
			i->npending = 0;
		for (struct cm_id *i = g_ids; i; i = i->next)
			if (i->state == ST_PENDING && i->listener)
				i->listener->npending++;
		for (struct cm_id *i = g_ids; i; i = i->next) {
			if (i->deadline_ms) {
				int left = i->deadline_ms > now ? (int)(i->deadline_ms - now) : 0;

				if (timeout < 0 || left < timeout)
					timeout = left;
			}
			if (i->retry_at) {
				int left = i->retry_at > now ? (int)(i->retry_at - now) : 0;

				if (timeout < 0 || left < timeout)
					timeout = left;
			}
			if (i->sock < 0 || i->req_unanswered || !polled_state(i->state))
				continue;
			if (i->state == ST_LISTEN) {
				uint64_t again;

				if (!listener_polled(i, now, &again)) {
					if (again) {
						int left = again > now ? (int)(again - now) : 0;

						if (timeout < 0 || left < timeout)
							timeout = left;
					}
					continue;
				}
			}
			pfd[n].fd = i->sock;
			pfd[n].events = i->connect_pending ? POLLOUT : POLLIN;
			pfd[n].revents = 0;
			map[n++] = i;
		}
		pthread_mutex_unlock(&g_lock);
		rc = poll(pfd, n, timeout);
		pthread_mutex_lock(&g_lock);
		g_gen++;
		pthread_cond_broadcast(&g_cond);
		if (rc < 0)
			continue;
		if (pfd[0].revents & POLLIN)
			while (read(g_wake[0], buf, sizeof(buf)) > 0)
				;
		for (int k = 1; k < n; k++) {
			struct cm_id *i = map[k];

			if (!pfd[k].revents || !id_valid(i) || i->sock != pfd[k].fd)
				continue;
			if (i->connect_pending) {
				int err = 0;
				socklen_t el = sizeof(err);

				if (getsockopt(i->sock, SOL_SOCKET, SO_ERROR, &err, &el))
					err = errno;
				connect_done(i, err);
				continue;
			}
			if (i->state == ST_LISTEN)
				accept_new(i);
			else
				read_sock(i);
		}
		now = now_ms();
		for (struct cm_id *i = g_ids, *next; i; i = next) {
			next = i->next;
			if (i->retry_at && i->retry_at <= now && i->state == ST_CONNECTING)
				start_connect(i);
			else if (i->deadline_ms && i->deadline_ms <= now)
				handle_timeout(i);
		}
	}
	return NULL;
}

/* ------------------------------------------------------------- sync mode */

/* A synchronous id waits for the event its call produces, like librdmacm's
 * ucma_complete(); the event stays in id->event until the next call. */
static int sync_complete(struct rdma_cm_id *id)
{
	struct rdma_cm_event *ev;
	int rc;

	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	rc = rdma_get_cm_event(id->channel, &ev);
	if (rc)
		return rc;
	id->event = ev;
	if (ev->status) {
		if (ev->event == RDMA_CM_EVENT_REJECTED)
			return fail(ECONNREFUSED);
		return fail(ev->status < 0 ? -ev->status : ev->status);
	}
	if (ev->event == RDMA_CM_EVENT_DISCONNECTED || ev->event == RDMA_CM_EVENT_UNREACHABLE ||
	    ev->event == RDMA_CM_EVENT_CONNECT_ERROR || ev->event == RDMA_CM_EVENT_ADDR_ERROR ||
	    ev->event == RDMA_CM_EVENT_ROUTE_ERROR)
		return fail(ECONNRESET);
	return 0;
}

static void sync_ack_old(struct rdma_cm_id *id)
{
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
}

/* --------------------------------------------------------- address setup */

static int new_socket(struct cm_id *idp, int family)
{
	int one = 1;
	int s = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (s < 0)
		return -1;
	/* the listener must be restartable while old connections sit in TIME_WAIT */
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (family == AF_INET6)
		setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &idp->afonly, sizeof(idp->afonly));
	return s;
}

static int bind_locked(struct cm_id *idp, const struct sockaddr *addr)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);
	int s, rc;

	if (!addr)
		return fail(EINVAL);
	if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)
		return fail(EAFNOSUPPORT);
	if (idp->state != ST_IDLE)
		return fail(EINVAL);
	if (!sa_is_any(addr)) {
		rc = find_dev(addr, idp);
		if (rc)
			return fail(-rc);
	}
	s = new_socket(idp, addr->sa_family);
	if (s < 0)
		return -1;
	if (bind(s, addr, sa_len(addr)) || getsockname(s, (struct sockaddr *)&ss, &l)) {
		int err = errno;

		close(s);
		idp->dev = NULL;
		idp->id.verbs = NULL;
		idp->id.port_num = 0;
		return fail(err);
	}
	idp->sock = s;
	memset(&idp->id.route.addr.src_storage, 0, sizeof(idp->id.route.addr.src_storage));
	memcpy(&idp->id.route.addr.src_storage, &ss, l);
	if (idp->dev)
		idp->id.route.addr.addr.ibaddr.sgid = idp->sgid;
	idp->state = ST_BOUND;
	return 0;
}

CM_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	int rc;

	if (!id)
		return fail(EINVAL);
	pthread_mutex_lock(&g_lock);
	rc = bind_locked((struct cm_id *)id, addr);
	pthread_mutex_unlock(&g_lock);
	return rc;
}

/* The local address the kernel's routing would use to reach dst. */
static int route_source(const struct sockaddr *dst, struct sockaddr_storage *src)
{
	socklen_t l = sizeof(*src);
	int s = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_storage d;

	if (s < 0)
		return -errno;
	memcpy(&d, dst, sa_len(dst));
	if (!sa_port((struct sockaddr *)&d))
		sa_set_port((struct sockaddr *)&d, htons(9));
	if (connect(s, (struct sockaddr *)&d, sa_len(dst)) ||
	    getsockname(s, (struct sockaddr *)src, &l)) {
		int err = errno;

		close(s);
		return -err;
	}
	close(s);
	return 0;
}

CM_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
				struct sockaddr *dst_addr, int timeout_ms)
{
	struct cm_id *idp = (struct cm_id *)id;
	struct sockaddr_storage src;
	int rc, status = 0;

	(void)timeout_ms; /* resolution is local and immediate */
	if (!id || !dst_addr || (dst_addr->sa_family != AF_INET && dst_addr->sa_family != AF_INET6))
		return fail(EINVAL);
	if (src_addr && src_addr->sa_family != dst_addr->sa_family)
		return fail(EINVAL);
	if (idp->sync)
		sync_ack_old(id);
	pthread_mutex_lock(&g_lock);
	if (idp->state == ST_ADDR_RESOLVED) {
		/* resolving again: keep the bound socket, refresh the destination */
	} else if (idp->state == ST_IDLE && src_addr) {
		if (bind_locked(idp, src_addr)) {
			pthread_mutex_unlock(&g_lock);
			return -1;
		}
	} else if (idp->state != ST_IDLE && idp->state != ST_BOUND) {
		pthread_mutex_unlock(&g_lock);
		return fail(EINVAL);
	}
	if (idp->sock >= 0 && idp->id.route.addr.src_addr.sa_family != dst_addr->sa_family) {
		pthread_mutex_unlock(&g_lock);
		return fail(EINVAL);
	}
	rc = route_source(dst_addr, &src);
	if (rc) {
		status = rc;
	} else if (idp->sock >= 0 && !sa_is_any(&idp->id.route.addr.src_addr)) {
		/* bound to a concrete address: that one is the source */
		memcpy(&src, &idp->id.route.addr.src_storage, sizeof(src));
	}
	if (!status && !idp->dev && find_dev((struct sockaddr *)&src, idp))
		status = -ENODEV;
	if (!status && idp->sock < 0) {
		struct sockaddr_storage b;

		memcpy(&b, &src, sizeof(b));
		sa_set_port((struct sockaddr *)&b, 0);
		idp->state = ST_IDLE;
		if (bind_locked(idp, (struct sockaddr *)&b))
			status = -errno;
		if (status == 0 && !idp->dev && find_dev((struct sockaddr *)&src, idp))
			status = -ENODEV;
	}
	if (!status) {
		uint16_t port = sa_port(&idp->id.route.addr.src_addr);

		memset(&idp->id.route.addr.src_storage, 0, sizeof(idp->id.route.addr.src_storage));
		memcpy(&idp->id.route.addr.src_storage, &src, sa_len((struct sockaddr *)&src));
		sa_set_port(&idp->id.route.addr.src_addr, port);
		memset(&idp->id.route.addr.dst_storage, 0, sizeof(idp->id.route.addr.dst_storage));
		memcpy(&idp->id.route.addr.dst_storage, dst_addr, sa_len(dst_addr));
		sa_to_gid(dst_addr, &idp->id.route.addr.addr.ibaddr.dgid);
		fill_route(idp);
		idp->id.route.num_paths = 0;
		idp->id.route.path_rec = NULL;
		idp->state = ST_ADDR_RESOLVED;
		post_event(idp, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
	} else {
		post_event(idp, RDMA_CM_EVENT_ADDR_ERROR, status);
	}
	pthread_mutex_unlock(&g_lock);
	if (idp->sync)
		return sync_complete(id);
	return 0;
}

CM_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct cm_id *idp = (struct cm_id *)id;

	(void)timeout_ms;
	if (!id)
		return fail(EINVAL);
	if (idp->sync)
		sync_ack_old(id);
	pthread_mutex_lock(&g_lock);
	if (idp->state != ST_ADDR_RESOLVED && idp->state != ST_ROUTE_RESOLVED) {
		pthread_mutex_unlock(&g_lock);
		return fail(EINVAL);
	}
	fill_route(idp);
	idp->state = ST_ROUTE_RESOLVED;
	post_event(idp, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
	pthread_mutex_unlock(&g_lock);
	if (idp->sync)
		return sync_complete(id);
	return 0;
}

CM_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct cm_id *idp = (struct cm_id *)id;

	if (!id)
		return fail(EINVAL);
	pthread_mutex_lock(&g_lock);
	if (idp->state == ST_IDLE) {
		struct sockaddr_in any = { .sin_family = AF_INET };

		if (bind_locked(idp, (struct sockaddr *)&any)) {
			pthread_mutex_unlock(&g_lock);
			return -1;
		}
	}
	if (idp->state != ST_BOUND) {
		pthread_mutex_unlock(&g_lock);
		return fail(EINVAL);
	}
	if (listen(idp->sock, backlog > 0 ? backlog : SOMAXCONN)) {
		int err = errno;

		pthread_mutex_unlock(&g_lock);
		return fail(err);
	}
	idp->backlog = backlog <= 0 ? DEFAULT_PENDING : backlog > MAX_PENDING ? MAX_PENDING : backlog;
	idp->state = ST_LISTEN;
	wake_thread();
	pthread_mutex_unlock(&g_lock);
	return 0;
}

/* ------------------------------------------------------------ connecting */

static int valid_param(struct cm_id *idp, const struct rdma_conn_param *p)
{
	if (idp->id.ps != RDMA_PS_TCP)
		return 0;
	if (!idp->id.qp && !p)
		return -1;
	if (!p)
		return 0;
	if (p->responder_resources != RDMA_MAX_RESP_RES &&
	    p->responder_resources > idp->dev->attr.max_qp_rd_atom)
		return -1;
	if (p->initiator_depth != RDMA_MAX_INIT_DEPTH &&
	    p->initiator_depth > idp->dev->attr.max_qp_init_rd_atom)
		return -1;
	return 0;
}

CM_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
	struct cm_id *idp = (struct cm_id *)id;
	struct wire_msg *m = &idp->out;
	int ud = is_ud(idp);

	if (!id)
		return fail(EINVAL);
	if (idp->sync)
		sync_ack_old(id);
	pthread_mutex_lock(&g_lock);
	if (idp->state != ST_ROUTE_RESOLVED || idp->sock < 0 || !idp->dev || valid_param(idp, p)) {
		pthread_mutex_unlock(&g_lock);
		return fail(EINVAL);
	}
	msg_init(idp, m, ud ? MSG_SIDR_REQ : MSG_REQ);
	if (p && msg_pdata(m, p->private_data, p->private_data_len, ud ? PDATA_SIDR_REQ : PDATA_REQ)) {
		pthread_mutex_unlock(&g_lock);
		return fail(EINVAL);
	}
	if (!ud) {
		uint8_t rr = p ? p->responder_resources : RDMA_MAX_RESP_RES;
		uint8_t idep = p ? p->initiator_depth : RDMA_MAX_INIT_DEPTH;

		idp->responder_resources = rr == RDMA_MAX_RESP_RES ?
			clamp_u8(idp->dev->attr.max_qp_rd_atom, 255) : rr;
		idp->initiator_depth = idep == RDMA_MAX_INIT_DEPTH ?
			clamp_u8(idp->dev->attr.max_qp_init_rd_atom, 255) : idep;
		idp->retry_count = p ? p->retry_count & 7 : 7;
		idp->rnr_retry_count = p ? p->rnr_retry_count & 7 : 7;
		m->responder_resources = idp->responder_resources;
		m->initiator_depth = idp->initiator_depth;
		m->retry_count = idp->retry_count;
		m->rnr_retry_count = idp->rnr_retry_count;
		m->flow_control = p ? p->flow_control : 1;
	}
	m->qpn = htonl(id->qp ? id->qp->qp_num : (p ? p->qp_num : 0));
	m->srq = id->qp ? id->qp->srq != NULL : (p ? p->srq : 0);
	idp->state = ST_CONNECTING;
	idp->deadline_ms = now_ms() + g_timeout_ms;
	idp->refused_until = now_ms() + g_refused_retry_ms;
	start_connect(idp);
	wake_thread();
	pthread_mutex_unlock(&g_lock);
	if (idp->sync) {
		if (sync_complete(id))
			return -1;
		if (id->event->event == RDMA_CM_EVENT_CONNECT_RESPONSE)
			return rdma_establish(id);
	}
	return 0;
}

CM_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *p)
{
	struct cm_id *idp = (struct cm_id *)id;
	struct wire_msg m;
	int ud = is_ud(idp);

	if (!id)
		return fail(EINVAL);
	pthread_mutex_lock(&g_lock);
	if (idp->state != ST_REQ_RCVD || valid_param(idp, p)) {
		pthread_mutex_unlock(&g_lock);
		return fail(EINVAL);
	}
	msg_init(idp, &m, ud ? MSG_SIDR_REP : MSG_REP);
	if (p && msg_pdata(&m, p->private_data, p->private_data_len, ud ? PDATA_SIDR_REP : PDATA_REP)) {
		pthread_mutex_unlock(&g_lock);
		return fail(EINVAL);
	}
	m.qpn = htonl(id->qp ? id->qp->qp_num : (p ? p->qp_num : 0));
	if (!ud) {
		if (p && p->initiator_depth != RDMA_MAX_INIT_DEPTH)
			idp->initiator_depth = p->initiator_depth;
		if (p && p->responder_resources != RDMA_MAX_RESP_RES)
			idp->responder_resources = p->responder_resources;
		if (qp_connect(idp)) {
			int err = errno;

			pthread_mutex_unlock(&g_lock);
			return fail(err);
		}
		m.responder_resources = idp->responder_resources;
		m.initiator_depth = idp->initiator_depth;
		m.rnr_retry_count = p ? p->rnr_retry_count & 7 : 7;
		m.flow_control = p ? p->flow_control : 1;
		m.srq = id->qp ? id->qp->srq != NULL : (p ? p->srq : 0);
	}
	if (idp->peer_gone || msg_send(idp, &m)) {
		/* the requester vanished: the kernel would time out waiting for RTU */
		fail_connection(idp, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0);
	} else if (ud) {
		close_sock(idp);
		idp->state = ST_UD_DONE;
	} else {
		idp->state = ST_ACCEPTED;
		idp->deadline_ms = now_ms() + g_timeout_ms;
		wake_thread();
	}
	pthread_mutex_unlock(&g_lock);
	if (idp->sync && !ud)
		return sync_complete(id);
	return 0;
}

static int reject_locked(struct cm_id *idp, const void *pd, uint8_t len)
{
	struct wire_msg m;
	int ud = is_ud(idp);

	if (idp->state != ST_REQ_RCVD)
		return fail(EINVAL);
	msg_init(idp, &m, ud ? MSG_SIDR_REP : MSG_REJ);
	if (msg_pdata(&m, pd, len, ud ? PDATA_SIDR_REP : PDATA_REJ))
		return fail(EINVAL);
	m.status = ud ? SIDR_REJECT : REJ_CONSUMER_DEFINED;
	msg_send(idp, &m);
	close_sock(idp);
	idp->state = ST_ERROR;
	return 0;
}

CM_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	int rc;

	if (!id)
		return fail(EINVAL);
	pthread_mutex_lock(&g_lock);
	rc = reject_locked((struct cm_id *)id, private_data, private_data_len);
	pthread_mutex_unlock(&g_lock);
	return rc;
}

CM_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	return rdma_reject(id, private_data, private_data_len);
}

CM_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	struct cm_id *idp = (struct cm_id *)id;

	if (!id || id->qp)
		return fail(EINVAL);
	pthread_mutex_lock(&g_lock);
	if (idp->state != ST_RESP_WAIT) {
		pthread_mutex_unlock(&g_lock);
		return fail(EINVAL);
	}
	send_simple(idp, MSG_RTU, 0);
	idp->state = ST_ESTABLISHED;
	pthread_mutex_unlock(&g_lock);
	return 0;
}

CM_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	struct cm_id *idp = (struct cm_id *)id;

	if (!id)
		return fail(EINVAL);
	pthread_mutex_lock(&g_lock);
	/* traffic before the RTU proves the connection: establish it now */
	if (event == IBV_EVENT_COMM_EST && idp->state == ST_ACCEPTED) {
		idp->state = ST_ESTABLISHED;
		idp->deadline_ms = 0;
		post_event(idp, RDMA_CM_EVENT_ESTABLISHED, 0);
	}
	pthread_mutex_unlock(&g_lock);
	return 0;
}

CM_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct cm_id *idp = (struct cm_id *)id;
	int rc = 0;

	if (!id)
		return fail(EINVAL);
	pthread_mutex_lock(&g_lock);
	switch (idp->state) {
	case ST_ESTABLISHED:
	case ST_ACCEPTED:
	case ST_RESP_WAIT:
		qp_to_err(idp);
		send_simple(idp, MSG_DREQ, 0);
		idp->state = ST_DISC_SENT;
		idp->deadline_ms = now_ms() + g_timeout_ms;
		wake_thread();
		break;
	case ST_DISCONNECTED:
	case ST_DISC_SENT:
		qp_to_err(idp);
		break;
	default:
		rc = fail(EINVAL);
	}
	pthread_mutex_unlock(&g_lock);
	return rc;
}

CM_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	int rc;

	if (!id || !qp_attr || !qp_attr_mask)
		return fail(EINVAL);
	pthread_mutex_lock(&g_lock);
	rc = init_qp_attr_locked((struct cm_id *)id, qp_attr, qp_attr_mask);
	pthread_mutex_unlock(&g_lock);
	return rc;
}

/* -------------------------------------------------------------- destroy */

/* Drop events of idp not yet handed out; CONNECT_REQUESTs of a listener take
 * their unseen child ids with them (g_lock held). */
static void purge_events(struct cm_id *idp, struct cm_id ***dead, int *ndead)
{
	struct cm_channel *ch = idp->chan;
	struct cm_event *e, *prev = NULL, *next;

	if (!ch)
		return;
	for (e = ch->head; e; e = next) {
		next = e->next;
		if (e->owner != idp) {
			prev = e;
			continue;
		}
		channel_unlink(ch, e, prev);
		if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->ev.id != &idp->id) {
			struct cm_id **nd = realloc(*dead, (*ndead + 1) * sizeof(**dead));

			if (nd) {
				*dead = nd;
				nd[(*ndead)++] = (struct cm_id *)e->ev.id;
			}
		}
		free(e);
	}
}

static void release_id_locked(struct cm_id *idp)
{
	switch (idp->state) {
	case ST_ESTABLISHED:
		/* like the kernel destroying a connected id: tell the peer */
		send_simple(idp, MSG_DREQ, 0);
		break;
	case ST_CONNECTING:
	case ST_RESP_WAIT:
	case ST_REQ_RCVD:
	case ST_ACCEPTED:
		/* mid-handshake the kernel's ib_cm rejects with reason "timeout" */
		send_simple(idp, MSG_REJ, REJ_TIMEOUT);
		break;
	default:
		break;
	}
	id_unlink(idp);
}

CM_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct cm_id *idp = (struct cm_id *)id;
	struct cm_id **dead = NULL;
	int ndead = 0;

	if (!id)
		return fail(EINVAL);
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	pthread_mutex_lock(&g_lock);
	while (idp->reported != idp->acked)
		pthread_cond_wait(&g_cond, &g_lock);
	/* once unlinked, the CM thread no longer finds the id to queue events
	 * for it, so what is queued now is all there will be */
	release_id_locked(idp);
	purge_events(idp, &dead, &ndead);
	for (int i = 0; i < ndead; i++)
		release_id_locked(dead[i]);
	if (idp->state == ST_LISTEN) {
		for (struct cm_id *c = g_ids, *next; c; c = next) {
			struct cm_id **nd;

			next = c->next;
			if (!c->internal || c->listener != idp)
				continue;
			id_unlink(c);
			nd = realloc(dead, (ndead + 1) * sizeof(*dead));
			if (!nd) {
				close_sock(c);	/* the thread no longer sees it; leak the id */
				continue;
			}
			dead = nd;
			dead[ndead++] = c;
		}
	}
	wait_thread_pass();
	close_sock(idp);
	if (idp->chan && idp->chan->private_to_id)
		channel_free(idp->chan);
	for (int i = 0; dead && i < ndead; i++) {
		close_sock(dead[i]);
		if (dead[i]->chan && dead[i]->chan->private_to_id)
			channel_free(dead[i]->chan);
		free(dead[i]->ep_qp_attr);
		free(dead[i]);
	}
	pthread_mutex_unlock(&g_lock);
	free(dead);
	free(idp->ep_qp_attr);
	free(idp);
	return 0;
}

/* --------------------------------------------------------------- options */

CM_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval, size_t optlen)
{
	struct cm_id *idp = (struct cm_id *)id;
	int rc = 0;

	if (!id || !optval)
		return fail(EINVAL);
	if (level == RDMA_OPTION_IB)
		return fail(optname == RDMA_OPTION_IB_PATH ? ENOSYS : EINVAL);
	if (level != RDMA_OPTION_ID)
		return fail(EINVAL);
	pthread_mutex_lock(&g_lock);
	switch (optname) {
	case RDMA_OPTION_ID_TOS:
		if (optlen != sizeof(uint8_t))
			rc = fail(EINVAL);
		else
			idp->tos = *(uint8_t *)optval;
		break;
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		if (optlen != sizeof(uint8_t))
			rc = fail(EINVAL);
		else
			idp->ack_timeout = *(uint8_t *)optval & 31;
		break;
	case RDMA_OPTION_ID_REUSEADDR:
		if (optlen != sizeof(int))
			rc = fail(EINVAL);
		else
			idp->reuseaddr = *(int *)optval;
		break;
	case RDMA_OPTION_ID_AFONLY:
		if (optlen != sizeof(int) || idp->state != ST_IDLE)
			rc = fail(EINVAL);
		else
			idp->afonly = !!*(int *)optval;
		break;
	default:
		rc = fail(ENOSYS);
	}
	pthread_mutex_unlock(&g_lock);
	return rc;
}

CM_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct cm_id *idp = (struct cm_id *)id;
	struct cm_channel *to = (struct cm_channel *)channel, *from;
	int sync = 0;

	if (!id)
		return fail(EINVAL);
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	pthread_mutex_lock(&g_lock);
	if (!to) {
		to = channel_new();
		if (!to) {
			pthread_mutex_unlock(&g_lock);
			return fail(ENOMEM);
		}
		to->private_to_id = 1;
		sync = 1;
	}
	while (idp->reported != idp->acked)
		pthread_cond_wait(&g_cond, &g_lock);
	from = idp->chan;
	if (from) {
		struct cm_event *e, *prev = NULL, *next;

		for (e = from->head; e; e = next) {
			next = e->next;
			if (e->owner != idp) {
				prev = e;
				continue;
			}
			channel_unlink(from, e, prev);
			channel_push(to, e);
		}
	}
	idp->chan = to;
	idp->id.channel = &to->ch;
	idp->sync = sync;
	if (from && from->private_to_id)
		channel_free(from);
	pthread_mutex_unlock(&g_lock);
	return 0;
}

/* --------------------------------------------------------------- devices */

CM_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return sa_port(&id->route.addr.src_addr);
}

CM_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return sa_port(&id->route.addr.dst_addr);
}

/* ----------------------------------------------------------------- QPs */

static struct ibv_pd *default_pd(struct cm_id *idp)
{
	struct cm_dev *d = idp->dev ? idp->dev : dev_of(idp->id.verbs);

	if (!d)
		return NULL;
	if (!d->default_pd)
		d->default_pd = ibv_alloc_pd(d->verbs);
	return d->default_pd;
}

static void destroy_cqs(struct rdma_cm_id *id)
{
	if (id->recv_cq) {
		ibv_destroy_cq(id->recv_cq);
		if (id->send_cq == id->recv_cq)
			id->send_cq = NULL;
		id->recv_cq = NULL;
	}
	if (id->recv_cq_channel) {
		ibv_destroy_comp_channel(id->recv_cq_channel);
		if (id->send_cq_channel == id->recv_cq_channel)
			id->send_cq_channel = NULL;
		id->recv_cq_channel = NULL;
	}
	if (id->send_cq) {
		ibv_destroy_cq(id->send_cq);
		id->send_cq = NULL;
	}
	if (id->send_cq_channel) {
		ibv_destroy_comp_channel(id->send_cq_channel);
		id->send_cq_channel = NULL;
	}
}

static int create_cq(struct rdma_cm_id *id, int size, struct ibv_comp_channel **chp, struct ibv_cq **cqp)
{
	*chp = ibv_create_comp_channel(id->verbs);
	if (!*chp)
		return -1;
	*cqp = ibv_create_cq(id->verbs, size > 0 ? size : 1, id, *chp, 0);
	return *cqp ? 0 : -1;
}

CM_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct cm_id *idp = (struct cm_id *)id;
	struct ibv_qp *qp;
	int made_send = 0, made_recv = 0, err;

	if (!id || !attr || !id->verbs || id->qp)
		return fail(EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : default_pd(idp);
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		if (!attr->pd)
			return fail(ENOMEM);
	}
	if (attr->pd->context != id->verbs)
		return fail(EINVAL);
	if (is_ud(idp) ? attr->qp_type != IBV_QPT_UD :
	    attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC)
		return fail(EINVAL);
	if (!attr->recv_cq) {
		made_recv = 1;
		if (create_cq(id, attr->cap.max_recv_wr, &id->recv_cq_channel, &id->recv_cq))
			goto fail_cq;
		attr->recv_cq = id->recv_cq;
	}
	if (!attr->send_cq) {
		made_send = 1;
		if (create_cq(id, attr->cap.max_send_wr, &id->send_cq_channel, &id->send_cq))
			goto fail_cq;
		attr->send_cq = id->send_cq;
	}
	if (!attr->srq && id->srq)
		attr->srq = id->srq;
	if (attr->comp_mask == IBV_QP_INIT_ATTR_PD) {
		struct ibv_qp_init_attr ia;

		memset(&ia, 0, sizeof(ia));
		ia.qp_context = attr->qp_context;
		ia.send_cq = attr->send_cq;
		ia.recv_cq = attr->recv_cq;
		ia.srq = attr->srq;
		ia.cap = attr->cap;
		ia.qp_type = attr->qp_type;
		ia.sq_sig_all = attr->sq_sig_all;
		qp = ibv_create_qp(attr->pd, &ia);
		if (qp)
			attr->cap = ia.cap;
	} else {
		qp = ibv_create_qp_ex(id->verbs, attr);
	}
	if (!qp)
		goto fail_cq;
	pthread_mutex_lock(&g_lock);
	id->qp = qp;
	id->qp_type = attr->qp_type;
	if (modify_qp_to(idp, IBV_QPS_INIT) ||
	    (is_ud(idp) && (modify_qp_to(idp, IBV_QPS_RTR) || modify_qp_to(idp, IBV_QPS_RTS)))) {
		err = errno;
		id->qp = NULL;
		pthread_mutex_unlock(&g_lock);
		ibv_destroy_qp(qp);
		errno = err;
		goto fail_cq;
	}
	if (!id->pd)
		id->pd = attr->pd;
	pthread_mutex_unlock(&g_lock);
	return 0;

fail_cq:
	err = errno ? errno : ENOMEM;
	if (made_recv) {
		if (id->recv_cq)
			ibv_destroy_cq(id->recv_cq);
		if (id->recv_cq_channel)
			ibv_destroy_comp_channel(id->recv_cq_channel);
		id->recv_cq = NULL;
		id->recv_cq_channel = NULL;
		attr->recv_cq = NULL;
	}
	if (made_send) {
		if (id->send_cq)
			ibv_destroy_cq(id->send_cq);
		if (id->send_cq_channel)
			ibv_destroy_comp_channel(id->send_cq_channel);
		id->send_cq = NULL;
		id->send_cq_channel = NULL;
		attr->send_cq = NULL;
	}
	return fail(err);
}

CM_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex ex;
	int rc;

	if (!id || !qp_init_attr)
		return fail(EINVAL);
	memset(&ex, 0, sizeof(ex));
	ex.qp_context = qp_init_attr->qp_context;
	ex.send_cq = qp_init_attr->send_cq;
	ex.recv_cq = qp_init_attr->recv_cq;
	ex.srq = qp_init_attr->srq;
	ex.cap = qp_init_attr->cap;
	ex.qp_type = qp_init_attr->qp_type;
	ex.sq_sig_all = qp_init_attr->sq_sig_all;
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd ? pd : id->pd;
	rc = rdma_create_qp_ex(id, &ex);
	if (rc)
		return rc;
	qp_init_attr->send_cq = ex.send_cq;
	qp_init_attr->recv_cq = ex.recv_cq;
	qp_init_attr->srq = ex.srq;
	qp_init_attr->cap = ex.cap;
	return 0;
}

CM_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (!id || !id->qp)
		return;
	ibv_destroy_qp(id->qp);
	id->qp = NULL;
	destroy_cqs(id);
}

CM_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq_init_attr ia;
	struct ibv_pd *pd;

	if (!id || !attr || !id->verbs || id->srq)
		return fail(EINVAL);
	if (attr->comp_mask & ~(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD))
		return fail(ENOSYS);
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC)
		return fail(ENOSYS);
	pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) && attr->pd ? attr->pd :
		(id->pd ? id->pd : default_pd((struct cm_id *)id));
	if (!pd)
		return fail(ENOMEM);
	memset(&ia, 0, sizeof(ia));
	ia.srq_context = attr->srq_context;
	ia.attr = attr->attr;
	id->srq = ibv_create_srq(pd, &ia);
	if (!id->srq)
		return -1;
	attr->attr = ia.attr;
	return 0;
}

CM_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ex;
	int rc;

	if (!attr)
		return fail(EINVAL);
	memset(&ex, 0, sizeof(ex));
	ex.srq_context = attr->srq_context;
	ex.attr = attr->attr;
	ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	ex.srq_type = IBV_SRQT_BASIC;
	ex.pd = pd;
	rc = rdma_create_srq_ex(id, &ex);
	if (!rc)
		attr->attr = ex.attr;
	return rc;
}

CM_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (!id || !id->srq)
		return;
	ibv_destroy_srq(id->srq);
	id->srq = NULL;
}

/* ----------------------------------------------------- endpoint helpers */

CM_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct cm_id *l = (struct cm_id *)listen;
	struct rdma_cm_event *ev;
	struct cm_id *child;

	if (!listen || !id || !l->sync)
		return fail(EINVAL);
	sync_ack_old(listen);
	for (;;) {
		if (rdma_get_cm_event(listen->channel, &ev))
			return -1;
		if (ev->status) {
			int st = ev->status;

			rdma_ack_cm_event(ev);
			return fail(st < 0 ? -st : st);
		}
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		rdma_ack_cm_event(ev);
	}
	child = (struct cm_id *)ev->id;
	/* the child keeps the request event in id->event, counted against it */
	pthread_mutex_lock(&g_lock);
	((struct cm_event *)ev)->owner = child;
	l->acked++;
	child->reported++;
	pthread_cond_broadcast(&g_cond);
	pthread_mutex_unlock(&g_lock);
	child->id.event = ev;
	if (l->ep_qp_attr) {
		struct ibv_qp_init_attr attr = *l->ep_qp_attr;

		if (rdma_create_qp(&child->id, l->ep_pd, &attr)) {
			int err = errno;

			rdma_reject(&child->id, NULL, 0);
			rdma_destroy_id(&child->id);
			return fail(err);
		}
		child->qp_from_ep = 1;
	}
	*id = &child->id;
	return 0;
}

CM_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
			     struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cid;
	struct cm_id *idp;
	int err;

	if (!id || !res)
		return fail(EINVAL);
	if (rdma_create_id(NULL, &cid, NULL, res->ai_port_space ? res->ai_port_space : RDMA_PS_TCP))
		return -1;
	idp = (struct cm_id *)cid;
	/* the QP type comes from the address info, as in librdmacm */
	if (qp_init_attr)
		qp_init_attr->qp_type = res->ai_qp_type ? res->ai_qp_type :
			(is_ud(idp) ? IBV_QPT_UD : IBV_QPT_RC);
	if (res->ai_flags & RAI_PASSIVE) {
		if (!res->ai_src_addr || rdma_bind_addr(cid, res->ai_src_addr))
			goto fail;
		if (qp_init_attr) {
			idp->ep_qp_attr = malloc(sizeof(*qp_init_attr));
			if (!idp->ep_qp_attr) {
				errno = ENOMEM;
				goto fail;
			}
			*idp->ep_qp_attr = *qp_init_attr;
			idp->ep_pd = pd;
		}
	} else {
		if (!res->ai_dst_addr ||
		    rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000) ||
		    rdma_resolve_route(cid, 2000))
			goto fail;
		if (qp_init_attr) {
			if (rdma_create_qp(cid, pd, qp_init_attr))
				goto fail;
			idp->qp_from_ep = 1;
		}
	}
	*id = cid;
	return 0;
fail:
	err = errno;
	rdma_destroy_id(cid);
	return fail(err);
}

CM_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}
