/*
 * Tests of softrdma's librdmacm. Each test forks its peers before they touch
 * rdma_cm (the library's thread does not survive fork), so server and client
 * are real separate processes talking over TCP on 127.0.0.1.
 * Run with LD_LIBRARY_PATH pointing at softrdma's lib directory.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <infiniband/verbs.h>
#include "../cm_internal.h"

#define MSG_LEN 32
#define EV_TIMEOUT_MS 8000

static const char *g_test;

static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "  [%s pid %d] ", g_test, getpid());
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}

#define CHECK(cond, ...) do { if (!(cond)) { say(__VA_ARGS__); return 1; } } while (0)

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Wait for the next event on ch and require its type (and the id it is for). */
static struct rdma_cm_event *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type type,
				    struct rdma_cm_id *id, int timeout_ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&p, 1, timeout_ms) != 1) {
		say("no event within %d ms, wanted %s", timeout_ms, rdma_event_str(type));
		return NULL;
	}
	if (rdma_get_cm_event(ch, &ev)) {
		say("rdma_get_cm_event: %s", strerror(errno));
		return NULL;
	}
	if (ev->event != type || (id && ev->id != id)) {
		say("got %s status %d (id %p), wanted %s (id %p)", rdma_event_str(ev->event),
		    ev->status, (void *)ev->id, rdma_event_str(type), (void *)id);
		rdma_ack_cm_event(ev);
		return NULL;
	}
	return ev;
}

static int ack_expect(struct rdma_event_channel *ch, enum rdma_cm_event_type type, struct rdma_cm_id *id)
{
	struct rdma_cm_event *ev = expect(ch, type, id, EV_TIMEOUT_MS);

	if (!ev)
		return 1;
	rdma_ack_cm_event(ev);
	return 0;
}

static void loopback(struct sockaddr_in *sin, uint16_t port)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin->sin_port = htons(port);
}

static int listen_on(struct rdma_event_channel *ch, struct rdma_cm_id **l, enum rdma_port_space ps, int wfd)
{
	struct sockaddr_in sin;
	uint16_t port;

	loopback(&sin, 0);
	CHECK(!rdma_create_id(ch, l, NULL, ps), "rdma_create_id: %s", strerror(errno));
	CHECK(!rdma_bind_addr(*l, (struct sockaddr *)&sin), "rdma_bind_addr: %s", strerror(errno));
	CHECK(!rdma_listen(*l, 4), "rdma_listen: %s", strerror(errno));
	port = ntohs(rdma_get_src_port(*l));
	CHECK(port != 0, "listener has no port");
	CHECK(write(wfd, &port, sizeof(port)) == sizeof(port), "cannot pass the port");
	return 0;
}

/* A new event channel and a listener on it (see listen_on). */
static int open_listener(struct rdma_event_channel **ch, struct rdma_cm_id **l, enum rdma_port_space ps, int wfd)
{
	*ch = rdma_create_event_channel();
	CHECK(*ch, "rdma_create_event_channel: %s", strerror(errno));
	return listen_on(*ch, l, ps, wfd);
}

static int resolve(struct rdma_event_channel *ch, struct rdma_cm_id **id, enum rdma_port_space ps, uint16_t port)
{
	struct sockaddr_in dst;

	loopback(&dst, port);
	CHECK(!rdma_create_id(ch, id, NULL, ps), "rdma_create_id: %s", strerror(errno));
	CHECK(!rdma_resolve_addr(*id, NULL, (struct sockaddr *)&dst, 2000), "rdma_resolve_addr: %s", strerror(errno));
	if (ack_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, *id))
		return 1;
	CHECK((*id)->verbs != NULL, "resolved id has no device");
	CHECK((*id)->port_num == 1, "resolved id port %d", (*id)->port_num);
	CHECK(!rdma_resolve_route(*id, 2000), "rdma_resolve_route: %s", strerror(errno));
	if (ack_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, *id))
		return 1;
	CHECK((*id)->route.num_paths == 1 && (*id)->route.path_rec, "no path record");
	CHECK(ntohs(rdma_get_dst_port(*id)) == port, "dst port %d", ntohs(rdma_get_dst_port(*id)));
	return 0;
}

struct res {
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char buf[4096];
};

static int make_qp(struct rdma_cm_id *id, struct res *r, enum ibv_qp_type qpt)
{
	struct ibv_qp_init_attr attr;

	r->pd = ibv_alloc_pd(id->verbs);
	CHECK(r->pd, "ibv_alloc_pd: %s", strerror(errno));
	memset(&attr, 0, sizeof(attr));
	attr.qp_type = qpt;
	attr.cap.max_send_wr = 8;
	attr.cap.max_recv_wr = 8;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 1;
	attr.sq_sig_all = 1;
	CHECK(!rdma_create_qp(id, r->pd, &attr), "rdma_create_qp: %s", strerror(errno));
	CHECK(id->qp && id->send_cq && id->recv_cq, "rdma_create_qp left no QP/CQs");
	r->mr = ibv_reg_mr(r->pd, r->buf, sizeof(r->buf),
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	CHECK(r->mr, "ibv_reg_mr: %s", strerror(errno));
	return 0;
}

static void free_res(struct rdma_cm_id *id, struct res *r)
{
	if (id && id->qp)
		rdma_destroy_qp(id);
	if (r->mr)
		ibv_dereg_mr(r->mr);
	if (r->pd)
		ibv_dealloc_pd(r->pd);
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return (enum ibv_qp_state)-1;
	return a.qp_state;
}

static int post_recv(struct rdma_cm_id *id, struct res *r, size_t off, size_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)r->buf + off, .length = len, .lkey = r->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;

	CHECK(!ibv_post_recv(id->qp, &wr, &bad), "ibv_post_recv failed");
	return 0;
}

static int post_send(struct rdma_cm_id *id, struct res *r, size_t off, size_t len,
		     struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)r->buf + off, .length = len, .lkey = r->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (ah) {
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = qpn;
		wr.wr.ud.remote_qkey = qkey;
	}
	CHECK(!ibv_post_send(id->qp, &wr, &bad), "ibv_post_send failed");
	return 0;
}

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	long long end = now_ms() + EV_TIMEOUT_MS;

	while (now_ms() < end) {
		int n = ibv_poll_cq(cq, 1, wc);

		CHECK(n >= 0, "ibv_poll_cq failed");
		if (n == 1) {
			CHECK(wc->status == IBV_WC_SUCCESS, "completion status %s", ibv_wc_status_str(wc->status));
			return 0;
		}
		usleep(100);
	}
	say("no completion within %d ms", EV_TIMEOUT_MS);
	return 1;
}

static void pattern(char *p, int seed)
{
	for (int i = 0; i < MSG_LEN; i++)
		p[i] = (char)(seed + i * 7);
}

static int zero_after(const void *p, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (((const uint8_t *)p)[i])
			return 0;
	return 1;
}

/* ------------------------------------------------------------- test bodies */

static int accept_one(struct rdma_event_channel *ch, struct rdma_cm_id *l, struct rdma_cm_id **child,
		      struct res *r, int check_req)
{
	struct rdma_cm_event *ev = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL, EV_TIMEOUT_MS);
	struct rdma_conn_param cp;

	if (!ev)
		return 1;
	*child = ev->id;
	CHECK(ev->listen_id == l && ev->id != l, "CONNECT_REQUEST ids: listen %p id %p", (void *)ev->listen_id,
	      (void *)ev->id);
	CHECK((*child)->verbs && (*child)->port_num == 1, "child has no device");
	if (check_req) {
		CHECK(ev->param.conn.private_data_len == 56, "REQ private data len %d",
		      ev->param.conn.private_data_len);
		CHECK(!memcmp(ev->param.conn.private_data, "hello-req", 10) &&
		      zero_after(ev->param.conn.private_data, 10, 56), "REQ private data differs");
		CHECK(ev->param.conn.responder_resources == 1 && ev->param.conn.initiator_depth == 1,
		      "REQ rd atomic %d/%d", ev->param.conn.responder_resources, ev->param.conn.initiator_depth);
		CHECK(ev->param.conn.qp_num != 0, "REQ carries no QPN");
	}
	rdma_ack_cm_event(ev);
	if (make_qp(*child, r, IBV_QPT_RC))
		return 1;
	CHECK(qp_state((*child)->qp) == IBV_QPS_INIT, "new QP not in INIT");
	if (post_recv(*child, r, 0, MSG_LEN))
		return 1;
	memset(&cp, 0, sizeof(cp));
	cp.private_data = "hello-rep";
	cp.private_data_len = 10;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.rnr_retry_count = 7;
	CHECK(!rdma_accept(*child, &cp), "rdma_accept: %s", strerror(errno));
	CHECK(qp_state((*child)->qp) == IBV_QPS_RTS, "accepted QP not in RTS");
	if (ack_expect(ch, RDMA_CM_EVENT_ESTABLISHED, *child))
		return 1;
	return 0;
}

/* Serve one well-formed connection until its client disconnects, then close the listener and channel. */
static int serve_last(struct rdma_event_channel *ch, struct rdma_cm_id *l)
{
	struct rdma_cm_id *child;
	struct res r = { 0 };

	if (accept_one(ch, l, &child, &r, 1) || ack_expect(ch, RDMA_CM_EVENT_DISCONNECTED, child))
		return 1;
	free_res(child, &r);
	rdma_destroy_id(child);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	return 0;
}

static int connect_one(struct rdma_event_channel *ch, struct rdma_cm_id **id, struct res *r, uint16_t port)
{
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;

	if (resolve(ch, id, RDMA_PS_TCP, port) || make_qp(*id, r, IBV_QPT_RC))
		return 1;
	CHECK(qp_state((*id)->qp) == IBV_QPS_INIT, "new QP not in INIT");
	if (post_recv(*id, r, 0, MSG_LEN))
		return 1;
	memset(&cp, 0, sizeof(cp));
	cp.private_data = "hello-req";
	cp.private_data_len = 10;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	CHECK(!rdma_connect(*id, &cp), "rdma_connect: %s", strerror(errno));
	ev = expect(ch, RDMA_CM_EVENT_ESTABLISHED, *id, EV_TIMEOUT_MS);
	if (!ev)
		return 1;
	CHECK(ev->param.conn.private_data_len == 196, "REP private data len %d", ev->param.conn.private_data_len);
	CHECK(!memcmp(ev->param.conn.private_data, "hello-rep", 10) &&
	      zero_after(ev->param.conn.private_data, 10, 196), "REP private data differs");
	rdma_ack_cm_event(ev);
	CHECK(qp_state((*id)->qp) == IBV_QPS_RTS, "connected QP not in RTS");
	return 0;
}

static int exchange_server(int wfd)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *l, *child;
	struct res r = { 0 };
	struct ibv_wc wc;
	char want[MSG_LEN];

	if (open_listener(&ch, &l, RDMA_PS_TCP, wfd) || accept_one(ch, l, &child, &r, 1))
		return 1;
	if (poll_one(child->recv_cq, &wc))
		return 1;
	pattern(want, 11);
	CHECK(wc.byte_len == MSG_LEN && !memcmp(r.buf, want, MSG_LEN), "server received wrong bytes");
	pattern(r.buf + 1024, 99);
	if (post_send(child, &r, 1024, MSG_LEN, NULL, 0, 0) || poll_one(child->send_cq, &wc))
		return 1;
	if (ack_expect(ch, RDMA_CM_EVENT_DISCONNECTED, child))
		return 1;
	CHECK(!rdma_disconnect(child), "rdma_disconnect after DISCONNECTED: %s", strerror(errno));
	CHECK(qp_state(child->qp) == IBV_QPS_ERR, "QP not in ERR after disconnect");
	free_res(child, &r);
	CHECK(!rdma_destroy_id(child) && !rdma_destroy_id(l), "rdma_destroy_id: %s", strerror(errno));
	rdma_destroy_event_channel(ch);
	return 0;
}

static int exchange_client(uint16_t port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct res r = { 0 };
	struct ibv_wc wc;
	char want[MSG_LEN];

	CHECK(ch, "rdma_create_event_channel: %s", strerror(errno));
	if (connect_one(ch, &id, &r, port))
		return 1;
	pattern(r.buf + 1024, 11);
	if (post_send(id, &r, 1024, MSG_LEN, NULL, 0, 0) || poll_one(id->send_cq, &wc))
		return 1;
	if (poll_one(id->recv_cq, &wc))
		return 1;
	pattern(want, 99);
	CHECK(wc.byte_len == MSG_LEN && !memcmp(r.buf, want, MSG_LEN), "client received wrong bytes");
	CHECK(!rdma_disconnect(id), "rdma_disconnect: %s", strerror(errno));
	CHECK(qp_state(id->qp) == IBV_QPS_ERR, "QP not in ERR after rdma_disconnect");
	if (ack_expect(ch, RDMA_CM_EVENT_DISCONNECTED, id))
		return 1;
	free_res(id, &r);
	CHECK(!rdma_destroy_id(id), "rdma_destroy_id: %s", strerror(errno));
	rdma_destroy_event_channel(ch);
	return 0;
}

static int reject_server(int wfd)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *l;
	struct rdma_cm_event *ev;

	if (open_listener(&ch, &l, RDMA_PS_TCP, wfd))
		return 1;
	ev = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL, EV_TIMEOUT_MS);
	if (!ev)
		return 1;
	CHECK(!rdma_reject(ev->id, "no-thanks", 10), "rdma_reject: %s", strerror(errno));
	CHECK(rdma_accept(ev->id, NULL) == -1 && errno == EINVAL, "accept after reject was not EINVAL");
	CHECK(!rdma_destroy_id(ev->id), "destroy child: %s", strerror(errno));
	rdma_ack_cm_event(ev);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	return 0;
}

static int reject_client(uint16_t port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;

	CHECK(ch, "rdma_create_event_channel: %s", strerror(errno));
	if (resolve(ch, &id, RDMA_PS_TCP, port))
		return 1;
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 0x123;	/* no QP on the id: the request names one */
	cp.private_data = "hello-req";
	cp.private_data_len = 10;
	CHECK(!rdma_connect(id, &cp), "rdma_connect: %s", strerror(errno));
	ev = expect(ch, RDMA_CM_EVENT_REJECTED, id, EV_TIMEOUT_MS);
	if (!ev)
		return 1;
	CHECK(ev->status == 28, "REJECTED status %d, want 28 (consumer defined)", ev->status);
	CHECK(ev->param.conn.private_data_len == 148, "REJ private data len %d", ev->param.conn.private_data_len);
	CHECK(!memcmp(ev->param.conn.private_data, "no-thanks", 10) &&
	      zero_after(ev->param.conn.private_data, 10, 148), "REJ private data differs");
	rdma_ack_cm_event(ev);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

/*
 * Reserve a loopback port nothing listens on: a bound TCP socket that never
 * listens, so connecting there is refused and no other program can start
 * listening there while it is open (with reuse set, only another socket with
 * SO_REUSEADDR, like softrdma's own listener, can bind it too). Returns the
 * socket (close it to release the port) and sets *port; -1 on failure.
 */
static int reserve_port(uint16_t *port, int reuse)
{
	struct sockaddr_in sin;
	socklen_t l = sizeof(sin);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	loopback(&sin, 0);
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse)) ||
	    bind(s, (struct sockaddr *)&sin, sizeof(sin)) || getsockname(s, (struct sockaddr *)&sin, &l)) {
		if (s >= 0)
			close(s);
		return -1;
	}
	*port = ntohs(sin.sin_port);
	return s;
}

/* A live host without a listener answers like the kernel's CM: REJ "invalid service ID". */
static int no_listener_client(uint16_t unused)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp = { .qp_num = 1, .retry_count = 7 };
	long long t0, dt;
	uint16_t port;
	int held = reserve_port(&port, 0);

	CHECK(held >= 0, "cannot reserve a port: %s", strerror(errno));
	setenv("SOFTRDMA_CM_REFUSED_RETRY_MS", "500", 1);
	ch = rdma_create_event_channel();
	CHECK(ch, "rdma_create_event_channel: %s", strerror(errno));
	if (resolve(ch, &id, RDMA_PS_TCP, port))
		return 1;
	t0 = now_ms();
	CHECK(!rdma_connect(id, &cp), "rdma_connect: %s", strerror(errno));
	ev = expect(ch, RDMA_CM_EVENT_REJECTED, id, 4000);
	if (!ev)
		return 1;
	dt = now_ms() - t0;
	CHECK(ev->status == 8, "REJECTED status %d, want 8 (invalid service ID)", ev->status);
	CHECK(dt >= 450 && dt < 3000, "rejected after %lld ms, want just past the 500 ms retry window", dt);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	close(held);
	return 0;
}

/* A server that starts listening just after the client connects (perftest
 * re-listens on its port right after its handshake) is still reached. */
static int late_listener_server(int wfd)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *l;
	struct sockaddr_in sin;
	uint16_t port;
	/* held until the listener has its own socket there: nobody else can listen on it meanwhile */
	int held = reserve_port(&port, 1);

	CHECK(ch, "rdma_create_event_channel: %s", strerror(errno));
	CHECK(held >= 0, "cannot reserve a port: %s", strerror(errno));
	CHECK(write(wfd, &port, sizeof(port)) == sizeof(port), "cannot pass the port");
	usleep(400 * 1000);
	loopback(&sin, port);
	CHECK(!rdma_create_id(ch, &l, NULL, RDMA_PS_TCP), "rdma_create_id");
	CHECK(!rdma_bind_addr(l, (struct sockaddr *)&sin) && !rdma_listen(l, 1), "late listen: %s", strerror(errno));
	close(held);
	return serve_last(ch, l);
}

/* A plain TCP listener on a free loopback port, its port passed on wfd: a fake CM peer. */
static int plain_listener(int wfd)
{
	struct sockaddr_in sin;
	socklen_t l = sizeof(sin);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	uint16_t port;

	loopback(&sin, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&sin, sizeof(sin)) || listen(s, 4) ||
	    getsockname(s, (struct sockaddr *)&sin, &l)) {
		say("plain TCP listener: %s", strerror(errno));
		return -1;
	}
	port = ntohs(sin.sin_port);
	if (write(wfd, &port, sizeof(port)) != sizeof(port)) {
		say("cannot pass the port");
		return -1;
	}
	return s;
}

/* A peer that accepts the TCP connection but never answers: UNREACHABLE after the CM timeout. */
static int silent_server(int wfd)
{
	int s = plain_listener(wfd), c;
	char buf[512];

	if (s < 0)
		return 1;
	c = accept(s, NULL, NULL);
	CHECK(c >= 0, "accept: %s", strerror(errno));
	while (read(c, buf, sizeof(buf)) > 0)
		;
	close(c);
	close(s);
	return 0;
}

/* An event channel, the CM timeout set first (the library reads it when its first channel appears). */
static struct rdma_event_channel *channel_with_timeout(const char *ms)
{
	struct rdma_event_channel *ch;

	setenv("SOFTRDMA_CM_TIMEOUT_MS", ms, 1);
	ch = rdma_create_event_channel();
	if (!ch)
		say("rdma_create_event_channel: %s", strerror(errno));
	return ch;
}

/* Resolve and connect an id without a QP (its REQ names QPN 1). */
static int connect_no_qp(struct rdma_event_channel *ch, struct rdma_cm_id **id, uint16_t port)
{
	struct rdma_conn_param cp = { .qp_num = 1, .retry_count = 7 };

	if (resolve(ch, id, RDMA_PS_TCP, port))
		return 1;
	CHECK(!rdma_connect(*id, &cp), "rdma_connect: %s", strerror(errno));
	return 0;
}

static int silent_client(uint16_t port)
{
	struct rdma_event_channel *ch = channel_with_timeout("1500");
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	long long t0 = now_ms(), dt;

	if (!ch || connect_no_qp(ch, &id, port))
		return 1;
	ev = expect(ch, RDMA_CM_EVENT_UNREACHABLE, id, 5000);
	if (!ev)
		return 1;
	dt = now_ms() - t0;
	CHECK(ev->status == -ETIMEDOUT, "UNREACHABLE status %d, want %d", ev->status, -ETIMEDOUT);
	CHECK(dt >= 1400 && dt < 4000, "UNREACHABLE after %lld ms, want ~1500", dt);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

/*
 * A destination on another host, where no softrdma device answers without
 * SOFTRDMA_REMOTE: TEST-NET-2 (RFC 5737), reached through the default route. The
 * kernel resolves it (the gateway is the neighbour) and retries its REQ unanswered
 * until the CM timeout, then reports UNREACHABLE -ETIMEDOUT.
 */
#define NO_DEVICE_ADDR "198.51.100.254"

/* Resolve address and route to NO_DEVICE_ADDR and connect: 0 connecting, 1 failed,
 * -1 this host has no route there (ADDR_ERROR -ENETUNREACH: nothing to test). */
static int connect_no_device(struct rdma_event_channel *ch, struct rdma_cm_id **id)
{
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(65535) };
	struct rdma_conn_param cp = { .qp_num = 1, .retry_count = 7 };
	struct rdma_cm_event *ev;
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	int type, status;

	unsetenv("SOFTRDMA_REMOTE");
	CHECK(inet_pton(AF_INET, NO_DEVICE_ADDR, &dst.sin_addr) == 1, "inet_pton");
	CHECK(!rdma_create_id(ch, id, NULL, RDMA_PS_TCP), "rdma_create_id: %s", strerror(errno));
	CHECK(!rdma_resolve_addr(*id, NULL, (struct sockaddr *)&dst, 2000), "rdma_resolve_addr: %s", strerror(errno));
	CHECK(poll(&p, 1, EV_TIMEOUT_MS) == 1, "no address resolution event");
	CHECK(!rdma_get_cm_event(ch, &ev), "rdma_get_cm_event: %s", strerror(errno));
	type = ev->event;
	status = ev->status;
	rdma_ack_cm_event(ev);
	if (type == RDMA_CM_EVENT_ADDR_ERROR && status == -ENETUNREACH) {
		say("no route to %s on this host: nothing to test", NO_DEVICE_ADDR);
		rdma_destroy_id(*id);
		return -1;
	}
	CHECK(type == RDMA_CM_EVENT_ADDR_RESOLVED, "got %s status %d, want ADDR_RESOLVED",
	      rdma_event_str(type), status);
	CHECK(!rdma_resolve_route(*id, 2000), "rdma_resolve_route: %s", strerror(errno));
	if (ack_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, *id))
		return 1;
	CHECK(!rdma_connect(*id, &cp), "rdma_connect: %s", strerror(errno));
	return 0;
}

/* Whether an event arrives on ch within ms (it is left queued). */
static int event_within(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1;
}

/* A connect to where no device answers stays pending until the CM timeout, then UNREACHABLE -ETIMEDOUT. */
static int no_device_client(uint16_t unused)
{
	struct rdma_event_channel *ch = channel_with_timeout("1500");
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	long long t0, dt;
	int rc;

	if (!ch)
		return 1;
	t0 = now_ms();
	rc = connect_no_device(ch, &id);
	if (rc)
		return rc < 0 ? 0 : 1;
	CHECK(!event_within(ch, 1200), "an event %lld ms after rdma_connect: the connect did not stay pending",
	      now_ms() - t0);
	ev = expect(ch, RDMA_CM_EVENT_UNREACHABLE, id, 3000);
	if (!ev)
		return 1;
	dt = now_ms() - t0;
	CHECK(ev->status == -ETIMEDOUT, "UNREACHABLE status %d, want %d", ev->status, -ETIMEDOUT);
	CHECK(dt >= 1400 && dt < 4000, "UNREACHABLE after %lld ms, want ~1500 (the CM timeout)", dt);
	rdma_ack_cm_event(ev);
	CHECK(!rdma_destroy_id(id), "rdma_destroy_id: %s", strerror(errno));
	rdma_destroy_event_channel(ch);
	return 0;
}

/* rdma_destroy_id cancels such a pending connect: at once, and no event follows (not even at the CM timeout). */
static int no_device_cancel_client(uint16_t unused)
{
	struct rdma_event_channel *ch = channel_with_timeout("1000");
	struct rdma_cm_id *id;
	long long t0;
	int rc;

	if (!ch)
		return 1;
	rc = connect_no_device(ch, &id);
	if (rc)
		return rc < 0 ? 0 : 1;
	CHECK(!event_within(ch, 300), "an event before the cancellation: the connect did not stay pending");
	t0 = now_ms();
	CHECK(!rdma_destroy_id(id), "rdma_destroy_id on a pending connect: %s", strerror(errno));
	CHECK(now_ms() - t0 < 500, "rdma_destroy_id took %lld ms", now_ms() - t0);
	CHECK(!event_within(ch, 1500), "an event after the id was destroyed");
	rdma_destroy_event_channel(ch);
	return 0;
}

/* The server survives a client that dies once connected, and one that dies before being accepted. */
static int survive_server(int wfd)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *l, *child;
	struct rdma_cm_event *ev;
	struct res r = { 0 };
	long long t0;

	if (open_listener(&ch, &l, RDMA_PS_TCP, wfd))
		return 1;
	/* client 1: connects, then dies without disconnecting */
	if (accept_one(ch, l, &child, &r, 1))
		return 1;
	t0 = now_ms();
	if (ack_expect(ch, RDMA_CM_EVENT_DISCONNECTED, child))
		return 1;
	say("DISCONNECTED %lld ms after ESTABLISHED", now_ms() - t0);
	free_res(child, &r);
	rdma_destroy_id(child);
	/* client 2: sends its request and dies before we accept */
	ev = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL, EV_TIMEOUT_MS);
	if (!ev)
		return 1;
	child = ev->id;
	rdma_ack_cm_event(ev);
	usleep(500 * 1000);
	memset(&r, 0, sizeof(r));
	if (make_qp(child, &r, IBV_QPT_RC))
		return 1;
	CHECK(!rdma_accept(child, NULL), "rdma_accept of a vanished requester: %s", strerror(errno));
	ev = expect(ch, RDMA_CM_EVENT_UNREACHABLE, child, EV_TIMEOUT_MS);
	if (!ev)
		return 1;
	CHECK(ev->status == -ETIMEDOUT, "UNREACHABLE status %d", ev->status);
	rdma_ack_cm_event(ev);
	free_res(child, &r);
	rdma_destroy_id(child);
	/* client 3: a normal connection still works */
	memset(&r, 0, sizeof(r));
	return serve_last(ch, l);
}

static int survive_client_dies_connected(uint16_t port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct res r = { 0 };

	CHECK(ch, "rdma_create_event_channel: %s", strerror(errno));
	if (connect_one(ch, &id, &r, port))
		return 1;
	_exit(0);	/* no disconnect, no cleanup: the process just goes away */
}

static int survive_client_dies_early(uint16_t port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_conn_param cp;

	CHECK(ch, "rdma_create_event_channel: %s", strerror(errno));
	if (resolve(ch, &id, RDMA_PS_TCP, port))
		return 1;
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 0x42;
	cp.private_data = "hello-req";
	cp.private_data_len = 10;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	CHECK(!rdma_connect(id, &cp), "rdma_connect: %s", strerror(errno));
	usleep(100 * 1000);
	_exit(0);
}

static int connect_and_disconnect(uint16_t port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct res r = { 0 };

	CHECK(ch, "rdma_create_event_channel: %s", strerror(errno));
	if (connect_one(ch, &id, &r, port))
		return 1;
	CHECK(!rdma_disconnect(id), "rdma_disconnect: %s", strerror(errno));
	if (ack_expect(ch, RDMA_CM_EVENT_DISCONNECTED, id))
		return 1;
	free_res(id, &r);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

static int survive_client_normal(uint16_t port)
{
	/* let the server see the previous client's UNREACHABLE first: it expects events in order */
	usleep(1500 * 1000);
	return connect_and_disconnect(port);
}

/* UD: the SIDR-like exchange gives the client the server's QPN and Q_Key, and they work. */
static int ud_server(int wfd)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *l, *child;
	struct rdma_cm_event *ev;
	struct res r = { 0 };
	struct ibv_wc wc;
	char want[MSG_LEN];

	if (open_listener(&ch, &l, RDMA_PS_UDP, wfd))
		return 1;
	ev = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL, EV_TIMEOUT_MS);
	if (!ev)
		return 1;
	child = ev->id;
	CHECK(ev->param.ud.private_data_len == 180, "SIDR REQ private data len %d", ev->param.ud.private_data_len);
	CHECK(!memcmp(ev->param.ud.private_data, "ud-hello", 9), "SIDR REQ private data differs");
	rdma_ack_cm_event(ev);
	CHECK(child->qp_type == IBV_QPT_UD, "UD child qp_type %d", child->qp_type);
	if (make_qp(child, &r, IBV_QPT_UD))
		return 1;
	CHECK(qp_state(child->qp) == IBV_QPS_RTS, "UD QP not moved to RTS by rdma_create_qp");
	if (post_recv(child, &r, 0, 40 + MSG_LEN))
		return 1;
	CHECK(!rdma_accept(child, NULL), "rdma_accept: %s", strerror(errno));
	if (poll_one(child->recv_cq, &wc))
		return 1;
	pattern(want, 5);
	CHECK(wc.byte_len == 40 + MSG_LEN && !memcmp(r.buf + 40, want, MSG_LEN), "UD server received wrong bytes");
	free_res(child, &r);
	rdma_destroy_id(child);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	return 0;
}

static int ud_client(uint16_t port)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp;
	struct res r = { 0 };
	struct ibv_ah *ah;
	struct ibv_wc wc;
	uint32_t qpn, qkey;

	CHECK(ch, "rdma_create_event_channel: %s", strerror(errno));
	if (resolve(ch, &id, RDMA_PS_UDP, port) || make_qp(id, &r, IBV_QPT_UD))
		return 1;
	memset(&cp, 0, sizeof(cp));
	cp.private_data = "ud-hello";
	cp.private_data_len = 9;
	CHECK(!rdma_connect(id, &cp), "rdma_connect: %s", strerror(errno));
	ev = expect(ch, RDMA_CM_EVENT_ESTABLISHED, id, EV_TIMEOUT_MS);
	if (!ev)
		return 1;
	qpn = ev->param.ud.qp_num;
	qkey = ev->param.ud.qkey;
	CHECK(qpn != 0 && qkey == RDMA_UDP_QKEY, "UD peer qpn %u qkey %#x", qpn, qkey);
	CHECK(ev->param.ud.ah_attr.is_global && ev->param.ud.ah_attr.port_num == 1, "UD ah_attr incomplete");
	ah = ibv_create_ah(r.pd, &ev->param.ud.ah_attr);
	CHECK(ah, "ibv_create_ah from the event: %s", strerror(errno));
	rdma_ack_cm_event(ev);
	pattern(r.buf + 1024, 5);
	if (post_send(id, &r, 1024, MSG_LEN, ah, qpn, qkey) || poll_one(id->send_cq, &wc))
		return 1;
	ibv_destroy_ah(ah);
	free_res(id, &r);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

static void *blocked_get(void *arg)
{
	struct rdma_cm_event *ev;

	rdma_get_cm_event(arg, &ev);
	return NULL;
}

/* Event channel: the fd is pollable, non-blocking gets say EAGAIN, unacked events hold destroy. */
static int channel_semantics(uint16_t unused)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct sockaddr_in dst;
	struct pollfd p;
	int fl;

	CHECK(ch, "rdma_create_event_channel: %s", strerror(errno));
	fl = fcntl(ch->fd, F_GETFL);
	CHECK(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) == 0, "fcntl");
	CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN, "empty non-blocking channel did not give EAGAIN");
	p.fd = ch->fd;
	p.events = POLLIN;
	CHECK(poll(&p, 1, 0) == 0, "empty channel polls readable");
	CHECK(!rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), "rdma_create_id");
	loopback(&dst, 4791);
	CHECK(!rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 1000), "rdma_resolve_addr");
	CHECK(poll(&p, 1, 2000) == 1 && (p.revents & POLLIN), "channel with an event does not poll readable");
	CHECK(!rdma_get_cm_event(ch, &ev) && ev->event == RDMA_CM_EVENT_ADDR_RESOLVED && ev->id == id,
	      "ADDR_RESOLVED not delivered");
	CHECK(poll(&p, 1, 0) == 0, "drained channel still polls readable");
	CHECK(rdma_resolve_addr(id, NULL, NULL, 1000) == -1 && errno == EINVAL, "NULL dst not EINVAL");
	CHECK(rdma_connect(id, NULL) == -1 && errno == EINVAL, "connect before route not EINVAL");
	rdma_ack_cm_event(ev);
	CHECK(!strcmp(rdma_event_str(RDMA_CM_EVENT_REJECTED), "RDMA_CM_EVENT_REJECTED"), "rdma_event_str");
	CHECK(rsocket(AF_INET, SOCK_STREAM, 0) == -1 && errno == ENOSYS, "rsocket not ENOSYS");
	CHECK(rdma_join_multicast(id, (struct sockaddr *)&dst, NULL) == -1 && errno == ENOSYS,
	      "rdma_join_multicast not ENOSYS");
	{
		/* two queued events: the fd stays readable until both are taken */
		struct rdma_cm_id *id2;

		CHECK(!rdma_create_id(ch, &id2, NULL, RDMA_PS_TCP), "rdma_create_id");
		CHECK(!rdma_resolve_addr(id2, NULL, (struct sockaddr *)&dst, 1000), "resolve id2");
		CHECK(!rdma_resolve_route(id, 1000), "resolve_route");
		CHECK(poll(&p, 1, 2000) == 1, "two events: not readable");
		CHECK(!rdma_get_cm_event(ch, &ev), "first of two events");
		rdma_ack_cm_event(ev);
		CHECK(poll(&p, 1, 0) == 1, "one event left: not readable");
		CHECK(!rdma_get_cm_event(ch, &ev), "second of two events");
		rdma_ack_cm_event(ev);
		CHECK(poll(&p, 1, 0) == 0, "no event left: still readable");
		/* an unretrieved event does not hold up destroy: it goes with the id */
		CHECK(!rdma_resolve_route(id2, 1000), "resolve_route id2");
		CHECK(!rdma_destroy_id(id2), "destroy with a queued event");
		CHECK(poll(&p, 1, 0) == 0, "destroyed id's event still queued");
	}
	{
		/* a child forked after the library started works on its own */
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			struct rdma_event_channel *c2 = rdma_create_event_channel();
			struct rdma_cm_id *i2;

			alarm(10);
			if (!c2 || rdma_create_id(c2, &i2, NULL, RDMA_PS_TCP) ||
			    rdma_resolve_addr(i2, NULL, (struct sockaddr *)&dst, 1000) ||
			    ack_expect(c2, RDMA_CM_EVENT_ADDR_RESOLVED, i2) || rdma_destroy_id(i2))
				_exit(1);
			rdma_destroy_event_channel(c2);
			_exit(0);
		}
		CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "rdma_cm in a forked child failed");
	}
	{
		/* a blocked rdma_get_cm_event can be cancelled, like a read() */
		struct rdma_event_channel *c3 = rdma_create_event_channel();
		pthread_t t;
		void *ret;

		CHECK(c3 && !pthread_create(&t, NULL, blocked_get, c3), "thread");
		usleep(100 * 1000);
		CHECK(!pthread_cancel(t) && !pthread_join(t, &ret) && ret == PTHREAD_CANCELED,
		      "blocked rdma_get_cm_event was not cancelled");
		rdma_destroy_event_channel(c3);
		/* destroying a channel a thread waits on leaves that thread blocked, unharmed */
		c3 = rdma_create_event_channel();
		CHECK(c3 && !pthread_create(&t, NULL, blocked_get, c3), "thread");
		usleep(100 * 1000);
		rdma_destroy_event_channel(c3);
		CHECK(!rdma_resolve_route(id, 1000), "resolve_route after channel teardown");
		CHECK(!rdma_get_cm_event(ch, &ev), "event after channel teardown");
		rdma_ack_cm_event(ev);
		usleep(100 * 1000);
		CHECK(pthread_tryjoin_np(t, &ret) == EBUSY, "waiter on a destroyed channel returned");
	}
	CHECK(!rdma_destroy_id(id), "rdma_destroy_id");
	rdma_destroy_event_channel(ch);
	return 0;
}

/* Synchronous endpoints: rdma_getaddrinfo, rdma_create_ep, rdma_get_request. */
static int ep_server(int wfd)
{
	struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr = { .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
						  .max_recv_sge = 1 }, .qp_type = IBV_QPT_RC, .sq_sig_all = 1 };
	struct rdma_cm_id *l, *id;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	char buf[MSG_LEN], want[MSG_LEN];
	uint16_t port;

	CHECK(!rdma_getaddrinfo("127.0.0.1", "0", &hints, &res), "rdma_getaddrinfo passive");
	CHECK(res->ai_src_addr && !res->ai_dst_addr, "passive addrinfo has no source");
	CHECK(!rdma_create_ep(&l, res, NULL, &attr), "rdma_create_ep passive: %s", strerror(errno));
	rdma_freeaddrinfo(res);
	CHECK(!rdma_listen(l, 1), "rdma_listen: %s", strerror(errno));
	port = ntohs(rdma_get_src_port(l));
	CHECK(write(wfd, &port, sizeof(port)) == sizeof(port), "cannot pass the port");
	CHECK(!rdma_get_request(l, &id), "rdma_get_request: %s", strerror(errno));
	CHECK(id->qp && id->event && id->event->event == RDMA_CM_EVENT_CONNECT_REQUEST, "request without QP/event");
	mr = ibv_reg_mr(id->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "ibv_reg_mr: %s", strerror(errno));
	{
		struct ibv_sge sge = { (uintptr_t)buf, MSG_LEN, mr->lkey };
		struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;

		CHECK(!ibv_post_recv(id->qp, &wr, &bad), "post_recv");
	}
	CHECK(!rdma_accept(id, NULL), "synchronous rdma_accept: %s", strerror(errno));
	{
		long long end = now_ms() + EV_TIMEOUT_MS;
		int n = 0;

		while (n == 0 && now_ms() < end)
			n = ibv_poll_cq(id->recv_cq, 1, &wc);
		CHECK(n == 1 && wc.status == IBV_WC_SUCCESS, "ep server receive failed");
	}
	pattern(want, 3);
	CHECK(!memcmp(buf, want, MSG_LEN), "ep server received wrong bytes");
	CHECK(!rdma_disconnect(id), "rdma_disconnect: %s", strerror(errno));
	ibv_dereg_mr(mr);
	rdma_destroy_ep(id);
	rdma_destroy_ep(l);
	return 0;
}

static int ep_client(uint16_t port)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr attr = { .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
						  .max_recv_sge = 1 }, .qp_type = IBV_QPT_RC, .sq_sig_all = 1 };
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	char buf[MSG_LEN], svc[8];

	snprintf(svc, sizeof(svc), "%u", port);
	CHECK(!rdma_getaddrinfo("localhost", svc, &hints, &res), "rdma_getaddrinfo active");
	CHECK(res->ai_dst_addr && res->ai_family == AF_INET, "active addrinfo has no IPv4 destination");
	CHECK(!rdma_create_ep(&id, res, NULL, &attr), "rdma_create_ep active: %s", strerror(errno));
	rdma_freeaddrinfo(res);
	CHECK(id->qp && id->verbs, "active endpoint without QP");
	CHECK(!rdma_connect(id, NULL), "synchronous rdma_connect: %s", strerror(errno));
	pattern(buf, 3);
	mr = ibv_reg_mr(id->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "ibv_reg_mr: %s", strerror(errno));
	{
		struct ibv_sge sge = { (uintptr_t)buf, MSG_LEN, mr->lkey };
		struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;
		long long end = now_ms() + EV_TIMEOUT_MS;
		int n = 0;

		CHECK(!ibv_post_send(id->qp, &wr, &bad), "post_send");
		while (n == 0 && now_ms() < end)
			n = ibv_poll_cq(id->send_cq, 1, &wc);
		CHECK(n == 1 && wc.status == IBV_WC_SUCCESS, "ep client send failed");
	}
	/* wait for the server's disconnect on the synchronous id's own channel */
	{
		struct rdma_cm_event *ev = expect(id->channel, RDMA_CM_EVENT_DISCONNECTED, id, EV_TIMEOUT_MS);

		if (!ev)
			return 1;
		rdma_ack_cm_event(ev);
	}
	ibv_dereg_mr(mr);
	rdma_destroy_ep(id);
	return 0;
}

/* Both ends in one process, on one event channel: what a single-JVM test does. */
static int same_process(uint16_t unused)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *l, *a, *p = NULL;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp;
	struct res ra = { 0 }, rp = { 0 };
	struct sockaddr_in sin;
	struct ibv_wc wc;
	char want[MSG_LEN];
	int est = 0, fds[2];

	CHECK(!pipe(fds), "pipe");
	if (open_listener(&ch, &l, RDMA_PS_TCP, fds[1]))
		return 1;
	loopback(&sin, ntohs(rdma_get_src_port(l)));
	CHECK(!rdma_create_id(ch, &a, NULL, RDMA_PS_TCP), "rdma_create_id");
	CHECK(!rdma_resolve_addr(a, NULL, (struct sockaddr *)&sin, 2000), "rdma_resolve_addr");
	if (ack_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, a))
		return 1;
	CHECK(!rdma_resolve_route(a, 2000), "rdma_resolve_route");
	if (ack_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, a) || make_qp(a, &ra, IBV_QPT_RC) ||
	    post_recv(a, &ra, 0, MSG_LEN))
		return 1;
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = cp.initiator_depth = 1;
	cp.retry_count = cp.rnr_retry_count = 7;
	CHECK(!rdma_connect(a, &cp), "rdma_connect: %s", strerror(errno));
	ev = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL, EV_TIMEOUT_MS);
	if (!ev)
		return 1;
	p = ev->id;
	CHECK(ev->listen_id == l && ev->param.conn.qp_num == a->qp->qp_num, "request does not name the active QP");
	rdma_ack_cm_event(ev);
	if (make_qp(p, &rp, IBV_QPT_RC) || post_recv(p, &rp, 0, MSG_LEN))
		return 1;
	CHECK(!rdma_accept(p, NULL), "rdma_accept: %s", strerror(errno));
	/* both ESTABLISHED events arrive, in either order */
	while (est != 3) {
		struct pollfd pf = { .fd = ch->fd, .events = POLLIN };

		CHECK(poll(&pf, 1, EV_TIMEOUT_MS) == 1 && !rdma_get_cm_event(ch, &ev), "no ESTABLISHED");
		CHECK(ev->event == RDMA_CM_EVENT_ESTABLISHED && (ev->id == a || ev->id == p),
		      "unexpected %s", rdma_event_str(ev->event));
		est |= ev->id == a ? 1 : 2;
		rdma_ack_cm_event(ev);
	}
	pattern(ra.buf + 1024, 21);
	if (post_send(a, &ra, 1024, MSG_LEN, NULL, 0, 0) || poll_one(a->send_cq, &wc) || poll_one(p->recv_cq, &wc))
		return 1;
	pattern(want, 21);
	CHECK(!memcmp(rp.buf, want, MSG_LEN), "same-process receive differs");
	CHECK(!rdma_disconnect(p), "rdma_disconnect: %s", strerror(errno));
	est = 0;
	while (est != 3) {
		struct pollfd pf = { .fd = ch->fd, .events = POLLIN };

		CHECK(poll(&pf, 1, EV_TIMEOUT_MS) == 1 && !rdma_get_cm_event(ch, &ev), "no DISCONNECTED");
		CHECK(ev->event == RDMA_CM_EVENT_DISCONNECTED, "unexpected %s", rdma_event_str(ev->event));
		est |= ev->id == a ? 1 : 2;
		rdma_ack_cm_event(ev);
	}
	free_res(a, &ra);
	free_res(p, &rp);
	CHECK(!rdma_destroy_id(a) && !rdma_destroy_id(p) && !rdma_destroy_id(l), "destroy");
	rdma_destroy_event_channel(ch);
	return 0;
}

/* ------------------------------------------------- hostile peers, raw TCP */

/* A raw TCP peer that speaks (or mangles) the CM records itself. */
static int raw_connect(uint16_t port)
{
	struct sockaddr_in sin;
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	loopback(&sin, port);
	if (s < 0 || connect(s, (struct sockaddr *)&sin, sizeof(sin))) {
		say("raw connect to %u: %s", port, strerror(errno));
		if (s >= 0)
			close(s);
		return -1;
	}
	return s;
}

/* A well-formed record of the given type from an RC requester on 127.0.0.1. */
static void raw_record(struct wire_msg *m, enum wire_type type)
{
	memset(m, 0, sizeof(*m));
	m->magic = htonl(WIRE_MAGIC);
	m->version = WIRE_VERSION;
	m->type = type;
	m->qp_type = IBV_QPT_RC;
	m->qpn = htonl(0x4242);
	m->psn = htonl(0x1234);
	m->gid[10] = m->gid[11] = 0xff;
	m->gid[12] = 127;
	m->gid[15] = 1;
	m->responder_resources = m->initiator_depth = 1;
	m->retry_count = m->rnr_retry_count = 7;
	m->mtu = IBV_MTU_1024;
}

static int raw_send(int fd, const void *p, size_t n)
{
	return send(fd, p, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/* Read one whole record: 1, or 0 when the peer closed, -1 on timeout or error. */
static int raw_read(int fd, struct wire_msg *m, int timeout_ms)
{
	size_t got = 0;
	long long end = now_ms() + timeout_ms;

	while (got < sizeof(*m)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long long left = end - now_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) != 1)
			return -1;
		n = recv(fd, (char *)m + got, sizeof(*m) - got, 0);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return 0;
		if (n < 0)
			return -1;
		got += n;
	}
	return 1;
}

/* Wait until the peer closes the connection, discarding what it sends: 0 if it did in time. */
static int raw_wait_closed(int fd, int timeout_ms)
{
	struct wire_msg m;
	int rc;

	while ((rc = raw_read(fd, &m, timeout_ms)) == 1)
		;
	return rc == 0 ? 0 : -1;
}

static void garbage(void *p, size_t n, uint8_t fill)
{
	memset(p, fill, n);
}

/* Accept a request without a QP (the REP names a made-up QPN). */
static int accept_no_qp(struct rdma_event_channel *ch, struct rdma_cm_id **child)
{
	struct rdma_cm_event *ev = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL, EV_TIMEOUT_MS);
	struct rdma_conn_param cp;

	if (!ev)
		return 1;
	*child = ev->id;
	rdma_ack_cm_event(ev);
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 0x77;
	cp.responder_resources = cp.initiator_depth = 1;
	CHECK(!rdma_accept(*child, &cp), "rdma_accept: %s", strerror(errno));
	return 0;
}

/* The listener drops malformed requests without troubling the application
 * and keeps serving; a malformed record after its REP ends the child with
 * UNREACHABLE, and on an established connection with DISCONNECTED, both at
 * once rather than at the CM timeout (15 s here). */
static int hostile_server(int wfd)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *l, *child;
	struct rdma_cm_event *ev;
	long long t0;

	if (open_listener(&ch, &l, RDMA_PS_TCP, wfd))
		return 1;
	/* client 1 sends only garbage: its first event here is client 2's request */
	if (accept_no_qp(ch, &child))
		return 1;
	t0 = now_ms();
	ev = expect(ch, RDMA_CM_EVENT_UNREACHABLE, child, 5000);
	if (!ev)
		return 1;
	CHECK(ev->status == -ETIMEDOUT, "UNREACHABLE status %d", ev->status);
	CHECK(now_ms() - t0 < 5000, "UNREACHABLE only after %lld ms", now_ms() - t0);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(child);
	/* client 3: establishes, then sends garbage */
	if (accept_no_qp(ch, &child) || ack_expect(ch, RDMA_CM_EVENT_ESTABLISHED, child))
		return 1;
	ev = expect(ch, RDMA_CM_EVENT_DISCONNECTED, child, 5000);
	if (!ev)
		return 1;
	rdma_ack_cm_event(ev);
	rdma_destroy_id(child);
	/* client 4: a well-formed connection still works */
	return serve_last(ch, l);
}

/* Garbage instead of a request, then a request cut short: both connections are closed. */
static int hostile_client_garbage_request(uint16_t port)
{
	struct wire_msg m;
	int fd = raw_connect(port);

	CHECK(fd >= 0, "no connection");
	garbage(&m, sizeof(m), 0xa5);
	CHECK(!raw_send(fd, &m, sizeof(m)), "send: %s", strerror(errno));
	CHECK(!raw_wait_closed(fd, 3000), "the listener kept a garbage connection open");
	close(fd);
	fd = raw_connect(port);
	CHECK(fd >= 0, "no second connection");
	raw_record(&m, MSG_REQ);
	m.mtu = 0;	/* well framed, but no MTU */
	CHECK(!raw_send(fd, &m, sizeof(m)), "send: %s", strerror(errno));
	CHECK(!raw_wait_closed(fd, 3000), "the listener kept a request without MTU open");
	close(fd);
	return 0;
}

static int raw_request(uint16_t port, struct wire_msg *rep)
{
	struct wire_msg m;
	int fd = raw_connect(port);

	if (fd < 0)
		return -1;
	raw_record(&m, MSG_REQ);
	if (raw_send(fd, &m, sizeof(m)) || raw_read(fd, rep, EV_TIMEOUT_MS) != 1 || rep->type != MSG_REP) {
		say("no REP for a well-formed request");
		close(fd);
		return -1;
	}
	return fd;
}

static int hostile_client_garbage_after_rep(uint16_t port)
{
	struct wire_msg m;
	int fd = raw_request(port, &m);

	CHECK(fd >= 0, "request failed");
	garbage(&m, sizeof(m), 0x5a);
	CHECK(!raw_send(fd, &m, sizeof(m)), "send: %s", strerror(errno));
	CHECK(!raw_wait_closed(fd, 3000), "the server kept the connection after garbage");
	close(fd);
	return 0;
}

static int hostile_client_garbage_established(uint16_t port)
{
	struct wire_msg m;
	int fd = raw_request(port, &m);

	CHECK(fd >= 0, "request failed");
	raw_record(&m, MSG_RTU);
	CHECK(!raw_send(fd, &m, sizeof(m)), "send: %s", strerror(errno));
	usleep(200 * 1000);
	raw_record(&m, MSG_DREQ);
	m.magic = htonl(0xdeadbeef);
	CHECK(!raw_send(fd, &m, sizeof(m)), "send: %s", strerror(errno));
	CHECK(!raw_wait_closed(fd, 3000), "the server kept the connection after garbage");
	close(fd);
	return 0;
}

/* A fake server answering each request with something unusable. */
#define BAD_REPLIES 3
static int bad_reply_server(int wfd)
{
	int s = plain_listener(wfd);

	if (s < 0)
		return 1;
	for (int i = 0; i < BAD_REPLIES; i++) {
		struct wire_msg m;
		int c = accept(s, NULL, NULL);

		CHECK(c >= 0, "accept: %s", strerror(errno));
		CHECK(raw_read(c, &m, EV_TIMEOUT_MS) == 1 && m.type == MSG_REQ, "no REQ");
		raw_record(&m, MSG_REP);
		if (i == 0)
			garbage(&m, sizeof(m), 0xee);	/* garbage */
		else if (i == 1)
			m.mtu = 9;			/* well framed, impossible MTU */
		/* i == 2: half a REP, then silence until the client gives up */
		raw_send(c, &m, i == 2 ? sizeof(m) / 2 : sizeof(m));
		raw_wait_closed(c, 10000);
		close(c);
	}
	close(s);
	return 0;
}

/* Garbage or an impossible REP ends the connect at once (UNREACHABLE); a
 * reply cut short ends it at the CM timeout: the deadline still holds. */
static int bad_reply_client(uint16_t port)
{
	struct rdma_event_channel *ch = channel_with_timeout("1500");

	if (!ch)
		return 1;
	for (int i = 0; i < BAD_REPLIES; i++) {
		struct rdma_cm_id *id;
		struct rdma_cm_event *ev;
		long long t0 = now_ms(), dt;

		if (connect_no_qp(ch, &id, port))
			return 1;
		ev = expect(ch, RDMA_CM_EVENT_UNREACHABLE, id, 5000);
		if (!ev)
			return 1;
		dt = now_ms() - t0;
		if (i < 2)
			CHECK(dt < 1000, "reply %d: UNREACHABLE only after %lld ms", i, dt);
		else
			CHECK(dt >= 1400, "half a reply: UNREACHABLE after %lld ms, before the CM timeout", dt);
		rdma_ack_cm_event(ev);
		rdma_destroy_id(id);
	}
	rdma_destroy_event_channel(ch);
	return 0;
}

static int count_fds(void)
{
	char path[64];
	int n = 0;

	for (int fd = 0; fd < 4096; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		if (!access(path, F_OK))
			n++;
	}
	return n;
}

/* A well-formed request on a raw connection reaches the listener as CONNECT_REQUEST; reject it. */
static int listener_still_serves(struct rdma_event_channel *ch, uint16_t port)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *child;
	struct wire_msg m;
	int fd = raw_connect(port);

	CHECK(fd >= 0, "no connection");
	raw_record(&m, MSG_REQ);
	CHECK(!raw_send(fd, &m, sizeof(m)), "send: %s", strerror(errno));
	ev = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL, EV_TIMEOUT_MS);
	if (!ev)
		return 1;
	child = ev->id;
	rdma_ack_cm_event(ev);
	CHECK(!rdma_reject(child, NULL, 0), "rdma_reject: %s", strerror(errno));
	rdma_destroy_id(child);
	CHECK(raw_read(fd, &m, EV_TIMEOUT_MS) == 1 && m.type == MSG_REJ, "no REJ");
	close(fd);
	return 0;
}

/* Silent connections hold at most the backlog's worth (listen_on's 4) of the
 * listener's descriptors; the rest wait in the kernel's queue (which holds 5
 * for a backlog of 4: 8 connections fit without a connect blocking). Out of descriptors, the CM thread
 * pauses accepting instead of spinning, and resumes once there are some. */
static int listener_limits(uint16_t unused)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *l;
	struct rlimit rl, low;
	struct timespec c0, c1;
	int fds[2], raw[8], before, held, spare;
	uint16_t port;
	long cpu_ms;

	CHECK(!pipe(fds), "pipe");
	if (open_listener(&ch, &l, RDMA_PS_TCP, fds[1]))
		return 1;
	port = ntohs(rdma_get_src_port(l));
	before = count_fds();
	for (int i = 0; i < 8; i++) {
		raw[i] = raw_connect(port);
		CHECK(raw[i] >= 0, "connection %d", i);
	}
	usleep(500 * 1000);
	held = count_fds() - 8 - before;
	CHECK(held <= 4, "the listener holds %d silent connections, its backlog is 4", held);
	for (int i = 0; i < 8; i++)
		close(raw[i]);
	usleep(300 * 1000);
	if (listener_still_serves(ch, port))
		return 1;

	/* no descriptor left: a waiting connection must not make the CM thread spin */
	spare = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(spare >= 0 && !getrlimit(RLIMIT_NOFILE, &rl), "socket/getrlimit");
	low = rl;
	low.rlim_cur = dup(0);
	close((int)low.rlim_cur);
	CHECK(!setrlimit(RLIMIT_NOFILE, &low), "setrlimit: %s", strerror(errno));
	{
		struct sockaddr_in sin;

		loopback(&sin, port);
		CHECK(!connect(spare, (struct sockaddr *)&sin, sizeof(sin)), "connect: %s", strerror(errno));
	}
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
	usleep(1000 * 1000);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
	cpu_ms = (c1.tv_sec - c0.tv_sec) * 1000 + (c1.tv_nsec - c0.tv_nsec) / 1000000;
	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit back");
	CHECK(cpu_ms < 100, "the CM thread used %ld ms of CPU in 1 s out of descriptors", cpu_ms);
	close(spare);
	usleep(300 * 1000);
	if (listener_still_serves(ch, port))
		return 1;
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	return 0;
}

/* ------------------------------------------------------------------ fuzzing */

/* A fixed-seed generator, so a failing round can be replayed. */
static uint32_t fuzz_next(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static void fuzz_bytes(uint32_t *s, void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		((uint8_t *)p)[i] = (uint8_t)fuzz_next(s);
}

#define FUZZ_SEED 0x5eed1234u
#define FUZZ_ROUNDS 150
#define FUZZ_REPLIES 24
#define FUZZ_FINAL "final-ok"

/* Random, mutated, truncated, oversized and out-of-place records against a
 * listener; then a well-formed connection must still work. The server
 * accepts or rejects every request that makes it through (alternately) and
 * requires each accepted id to end with an event (CM timeout 2 s here). */
static int fuzz_listener_server(int wfd)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *l, *open[FUZZ_ROUNDS + 1], *final = NULL;
	int nopen = 0, final_done = 0, nreq = 0;
	long long end;

	setenv("SOFTRDMA_CM_TIMEOUT_MS", "2000", 1);
	if (open_listener(&ch, &l, RDMA_PS_TCP, wfd))
		return 1;
	end = now_ms() + 35000;
	while (!final_done || nopen) {
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };
		struct rdma_cm_event *ev;
		struct rdma_cm_id *id;
		enum rdma_cm_event_type type;
		int k;

		CHECK(now_ms() < end, "%d accepted ids never got their last event (final connection %s)", nopen,
		      final_done ? "done" : final ? "accepted" : "not seen");
		if (poll(&p, 1, 500) != 1)
			continue;
		CHECK(!rdma_get_cm_event(ch, &ev), "rdma_get_cm_event: %s", strerror(errno));
		id = ev->id;
		type = ev->event;
		if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
			struct rdma_conn_param cp;
			int is_final = !memcmp(ev->param.conn.private_data, FUZZ_FINAL, sizeof(FUZZ_FINAL));

			rdma_ack_cm_event(ev);
			if (!is_final && nreq++ % 2) {
				CHECK(!rdma_reject(id, NULL, 0), "rdma_reject: %s", strerror(errno));
				rdma_destroy_id(id);
				continue;
			}
			memset(&cp, 0, sizeof(cp));
			cp.qp_num = 0x77;
			cp.responder_resources = cp.initiator_depth = 1;
			CHECK(!rdma_accept(id, &cp), "rdma_accept: %s", strerror(errno));
			open[nopen++] = id;
			if (is_final)
				final = id;
			continue;
		}
		rdma_ack_cm_event(ev);
		if (type == RDMA_CM_EVENT_ESTABLISHED)
			continue;
		CHECK(type == RDMA_CM_EVENT_UNREACHABLE || type == RDMA_CM_EVENT_DISCONNECTED ||
		      type == RDMA_CM_EVENT_REJECTED || type == RDMA_CM_EVENT_CONNECT_ERROR,
		      "unexpected %s", rdma_event_str(type));
		for (k = 0; k < nopen && open[k] != id; k++)
			;
		CHECK(k < nopen, "%s for an id that was not open", rdma_event_str(type));
		open[k] = open[--nopen];
		if (id == final) {
			CHECK(type == RDMA_CM_EVENT_DISCONNECTED, "the well-formed connection ended with %s",
			      rdma_event_str(type));
			final_done = 1;
		}
		rdma_destroy_id(id);
	}
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	return 0;
}

static int fuzz_listener_client(uint16_t port)
{
	uint32_t seed = FUZZ_SEED;
	long long end = now_ms() + 15000;
	struct rdma_event_channel *ch;
	struct rdma_conn_param cp;
	struct rdma_cm_id *id;
	int round;

	for (round = 0; round < FUZZ_ROUNDS && now_ms() < end; round++) {
		uint8_t junk[600];
		struct wire_msg m, reply;
		int kind = fuzz_next(&seed) % 6, fd = raw_connect(port);
		size_t n;

		CHECK(fd >= 0, "round %d: the listener stopped accepting", round);
		raw_record(&m, MSG_REQ);
		switch (kind) {
		case 0:		/* random bytes: short, a record's worth, or more */
			n = 1 + fuzz_next(&seed) % sizeof(junk);
			fuzz_bytes(&seed, junk, n);
			raw_send(fd, junk, n);
			break;
		case 1:		/* a request with a few bytes changed */
			for (int k = 1 + fuzz_next(&seed) % 4; k > 0; k--)
				((uint8_t *)&m)[fuzz_next(&seed) % sizeof(m)] = (uint8_t)fuzz_next(&seed);
			raw_send(fd, &m, sizeof(m));
			break;
		case 2:		/* a request, then garbage after the answer */
		case 3:		/* a request, an RTU, then garbage on the connection */
			raw_send(fd, &m, sizeof(m));
			if (raw_read(fd, &reply, 3000) == 1 && reply.type == MSG_REP && kind == 3) {
				raw_record(&m, MSG_RTU);
				raw_send(fd, &m, sizeof(m));
			}
			n = 1 + fuzz_next(&seed) % 300;
			fuzz_bytes(&seed, junk, n);
			raw_send(fd, junk, n);
			break;
		case 4:		/* a well-framed record with random header fields */
			m.type = fuzz_next(&seed) % 12;
			m.version = fuzz_next(&seed) % 3;
			m.qp_type = fuzz_next(&seed) % 8;
			m.mtu = fuzz_next(&seed) % 8;
			m.pdata_len = (uint8_t)fuzz_next(&seed);
			raw_send(fd, &m, sizeof(m));
			break;
		default:	/* a request cut short, then gone */
			raw_send(fd, &m, fuzz_next(&seed) % sizeof(m));
			break;
		}
		raw_wait_closed(fd, 150);
		close(fd);
	}
	say("%d rounds", round);
	/* the listener still takes a well-formed connection */
	ch = rdma_create_event_channel();
	CHECK(ch, "rdma_create_event_channel: %s", strerror(errno));
	if (resolve(ch, &id, RDMA_PS_TCP, port))
		return 1;
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 1;
	cp.private_data = FUZZ_FINAL;
	cp.private_data_len = sizeof(FUZZ_FINAL);
	cp.responder_resources = cp.initiator_depth = 1;
	CHECK(!rdma_connect(id, &cp), "rdma_connect: %s", strerror(errno));
	if (ack_expect(ch, RDMA_CM_EVENT_CONNECT_RESPONSE, id))
		return 1;
	CHECK(!rdma_establish(id), "rdma_establish: %s", strerror(errno));
	usleep(100 * 1000);
	CHECK(!rdma_disconnect(id), "rdma_disconnect: %s", strerror(errno));
	if (ack_expect(ch, RDMA_CM_EVENT_DISCONNECTED, id))
		return 1;
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	return 0;
}

/* A fake server answering each request with garbage, a mangled or cut-short
 * REP, a mangled REJ or an out-of-place record: the client's id must get
 * its failure (or CONNECT_RESPONSE, for a mangled REP that is still valid)
 * within the CM timeout. */
static int fuzz_reply_server(int wfd)
{
	int s = plain_listener(wfd);
	uint32_t seed = FUZZ_SEED;

	if (s < 0)
		return 1;
	for (int i = 0; i < FUZZ_REPLIES; i++) {
		uint8_t junk[600];
		struct wire_msg m;
		int c = accept(s, NULL, NULL);
		size_t n = sizeof(m);

		CHECK(c >= 0, "accept: %s", strerror(errno));
		CHECK(raw_read(c, &m, EV_TIMEOUT_MS) == 1 && m.type == MSG_REQ, "round %d: no REQ", i);
		raw_record(&m, MSG_REP);
		switch (fuzz_next(&seed) % 6) {
		case 0:
			n = 1 + fuzz_next(&seed) % sizeof(junk);
			fuzz_bytes(&seed, junk, n);
			raw_send(c, junk, n);
			break;
		case 1:
			for (int k = 1 + fuzz_next(&seed) % 4; k > 0; k--)
				((uint8_t *)&m)[fuzz_next(&seed) % sizeof(m)] = (uint8_t)fuzz_next(&seed);
			raw_send(c, &m, n);
			break;
		case 2:
			m.type = MSG_REJ;
			m.status = (uint8_t)fuzz_next(&seed);
			m.pdata_len = (uint8_t)fuzz_next(&seed);
			raw_send(c, &m, n);
			break;
		case 3:
			m.type = fuzz_next(&seed) % 12;
			m.mtu = fuzz_next(&seed) % 8;
			m.qp_type = fuzz_next(&seed) % 8;
			raw_send(c, &m, n);
			break;
		case 4:
			m.type = MSG_DREQ;
			raw_send(c, &m, n);
			break;
		default:	/* cut short: only the CM timeout ends it */
			raw_send(c, &m, fuzz_next(&seed) % n);
			break;
		}
		raw_wait_closed(c, 5000);
		close(c);
	}
	close(s);
	return 0;
}

static int fuzz_reply_client(uint16_t port)
{
	struct rdma_event_channel *ch = channel_with_timeout("1500");

	if (!ch)
		return 1;
	for (int i = 0; i < FUZZ_REPLIES; i++) {
		struct pollfd p = { .fd = ch->fd, .events = POLLIN };
		struct rdma_cm_id *id;
		struct rdma_cm_event *ev;
		enum rdma_cm_event_type type;

		if (connect_no_qp(ch, &id, port))
			return 1;
		CHECK(poll(&p, 1, 4000) == 1, "round %d: no event within 4 s (CM timeout 1.5 s)", i);
		CHECK(!rdma_get_cm_event(ch, &ev), "rdma_get_cm_event: %s", strerror(errno));
		type = ev->event;
		CHECK(ev->id == id, "event for another id");
		rdma_ack_cm_event(ev);
		CHECK(type == RDMA_CM_EVENT_UNREACHABLE || type == RDMA_CM_EVENT_REJECTED ||
		      type == RDMA_CM_EVENT_CONNECT_ERROR || type == RDMA_CM_EVENT_CONNECT_RESPONSE,
		      "round %d: %s", i, rdma_event_str(type));
		rdma_destroy_id(id);
	}
	rdma_destroy_event_channel(ch);
	return 0;
}

/* --------------------------------------------------------------- harness */

typedef int (*server_fn)(int wfd);
typedef int (*client_fn)(uint16_t port);

static int wait_child(pid_t pid, const char *role)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return 1;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFSIGNALED(st))
		say("%s killed by signal %d", role, WTERMSIG(st));
	else
		say("%s exited %d", role, WEXITSTATUS(st));
	return 1;
}

static pid_t spawn_client(client_fn fn, uint16_t port)
{
	pid_t pid = fork();

	if (pid == 0) {
		alarm(30);
		_exit(fn(port));
	}
	return pid;
}

/* A server and a sequence of clients, each client run to its end in turn. */
static int run(const char *name, server_fn server, client_fn *clients, int nclients)
{
	int p[2], bad = 0;
	pid_t spid = -1;
	uint16_t port = 0;

	g_test = name;
	if (server) {
		if (pipe(p))
			return 1;
		spid = fork();
		if (spid == 0) {
			close(p[0]);
			alarm(40);
			_exit(server(p[1]));
		}
		close(p[1]);
		if (read(p[0], &port, sizeof(port)) != sizeof(port)) {
			say("server did not publish its port");
			bad = 1;
		}
		close(p[0]);
	}
	for (int i = 0; !bad && i < nclients; i++)
		bad |= wait_child(spawn_client(clients[i], port), "client");
	if (server) {
		if (bad)
			kill(spid, SIGKILL);
		bad |= wait_child(spid, "server");
	}
	printf("%s %s\n", bad ? "FAIL" : "PASS", name);
	fflush(stdout);
	return bad;
}

/* With an argument, only the tests whose names contain it run. */
int main(int argc, char **argv)
{
	int passed = 0, failed = 0;
	client_fn exchange[] = { exchange_client };
	client_fn reject[] = { reject_client };
	client_fn nolisten[] = { no_listener_client };
	client_fn silent[] = { silent_client };
	client_fn nodev[] = { no_device_client };
	client_fn nodevcancel[] = { no_device_cancel_client };
	client_fn survive[] = { survive_client_dies_connected, survive_client_dies_early, survive_client_normal };
	client_fn ud[] = { ud_client };
	client_fn chan[] = { channel_semantics };
	client_fn ep[] = { ep_client };
	client_fn same[] = { same_process };
	client_fn late[] = { connect_and_disconnect };
	client_fn hostile[] = { hostile_client_garbage_request, hostile_client_garbage_after_rep,
				hostile_client_garbage_established, connect_and_disconnect };
	client_fn badrep[] = { bad_reply_client };
	client_fn limits[] = { listener_limits };
	client_fn fuzzl[] = { fuzz_listener_client };
	client_fn fuzzr[] = { fuzz_reply_client };
	struct { const char *name; server_fn s; client_fn *c; int n; } tests[] = {
		{ "rc-connect-exchange-disconnect", exchange_server, exchange, 1 },
		{ "reject-with-private-data", reject_server, reject, 1 },
		{ "connect-no-listener-rejected-invalid-service", NULL, nolisten, 1 },
		{ "connect-silent-peer-unreachable-timeout", silent_server, silent, 1 },
		{ "connect-where-no-device-answers-pending-until-cm-timeout", NULL, nodev, 1 },
		{ "destroy-id-cancels-connect-where-no-device-answers", NULL, nodevcancel, 1 },
		{ "server-survives-dying-clients", survive_server, survive, 3 },
		{ "ud-sidr-exchange-and-send", ud_server, ud, 1 },
		{ "event-channel-semantics-and-enosys", NULL, chan, 1 },
		{ "sync-endpoints-create-ep-get-request", ep_server, ep, 1 },
		{ "both-ends-in-one-process", NULL, same, 1 },
		{ "listener-appearing-during-connect-is-reached", late_listener_server, late, 1 },
		{ "malformed-records-end-connections-listener-survives", hostile_server, hostile, 4 },
		{ "bad-reply-to-connect-unreachable-deadline-kept", bad_reply_server, badrep, 1 },
		{ "listener-caps-pending-and-pauses-out-of-descriptors", NULL, limits, 1 },
		{ "fuzz-listener-records-then-a-good-connection", fuzz_listener_server, fuzzl, 1 },
		{ "fuzz-replies-to-connect-each-id-gets-its-event", fuzz_reply_server, fuzzr, 1 },
	};

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (argc > 1 && !strstr(tests[i].name, argv[1]))
			continue;
		if (run(tests[i].name, tests[i].s, tests[i].c, tests[i].n))
			failed++;
		else
			passed++;
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
