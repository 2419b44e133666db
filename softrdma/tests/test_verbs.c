/*
 * softrdma behaviour tests: state machine, data path, error statuses, completion
 * channels, SRQ limit, fault injection and cross-process transport.
 * Runs against whichever libibverbs.so.1 LD_LIBRARY_PATH selects (softrdma in `make check`).
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <poll.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/wait.h>
#include <sys/mman.h>
#include <arpa/inet.h>
#include <stdint.h>
#include "testlib.h"

#define BUF (2 << 20)

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;     /* send + recv for qa */
	struct ibv_cq *cqb;    /* send + recv for qb */
	struct ibv_qp *qa, *qb;
	unsigned char *a, *b;
	struct ibv_mr *ma, *mb;
	union ibv_gid gid;
};

static struct ibv_qp *mkqp(struct env *e, struct ibv_cq *cq, enum ibv_qp_type t, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = t,
				       .cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 4,
						.max_recv_sge = 4, .max_inline_data = 64 } };
	return ibv_create_qp(e->pd, &ia);
}

static const struct t_conn conn = {
	.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	.qkey = 0x11111111, .rq_psn = 100, .sq_psn = 100, .rd_atomic = 4, .min_rnr_timer = 1, .hop_limit = 64,
	.timeout = 12, .retry_cnt = 7, .rnr_retry = 7 };
/* the same with timeout 14 (~67 ms): the cross-process peers and the state machine's RTS */
static const struct t_conn slow = {
	.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	.qkey = 0x11111111, .rq_psn = 100, .sq_psn = 100, .rd_atomic = 4, .min_rnr_timer = 1, .hop_limit = 64,
	.timeout = 14, .retry_cnt = 7, .rnr_retry = 7 };

/* timeout 12 (~17 ms) x 7 retries: a peer starved of CPU on a busy machine is not "gone" */
static void connect_pair(struct env *e, uint8_t rnr_retry)
{
	struct t_conn c = conn;
	c.rnr_retry = rnr_retry;
	t_qp_init(e->qa, &c);
	t_qp_init(e->qb, &c);
	t_qp_rtr(e->qa, e->qb->qp_num, &e->gid, &c);
	t_qp_rtr(e->qb, e->qa->qp_num, &e->gid, &c);
	t_qp_rts(e->qa, &c);
	t_qp_rts(e->qb, &c);
}

static void env_up(struct env *e, enum ibv_qp_type t, uint8_t rnr_retry)
{
	memset(e, 0, sizeof(*e));
	e->ctx = t_open_dev();
	e->pd = ibv_alloc_pd(e->ctx);
	e->ch = ibv_create_comp_channel(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 256, NULL, e->ch, 0);
	e->cqb = ibv_create_cq(e->ctx, 256, NULL, e->ch, 0);
	e->a = aligned_alloc(4096, BUF);
	e->b = aligned_alloc(4096, BUF);
	memset(e->a, 0, BUF);
	memset(e->b, 0, BUF);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		  IBV_ACCESS_REMOTE_ATOMIC;
	e->ma = ibv_reg_mr(e->pd, e->a, BUF, acc);
	e->mb = ibv_reg_mr(e->pd, e->b, BUF, acc);
	ibv_query_gid(e->ctx, 1, 1, &e->gid);
	e->qa = mkqp(e, e->cq, t, NULL);
	e->qb = mkqp(e, e->cqb, t, NULL);
	if (!e->pd || !e->cq || !e->cqb || !e->ma || !e->mb || !e->qa || !e->qb) {
		fprintf(stderr, "setup failed: %s\n", strerror(errno));
		exit(2);
	}
	connect_pair(e, rnr_retry);
}

static void env_down(struct env *e)
{
	ibv_destroy_qp(e->qa);
	ibv_destroy_qp(e->qb);
	ibv_dereg_mr(e->ma);
	ibv_dereg_mr(e->mb);
	ibv_destroy_cq(e->cq);
	ibv_destroy_cq(e->cqb);
	ibv_destroy_comp_channel(e->ch);
	ibv_dealloc_pd(e->pd);
	ibv_close_device(e->ctx);
	free(e->a);
	free(e->b);
}

static int post_recv(struct ibv_qp *q, void *addr, uint32_t len, uint32_t lkey, uint64_t id)
{
	struct ibv_sge s = { (uintptr_t)addr, len, lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bad;
	return ibv_post_recv(q, &w, &bad);
}

static int post1(struct ibv_qp *q, enum ibv_wr_opcode op, void *addr, uint32_t len, uint32_t lkey,
		 uint64_t raddr, uint32_t rkey, uint64_t id, unsigned flags)
{
	struct ibv_sge s = { (uintptr_t)addr, len, lkey };
	struct ibv_send_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = op,
				 .send_flags = flags | IBV_SEND_SIGNALED }, *bad;
	w.wr.rdma.remote_addr = raddr;
	w.wr.rdma.rkey = rkey;
	w.imm_data = htonl(0xabcd1234);
	return ibv_post_send(q, &w, &bad);
}

/* ---------------------------------------------------------------- data path */

static void rc_data_ops(struct env *e, const char *tag)
{
	struct ibv_wc wc;
	char what[128];
	size_t sizes[] = { 1, 1000, 1024, 5000, 300000 };
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		/* SEND / RECV */
		t_fill(e->a, n, (unsigned)n);
		memset(e->b, 0, n);
		post_recv(e->qb, e->b, (uint32_t)n, e->mb->lkey, 7);
		CHECK_EQ(post1(e->qa, IBV_WR_SEND, e->a, (uint32_t)n, e->ma->lkey, 0, 0, 1, 0), 0, "post send");
		snprintf(what, sizeof(what), "%s send %zu status", tag, n);
		CHECK(t_wait_wc(e->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND, "%s", what);
		CHECK(t_wait_wc(e->cqb, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
		      wc.byte_len == n && wc.wr_id == 7, "%s recv", what);
		CHECK(t_checksum(e->a, n) == t_checksum(e->b, n), "%s send %zu checksum", tag, n);
		/* RDMA WRITE */
		t_fill(e->a, n, (unsigned)n + 1);
		CHECK_EQ(post1(e->qa, IBV_WR_RDMA_WRITE, e->a, (uint32_t)n, e->ma->lkey, (uintptr_t)e->b + 4096,
			       e->mb->rkey, 2, 0), 0, "post write");
		CHECK(t_wait_wc(e->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE,
		      "%s write %zu", tag, n);
		CHECK(t_checksum(e->a, n) == t_checksum(e->b + 4096, n), "%s write %zu checksum", tag, n);
		/* RDMA READ */
		t_fill(e->b + 8192, n, (unsigned)n + 2);
		CHECK_EQ(post1(e->qa, IBV_WR_RDMA_READ, e->a + 8192, (uint32_t)n, e->ma->lkey,
			       (uintptr_t)e->b + 8192, e->mb->rkey, 3, 0), 0, "post read");
		wc.status = -1;
		CHECK(t_wait_wc(e->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ &&
		      wc.byte_len == n, "%s read %zu status %d", tag, n, wc.status);
		CHECK(t_checksum(e->a + 8192, n) == t_checksum(e->b + 8192, n), "%s read %zu checksum", tag, n);
	}
	/* READs and WRITEs in flight together, more READs than max_rd_atomic (4): under faults a
	 * lost READ response is re-requested while later READs' responses keep arriving */
	enum { PIPE = 8, RLEN = 65536, WLEN = 16384 };
	t_fill(e->b + 512 * 1024, PIPE * RLEN, 31);
	t_fill(e->a + 1024 * 1024, PIPE * WLEN, 32);
	memset(e->a + 512 * 1024, 0, PIPE * RLEN);
	for (unsigned k = 0; k < PIPE; k++) {
		CHECK_EQ(post1(e->qa, IBV_WR_RDMA_READ, e->a + 512 * 1024 + k * RLEN, RLEN, e->ma->lkey,
			       (uintptr_t)e->b + 512 * 1024 + k * RLEN, e->mb->rkey, 100 + 2 * k, 0), 0, "post read");
		CHECK_EQ(post1(e->qa, IBV_WR_RDMA_WRITE, e->a + 1024 * 1024 + k * WLEN, WLEN, e->ma->lkey,
			       (uintptr_t)e->b + 1024 * 1024 + k * WLEN, e->mb->rkey, 101 + 2 * k, 0), 0, "post write");
	}
	for (unsigned k = 0; k < 2 * PIPE; k++) {
		wc.status = -1;
		wc.wr_id = 0;
		CHECK(t_wait_wc(e->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 100 + k,
		      "%s pipelined completion %u: wr_id %llu status %d", tag, k, (unsigned long long)wc.wr_id,
		      wc.status);
	}
	CHECK(t_checksum(e->a + 512 * 1024, PIPE * RLEN) == t_checksum(e->b + 512 * 1024, PIPE * RLEN),
	      "%s pipelined reads checksum", tag);
	CHECK(t_checksum(e->a + 1024 * 1024, PIPE * WLEN) == t_checksum(e->b + 1024 * 1024, PIPE * WLEN),
	      "%s pipelined writes checksum", tag);
	/* SEND_WITH_IMM and WRITE_WITH_IMM carry the immediate */
	post_recv(e->qb, e->b, 64, e->mb->lkey, 8);
	post1(e->qa, IBV_WR_SEND_WITH_IMM, e->a, 16, e->ma->lkey, 0, 0, 4, 0);
	CHECK(t_wait_wc(e->cq, &wc) && wc.status == IBV_WC_SUCCESS, "%s send_imm", tag);
	CHECK(t_wait_wc(e->cqb, &wc) && (wc.wc_flags & IBV_WC_WITH_IMM) && wc.imm_data == htonl(0xabcd1234),
	      "%s send_imm immediate", tag);
	post_recv(e->qb, e->b, 64, e->mb->lkey, 9);
	post1(e->qa, IBV_WR_RDMA_WRITE_WITH_IMM, e->a, 100, e->ma->lkey, (uintptr_t)e->b + 65536, e->mb->rkey, 5, 0);
	CHECK(t_wait_wc(e->cq, &wc) && wc.status == IBV_WC_SUCCESS, "%s write_imm", tag);
	CHECK(t_wait_wc(e->cqb, &wc) && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.byte_len == 100 &&
	      wc.imm_data == htonl(0xabcd1234), "%s write_imm recv", tag);
	CHECK(!memcmp(e->a, e->b + 65536, 100), "%s write_imm data", tag);
	/* atomics on an aligned word */
	uint64_t *target = (uint64_t *)(e->b + 128 * 1024);
	*target = 40;
	struct ibv_sge s = { (uintptr_t)e->a, 8, e->ma->lkey };
	struct ibv_send_wr w = { .wr_id = 6, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	w.wr.atomic.remote_addr = (uintptr_t)target;
	w.wr.atomic.rkey = e->mb->rkey;
	w.wr.atomic.compare_add = 2;
	CHECK_EQ(ibv_post_send(e->qa, &w, &bad), 0, "post faa");
	CHECK(t_wait_wc(e->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_FETCH_ADD, "%s faa", tag);
	CHECK(*(uint64_t *)e->a == 40 && *target == 42, "%s faa values %llu %llu", tag,
	      (unsigned long long)*(uint64_t *)e->a, (unsigned long long)*target);
	w.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	w.wr.atomic.compare_add = 42;
	w.wr.atomic.swap = 7;
	CHECK_EQ(ibv_post_send(e->qa, &w, &bad), 0, "post cas");
	CHECK(t_wait_wc(e->cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_COMP_SWAP, "%s cas", tag);
	CHECK(*(uint64_t *)e->a == 42 && *target == 7, "%s cas values", tag);
	/* SGE list gather + inline */
	struct ibv_sge sg[3] = { { (uintptr_t)e->a, 10, e->ma->lkey }, { (uintptr_t)e->a + 100, 20, e->ma->lkey },
				 { (uintptr_t)e->a + 200, 30, e->ma->lkey } };
	t_fill(e->a, 256, 99);
	post_recv(e->qb, e->b, 128, e->mb->lkey, 10);
	struct ibv_send_wr g = { .wr_id = 11, .sg_list = sg, .num_sge = 3, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE };
	CHECK_EQ(ibv_post_send(e->qa, &g, &bad), 0, "post inline gather");
	memset(e->a, 0, 256); /* inline data was captured at post time */
	CHECK(t_wait_wc(e->cq, &wc) && wc.status == IBV_WC_SUCCESS, "%s inline", tag);
	CHECK(t_wait_wc(e->cqb, &wc) && wc.byte_len == 60, "%s inline recv", tag);
	unsigned char ref[256];
	t_fill(ref, 256, 99);
	CHECK(!memcmp(e->b, ref, 10) && !memcmp(e->b + 10, ref + 100, 20) && !memcmp(e->b + 30, ref + 200, 30),
	      "%s gather order", tag);
	/* unsignaled WRs produce no completion */
	post_recv(e->qb, e->b, 64, e->mb->lkey, 12);
	struct ibv_send_wr u = { .wr_id = 13, .sg_list = sg, .num_sge = 1, .opcode = IBV_WR_SEND };
	CHECK_EQ(ibv_post_send(e->qa, &u, &bad), 0, "post unsignaled");
	CHECK(t_wait_wc(e->cqb, &wc) && wc.wr_id == 12, "%s unsignaled delivered", tag);
	usleep(20000);
	CHECK_EQ(ibv_poll_cq(e->cq, 1, &wc), 0, "unsignaled send has no completion");
}

/* ---------------------------------------------------------------- errors */

static void test_errors(void)
{
	struct env e;
	struct ibv_wc wc;
	struct ibv_send_wr *bad;

	/* bad rkey -> REM_ACCESS_ERR, requester and responder QPs to ERR, later WRs flushed */
	env_up(&e, IBV_QPT_RC, 7);
	post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 64, e.ma->lkey, (uintptr_t)e.b, e.mb->rkey ^ 0x100, 1, 0);
	post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 64, e.ma->lkey, (uintptr_t)e.b, e.mb->rkey, 2, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_REM_ACCESS_ERR && wc.wr_id == 1, "bad rkey status %d", wc.status);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 2, "flush after error %d", wc.status);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	usleep(20000);
	ibv_query_qp(e.qa, &qa, IBV_QP_STATE, &qi);
	CHECK_EQ(qa.qp_state, IBV_QPS_ERR, "requester state after REM_ACCESS_ERR");
	ibv_query_qp(e.qb, &qa, IBV_QP_STATE, &qi);
	CHECK_EQ(qa.qp_state, IBV_QPS_ERR, "responder state after access violation");
	env_down(&e);

	/* out of MR bounds remote write and read */
	env_up(&e, IBV_QPT_RC, 7);
	post1(e.qa, IBV_WR_RDMA_READ, e.a, 64, e.ma->lkey, (uintptr_t)e.b + BUF - 32, e.mb->rkey, 1, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_REM_ACCESS_ERR, "read past MR end %d", wc.status);
	env_down(&e);

	/* registering memory that is not mapped fails with EFAULT, as the kernel's page pinning does */
	env_up(&e, IBV_QPT_RC, 7);
	{
		long pg = sysconf(_SC_PAGESIZE);
		char *m = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(m != MAP_FAILED, "mmap for the EFAULT test");
		munmap(m + pg, pg); /* a hole in the middle */
		errno = 0;
		struct ibv_mr *hole = ibv_reg_mr(e.pd, m, 3 * pg, IBV_ACCESS_LOCAL_WRITE);
		CHECK(!hole && errno == EFAULT, "range with an unmapped page: %p errno %d", (void *)hole, errno);
		if (hole)
			ibv_dereg_mr(hole);
		errno = 0;
		struct ibv_mr *gone = ibv_reg_mr(e.pd, m + pg, 16, IBV_ACCESS_LOCAL_WRITE);
		CHECK(!gone && errno == EFAULT, "unmapped range: errno %d", errno);
		struct ibv_mr *ok = ibv_reg_mr(e.pd, m, pg, IBV_ACCESS_LOCAL_WRITE);
		CHECK(ok != NULL, "the mapped page before the hole registers");
		if (ok)
			ibv_dereg_mr(ok);
		munmap(m, pg);
		munmap(m + 2 * pg, pg);
	}
	env_down(&e);

	/* MR without remote write permission */
	env_up(&e, IBV_QPT_RC, 7);
	struct ibv_mr *ro = ibv_reg_mr(e.pd, e.b + BUF / 2, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 64, e.ma->lkey, (uintptr_t)e.b + BUF / 2, ro->rkey, 1, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_REM_ACCESS_ERR, "write to read-only MR %d", wc.status);
	ibv_dereg_mr(ro);
	env_down(&e);

	/* bad lkey and local buffer outside its MR -> LOC_PROT_ERR */
	env_up(&e, IBV_QPT_RC, 7);
	post1(e.qa, IBV_WR_SEND, e.a, 64, e.ma->lkey + 0x1000, 0, 0, 1, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_LOC_PROT_ERR, "bad lkey %d", wc.status);
	env_down(&e);
	env_up(&e, IBV_QPT_RC, 7);
	post1(e.qa, IBV_WR_RDMA_WRITE, e.a + BUF - 10, 64, e.ma->lkey, (uintptr_t)e.b, e.mb->rkey, 1, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_LOC_PROT_ERR, "local buffer past MR %d", wc.status);
	env_down(&e);

	/* receive buffer too small -> LOC_LEN_ERR at responder, REM_INV_REQ_ERR at requester */
	env_up(&e, IBV_QPT_RC, 7);
	post_recv(e.qb, e.b, 16, e.mb->lkey, 1);
	post1(e.qa, IBV_WR_SEND, e.a, 64, e.ma->lkey, 0, 0, 2, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_REM_INV_REQ_ERR, "short recv requester %d", wc.status);
	CHECK(t_wait_wc(e.cqb, &wc) && wc.status == IBV_WC_LOC_LEN_ERR, "short recv responder %d", wc.status);
	env_down(&e);

	/* no receive and rnr_retry 0 -> RNR_RETRY_EXC_ERR */
	env_up(&e, IBV_QPT_RC, 0);
	post1(e.qa, IBV_WR_SEND, e.a, 64, e.ma->lkey, 0, 0, 1, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_RNR_RETRY_EXC_ERR, "rnr exhausted %d", wc.status);
	env_down(&e);

	/* RNR with retries: the receive posted later is used */
	env_up(&e, IBV_QPT_RC, 7);
	post1(e.qa, IBV_WR_SEND, e.a, 64, e.ma->lkey, 0, 0, 1, 0);
	usleep(5000);
	CHECK_EQ(ibv_poll_cq(e.cq, 1, &wc), 0, "send waits while receiver not ready");
	post_recv(e.qb, e.b, 64, e.mb->lkey, 2);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_SUCCESS, "send after RNR %d", wc.status);
	env_down(&e);

	/* peer gone -> RETRY_EXC_ERR after timeout/retry_cnt */
	env_up(&e, IBV_QPT_RC, 7);
	ibv_destroy_qp(e.qb);
	e.qb = mkqp(&e, e.cqb, IBV_QPT_RC, NULL); /* keep env_down happy */
	post1(e.qa, IBV_WR_SEND, e.a, 64, e.ma->lkey, 0, 0, 1, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_RETRY_EXC_ERR, "peer gone %d", wc.status);
	env_down(&e);

	/* post-time errors: too many SGEs, queue full, wrong state */
	env_up(&e, IBV_QPT_RC, 7);
	struct ibv_sge sg[8];
	for (int i = 0; i < 8; i++)
		sg[i] = (struct ibv_sge){ (uintptr_t)e.a, 8, e.ma->lkey };
	struct ibv_send_wr w = { .sg_list = sg, .num_sge = 5, .opcode = IBV_WR_SEND };
	CHECK_EQ(ibv_post_send(e.qa, &w, &bad), EINVAL, "too many SGEs");
	CHECK(bad == &w, "bad_wr points at the failing WR");
	struct ibv_recv_wr rw = { .sg_list = sg, .num_sge = 5 }, *rbad;
	CHECK_EQ(ibv_post_recv(e.qb, &rw, &rbad), EINVAL, "too many recv SGEs");
	rw.num_sge = 1;
	int rc = 0, k;
	for (k = 0; k < 100 && !rc; k++)
		rc = ibv_post_recv(e.qb, &rw, &rbad);
	CHECK(rc == ENOMEM && k == 65, "recv queue overflow rc=%d after %d", rc, k);
	env_down(&e);

	env_up(&e, IBV_QPT_RC, 7);
	struct ibv_qp *q = mkqp(&e, e.cq, IBV_QPT_RC, NULL);
	w.num_sge = 1;
	CHECK_EQ(ibv_post_send(q, &w, &bad), EINVAL, "send in RESET");
	t_qp_init(q, &conn);
	CHECK_EQ(ibv_post_send(q, &w, &bad), EINVAL, "send in INIT");
	/* moving to ERR flushes posted receives */
	post_recv(q, e.a, 8, e.ma->lkey, 77);
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_ERR };
	CHECK_EQ(ibv_modify_qp(q, &at, IBV_QP_STATE), 0, "to ERR");
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 77, "recv flushed %d", wc.status);
	/* and WRs posted in ERR are flushed too */
	w.wr_id = 78;
	CHECK_EQ(ibv_post_send(q, &w, &bad), 0, "post in ERR accepted");
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 78, "send in ERR flushed");
	ibv_destroy_qp(q);
	/* objects in use cannot be destroyed */
	CHECK_EQ(ibv_destroy_cq(e.cq), EBUSY, "destroy CQ used by a QP");
	CHECK_EQ(ibv_dealloc_pd(e.pd), EBUSY, "dealloc PD holding MRs and QPs");
	env_down(&e);
}

/* ---------------------------------------------------------------- state machine */

/*
 * A destroyed QP's number is not handed to the next QP at once: a packet of the old QP still on
 * its way must not land in a new connection that took the same numbers and PSNs.
 */
static void test_qpn_reuse(void)
{
	struct env e;
	env_up(&e, IBV_QPT_RC, 7);
	uint32_t seen[8];
	for (int i = 0; i < 8; i++) {
		struct ibv_qp *q = mkqp(&e, e.cq, IBV_QPT_RC, NULL);
		seen[i] = q->qp_num;
		for (int j = 0; j < i; j++)
			CHECK(seen[j] != seen[i], "QP %d got the number 0x%x of QP %d, destroyed before it", i, seen[i], j);
		CHECK(ibv_destroy_qp(q) == 0, "destroy QP %d", i);
	}
	/* past one socket's 256 numbers: a second socket (port) is opened, every number distinct */
	enum { MANY = 300 };
	static struct ibv_qp *many[MANY];
	int made = 0, ports = 0, shared = 0;
	for (; made < MANY; made++) {
		many[made] = mkqp(&e, e.cq, IBV_QPT_RC, NULL);
		if (!many[made])
			break;
		int new_port = 1;
		for (int j = 0; j < made; j++) {
			shared += many[j]->qp_num == many[made]->qp_num;
			new_port &= (many[j]->qp_num >> 8) != (many[made]->qp_num >> 8);
		}
		ports += new_port;
	}
	CHECK_EQ(made, MANY, "QPs created");
	CHECK_EQ(shared, 0, "pairs of live QPs sharing a number");
	CHECK(ports >= 2, "%d QPs on %d ports", made, ports);
	for (int j = 0; j < made; j++)
		CHECK(ibv_destroy_qp(many[j]) == 0, "destroy QP %d of many", j);
	env_down(&e);
}

static void test_state_machine(void)
{
	struct env e;
	env_up(&e, IBV_QPT_RC, 7);
	union ibv_gid gid = e.gid;
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr qi;
	enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	for (int ti = 0; ti < 3; ti++) {
		enum ibv_qp_type t = types[ti];
		struct ibv_qp *q = mkqp(&e, e.cq, t, NULL);
		memset(&a, 0, sizeof(a));
		/* illegal from RESET */
		a.qp_state = IBV_QPS_RTR;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), EINVAL, "RESET->RTR");
		a.qp_state = IBV_QPS_RTS;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), EINVAL, "RESET->RTS");
		a.qp_state = IBV_QPS_INIT;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), EINVAL, "RESET->INIT without required attrs");
		a.port_num = 1;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY |
					   IBV_QP_ACCESS_FLAGS), EINVAL, "RESET->INIT with a foreign attr");
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_SQ_PSN |
					   (t == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS)), EINVAL,
			 "RESET->INIT with SQ_PSN");
		a.port_num = 2;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					   (t == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS)), EINVAL, "bad port");
		CHECK_EQ(t_qp_init(q, &conn), 0, "RESET->INIT");
		CHECK_EQ(t_qp_init(q, &conn), 0, "INIT->INIT");
		a.qp_state = IBV_QPS_RTS;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), EINVAL, "INIT->RTS");
		if (t != IBV_QPT_UD) {
			/* RoCE: no GRH -> EINVAL; missing required attrs -> EINVAL */
			struct ibv_qp_attr r = { .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = 5,
						 .max_dest_rd_atomic = 1 };
			r.ah_attr.port_num = 1;
			int m = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				(t == IBV_QPT_RC ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0);
			CHECK_EQ(ibv_modify_qp(q, &r, m), EINVAL, "RTR without GRH");
			r.ah_attr.is_global = 1;
			r.ah_attr.grh.dgid = gid;
			r.ah_attr.grh.sgid_index = 1;
			CHECK_EQ(ibv_modify_qp(q, &r, m & ~IBV_QP_RQ_PSN), EINVAL, "RTR without RQ_PSN");
			if (t == IBV_QPT_UC)
				CHECK_EQ(ibv_modify_qp(q, &r, m | IBV_QP_MAX_DEST_RD_ATOMIC), EINVAL, "UC RTR with rd_atomic");
			CHECK_EQ(ibv_modify_qp(q, &r, m), 0, "INIT->RTR");
		} else {
			CHECK_EQ(t_qp_rtr(q, 0, &gid, &conn), 0, "UD INIT->RTR");
		}
		ibv_query_qp(q, &a, IBV_QP_STATE, &qi);
		CHECK_EQ(a.qp_state, IBV_QPS_RTR, "query RTR");
		a.qp_state = IBV_QPS_RTS;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), EINVAL, "RTR->RTS without SQ_PSN");
		CHECK_EQ(t_qp_rts(q, &slow), 0, "RTR->RTS");
		a.qp_state = IBV_QPS_RTR;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), EINVAL, "RTS->RTR");
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), 0, "RTS->RTS");
		a.qp_state = IBV_QPS_SQD;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), 0, "RTS->SQD");
		ibv_query_qp(q, &a, IBV_QP_STATE, &qi);
		CHECK_EQ(a.qp_state, IBV_QPS_SQD, "query SQD");
		a.qp_state = IBV_QPS_INIT;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), EINVAL, "SQD->INIT");
		a.qp_state = IBV_QPS_RTS;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), 0, "SQD->RTS");
		a.qp_state = IBV_QPS_SQE;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), EINVAL, "RTS->SQE by the user");
		a.qp_state = IBV_QPS_ERR;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), 0, "RTS->ERR");
		a.qp_state = IBV_QPS_RTS;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), EINVAL, "ERR->RTS");
		a.qp_state = IBV_QPS_RESET;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), 0, "ERR->RESET");
		CHECK_EQ(t_qp_init(q, &conn), 0, "RESET->INIT again");
		a.qp_state = IBV_QPS_RESET;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), 0, "INIT->RESET");
		a.cur_qp_state = IBV_QPS_RTS;
		a.qp_state = IBV_QPS_INIT;
		CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_CUR_STATE), EINVAL, "wrong cur_qp_state");
		ibv_destroy_qp(q);
	}
	env_down(&e);
}

/* ---------------------------------------------------------------- channels, SRQ, UD */

static void test_channels_srq_ud(void)
{
	struct env e;
	struct ibv_wc wc;
	env_up(&e, IBV_QPT_RC, 7);
	/* solicited-only arming ignores an unsolicited completion, fires on a solicited one */
	CHECK_EQ(ibv_req_notify_cq(e.cqb, 1), 0, "arm solicited");
	post_recv(e.qb, e.b, 64, e.mb->lkey, 1);
	post_recv(e.qb, e.b, 64, e.mb->lkey, 2);
	post1(e.qa, IBV_WR_SEND, e.a, 8, e.ma->lkey, 0, 0, 1, 0);
	t_wait_wc(e.cq, &wc);
	struct pollfd pfd = { .fd = e.ch->fd, .events = POLLIN };
	CHECK_EQ(poll(&pfd, 1, 50), 0, "no event for an unsolicited completion");
	post1(e.qa, IBV_WR_SEND, e.a, 8, e.ma->lkey, 0, 0, 2, IBV_SEND_SOLICITED);
	t_wait_wc(e.cq, &wc);
	CHECK_EQ(poll(&pfd, 1, 2000), 1, "event for a solicited completion");
	struct ibv_cq *ecq;
	void *ectx;
	CHECK_EQ(ibv_get_cq_event(e.ch, &ecq, &ectx), 0, "get_cq_event");
	CHECK(ecq == e.cqb, "event names the CQ");
	ibv_ack_cq_events(ecq, 1);
	CHECK_EQ(ibv_poll_cq(e.cqb, 2, (struct ibv_wc[2]){ 0 }), 2, "both receives completed");
	env_down(&e);

	/* SRQ limit event */
	env_up(&e, IBV_QPT_RC, 7);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1, .srq_limit = 2 } };
	struct ibv_srq *srq = ibv_create_srq(e.pd, &sa);
	CHECK(srq != NULL, "create srq");
	struct ibv_qp *qs = mkqp(&e, e.cqb, IBV_QPT_RC, srq);
	t_qp_init(qs, &conn);
	t_qp_rtr(qs, e.qa->qp_num, &e.gid, &conn);
	t_qp_rtr(e.qa, qs->qp_num, &e.gid, &conn); /* re-pointing RTR is not allowed: use a fresh requester */
	struct ibv_qp *qr = mkqp(&e, e.cq, IBV_QPT_RC, NULL);
	t_qp_init(qr, &conn);
	t_qp_rtr(qr, qs->qp_num, &e.gid, &conn);
	t_qp_rts(qr, &conn);
	struct ibv_qp_attr fix = { .dest_qp_num = qr->qp_num };
	(void)fix;
	ibv_destroy_qp(qs);
	qs = mkqp(&e, e.cqb, IBV_QPT_RC, srq);
	t_qp_init(qs, &conn);
	t_qp_rtr(qs, qr->qp_num, &e.gid, &conn);
	ibv_destroy_qp(qr);
	qr = mkqp(&e, e.cq, IBV_QPT_RC, NULL);
	t_qp_init(qr, &conn);
	t_qp_rtr(qr, qs->qp_num, &e.gid, &conn);
	t_qp_rts(qr, &conn);
	/* qs was connected to the destroyed QPN; reconnect it through RESET */
	struct ibv_qp_attr rs = { .qp_state = IBV_QPS_RESET };
	ibv_modify_qp(qs, &rs, IBV_QP_STATE);
	t_qp_init(qs, &conn);
	t_qp_rtr(qs, qr->qp_num, &e.gid, &conn);
	for (int i = 0; i < 4; i++) {
		struct ibv_sge s = { (uintptr_t)e.b + i * 64, 64, e.mb->lkey };
		struct ibv_recv_wr w = { .wr_id = 100 + i, .sg_list = &s, .num_sge = 1 }, *bad;
		ibv_post_srq_recv(srq, &w, &bad);
	}
	for (int i = 0; i < 3; i++)
		post1(qr, IBV_WR_SEND, e.a, 8, e.ma->lkey, 0, 0, i, 0);
	int got = 0;
	for (int i = 0; i < 3; i++)
		got += t_wait_wc(e.cqb, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)(100 + i);
	CHECK_EQ(got, 3, "SRQ receives in order");
	pfd.fd = e.ctx->async_fd;
	CHECK_EQ(poll(&pfd, 1, 2000), 1, "async event pending");
	struct ibv_async_event ev;
	CHECK(ibv_get_async_event(e.ctx, &ev) == 0 && ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED &&
	      ev.element.srq == srq, "SRQ limit event");
	ibv_ack_async_event(&ev);
	ibv_destroy_qp(qs);
	ibv_destroy_qp(qr);
	ibv_destroy_srq(srq);
	env_down(&e);

	/* a non-blocking channel fd reports EAGAIN when no event is pending */
	env_up(&e, IBV_QPT_UC, 7);
	fcntl(e.ch->fd, F_SETFL, fcntl(e.ch->fd, F_GETFL) | O_NONBLOCK);
	errno = 0;
	CHECK(ibv_get_cq_event(e.ch, &ecq, &ectx) == -1 && errno == EAGAIN, "EAGAIN on non-blocking channel");
	/* UC: send and write, no READ */
	t_fill(e.a, 3000, 11);
	post_recv(e.qb, e.b, 4096, e.mb->lkey, 1);
	post1(e.qa, IBV_WR_SEND, e.a, 3000, e.ma->lkey, 0, 0, 1, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_SUCCESS, "uc send");
	CHECK(t_wait_wc(e.cqb, &wc) && wc.status == IBV_WC_SUCCESS && wc.byte_len == 3000 &&
	      !memcmp(e.a, e.b, 3000), "uc recv data");
	post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 3000, e.ma->lkey, (uintptr_t)e.b + 8192, e.mb->rkey, 2, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_SUCCESS, "uc write completion");
	/* UC completes when sent: over the packet path the data lands a little later */
	for (int i = 0; i < 2000 && memcmp(e.a, e.b + 8192, 3000); i++)
		usleep(1000);
	CHECK(!memcmp(e.a, e.b + 8192, 3000), "uc write data");
	{
		struct ibv_send_wr *bad;
		struct ibv_sge s = { (uintptr_t)e.a, 8, e.ma->lkey };
		struct ibv_send_wr r = { .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_READ };
		CHECK_EQ(ibv_post_send(e.qa, &r, &bad), EINVAL, "READ on UC");
	}
	env_down(&e);

	/* UD: GRH area, src_qp, q_key check */
	env_up(&e, IBV_QPT_UD, 7);
	struct ibv_ah *ah = t_create_ah(e.pd, &e.gid, 0);
	CHECK(ah != NULL, "create ah");
	t_fill(e.a, 512, 5);
	post_recv(e.qb, e.b, 1024, e.mb->lkey, 1);
	struct ibv_sge s = { (uintptr_t)e.a, 512, e.ma->lkey };
	struct ibv_send_wr w = { .wr_id = 1, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	w.wr.ud.ah = ah;
	w.wr.ud.remote_qpn = e.qb->qp_num;
	w.wr.ud.remote_qkey = 0x11111111;
	CHECK_EQ(ibv_post_send(e.qa, &w, &bad), 0, "ud post");
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_SUCCESS, "ud send");
	CHECK(t_wait_wc(e.cqb, &wc) && wc.status == IBV_WC_SUCCESS && wc.byte_len == 512 + 40 &&
	      (wc.wc_flags & IBV_WC_GRH) && wc.src_qp == e.qa->qp_num, "ud recv len %u", wc.byte_len);
	CHECK(!memcmp(e.a, e.b + 40, 512), "ud payload after the GRH");
	post_recv(e.qb, e.b, 1024, e.mb->lkey, 2);
	w.wr.ud.remote_qkey = 0x2222;
	ibv_post_send(e.qa, &w, &bad);
	t_wait_wc(e.cq, &wc);
	usleep(20000);
	CHECK_EQ(ibv_poll_cq(e.cqb, 1, &wc), 0, "wrong q_key dropped");
	ibv_destroy_ah(ah);
	env_down(&e);
}

/* ---------------------------------------------------------------- faults and processes */


/* ---------------------------------------------------------------- memory windows */

static int post_bind(struct ibv_qp *q, struct ibv_mw *mw, uint32_t rkey, struct ibv_mr *mr, void *addr,
		     uint64_t len, unsigned acc, uint64_t id)
{
	struct ibv_send_wr w = { .wr_id = id, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED }, *bad;
	w.bind_mw.mw = mw;
	w.bind_mw.rkey = rkey;
	w.bind_mw.bind_info = (struct ibv_mw_bind_info){ mr, (uintptr_t)addr, len, acc };
	return ibv_post_send(q, &w, &bad);
}

/* LOCAL_INV (no data) or SEND_WITH_INV (len bytes at addr) naming rkey */
static int post_inv(struct ibv_qp *q, enum ibv_wr_opcode op, uint32_t rkey, void *addr, uint32_t len,
		    uint32_t lkey, uint64_t id)
{
	struct ibv_sge s = { (uintptr_t)addr, len, lkey };
	struct ibv_send_wr w = { .wr_id = id, .sg_list = &s, .num_sge = op == IBV_WR_LOCAL_INV ? 0 : 1,
				 .opcode = op, .send_flags = IBV_SEND_SIGNALED }, *bad;
	w.invalidate_rkey = rkey;
	return ibv_post_send(q, &w, &bad);
}

#define MW_RIGHTS (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* An RC pair with a second registration of b that allows binding (b's own MR does not). */
static struct ibv_mr *mw_env(struct env *e, int extra)
{
	env_up(e, IBV_QPT_RC, 7);
	return ibv_reg_mr(e->pd, e->b, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND | extra);
}

/* A bind on qb that must fail: the completion is MW_BIND_ERR (and qb goes to ERR). */
static void bind_fails(const char *what, enum ibv_mw_type type, int mr_extra, uint64_t off, uint64_t len,
		       unsigned acc, int use_plain_mr)
{
	struct env e;
	struct ibv_wc wc;
	struct ibv_mr *mr = mw_env(&e, mr_extra);
	struct ibv_mw *mw = ibv_alloc_mw(e.pd, type);
	struct ibv_mr *target = use_plain_mr ? e.mb : mr;
	int rc;
	if (type == IBV_MW_TYPE_1) {
		struct ibv_mw_bind b = { .wr_id = 7, .send_flags = IBV_SEND_SIGNALED,
					 .bind_info = { target, (uintptr_t)e.b + off, len, acc } };
		rc = ibv_bind_mw(e.qb, mw, &b);
	} else {
		rc = post_bind(e.qb, mw, ibv_inc_rkey(mw->rkey), target, e.b + off, len, acc, 7);
	}
	CHECK_EQ(rc, 0, what);
	CHECK(t_wait_wc(e.cqb, &wc) && wc.wr_id == 7 && wc.status == IBV_WC_MW_BIND_ERR, "%s: status %d", what,
	      wc.status);
	ibv_dealloc_mw(mw);
	ibv_dereg_mr(mr);
	env_down(&e);
}

static void test_mw(void)
{
	struct env e;
	struct ibv_wc wc;
	struct ibv_mr *mr = mw_env(&e, 0);
	CHECK(mr != NULL, "MR with MW_BIND");
	struct ibv_device_attr da;
	CHECK(ibv_query_device(e.ctx, &da) == 0 && (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW) &&
	      (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) && da.max_mw > 0, "MW caps");

	/* type 1: ibv_bind_mw, then WRITE and READ through the window's rkey */
	struct ibv_mw *mw1 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1);
	CHECK(mw1 && mw1->type == IBV_MW_TYPE_1 && mw1->pd == e.pd, "alloc type 1");
	uint32_t old = mw1->rkey;
	struct ibv_mw_bind b = { .wr_id = 31, .send_flags = IBV_SEND_SIGNALED,
				 .bind_info = { mr, (uintptr_t)e.b + 4096, 8192, IBV_ACCESS_REMOTE_WRITE |
										 IBV_ACCESS_REMOTE_READ } };
	CHECK_EQ(ibv_bind_mw(e.qb, mw1, &b), 0, "ibv_bind_mw");
	CHECK(mw1->rkey == ibv_inc_rkey(old), "bind moves the key byte: 0x%x -> 0x%x", old, mw1->rkey);
	CHECK(t_wait_wc(e.cqb, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW &&
	      wc.wr_id == 31, "bind completion %d/%d", wc.status, wc.opcode);
	CHECK_EQ(ibv_dereg_mr(mr), EINVAL, "dereg of a region with a bound window");
	struct ibv_mw_bind zb = b;
	zb.bind_info.mw_access_flags |= IBV_ACCESS_ZERO_BASED;
	CHECK_EQ(ibv_bind_mw(e.qb, mw1, &zb), EINVAL, "zero-based type 1 bind");
	for (int i = 0; i < 100; i++)
		e.a[i] = (unsigned char)(i * 7 + 1);
	post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 100, e.ma->lkey, (uintptr_t)e.b + 4096 + 10, mw1->rkey, 1, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_SUCCESS, "WRITE through a type 1 window %d", wc.status);
	CHECK(memcmp(e.b + 4096 + 10, e.a, 100) == 0, "WRITE data through the window");
	memset(e.a + 1000, 0, 100);
	post1(e.qa, IBV_WR_RDMA_READ, e.a + 1000, 100, e.ma->lkey, (uintptr_t)e.b + 4096 + 10, mw1->rkey, 2, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_SUCCESS && memcmp(e.a + 1000, e.a, 100) == 0,
	      "READ through a type 1 window %d", wc.status);
	/* the old rkey is dead: a WRITE with it is a remote access error */
	post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 100, e.ma->lkey, (uintptr_t)e.b + 4096, old, 3, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_REM_ACCESS_ERR, "stale window rkey %d", wc.status);
	CHECK_EQ(ibv_dealloc_mw(mw1), 0, "dealloc type 1");
	CHECK_EQ(ibv_dereg_mr(mr), 0, "dereg once the window is gone");
	env_down(&e);

	/* a WRITE past the window's end (still inside the region) */
	mr = mw_env(&e, 0);
	mw1 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1);
	b.bind_info.mr = mr;
	b.bind_info.addr = (uintptr_t)e.b + 4096; /* this environment's buffer, not the last one's */
	CHECK_EQ(ibv_bind_mw(e.qb, mw1, &b), 0, "bind");
	CHECK(t_wait_wc(e.cqb, &wc) && wc.status == IBV_WC_SUCCESS, "bind completion %d", wc.status);
	post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 100, e.ma->lkey, (uintptr_t)e.b + 4096 + 8192 - 50, mw1->rkey, 4, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_REM_ACCESS_ERR, "WRITE past the window %d", wc.status);
	ibv_dealloc_mw(mw1);
	ibv_dereg_mr(mr);
	env_down(&e);

	/* type 2: bind by work request, atomics, SEND_WITH_INV; the invalidated rkey is dead */
	mr = mw_env(&e, 0);
	struct ibv_mw *mw2 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
	CHECK(mw2 && mw2->type == IBV_MW_TYPE_2, "alloc type 2");
	uint32_t rk = ibv_inc_rkey(mw2->rkey);
	CHECK_EQ(post_bind(e.qb, mw2, rk, mr, e.b + 8192, 4096, MW_RIGHTS, 41), 0, "post BIND_MW");
	CHECK(t_wait_wc(e.cqb, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW &&
	      wc.wr_id == 41, "type 2 bind completion %d", wc.status);
	uint64_t *target = (uint64_t *)(e.b + 8192 + 64);
	*target = 40;
	struct ibv_sge s = { (uintptr_t)e.a, 8, e.ma->lkey };
	struct ibv_send_wr aw = { .wr_id = 5, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	aw.wr.atomic.remote_addr = (uintptr_t)target;
	aw.wr.atomic.rkey = rk;
	aw.wr.atomic.compare_add = 2;
	CHECK_EQ(ibv_post_send(e.qa, &aw, &bad), 0, "post FAA");
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_SUCCESS && *(uint64_t *)e.a == 40 && *target == 42,
	      "FAA through a type 2 window %d", wc.status);
	post_recv(e.qb, e.b + 100000, 256, e.mb->lkey, 77);
	CHECK_EQ(post_inv(e.qa, IBV_WR_SEND_WITH_INV, rk, e.a, 32, e.ma->lkey, 6), 0, "post SEND_WITH_INV");
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND, "SEND_WITH_INV %d",
	      wc.status);
	CHECK(t_wait_wc(e.cqb, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 77 && wc.opcode == IBV_WC_RECV &&
	      (wc.wc_flags & IBV_WC_WITH_INV) && !(wc.wc_flags & IBV_WC_WITH_IMM) && wc.invalidated_rkey == rk &&
	      wc.byte_len == 32, "receive with invalidate: flags 0x%x rkey 0x%x", wc.wc_flags, wc.invalidated_rkey);
	post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 8, e.ma->lkey, (uintptr_t)target, rk, 7, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_REM_ACCESS_ERR, "WRITE after remote invalidate %d", wc.status);
	CHECK_EQ(ibv_dealloc_mw(mw2), 0, "dealloc type 2");
	ibv_dereg_mr(mr);
	env_down(&e);

	/* type 2: LOCAL_INV, rebind, and the window answers only the QP it was bound through */
	mr = mw_env(&e, 0);
	mw2 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
	rk = ibv_inc_rkey(mw2->rkey);
	post_bind(e.qb, mw2, rk, mr, e.b, 4096, MW_RIGHTS, 1);
	CHECK(t_wait_wc(e.cqb, &wc) && wc.status == IBV_WC_SUCCESS, "bind %d", wc.status);
	CHECK_EQ(post_inv(e.qb, IBV_WR_LOCAL_INV, rk, NULL, 0, 0, 2), 0, "post LOCAL_INV");
	CHECK(t_wait_wc(e.cqb, &wc) && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_LOCAL_INV && wc.wr_id == 2,
	      "LOCAL_INV completion %d/%d", wc.status, wc.opcode);
	uint32_t rk2 = ibv_inc_rkey(rk);
	post_bind(e.qa, mw2, rk2, mr, e.b, 4096, MW_RIGHTS, 3); /* bound through qa, not qb */
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_SUCCESS, "rebind after invalidate %d", wc.status);
	post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 8, e.ma->lkey, (uintptr_t)e.b, rk2, 4, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_REM_ACCESS_ERR,
	      "type 2 window reached through a QP it is not bound to %d", wc.status);
	ibv_dealloc_mw(mw2);
	ibv_dereg_mr(mr);
	env_down(&e);

	/* bind errors */
	bind_fails("type 1 bind to a region without MW_BIND", IBV_MW_TYPE_1, 0, 0, 4096, IBV_ACCESS_REMOTE_READ, 1);
	bind_fails("type 2 bind to a region without MW_BIND", IBV_MW_TYPE_2, 0, 0, 4096, IBV_ACCESS_REMOTE_READ, 1);
	bind_fails("type 2 bind past the region", IBV_MW_TYPE_2, 0, BUF - 100, 4096, IBV_ACCESS_REMOTE_READ, 0);
	bind_fails("type 1 bind past the region", IBV_MW_TYPE_1, 0, BUF - 100, 4096, IBV_ACCESS_REMOTE_READ, 0);
	bind_fails("type 2 bind to a zero-based region", IBV_MW_TYPE_2, IBV_ACCESS_ZERO_BASED, 0, 4096,
		   IBV_ACCESS_REMOTE_READ, 0);
	bind_fails("type 2 bind of zero length", IBV_MW_TYPE_2, 0, 0, 0, IBV_ACCESS_REMOTE_READ, 0);

	/* rebinding a bound type 2 window; invalidating a type 1 window or a region */
	const char *inv_what[] = { "second bind of a bound type 2 window", "LOCAL_INV of a type 1 window",
				   "LOCAL_INV of a region's rkey" };
	for (int k = 0; k < 3; k++) {
		mr = mw_env(&e, 0);
		struct ibv_mw *mw = ibv_alloc_mw(e.pd, k == 1 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2);
		if (k == 0) {
			rk = ibv_inc_rkey(mw->rkey);
			post_bind(e.qb, mw, rk, mr, e.b, 4096, MW_RIGHTS, 1);
			t_wait_wc(e.cqb, &wc);
			post_bind(e.qb, mw, ibv_inc_rkey(rk), mr, e.b, 4096, MW_RIGHTS, 2);
		} else {
			post_inv(e.qb, IBV_WR_LOCAL_INV, k == 1 ? mw->rkey : mr->rkey, NULL, 0, 0, 2);
		}
		CHECK(t_wait_wc(e.cqb, &wc) && wc.wr_id == 2 &&
		      wc.status == (k == 0 ? IBV_WC_MW_BIND_ERR : IBV_WC_LOC_QP_OP_ERR), "%s: status %d",
		      inv_what[k], wc.status);
		ibv_dealloc_mw(mw);
		ibv_dereg_mr(mr);
		env_down(&e);
	}

	/* SEND_WITH_INV naming nothing that can be invalidated: an invalid request on both sides */
	mr = mw_env(&e, 0);
	post_recv(e.qb, e.b + 100000, 256, e.mb->lkey, 9);
	post_inv(e.qa, IBV_WR_SEND_WITH_INV, e.mb->rkey, e.a, 16, e.ma->lkey, 8);
	CHECK(t_wait_wc(e.cq, &wc) && wc.wr_id == 8 && wc.status == IBV_WC_REM_INV_REQ_ERR,
	      "SEND_WITH_INV of a region's rkey: sender %d", wc.status);
	CHECK(t_wait_wc(e.cqb, &wc) && wc.wr_id == 9 && wc.status == IBV_WC_REM_INV_REQ_ERR,
	      "SEND_WITH_INV of a region's rkey: receiver %d", wc.status);
	ibv_dereg_mr(mr);
	env_down(&e);
}

static int child_faults(const char *spec)
{
	setenv("SOFTRDMA_FAULTS", spec, 1);
	struct env e;
	env_up(&e, IBV_QPT_RC, 7);
	char tag[96];
	snprintf(tag, sizeof(tag), "faults %s", spec);
	rc_data_ops(&e, tag);
	env_down(&e);
	return t_fail;
}

/* Server and client in two processes exchange QPNs over a pipe, then move data. */
static int cross_process(void)
{
	int p2c[2], c2p[2];
	if (pipe(p2c) || pipe(c2p))
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		struct env e;
		memset(&e, 0, sizeof(e));
		e.ctx = t_open_dev();
		e.pd = ibv_alloc_pd(e.ctx);
		e.cqb = ibv_create_cq(e.ctx, 64, NULL, NULL, 0);
		e.b = aligned_alloc(4096, BUF);
		e.mb = ibv_reg_mr(e.pd, e.b, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
		t_fill(e.b, BUF, 77);
		ibv_query_gid(e.ctx, 1, 1, &e.gid);
		e.qb = mkqp(&e, e.cqb, IBV_QPT_RC, NULL);
		uint32_t info[2] = { e.qb->qp_num, e.mb->rkey }, peer;
		uint64_t addr = (uintptr_t)e.b;
		if (write(c2p[1], info, 8) != 8 || write(c2p[1], &addr, 8) != 8 || read(p2c[0], &peer, 4) != 4)
			_exit(3);
		t_qp_init(e.qb, &conn);
		t_qp_rtr(e.qb, peer, &e.gid, &conn);
		t_qp_rts(e.qb, &slow);
		post_recv(e.qb, e.b, 300000, e.mb->lkey, 1);
		char go = 1;
		if (write(c2p[1], &go, 1) != 1)
			_exit(3);
		struct ibv_wc wc;
		int ok = t_wait_wc(e.cqb, &wc) && wc.status == IBV_WC_SUCCESS && wc.byte_len == 300000;
		unsigned long sum = t_checksum(e.b, 300000);
		if (write(c2p[1], &sum, sizeof(sum)) != sizeof(sum))
			_exit(3);
		/* stay alive (without any verb call) while the peer writes and reads our memory */
		if (read(p2c[0], &go, 1) != 1)
			_exit(3);
		_exit(ok ? 0 : 4);
	}
	struct env e;
	memset(&e, 0, sizeof(e));
	e.ctx = t_open_dev();
	e.pd = ibv_alloc_pd(e.ctx);
	e.cq = ibv_create_cq(e.ctx, 64, NULL, NULL, 0);
	e.a = aligned_alloc(4096, BUF);
	e.ma = ibv_reg_mr(e.pd, e.a, BUF, IBV_ACCESS_LOCAL_WRITE);
	ibv_query_gid(e.ctx, 1, 1, &e.gid);
	e.qa = mkqp(&e, e.cq, IBV_QPT_RC, NULL);
	uint32_t info[2];
	uint64_t raddr;
	char go;
	if (read(c2p[0], info, 8) != 8 || read(c2p[0], &raddr, 8) != 8 || write(p2c[1], &e.qa->qp_num, 4) != 4)
		return 1;
	t_qp_init(e.qa, &conn);
	t_qp_rtr(e.qa, info[0], &e.gid, &conn);
	t_qp_rts(e.qa, &slow);
	if (read(c2p[0], &go, 1) != 1)
		return 1;
	struct ibv_wc wc;
	t_fill(e.a, 300000, 3);
	post1(e.qa, IBV_WR_SEND, e.a, 300000, e.ma->lkey, 0, 0, 1, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_SUCCESS, "cross-process send %d", wc.status);
	unsigned long sum;
	CHECK(read(c2p[0], &sum, sizeof(sum)) == sizeof(sum) && sum == t_checksum(e.a, 300000),
	      "cross-process send checksum");
	/* read the peer's memory: its agent answers while the peer blocks in read(2) */
	unsigned char ref[65536];
	t_fill(ref, sizeof(ref), 0);
	memcpy(ref, ref, 0);
	post1(e.qa, IBV_WR_RDMA_READ, e.a, 65536, e.ma->lkey, raddr + 400000, info[1], 2, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_SUCCESS, "cross-process read %d", wc.status);
	/* the peer filled its whole buffer from seed 77: recompute that slice */
	unsigned char *full = malloc(BUF);
	t_fill(full, BUF, 77);
	CHECK(!memcmp(e.a, full + 400000, 65536), "cross-process read data");
	t_fill(e.a, 100000, 9);
	post1(e.qa, IBV_WR_RDMA_WRITE, e.a, 100000, e.ma->lkey, raddr + 1000000, info[1], 3, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_SUCCESS, "cross-process write %d", wc.status);
	post1(e.qa, IBV_WR_RDMA_READ, e.a + 200000, 100000, e.ma->lkey, raddr + 1000000, info[1], 4, 0);
	CHECK(t_wait_wc(e.cq, &wc) && wc.status == IBV_WC_SUCCESS, "cross-process read back %d", wc.status);
	CHECK(!memcmp(e.a, e.a + 200000, 100000), "cross-process write then read back");
	free(full);
	go = 1;
	if (write(p2c[1], &go, 1) != 1)
		return 1;
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "peer process status %d", st);
	/* peer gone: the next send must end in RETRY_EXC_ERR */
	post1(e.qa, IBV_WR_SEND, e.a, 64, e.ma->lkey, 0, 0, 5, 0);
	CHECK(t_wait_wc(e.cq, &wc) && (wc.status == IBV_WC_RETRY_EXC_ERR), "send to a dead process %d", wc.status);
	return 0;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* fault-injection modes run in children before this process touches the library */
	const char *modes[] = { "seed=1,drop=0.05", "seed=2,dup=0.05", "seed=3,reorder=0.05",
				"seed=4,delay=0.05:1ms", "seed=5,drop=0.03,dup=0.03,reorder=0.03,delay=0.03:1ms" };
	for (unsigned i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		if (getenv("T_ONLY_FAULTS")) {
			exit(child_faults(getenv("T_ONLY_FAULTS")) ? 1 : 0);
		}
		pid_t pid = fork();
		if (pid == 0) {
			t_fail = 0;
			_exit(child_faults(modes[i]) ? 1 : 0);
		}
		int st;
		waitpid(pid, &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "data integrity under %s (status %d)", modes[i], st);
	}
	/* the error, channel, SRQ and UD tests once more through the packet path
	 * (faults configured with all probabilities zero) */
	pid_t pid = fork();
	if (pid == 0) {
		setenv("SOFTRDMA_FAULTS", "seed=9", 1);
		t_fail = 0;
		test_errors();
		test_channels_srq_ud();
		test_mw();
		_exit(t_fail ? 1 : 0);
	}
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "error statuses over the packet path (status %d)", st);
	pid = fork();
	if (pid == 0) {
		t_fail = 0; /* count only this child's own checks */
		_exit(cross_process() || t_fail ? 1 : 0);
	}
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "cross-process tests (status %d)", st);

	struct env e;
	env_up(&e, IBV_QPT_RC, 7);
	struct ibv_port_attr pa;
	CHECK(ibv_query_port(e.ctx, 1, &pa) == 0 && pa.state == IBV_PORT_ACTIVE &&
	      pa.link_layer == IBV_LINK_LAYER_ETHERNET, "port active, Ethernet");
	CHECK(e.gid.raw[10] == 0xff && e.gid.raw[11] == 0xff, "GID 1 is IPv4-mapped");
	rc_data_ops(&e, "in-process RC");
	env_down(&e);
	test_qpn_reuse();
	test_state_machine();
	test_errors();
	test_channels_srq_ud();
	test_mw();
	/* a process that used verbs forks: the child opens the device afresh and talks
	 * to its own child across processes */
	struct env keep;
	env_up(&keep, IBV_QPT_RC, 7);
	pid = fork();
	if (pid == 0) {
		t_fail = 0; /* count only this child's own checks */
		_exit(cross_process() || t_fail ? 1 : 0);
	}
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "cross-process tests after fork of a verbs user (status %d)", st);
	rc_data_ops(&keep, "parent after fork");
	env_down(&keep);
	return t_report();
}
