/*
 * softrdma librdmacm, API unit: the rdma_* calls on event channels and ids: create and destroy,
 * bind, resolve, listen, connect, accept, reject, establish, notify, disconnect, options,
 * migration and ports. Each takes g_lock, checks the id's state and drives the units below:
 * cm_thread (start, wake), cm_conn (start a connect, fail a connection), cm_qp, cm_event,
 * cm_id, cm_msg, cm_device and cm_util.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "cm_units.h"

/* Connections a listener holds before their request arrives: the backlog
 * given to rdma_listen, this many when it gave none, never more than the max. */
#define DEFAULT_PENDING 128
#define MAX_PENDING 1024

/* --------------------------------------------------------- event channels */

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

/* -------------------------------------------------------------------- ids */

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

/* --------------------------------------------------------- address setup */

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

/* ----------------------------------------------------------------- ports */

CM_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return sa_port(&id->route.addr.src_addr);
}

CM_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return sa_port(&id->route.addr.dst_addr);
}
