/*
 * The direct post of the in-process path: a send WR to a QP of this process runs from the WR
 * itself when the send queue is empty, and goes through the send queue otherwise. These tests
 * pin what both must agree on: order with WQEs already queued, signaled and unsignaled
 * completions, completion to the right CQ with wr_id, opcode and byte_len, RNR, error
 * statuses and the flush after them, QP state, keys that changed between two posts, and a
 * list posted whole that fails its checks.
 * Runs against whichever libibverbs.so.1 LD_LIBRARY_PATH selects (softrdma in `make check`).
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "testlib.h"

#define BUF 65536

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cqs, *cqr; /* qa's send CQ and receive CQ */
	struct ibv_cq *cqb;       /* qb's, both */
	struct ibv_qp *qa, *qb;
	unsigned char *a, *b;
	struct ibv_mr *ma, *mb;
	union ibv_gid gid;
};

static const struct t_conn conn = {
	.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	.rq_psn = 100, .sq_psn = 100, .rd_atomic = 4, .min_rnr_timer = 1, .hop_limit = 64,
	.timeout = 12, .retry_cnt = 7, .rnr_retry = 7 };

static const int ACC = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC;

/* qa (send CQ cqs, receive CQ cqr) and qb (cqb) of type t, connected with c; sig_all for qa */
static void env_up(struct env *e, enum ibv_qp_type t, const struct t_conn *c, int sig_all)
{
	memset(e, 0, sizeof(*e));
	e->ctx = t_open_dev();
	e->pd = ibv_alloc_pd(e->ctx);
	e->cqs = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	e->cqr = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	e->cqb = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	e->a = aligned_alloc(4096, BUF);
	e->b = aligned_alloc(4096, BUF);
	memset(e->a, 0, BUF);
	memset(e->b, 0, BUF);
	e->ma = ibv_reg_mr(e->pd, e->a, BUF, ACC);
	e->mb = ibv_reg_mr(e->pd, e->b, BUF, ACC);
	ibv_query_gid(e->ctx, 1, 1, &e->gid);
	struct ibv_qp_init_attr ia = { .send_cq = e->cqs, .recv_cq = e->cqr, .qp_type = t, .sq_sig_all = sig_all,
				       .cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 4,
						.max_recv_sge = 4, .max_inline_data = 64 } };
	e->qa = ibv_create_qp(e->pd, &ia);
	ia.send_cq = ia.recv_cq = e->cqb;
	ia.sq_sig_all = 0;
	e->qb = ibv_create_qp(e->pd, &ia);
	if (!e->pd || !e->cqs || !e->cqr || !e->cqb || !e->ma || !e->mb || !e->qa || !e->qb ||
	    t_connect(e->qa, e->qb, &e->gid, c)) {
		fprintf(stderr, "setup failed: %s\n", strerror(errno));
		exit(2);
	}
}

static void env_down(struct env *e)
{
	ibv_destroy_qp(e->qa);
	ibv_destroy_qp(e->qb);
	if (e->ma)
		ibv_dereg_mr(e->ma);
	ibv_dereg_mr(e->mb);
	ibv_destroy_cq(e->cqs);
	ibv_destroy_cq(e->cqr);
	ibv_destroy_cq(e->cqb);
	ibv_dealloc_pd(e->pd);
	ibv_close_device(e->ctx);
	free(e->a);
	free(e->b);
}

static void wr_init(struct ibv_send_wr *w, struct ibv_sge *s, enum ibv_wr_opcode op, void *addr, uint32_t len,
		    uint32_t lkey, void *raddr, uint32_t rkey, uint64_t id, unsigned flags)
{
	*s = (struct ibv_sge){ (uintptr_t)addr, len, lkey };
	*w = (struct ibv_send_wr){ .wr_id = id, .sg_list = s, .num_sge = 1, .opcode = op, .send_flags = flags };
	w->wr.rdma.remote_addr = (uintptr_t)raddr;
	w->wr.rdma.rkey = rkey;
	w->imm_data = htonl(0x5eed0001);
}

static int post1(struct ibv_qp *q, enum ibv_wr_opcode op, void *addr, uint32_t len, uint32_t lkey, void *raddr,
		 uint32_t rkey, uint64_t id, unsigned flags)
{
	struct ibv_sge s;
	struct ibv_send_wr w, *bad;
	wr_init(&w, &s, op, addr, len, lkey, raddr, rkey, id, flags);
	return ibv_post_send(q, &w, &bad);
}

static int post_recv(struct ibv_qp *q, void *addr, uint32_t len, uint32_t lkey, uint64_t id)
{
	struct ibv_sge s = { (uintptr_t)addr, len, lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bad;
	return ibv_post_recv(q, &w, &bad);
}

static bool zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static int qp_state(struct ibv_qp *q)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	return ibv_query_qp(q, &a, IBV_QP_STATE, &ia) ? -1 : (int)a.qp_state;
}

/* Completions now, without waiting: the count polled (at most n) */
static int poll_now(struct ibv_cq *cq, struct ibv_wc *wc, int n)
{
	return ibv_poll_cq(cq, n, wc);
}

/* A WR posted behind a WQE that waits (an RNR'd SEND) runs after it, never before; once the
 * queue has drained, the next post runs at once again. */
static void test_order(void)
{
	struct env e;
	env_up(&e, IBV_QPT_RC, &conn, 0);
	struct ibv_wc wc[4];
	t_fill(e.a, 4096, 1);
	/* a list: WRITE, SEND (no receive posted: RNR), WRITE */
	struct ibv_sge s[3];
	struct ibv_send_wr w[3], *bad;
	wr_init(&w[0], &s[0], IBV_WR_RDMA_WRITE, e.a, 32, e.ma->lkey, e.b, e.mb->rkey, 1, IBV_SEND_SIGNALED);
	wr_init(&w[1], &s[1], IBV_WR_SEND, e.a + 32, 32, e.ma->lkey, NULL, 0, 2, IBV_SEND_SIGNALED);
	wr_init(&w[2], &s[2], IBV_WR_RDMA_WRITE, e.a + 64, 32, e.ma->lkey, e.b + 64, e.mb->rkey, 3, IBV_SEND_SIGNALED);
	w[0].next = &w[1];
	w[1].next = &w[2];
	CHECK_EQ(ibv_post_send(e.qa, &w[0], &bad), 0, "post the list");
	CHECK(!memcmp(e.b, e.a, 32), "the first WRITE ran in the post");
	CHECK(zero(e.b + 64, 32), "the WRITE behind the waiting SEND did not overtake it");
	CHECK_EQ(poll_now(e.cqs, wc, 4), 1, "one completion so far");
	CHECK(wc[0].wr_id == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_RDMA_WRITE,
	      "first WRITE's completion: wr_id %llu status %d", (unsigned long long)wc[0].wr_id, wc[0].status);
	/* a single WR while the queue holds a WQE: queued behind it */
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE, e.a + 96, 32, e.ma->lkey, e.b + 96, e.mb->rkey, 4,
		       IBV_SEND_SIGNALED), 0, "post behind the queue");
	CHECK(zero(e.b + 96, 32), "a single WR does not overtake the queue either");
	CHECK_EQ(poll_now(e.cqs, wc, 4), 0, "no completion while the SEND waits");
	/* the receive: the SEND goes on its next try, then the WRITEs, in order */
	memset(e.b + 1024, 0, 64);
	CHECK_EQ(post_recv(e.qb, e.b + 1024, 64, e.mb->lkey, 9), 0, "post recv");
	for (uint64_t id = 2; id <= 4; id++) {
		wc[0].wr_id = 0;
		wc[0].status = -1;
		CHECK(t_wait_wc(e.cqs, &wc[0]) && wc[0].wr_id == id && wc[0].status == IBV_WC_SUCCESS &&
		      wc[0].opcode == (id == 2 ? IBV_WC_SEND : IBV_WC_RDMA_WRITE),
		      "completion %llu in order: got wr_id %llu status %d opcode %d", (unsigned long long)id,
		      (unsigned long long)wc[0].wr_id, wc[0].status, wc[0].opcode);
	}
	CHECK(t_wait_wc(e.cqb, &wc[0]) && wc[0].wr_id == 9 && wc[0].opcode == IBV_WC_RECV && wc[0].byte_len == 32 &&
	      wc[0].qp_num == e.qb->qp_num, "the receive completion");
	CHECK(!memcmp(e.b + 1024, e.a + 32, 32) && !memcmp(e.b + 64, e.a + 64, 64), "data after the wait");
	CHECK_EQ(poll_now(e.cqr, wc, 4), 0, "nothing on qa's receive CQ");
	/* drained: the next post runs in the post again */
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE, e.a + 128, 32, e.ma->lkey, e.b + 128, e.mb->rkey, 5,
		       IBV_SEND_SIGNALED), 0, "post after the drain");
	CHECK(!memcmp(e.b + 128, e.a + 128, 32), "ran in the post");
	CHECK(poll_now(e.cqs, wc, 4) == 1 && wc[0].wr_id == 5 && wc[0].status == IBV_WC_SUCCESS,
	      "its completion is there when the post returns");
	env_down(&e);

	/* a WQE that waits for its retransmission timer (the peer was not listening), not for an
	 * RNR: the peer listens again, and a WR posted then still runs after it */
	struct t_conn c = conn;
	c.timeout = 14; /* ~67 ms: the retransmission comes long after the second post */
	env_up(&e, IBV_QPT_RC, &c, 0);
	t_fill(e.a, 4096, 11);
	struct ibv_qp_attr ra = { .qp_state = IBV_QPS_RESET };
	CHECK_EQ(ibv_modify_qp(e.qb, &ra, IBV_QP_STATE), 0, "peer to RESET");
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 32, e.ma->lkey, e.b, e.mb->rkey, 6, IBV_SEND_SIGNALED), 0,
		 "post to a peer not listening");
	CHECK(zero(e.b, 32), "not delivered");
	CHECK_EQ(t_qp_up(e.qb, IBV_QPS_RTR, e.qa->qp_num, &e.gid, &c, NULL), 0, "peer listens again");
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE, e.a + 32, 32, e.ma->lkey, e.b + 32, e.mb->rkey, 7,
		       IBV_SEND_SIGNALED), 0, "post behind the waiting WQE");
	for (uint64_t id = 6; id <= 7; id++) {
		wc[0].wr_id = 0;
		wc[0].status = -1;
		CHECK(t_wait_wc(e.cqs, &wc[0]) && wc[0].wr_id == id && wc[0].status == IBV_WC_SUCCESS,
		      "completion %llu in order: got wr_id %llu status %d", (unsigned long long)id,
		      (unsigned long long)wc[0].wr_id, wc[0].status);
	}
	CHECK(!memcmp(e.b, e.a, 64), "both WRITEs' data");
	env_down(&e);
}

/* Signaled and unsignaled WRs, sq_sig_all, every opcode's completion (CQ, wr_id, opcode,
 * byte_len, qp_num), the receive side's, and inline data. */
static void test_completions(void)
{
	struct env e;
	env_up(&e, IBV_QPT_RC, &conn, 0);
	struct ibv_wc wc[4];
	t_fill(e.a, 4096, 2);
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 8, e.ma->lkey, e.b, e.mb->rkey, 10, 0), 0, "unsignaled write");
	CHECK(!memcmp(e.b, e.a, 8), "unsignaled write's data");
	CHECK_EQ(poll_now(e.cqs, wc, 4), 0, "no completion for an unsignaled WR");
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE, e.a + 8, 8, e.ma->lkey, e.b + 8, e.mb->rkey, 11, IBV_SEND_SIGNALED), 0,
		 "signaled write");
	CHECK(poll_now(e.cqs, wc, 4) == 1 && wc[0].wr_id == 11 && wc[0].opcode == IBV_WC_RDMA_WRITE &&
	      wc[0].qp_num == e.qa->qp_num && wc[0].byte_len == 0, "one completion, the signaled WR's");
	/* READ: byte_len is the length read */
	t_fill(e.b + 4096, 100, 3);
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_READ, e.a + 4096, 100, e.ma->lkey, e.b + 4096, e.mb->rkey, 12,
		       IBV_SEND_SIGNALED), 0, "read");
	CHECK(poll_now(e.cqs, wc, 4) == 1 && wc[0].wr_id == 12 && wc[0].opcode == IBV_WC_RDMA_READ &&
	      wc[0].byte_len == 100 && wc[0].status == IBV_WC_SUCCESS, "read's completion (byte_len %u)", wc[0].byte_len);
	CHECK(!memcmp(e.a + 4096, e.b + 4096, 100), "read's data");
	/* atomics: 8 bytes, the original value */
	uint64_t *t = (uint64_t *)(e.b + 8192);
	*t = 1000;
	struct ibv_sge s = { (uintptr_t)(e.a + 8192), 8, e.ma->lkey };
	struct ibv_send_wr aw = { .wr_id = 13, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	aw.wr.atomic.remote_addr = (uintptr_t)t;
	aw.wr.atomic.rkey = e.mb->rkey;
	aw.wr.atomic.compare_add = 5;
	CHECK_EQ(ibv_post_send(e.qa, &aw, &bad), 0, "faa");
	CHECK(poll_now(e.cqs, wc, 4) == 1 && wc[0].wr_id == 13 && wc[0].opcode == IBV_WC_FETCH_ADD &&
	      wc[0].byte_len == 8, "faa's completion");
	CHECK(*(uint64_t *)(e.a + 8192) == 1000 && *t == 1005, "faa's values");
	aw.wr_id = 14;
	aw.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	aw.wr.atomic.compare_add = 1005;
	aw.wr.atomic.swap = 77;
	CHECK_EQ(ibv_post_send(e.qa, &aw, &bad), 0, "cas");
	CHECK(poll_now(e.cqs, wc, 4) == 1 && wc[0].wr_id == 14 && wc[0].opcode == IBV_WC_COMP_SWAP &&
	      wc[0].byte_len == 8, "cas's completion");
	CHECK(*(uint64_t *)(e.a + 8192) == 1005 && *t == 77, "cas's values");
	/* SEND with immediate: the send completion on qa's send CQ, the receive on qb's CQ */
	CHECK_EQ(post_recv(e.qb, e.b + 12288, 64, e.mb->lkey, 15), 0, "recv");
	CHECK_EQ(post1(e.qa, IBV_WR_SEND_WITH_IMM, e.a, 24, e.ma->lkey, NULL, 0, 16, IBV_SEND_SIGNALED), 0,
		 "send with immediate");
	CHECK(poll_now(e.cqs, wc, 4) == 1 && wc[0].wr_id == 16 && wc[0].opcode == IBV_WC_SEND, "send's completion");
	CHECK(poll_now(e.cqb, wc, 4) == 1 && wc[0].wr_id == 15 && wc[0].opcode == IBV_WC_RECV &&
	      wc[0].byte_len == 24 && (wc[0].wc_flags & IBV_WC_WITH_IMM) && wc[0].imm_data == htonl(0x5eed0001) &&
	      wc[0].qp_num == e.qb->qp_num, "receive's completion");
	CHECK(!memcmp(e.b + 12288, e.a, 24), "send's data");
	CHECK_EQ(poll_now(e.cqr, wc, 4), 0, "nothing on qa's receive CQ");
	/* WRITE with immediate consumes a receive */
	CHECK_EQ(post_recv(e.qb, e.b + 12288, 64, e.mb->lkey, 17), 0, "recv");
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE_WITH_IMM, e.a + 64, 40, e.ma->lkey, e.b + 16384, e.mb->rkey, 18,
		       IBV_SEND_SIGNALED), 0, "write with immediate");
	CHECK(poll_now(e.cqs, wc, 4) == 1 && wc[0].wr_id == 18 && wc[0].opcode == IBV_WC_RDMA_WRITE,
	      "write with immediate's completion");
	CHECK(poll_now(e.cqb, wc, 4) == 1 && wc[0].wr_id == 17 && wc[0].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
	      wc[0].byte_len == 40, "its receive completion");
	CHECK(!memcmp(e.b + 16384, e.a + 64, 40), "its data");
	/* inline: the data as it was at the post */
	unsigned char src[48];
	t_fill(src, sizeof(src), 4);
	unsigned char ref[48];
	memcpy(ref, src, sizeof(ref));
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE, src, 48, 0, e.b + 20480, e.mb->rkey, 19,
		       IBV_SEND_SIGNALED | IBV_SEND_INLINE), 0, "inline write (no key)");
	memset(src, 0, sizeof(src));
	CHECK(poll_now(e.cqs, wc, 4) == 1 && wc[0].wr_id == 19 && wc[0].status == IBV_WC_SUCCESS,
	      "inline write's completion");
	CHECK(!memcmp(e.b + 20480, ref, 48), "inline data");
	env_down(&e);
	/* sq_sig_all: every WR completes */
	env_up(&e, IBV_QPT_RC, &conn, 1);
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 8, e.ma->lkey, e.b, e.mb->rkey, 20, 0), 0, "write, sq_sig_all");
	CHECK(poll_now(e.cqs, wc, 4) == 1 && wc[0].wr_id == 20 && wc[0].status == IBV_WC_SUCCESS,
	      "sq_sig_all completes an unsignaled WR");
	env_down(&e);
}

/* A key that worked for one post and changed before the next: deregistered or re-registered
 * without the right. The second post fails with the status a NIC gives, and the QP's later
 * WRs are flushed. */
static void test_keys_changed(void)
{
	struct env e;
	struct ibv_wc wc[4];
	/* lkey deregistered */
	env_up(&e, IBV_QPT_RC, &conn, 0);
	struct ibv_mr *m = ibv_reg_mr(e.pd, e.a, 4096, IBV_ACCESS_LOCAL_WRITE);
	uint32_t lkey = m->lkey;
	t_fill(e.a, 64, 5);
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 16, lkey, e.b, e.mb->rkey, 30, IBV_SEND_SIGNALED), 0, "write");
	CHECK(poll_now(e.cqs, wc, 4) == 1 && wc[0].status == IBV_WC_SUCCESS, "write with the lkey");
	CHECK_EQ(ibv_dereg_mr(m), 0, "dereg");
	memset(e.b, 0, 64);
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 16, lkey, e.b, e.mb->rkey, 31, IBV_SEND_SIGNALED), 0,
		 "write with the stale lkey");
	wc[0].status = -1;
	CHECK(t_wait_wc(e.cqs, &wc[0]) && wc[0].wr_id == 31 && wc[0].status == IBV_WC_LOC_PROT_ERR,
	      "stale lkey: LOC_PROT_ERR (status %d)", wc[0].status);
	CHECK(zero(e.b, 64), "nothing written");
	CHECK_EQ(qp_state(e.qa), IBV_QPS_ERR, "the QP is in ERR");
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 16, e.ma->lkey, e.b, e.mb->rkey, 32, IBV_SEND_SIGNALED), 0,
		 "post in ERR");
	CHECK(t_wait_wc(e.cqs, &wc[0]) && wc[0].wr_id == 32 && wc[0].status == IBV_WC_WR_FLUSH_ERR,
	      "flushed in ERR (status %d)", wc[0].status);
	CHECK(zero(e.b, 64), "nothing written in ERR");
	env_down(&e);
	/* rkey deregistered */
	env_up(&e, IBV_QPT_RC, &conn, 0);
	struct ibv_mr *r = ibv_reg_mr(e.pd, e.b + 4096, 4096, ACC);
	uint32_t rkey = r->rkey;
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 16, e.ma->lkey, e.b + 4096, rkey, 33, IBV_SEND_SIGNALED), 0,
		 "write");
	CHECK(poll_now(e.cqs, wc, 4) == 1 && wc[0].status == IBV_WC_SUCCESS, "write with the rkey");
	CHECK_EQ(ibv_dereg_mr(r), 0, "dereg");
	memset(e.b + 4096, 0, 64);
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 16, e.ma->lkey, e.b + 4096, rkey, 34, IBV_SEND_SIGNALED), 0,
		 "write with the stale rkey");
	wc[0].status = -1;
	CHECK(t_wait_wc(e.cqs, &wc[0]) && wc[0].wr_id == 34 && wc[0].status == IBV_WC_REM_ACCESS_ERR,
	      "stale rkey: REM_ACCESS_ERR (status %d)", wc[0].status);
	CHECK(zero(e.b + 4096, 64), "nothing written");
	CHECK_EQ(qp_state(e.qa), IBV_QPS_ERR, "the requester is in ERR");
	CHECK_EQ(qp_state(e.qb), IBV_QPS_ERR, "the responder is in ERR");
	env_down(&e);
	/* re-registered without remote write */
	env_up(&e, IBV_QPT_RC, &conn, 0);
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 16, e.ma->lkey, e.b, e.mb->rkey, 35, IBV_SEND_SIGNALED), 0,
		 "write");
	CHECK(poll_now(e.cqs, wc, 4) == 1 && wc[0].status == IBV_WC_SUCCESS, "write before the rereg");
	CHECK_EQ(ibv_rereg_mr(e.mb, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ), 0, "rereg: no remote write");
	memset(e.b, 0, 64);
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 16, e.ma->lkey, e.b, e.mb->rkey, 36, IBV_SEND_SIGNALED), 0,
		 "write after the rereg");
	wc[0].status = -1;
	CHECK(t_wait_wc(e.cqs, &wc[0]) && wc[0].wr_id == 36 && wc[0].status == IBV_WC_REM_ACCESS_ERR,
	      "rereg'd rkey: REM_ACCESS_ERR (status %d)", wc[0].status);
	CHECK(zero(e.b, 64), "nothing written");
	env_down(&e);
	/* a READ into a region without local write */
	env_up(&e, IBV_QPT_RC, &conn, 0);
	struct ibv_mr *ro = ibv_reg_mr(e.pd, e.a + 8192, 4096, 0);
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_READ, e.a + 8192, 16, ro->lkey, e.b, e.mb->rkey, 37, IBV_SEND_SIGNALED), 0,
		 "read into a read-only region");
	wc[0].status = -1;
	CHECK(t_wait_wc(e.cqs, &wc[0]) && wc[0].wr_id == 37 && wc[0].status == IBV_WC_LOC_PROT_ERR,
	      "READ into a read-only region: LOC_PROT_ERR (status %d)", wc[0].status);
	ibv_dereg_mr(ro);
	env_down(&e);
}

/* Each thread keeps its own copies of the keys it resolved: a key another thread deregistered
 * fails in this one too. */
struct poster {
	struct env *e;
	uint32_t lkey, rkey;
	uint64_t id;
	int rc;
};

static void *post_from_thread(void *arg)
{
	struct poster *p = arg;
	p->rc = post1(p->e->qa, IBV_WR_RDMA_WRITE, p->e->a, 16, p->lkey, p->e->b + 4096, p->rkey, p->id,
		      IBV_SEND_SIGNALED);
	return NULL;
}

static void test_keys_other_thread(void)
{
	struct env e;
	struct ibv_wc wc[2];
	env_up(&e, IBV_QPT_RC, &conn, 0);
	struct ibv_mr *r = ibv_reg_mr(e.pd, e.b + 4096, 4096, ACC);
	t_fill(e.a, 16, 9);
	struct poster p = { &e, e.ma->lkey, r->rkey, 60, -1 };
	pthread_t t;
	pthread_create(&t, NULL, post_from_thread, &p);
	pthread_join(t, NULL);
	CHECK_EQ(p.rc, 0, "post from a thread");
	CHECK(t_wait_wc(e.cqs, &wc[0]) && wc[0].wr_id == 60 && wc[0].status == IBV_WC_SUCCESS,
	      "the thread's write (status %d)", wc[0].status);
	CHECK(!memcmp(e.b + 4096, e.a, 16), "its data");
	/* the same thread (its record is reused by the next thread) after the main thread's dereg */
	CHECK_EQ(ibv_dereg_mr(r), 0, "dereg in the main thread");
	memset(e.b + 4096, 0, 16);
	p.id = 61;
	p.rc = -1;
	pthread_create(&t, NULL, post_from_thread, &p);
	pthread_join(t, NULL);
	CHECK_EQ(p.rc, 0, "post from a thread again");
	wc[0].status = -1;
	CHECK(t_wait_wc(e.cqs, &wc[0]) && wc[0].wr_id == 61 && wc[0].status == IBV_WC_REM_ACCESS_ERR,
	      "the deregistered rkey from a thread: REM_ACCESS_ERR (status %d)", wc[0].status);
	CHECK(zero(e.b + 4096, 16), "nothing written");
	env_down(&e);
}

/* RNR with no retries left, UC's message nobody takes, a peer not listening, and a QP out of
 * RTS (SQD): each as the send queue answers it. */
static void test_states(void)
{
	struct env e;
	struct ibv_wc wc[4];
	struct t_conn c = conn;
	c.rnr_retry = 0;
	env_up(&e, IBV_QPT_RC, &c, 0);
	CHECK_EQ(post1(e.qa, IBV_WR_SEND, e.a, 8, e.ma->lkey, NULL, 0, 40, IBV_SEND_SIGNALED), 0, "send, no receive");
	wc[0].status = -1;
	CHECK(t_wait_wc(e.cqs, &wc[0]) && wc[0].wr_id == 40 && wc[0].status == IBV_WC_RNR_RETRY_EXC_ERR,
	      "RNR with rnr_retry 0: RNR_RETRY_EXC_ERR (status %d)", wc[0].status);
	CHECK_EQ(qp_state(e.qa), IBV_QPS_ERR, "the requester is in ERR");
	env_down(&e);
	/* UC: a SEND nobody takes completes and is gone */
	env_up(&e, IBV_QPT_UC, &conn, 0);
	CHECK_EQ(post1(e.qa, IBV_WR_SEND, e.a, 8, e.ma->lkey, NULL, 0, 41, IBV_SEND_SIGNALED), 0, "UC send");
	CHECK(poll_now(e.cqs, wc, 4) == 1 && wc[0].wr_id == 41 && wc[0].status == IBV_WC_SUCCESS,
	      "UC send with no receive completes");
	CHECK_EQ(post_recv(e.qb, e.b, 64, e.mb->lkey, 42), 0, "recv");
	t_fill(e.a, 16, 6);
	CHECK_EQ(post1(e.qa, IBV_WR_SEND, e.a, 16, e.ma->lkey, NULL, 0, 43, IBV_SEND_SIGNALED), 0, "UC send");
	CHECK(poll_now(e.cqb, wc, 4) == 1 && wc[0].wr_id == 42 && wc[0].byte_len == 16, "the next one is received");
	CHECK(!memcmp(e.b, e.a, 16), "UC data");
	env_down(&e);
	/* SQD: posted, not executed until RTS */
	env_up(&e, IBV_QPT_RC, &conn, 0);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_SQD };
	CHECK_EQ(ibv_modify_qp(e.qa, &a, IBV_QP_STATE), 0, "to SQD");
	t_fill(e.a, 16, 7);
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 16, e.ma->lkey, e.b, e.mb->rkey, 44, IBV_SEND_SIGNALED), 0,
		 "post in SQD");
	usleep(20000);
	CHECK(zero(e.b, 16), "not executed in SQD");
	CHECK_EQ(poll_now(e.cqs, wc, 4), 0, "no completion in SQD");
	a.qp_state = IBV_QPS_RTS;
	CHECK_EQ(ibv_modify_qp(e.qa, &a, IBV_QP_STATE), 0, "back to RTS");
	CHECK(t_wait_wc(e.cqs, &wc[0]) && wc[0].wr_id == 44 && wc[0].status == IBV_WC_SUCCESS, "runs in RTS");
	CHECK(!memcmp(e.b, e.a, 16), "its data");
	env_down(&e);
	/* a peer that does not listen (RESET): retried until retry_cnt runs out */
	c = conn;
	c.timeout = 1;
	c.retry_cnt = 1;
	env_up(&e, IBV_QPT_RC, &c, 0);
	a.qp_state = IBV_QPS_RESET;
	CHECK_EQ(ibv_modify_qp(e.qb, &a, IBV_QP_STATE), 0, "peer to RESET");
	CHECK_EQ(post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 16, e.ma->lkey, e.b + 64, e.mb->rkey, 45, IBV_SEND_SIGNALED), 0,
		 "write to a peer not listening");
	wc[0].status = -1;
	CHECK(t_wait_wc(e.cqs, &wc[0]) && wc[0].wr_id == 45 && wc[0].status == IBV_WC_RETRY_EXC_ERR,
	      "peer not listening: RETRY_EXC_ERR (status %d)", wc[0].status);
	CHECK(zero(e.b + 64, 16), "nothing written");
	env_down(&e);
}

/* ibv_wr_complete posts all or nothing: a list whose second WR fails its checks runs none. */
static void test_whole_list(void)
{
	struct env e;
	env_up(&e, IBV_QPT_RC, &conn, 0);
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = e.cqs, .recv_cq = e.cqr, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 4, .max_recv_sge = 4,
			 .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = e.pd, .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND };
	struct ibv_qp *q = ibv_create_qp_ex(e.ctx, &ia);
	ia.send_cq = ia.recv_cq = e.cqb;
	struct ibv_qp *p = ibv_create_qp_ex(e.ctx, &ia);
	CHECK(q && p && !t_connect(q, p, &e.gid, &conn), "extended QPs connected");
	if (!q || !p) {
		env_down(&e);
		return;
	}
	struct ibv_qp_ex *x = ibv_qp_to_qp_ex(q);
	t_fill(e.a, 64, 8);
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_start(x);
	x->wr_id = 50;
	ibv_wr_rdma_write(x, e.mb->rkey, (uintptr_t)e.b);
	ibv_wr_set_sge(x, e.ma->lkey, (uintptr_t)e.a, 16);
	x->wr_id = 51;
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, e.a, 65); /* max_inline_data 64 */
	CHECK(ibv_wr_complete(x) != 0, "the list fails");
	usleep(20000);
	CHECK(zero(e.b, 16), "its first WRITE did not run");
	struct ibv_wc wc[2];
	CHECK_EQ(poll_now(e.cqs, wc, 2), 0, "no completion");
	ibv_wr_start(x);
	x->wr_id = 52;
	ibv_wr_rdma_write(x, e.mb->rkey, (uintptr_t)e.b);
	ibv_wr_set_sge(x, e.ma->lkey, (uintptr_t)e.a, 16);
	CHECK_EQ(ibv_wr_complete(x), 0, "a single WRITE");
	CHECK(poll_now(e.cqs, wc, 2) == 1 && wc[0].wr_id == 52 && wc[0].status == IBV_WC_SUCCESS, "completes");
	CHECK(!memcmp(e.b, e.a, 16), "its data");
	ibv_destroy_qp(q);
	ibv_destroy_qp(p);
	env_down(&e);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_order();
	test_completions();
	test_keys_changed();
	test_keys_other_thread();
	test_states();
	test_whole_list();
	return t_report();
}
