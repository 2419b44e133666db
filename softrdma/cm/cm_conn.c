/*
 * softrdma librdmacm, connection unit: the connection state machine, run by the CM thread (and
 * by the API for the calls that end or start a connection). It handles each received record
 * in each id state (REQ, REP, RTU, REJ, DREQ, DREP, SIDR), a lost peer, a passed deadline, and
 * the active side's TCP connect. Calls cm_qp, cm_event, cm_id, cm_msg, cm_device and cm_util;
 * never the thread or the API (the thread calls it, g_lock held).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <sys/socket.h>

#include "cm_units.h"

void fail_connection(struct cm_id *idp, enum rdma_cm_event_type type, int status,
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
void peer_closed(struct cm_id *idp)
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

void handle_msg(struct cm_id *idp, const struct wire_msg *m)
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
void start_connect(struct cm_id *idp)
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

void connect_done(struct cm_id *idp, int err)
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
void handle_timeout(struct cm_id *idp)
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
int peer_allowed(const struct sockaddr *sa)
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
