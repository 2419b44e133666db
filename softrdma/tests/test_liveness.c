/*
 * Retransmission across processes of this host tells "lost" from "not read yet":
 * - a peer process that is alive but not scheduled (stopped with SIGSTOP here, as a busy
 *   machine starves it) for far longer than the QP's whole retry budget costs the QP nothing:
 *   its RDMA WRITE completes with success and the bytes land once the peer runs again;
 * - a peer process that is gone fails the QP with IBV_WC_RETRY_EXC_ERR at its first timeout,
 *   not after retry_cnt more.
 * - a peer whose thread polled its CQ (so its agent handed the same-host rings to that thread)
 *   and then stops polling without a word (it spins on memory for an RDMA WRITE) or blocks for
 *   a completion event still gets the packet: the agent takes the rings back (no lost wake-up).
 * Each case forks a peer before this process touches the device; the two talk through pipes.
 */
#include <infiniband/verbs.h>
#include "testlib.h"
#include <signal.h>
#include <time.h>
#include <sys/wait.h>
#include <poll.h>

struct info { uint32_t qpn, psn, rkey; uint64_t addr; union ibv_gid gid; };

struct side {
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	unsigned char *buf;
};

static void side_open(struct side *s)
{
	s->ctx = t_open_dev();
	s->pd = ibv_alloc_pd(s->ctx);
	s->ch = ibv_create_comp_channel(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 16, NULL, s->ch, 0);
	struct ibv_qp_init_attr ia = { .send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 } };
	s->qp = ibv_create_qp(s->pd, &ia);
	s->buf = calloc(1, 4096);
	s->mr = ibv_reg_mr(s->pd, s->buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!s->pd || !s->ch || !s->cq || !s->qp || !s->buf || !s->mr) {
		fprintf(stderr, "resource setup failed\n");
		exit(1);
	}
}

static struct info side_info(struct side *s, uint32_t psn)
{
	struct info i = { .qpn = s->qp->qp_num, .psn = psn, .rkey = s->mr->rkey, .addr = (uintptr_t)s->buf };
	ibv_query_gid(s->ctx, 1, 1, &i.gid);
	return i;
}

static int side_connect(struct side *s, const struct info *me, const struct info *peer, uint8_t timeout,
			uint8_t retry)
{
	struct t_conn c = { .access = IBV_ACCESS_REMOTE_WRITE, .rq_psn = peer->psn, .sq_psn = me->psn,
			    .rd_atomic = 1, .min_rnr_timer = 1, .hop_limit = 1, .timeout = timeout,
			    .retry_cnt = retry, .rnr_retry = 7 };
	return t_qp_init(s->qp, &c) || t_qp_rtr(s->qp, peer->qpn, &peer->gid, &c) || t_qp_rts(s->qp, &c);
}

/* Polls the empty CQ for ms milliseconds (so the agent hands the rings to this thread). */
static void poll_empty(struct side *s, unsigned ms)
{
	struct ibv_wc wc;
	for (int64_t end = now_ms() + ms; now_ms() < end;)
		if (ibv_poll_cq(s->cq, 1, &wc) != 0) {
			fprintf(stderr, "peer: an unexpected completion\n");
			_exit(1);
		}
}

/* 'W': poll, then stop polling, say so ('S') and spin on the buffer (as ib_write_lat's target
 * does) until the parent's WRITE shows, for at most 3 s. 1: it showed. */
static unsigned char stop_and_spin(struct side *s, int wr, const unsigned char *want, size_t n)
{
	poll_empty(s, 300);
	xwrite(wr, "S", 1);
	for (int64_t end = now_ms() + 3000; now_ms() < end;) {
		__atomic_signal_fence(__ATOMIC_SEQ_CST); /* read the buffer afresh: the agent writes it */
		if (!memcmp(s->buf, want, n))
			return 1;
	}
	return 0;
}

/* 'E': post a receive, poll, then arm the CQ's notification, say so ('S') and block for the
 * event (at most 3 s). 1: the event came and the receive completed with the parent's bytes. */
static unsigned char stop_and_block(struct side *s, int wr, const unsigned char *want, size_t n)
{
	struct ibv_sge sge = { (uintptr_t)s->buf, (uint32_t)n, s->mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1 }, *bad;
	if (ibv_post_recv(s->qp, &rwr, &bad))
		return 0;
	poll_empty(s, 300);
	if (ibv_req_notify_cq(s->cq, 0))
		return 0;
	xwrite(wr, "S", 1);
	struct pollfd pfd = { .fd = s->ch->fd, .events = POLLIN };
	if (poll(&pfd, 1, 3000) != 1)
		return 0;
	struct ibv_cq *cq;
	void *cq_ctx;
	if (ibv_get_cq_event(s->ch, &cq, &cq_ctx))
		return 0;
	ibv_ack_cq_events(cq, 1);
	struct ibv_wc wc;
	return ibv_poll_cq(s->cq, 1, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 9 &&
	       wc.byte_len == n && !memcmp(s->buf, want, n);
}

/* The peer: connects, then answers one byte per request from the parent until the parent closes
 * the pipe or kills it: 'W' and 'E' as above; any other: whether its buffer holds the parent's
 * pattern. */
static void peer_main(int rd, int wr)
{
	struct side s;
	side_open(&s);
	struct info me = side_info(&s, 0x200), them;
	xwrite(wr, &me, sizeof(me));
	xread(rd, &them, sizeof(them));
	unsigned char ok = side_connect(&s, &me, &them, 14, 7) == 0;
	xwrite(wr, &ok, 1);
	unsigned char want[64], req;
	t_fill(want, sizeof(want), 28);
	while (read(rd, &req, 1) == 1) {
		unsigned char same = req == 'W'   ? stop_and_spin(&s, wr, want, sizeof(want))
				     : req == 'E' ? stop_and_block(&s, wr, want, sizeof(want))
						  : memcmp(s.buf, want, sizeof(want)) == 0;
		xwrite(wr, &same, 1);
	}
	_exit(0);
}

/* Forks a peer and connects to it with the given timeout and retry count. */
static pid_t start_pair(struct side *s, struct info *peer, int *rd, int *wr, uint8_t timeout, uint8_t retry)
{
	int to_peer[2], from_peer[2];
	if (pipe(to_peer) || pipe(from_peer))
		exit(1);
	pid_t pid = fork();
	if (pid == 0) {
		close(to_peer[1]);
		close(from_peer[0]);
		peer_main(to_peer[0], from_peer[1]);
	}
	close(to_peer[0]);
	close(from_peer[1]);
	*rd = from_peer[0];
	*wr = to_peer[1];
	side_open(s);
	xread(*rd, peer, sizeof(*peer));
	struct info me = side_info(s, 0x100);
	xwrite(*wr, &me, sizeof(me));
	CHECK_EQ(side_connect(s, &me, peer, timeout, retry), 0, "connect");
	unsigned char ok = 0;
	xread(*rd, &ok, 1);
	CHECK_EQ(ok, 1, "the peer connected");
	return pid;
}

static int post_op(struct side *s, const struct info *peer, enum ibv_wr_opcode op)
{
	t_fill(s->buf, 64, 28);
	struct ibv_sge sge = { (uintptr_t)s->buf, 64, s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	wr.wr.rdma.remote_addr = peer->addr;
	wr.wr.rdma.rkey = peer->rkey;
	return ibv_post_send(s->qp, &wr, &bad);
}

static int post_write(struct side *s, const struct info *peer)
{
	return post_op(s, peer, IBV_WR_RDMA_WRITE);
}

/* Polls for one completion until deadline_ms (now_ms clock): 1 with *wc, or 0. */
static int wait_wc_until(struct ibv_cq *cq, struct ibv_wc *wc, int64_t deadline_ms)
{
	while (now_ms() < deadline_ms) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n;
		usleep(100);
	}
	return 0;
}

static void side_close(struct side *s)
{
	ibv_destroy_qp(s->qp);
	ibv_dereg_mr(s->mr);
	ibv_destroy_cq(s->cq);
	ibv_destroy_comp_channel(s->ch);
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx);
	free(s->buf);
}

/* timeout 14 (67 ms), retry_cnt 1: the budget is spent in about 0.2 s; the peer sleeps 1.5 s */
static void starved_peer_costs_no_retry(void)
{
	struct side s;
	struct info peer;
	int rd, wr;
	pid_t pid = start_pair(&s, &peer, &rd, &wr, 14, 1);
	CHECK_EQ(kill(pid, SIGSTOP), 0, "stop the peer");
	int st;
	/* kill() only queues the stop: wait until every thread of the peer has stopped */
	CHECK(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st), "the peer stopped");
	CHECK_EQ(post_write(&s, &peer), 0, "post the WRITE");
	usleep(1500000);
	struct ibv_wc wc;
	int n = ibv_poll_cq(s.cq, 1, &wc);
	CHECK(n == 0, "a completion while the peer was stopped: status %d (%s)", n ? (int)wc.status : 0,
	      n ? ibv_wc_status_str(wc.status) : "");
	CHECK_EQ(kill(pid, SIGCONT), 0, "let the peer run");
	if (n == 0) {
		n = wait_wc_until(s.cq, &wc, now_ms() + 5000);
		CHECK_EQ(n, 1, "the WRITE completes once the peer runs");
	}
	if (n == 1)
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 7, "status %s, wr_id %llu",
		      ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id);
	unsigned char req = 1, same = 0;
	xwrite(wr, &req, 1);
	xread(rd, &same, 1);
	CHECK_EQ(same, 1, "the peer's buffer holds the written bytes");
	close(wr);
	waitpid(pid, &st, 0);
	close(rd);
	side_close(&s);
}

/* timeout 18 (1.07 s), retry_cnt 7: after the budget that is 8.6 s; a gone peer fails it at the
 * first timeout */
static void gone_peer_fails_at_once(void)
{
	struct side s;
	struct info peer;
	int rd, wr;
	pid_t pid = start_pair(&s, &peer, &rd, &wr, 18, 7);
	/* one exchange first, so this process has used the peer's ring */
	CHECK_EQ(post_write(&s, &peer), 0, "post the first WRITE");
	struct ibv_wc wc;
	CHECK_EQ(wait_wc_until(s.cq, &wc, now_ms() + 5000), 1, "the first WRITE completes");
	CHECK_EQ(wc.status, IBV_WC_SUCCESS, "its status");
	kill(pid, SIGKILL);
	int st;
	waitpid(pid, &st, 0);
	usleep(200000);
	int64_t t0 = now_ms();
	CHECK_EQ(post_write(&s, &peer), 0, "post the WRITE to the gone peer");
	int n = wait_wc_until(s.cq, &wc, t0 + 4000);
	CHECK_EQ(n, 1, "a completion within 4 s (one timeout), not after the 8.6 s of retries");
	if (n == 1)
		CHECK(wc.status == IBV_WC_RETRY_EXC_ERR, "status %s", ibv_wc_status_str(wc.status));
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	CHECK(ibv_query_qp(s.qp, &a, IBV_QP_STATE, &ia) == 0 && a.qp_state == IBV_QPS_ERR, "the QP is in error");
	close(wr);
	close(rd);
	side_close(&s);
}

/* The peer's thread polls its empty CQ for 300 ms, so its agent hands it the same-host rings,
 * then stops polling: 'W' spins on memory (no word to the agent), 'E' arms the CQ and blocks for
 * the event. The parent's WRITE (or SEND) then reaches only the peer's agent, which must take the
 * rings back: the operation completes, the bytes land, the event comes. */
static void stopped_poller_loses_nothing(char how)
{
	struct side s;
	struct info peer;
	int rd, wr;
	pid_t pid = start_pair(&s, &peer, &rd, &wr, 18, 7);
	unsigned char req = (unsigned char)how, said = 0, ok = 0;
	xwrite(wr, &req, 1);
	xread(rd, &said, 1);
	CHECK_EQ(said, 'S', "the peer stopped polling");
	CHECK_EQ(post_op(&s, &peer, how == 'W' ? IBV_WR_RDMA_WRITE : IBV_WR_SEND), 0, "post");
	struct ibv_wc wc;
	int n = wait_wc_until(s.cq, &wc, now_ms() + 5000);
	CHECK_EQ(n, 1, how == 'W' ? "the WRITE to a memory spinner completes" : "the SEND to a blocked poller completes");
	if (n == 1)
		CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == 7, "status %s", ibv_wc_status_str(wc.status));
	xread(rd, &ok, 1);
	CHECK_EQ(ok, 1, how == 'W' ? "the bytes landed in the spinner's buffer"
				   : "the blocked peer got the event and the receive with the bytes");
	close(wr);
	int st;
	waitpid(pid, &st, 0);
	close(rd);
	side_close(&s);
}

int main(void)
{
	if (getenv("SOFTRDMA_SHM") && !strcmp(getenv("SOFTRDMA_SHM"), "0")) {
		printf("0 passed, 0 failed (the same-host carrier is off)\n");
		return 0;
	}
	starved_peer_costs_no_retry();
	gone_peer_fails_at_once();
	stopped_poller_loses_nothing('W');
	stopped_poller_loses_nothing('E');
	return t_report();
}
