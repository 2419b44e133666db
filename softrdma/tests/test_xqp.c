/*
 * softrdma's extended QP and CQ: ibv_create_qp_ex with the post-send API (ibv_wr_*),
 * ibv_create_cq_ex with start_poll/next_poll/end_poll and the read_* accessors,
 * through the stock inline helpers of <infiniband/verbs.h>. Data byte-exact, statuses
 * and errnos as rxe gives them, and each ibv_wr_* opcode checked against the classic
 * ibv_post_send of the same request.
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <poll.h>
#include <unistd.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <stdint.h>
#include "testlib.h"

#define BUF (2 << 20)
#define ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	     IBV_ACCESS_REMOTE_ATOMIC)
#define RC_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE | \
		IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | \
		IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | \
		IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV)
#define ALL_WC (IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | \
		IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | \
		IBV_WC_EX_WITH_DLID_PATH_BITS)

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq_ex *ca, *cb;
	struct ibv_qp *qa, *qb;
	struct ibv_qp_ex *xa, *xb;
	unsigned char *a, *b;
	struct ibv_mr *ma, *mb;
	union ibv_gid gid;
};

/* one completion as read through the extended CQ */
struct xwc {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t byte_len, qp_num, src_qp;
	uint32_t imm;
	unsigned flags;
};

static struct ibv_cq_ex *mkcq(struct ibv_context *ctx, struct ibv_comp_channel *ch, uint64_t wc_flags)
{
	struct ibv_cq_init_attr_ex ca = { .cqe = 256, .channel = ch, .wc_flags = wc_flags };
	return ibv_create_cq_ex(ctx, &ca);
}

static struct ibv_qp *mkqp(struct env *e, struct ibv_cq_ex *cq, enum ibv_qp_type t, uint64_t ops,
			   uint32_t max_wr)
{
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = ibv_cq_ex_to_cq(cq), .qp_type = t,
		.cap = { .max_send_wr = max_wr, .max_recv_wr = 64, .max_send_sge = 4, .max_recv_sge = 4,
			 .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = e->pd, .send_ops_flags = ops };
	return ibv_create_qp_ex(e->ctx, &ia);
}

static const struct t_conn conn = {
	.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	.qkey = 0x11111111, .rq_psn = 7, .sq_psn = 7, .rd_atomic = 4, .min_rnr_timer = 1, .hop_limit = 64,
	.timeout = 12, .retry_cnt = 7, .rnr_retry = 7 };

static void env_up(struct env *e, enum ibv_qp_type t, uint64_t ops, int connect)
{
	memset(e, 0, sizeof(*e));
	e->ctx = t_open_dev();
	e->pd = ibv_alloc_pd(e->ctx);
	e->ch = ibv_create_comp_channel(e->ctx);
	e->ca = mkcq(e->ctx, e->ch, ALL_WC);
	e->cb = mkcq(e->ctx, e->ch, ALL_WC);
	e->a = aligned_alloc(4096, BUF);
	e->b = aligned_alloc(4096, BUF);
	memset(e->a, 0, BUF);
	memset(e->b, 0, BUF);
	e->ma = ibv_reg_mr(e->pd, e->a, BUF, ACC);
	e->mb = ibv_reg_mr(e->pd, e->b, BUF, ACC);
	ibv_query_gid(e->ctx, 1, 1, &e->gid);
	e->qa = mkqp(e, e->ca, t, ops, 16);
	e->qb = mkqp(e, e->cb, t, ops, 16);
	if (!e->pd || !e->ca || !e->cb || !e->ma || !e->mb || !e->qa || !e->qb) {
		fprintf(stderr, "setup failed: %s\n", strerror(errno));
		exit(2);
	}
	e->xa = ibv_qp_to_qp_ex(e->qa);
	e->xb = ibv_qp_to_qp_ex(e->qb);
	if (connect)
		t_check_connect(e->qa, e->qb, &e->gid, &conn);
}

static void env_down(struct env *e)
{
	CHECK_EQ(ibv_destroy_qp(e->qa), 0, "destroy qp a");
	CHECK_EQ(ibv_destroy_qp(e->qb), 0, "destroy qp b");
	ibv_dereg_mr(e->ma);
	ibv_dereg_mr(e->mb);
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(e->ca)), 0, "destroy cq_ex a");
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(e->cb)), 0, "destroy cq_ex b");
	ibv_destroy_comp_channel(e->ch);
	ibv_dealloc_pd(e->pd);
	ibv_close_device(e->ctx);
	free(e->a);
	free(e->b);
}

static void read_cur(struct ibv_cq_ex *cq, struct xwc *w)
{
	w->wr_id = cq->wr_id;
	w->status = cq->status;
	w->opcode = ibv_wc_read_opcode(cq);
	w->byte_len = ibv_wc_read_byte_len(cq);
	w->qp_num = ibv_wc_read_qp_num(cq);
	w->src_qp = ibv_wc_read_src_qp(cq);
	w->flags = ibv_wc_read_wc_flags(cq);
	w->imm = w->flags & IBV_WC_WITH_IMM ? ntohl(ibv_wc_read_imm_data(cq)) : 0;
}

/* Polls up to n completions within ~5 s through start_poll/next_poll/end_poll. */
static int poll_x(struct ibv_cq_ex *cq, struct xwc *out, int n)
{
	int got = 0;
	for (int spin = 0; got < n && spin < 500000; spin++) {
		struct ibv_poll_cq_attr pa = { 0 };
		int rc = ibv_start_poll(cq, &pa);
		if (rc == ENOENT) {
			usleep(10);
			continue;
		}
		if (rc) {
			CHECK(0, "start_poll: %d", rc);
			return got;
		}
		do {
			read_cur(cq, &out[got++]);
		} while (got < n && ibv_next_poll(cq) == 0);
		ibv_end_poll(cq);
	}
	return got;
}

static int poll1(struct ibv_cq_ex *cq, struct xwc *w)
{
	return poll_x(cq, w, 1);
}

static int post_recv(struct ibv_qp *q, void *addr, uint32_t len, uint32_t lkey, uint64_t id)
{
	struct ibv_sge s = { (uintptr_t)addr, len, lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bad;
	return ibv_post_recv(q, &w, &bad);
}

/* ---------------------------------------------------------------- creation */

static void test_create(void)
{
	struct env e;
	env_up(&e, IBV_QPT_RC, RC_OPS, 0);
	/* cq_ex: rxe's wc flags only; no timestamps, no creation flags */
	errno = 0;
	CHECK(!mkcq(e.ctx, NULL, IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) && errno == EOPNOTSUPP,
	      "timestamp wc flag refused: errno %d", errno);
	errno = 0;
	CHECK(!mkcq(e.ctx, NULL, IBV_WC_EX_WITH_FLOW_TAG) && errno == EOPNOTSUPP, "flow tag refused: %d", errno);
	struct ibv_cq_init_attr_ex ca = { .cqe = 4, .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
					  .flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED };
	errno = 0;
	CHECK(!ibv_create_cq_ex(e.ctx, &ca) && errno == EOPNOTSUPP, "cq creation flags refused: %d", errno);
	ca = (struct ibv_cq_init_attr_ex){ .cqe = 0 };
	errno = 0;
	CHECK(!ibv_create_cq_ex(e.ctx, &ca) && errno == EINVAL, "cqe 0 refused: %d", errno);
	struct ibv_cq_ex *few = mkcq(e.ctx, NULL, IBV_WC_EX_WITH_BYTE_LEN);
	CHECK(few && few->read_byte_len && !few->read_imm_data && !few->read_qp_num &&
	      !few->read_completion_ts && few->read_opcode && few->read_wc_flags,
	      "accessors exactly for the wc flags asked for");
	struct ibv_poll_cq_attr pa = { 0 };
	CHECK_EQ(ibv_start_poll(few, &pa), ENOENT, "start_poll on an empty CQ");
	struct ibv_wc wc;
	CHECK_EQ(ibv_poll_cq(ibv_cq_ex_to_cq(few), 1, &wc), 0, "classic poll of a cq_ex");
	CHECK_EQ(ibv_resize_cq(ibv_cq_ex_to_cq(few), 32), 0, "resize a cq_ex");
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(few)), 0, "destroy a cq_ex");
	/* the device reports no completion clock */
	struct ibv_device_attr_ex da;
	CHECK(ibv_query_device_ex(e.ctx, NULL, &da) == 0 && da.hca_core_clock == 0 &&
	      da.completion_timestamp_mask == 0, "no HCA clock reported");

	/* qp_ex: what rxe supports per QP type */
	CHECK(e.xa != NULL && (void *)e.xa == (void *)e.qa, "ibv_qp_to_qp_ex of an extended QP");
	CHECK(e.xa->wr_send && e.xa->wr_rdma_read && e.xa->wr_atomic_cmp_swp && e.xa->wr_bind_mw &&
	      e.xa->wr_local_inv && e.xa->wr_send_inv && !e.xa->wr_send_tso && !e.xa->wr_atomic_write &&
	      e.xa->wr_set_sge && e.xa->wr_set_inline_data_list && e.xa->wr_start && e.xa->wr_complete,
	      "builders for the opcodes asked for");
	struct ibv_qp *q = mkqp(&e, e.ca, IBV_QPT_RC, IBV_QP_EX_WITH_SEND, 4);
	CHECK(q && ibv_qp_to_qp_ex(q)->wr_send && !ibv_qp_to_qp_ex(q)->wr_rdma_write,
	      "only the opcodes asked for get a builder");
	ibv_destroy_qp(q);
	errno = 0;
	CHECK(!mkqp(&e, e.ca, IBV_QPT_RC, IBV_QP_EX_WITH_TSO, 4) && errno == EOPNOTSUPP, "TSO refused: %d", errno);
	errno = 0;
	CHECK(!mkqp(&e, e.ca, IBV_QPT_UD, IBV_QP_EX_WITH_RDMA_WRITE, 4) && errno == EOPNOTSUPP,
	      "UD WRITE refused: %d", errno);
	errno = 0;
	CHECK(!mkqp(&e, e.ca, IBV_QPT_UC, IBV_QP_EX_WITH_RDMA_READ, 4) && errno == EOPNOTSUPP,
	      "UC READ refused: %d", errno);
	q = mkqp(&e, e.ca, IBV_QPT_UD, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM, 4);
	CHECK(q && ibv_qp_to_qp_ex(q), "UD qp_ex");
	if (q)
		ibv_destroy_qp(q);
	struct ibv_qp_init_attr_ex ia = { .send_cq = ibv_cq_ex_to_cq(e.ca), .recv_cq = ibv_cq_ex_to_cq(e.ca),
					  .qp_type = IBV_QPT_RC, .cap = { 4, 4, 1, 1, 0 },
					  .comp_mask = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
					  .send_ops_flags = IBV_QP_EX_WITH_SEND };
	errno = 0;
	CHECK(!ibv_create_qp_ex(e.ctx, &ia) && errno == EINVAL, "no PD: %d", errno);
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	ia.pd = e.pd;
	ia.create_flags = IBV_QP_CREATE_SCATTER_FCS;
	errno = 0;
	CHECK(!ibv_create_qp_ex(e.ctx, &ia) && errno == EOPNOTSUPP, "create flags refused: %d", errno);
	/* a QP without IBV_QP_INIT_ATTR_SEND_OPS_FLAGS has no qp_ex (as libibverbs) */
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	ia.create_flags = 0;
	q = ibv_create_qp_ex(e.ctx, &ia);
	CHECK(q && !ibv_qp_to_qp_ex(q), "a classic QP has no qp_ex");
	if (q)
		ibv_destroy_qp(q);

	/* posting before RTS fails, and posts nothing */
	ibv_wr_start(e.xa);
	e.xa->wr_id = 1;
	e.xa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(e.xa);
	ibv_wr_set_sge(e.xa, e.ma->lkey, (uintptr_t)e.a, 8);
	CHECK_EQ(ibv_wr_complete(e.xa), EINVAL, "wr_complete in RESET");
	env_down(&e);
}

/* ---------------------------------------------------------------- data path */

static void test_rc_ops(void)
{
	struct env e;
	struct xwc w[8];
	env_up(&e, IBV_QPT_RC, RC_OPS, 1);
	struct ibv_qp_ex *x = e.xa;
	size_t sizes[] = { 1, 1024, 5000, 300000 };
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = (uint32_t)sizes[i];
		/* SEND, WRITE, READ in one batch: one wr_complete posts the three */
		t_fill(e.a, n, n);
		t_fill(e.a + 400000, n, n + 1);
		t_fill(e.b + 800000, n, n + 2);
		memset(e.b, 0, n);
		CHECK_EQ(post_recv(e.qb, e.b, n, e.mb->lkey, 70), 0, "post recv");
		ibv_wr_start(x);
		x->wr_id = 1;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(x);
		ibv_wr_set_sge(x, e.ma->lkey, (uintptr_t)e.a, n);
		x->wr_id = 2;
		ibv_wr_rdma_write(x, e.mb->rkey, (uintptr_t)e.b + 400000);
		ibv_wr_set_sge(x, e.ma->lkey, (uintptr_t)e.a + 400000, n);
		x->wr_id = 3;
		ibv_wr_rdma_read(x, e.mb->rkey, (uintptr_t)e.b + 800000);
		ibv_wr_set_sge(x, e.ma->lkey, (uintptr_t)e.a + 800000, n);
		CHECK_EQ(ibv_wr_complete(x), 0, "wr_complete of a batch of 3");
		int got = poll_x(e.ca, w, 3);
		CHECK(got == 3 && w[0].wr_id == 1 && w[0].status == IBV_WC_SUCCESS && w[0].opcode == IBV_WC_SEND &&
		      w[1].wr_id == 2 && w[1].opcode == IBV_WC_RDMA_WRITE && w[1].status == IBV_WC_SUCCESS &&
		      w[2].wr_id == 3 && w[2].opcode == IBV_WC_RDMA_READ && w[2].byte_len == n &&
		      w[2].status == IBV_WC_SUCCESS && w[0].qp_num == e.qa->qp_num,
		      "batch completions for %u bytes (%d)", n, got);
		CHECK(poll1(e.cb, w) && w[0].wr_id == 70 && w[0].opcode == IBV_WC_RECV && w[0].byte_len == n &&
		      w[0].status == IBV_WC_SUCCESS && w[0].qp_num == e.qb->qp_num && w[0].src_qp == 0,
		      "recv completion %u (src_qp 0 on RC, as rxe)", n);
		CHECK(!memcmp(e.a, e.b, n), "send data %u", n);
		CHECK(!memcmp(e.a + 400000, e.b + 400000, n), "write data %u", n);
		CHECK(!memcmp(e.a + 800000, e.b + 800000, n), "read data %u", n);
	}
	/* immediates */
	CHECK_EQ(post_recv(e.qb, e.b, 64, e.mb->lkey, 71), 0, "post recv");
	CHECK_EQ(post_recv(e.qb, e.b, 64, e.mb->lkey, 72), 0, "post recv");
	ibv_wr_start(x);
	x->wr_id = 4;
	ibv_wr_send_imm(x, htonl(0xa1b2c3d4));
	ibv_wr_set_sge(x, e.ma->lkey, (uintptr_t)e.a, 16);
	x->wr_id = 5;
	ibv_wr_rdma_write_imm(x, e.mb->rkey, (uintptr_t)e.b + 65536, htonl(0x01020304));
	ibv_wr_set_sge(x, e.ma->lkey, (uintptr_t)e.a + 100, 100);
	CHECK_EQ(ibv_wr_complete(x), 0, "imm batch");
	CHECK(poll_x(e.ca, w, 2) == 2 && w[0].wr_id == 4 && w[1].wr_id == 5 && w[1].opcode == IBV_WC_RDMA_WRITE,
	      "imm send completions");
	CHECK(poll_x(e.cb, w, 2) == 2 && w[0].opcode == IBV_WC_RECV && (w[0].flags & IBV_WC_WITH_IMM) &&
	      w[0].imm == 0xa1b2c3d4 && w[0].byte_len == 16 && w[1].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
	      w[1].imm == 0x01020304 && w[1].byte_len == 100, "immediates read through read_imm_data");
	CHECK(!memcmp(e.a + 100, e.b + 65536, 100), "write_imm data");
	/* atomics */
	uint64_t *target = (uint64_t *)(e.b + 128 * 1024);
	*target = 40;
	ibv_wr_start(x);
	x->wr_id = 6;
	ibv_wr_atomic_fetch_add(x, e.mb->rkey, (uintptr_t)target, 2);
	ibv_wr_set_sge(x, e.ma->lkey, (uintptr_t)e.a, 8);
	x->wr_id = 7;
	ibv_wr_atomic_cmp_swp(x, e.mb->rkey, (uintptr_t)target, 42, 7);
	ibv_wr_set_sge(x, e.ma->lkey, (uintptr_t)e.a + 8, 8);
	CHECK_EQ(ibv_wr_complete(x), 0, "atomics batch");
	CHECK(poll_x(e.ca, w, 2) == 2 && w[0].opcode == IBV_WC_FETCH_ADD && w[0].status == IBV_WC_SUCCESS &&
	      w[1].opcode == IBV_WC_COMP_SWAP && w[1].status == IBV_WC_SUCCESS && w[1].byte_len == 8,
	      "atomic completions");
	CHECK(((uint64_t *)e.a)[0] == 40 && ((uint64_t *)e.a)[1] == 42 && *target == 7, "atomic values");
	/* inline data list and SGE list: gathered in order; inline captured at the call */
	unsigned char ref[256];
	t_fill(ref, 256, 99);
	memcpy(e.a, ref, 256);
	CHECK_EQ(post_recv(e.qb, e.b, 256, e.mb->lkey, 73), 0, "post recv");
	CHECK_EQ(post_recv(e.qb, e.b + 1024, 256, e.mb->lkey, 74), 0, "post recv");
	unsigned char tmp[30];
	memcpy(tmp, ref + 200, 30);
	ibv_wr_start(x);
	x->wr_id = 8;
	ibv_wr_send(x);
	struct ibv_data_buf db[3] = { { e.a, 10 }, { e.a + 100, 20 }, { tmp, 30 } };
	ibv_wr_set_inline_data_list(x, 3, db);
	memset(tmp, 0, sizeof(tmp));
	x->wr_id = 9;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
	ibv_wr_send(x);
	struct ibv_sge sg[3] = { { (uintptr_t)e.a + 200, 5, e.ma->lkey }, { (uintptr_t)e.a, 7, e.ma->lkey },
				 { (uintptr_t)e.a + 50, 9, e.ma->lkey } };
	ibv_wr_set_sge_list(x, 3, sg);
	CHECK_EQ(ibv_wr_complete(x), 0, "inline + gather batch");
	CHECK(poll_x(e.ca, w, 2) == 2 && w[0].wr_id == 8 && w[1].wr_id == 9 && w[0].status == IBV_WC_SUCCESS,
	      "inline + gather completions");
	CHECK(poll_x(e.cb, w, 2) == 2 && w[0].byte_len == 60 && w[1].byte_len == 21, "inline + gather lengths");
	CHECK(!memcmp(e.b, ref, 10) && !memcmp(e.b + 10, ref + 100, 20) && !memcmp(e.b + 30, ref + 200, 30),
	      "inline data list order");
	CHECK(!memcmp(e.b + 1024, ref + 200, 5) && !memcmp(e.b + 1029, ref, 7) && !memcmp(e.b + 1036, ref + 50, 9),
	      "sge list order");
	/* unsignaled: no completion */
	CHECK_EQ(post_recv(e.qb, e.b, 64, e.mb->lkey, 75), 0, "post recv");
	ibv_wr_start(x);
	x->wr_id = 10;
	x->wr_flags = 0;
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, ref, 4);
	CHECK_EQ(ibv_wr_complete(x), 0, "unsignaled");
	CHECK(poll1(e.cb, w) && w[0].wr_id == 75 && w[0].byte_len == 4, "unsignaled delivered");
	usleep(20000);
	struct ibv_poll_cq_attr pa = { 0 };
	CHECK_EQ(ibv_start_poll(e.ca, &pa), ENOENT, "no completion for an unsignaled WR");

	/* batch errors: the whole batch is dropped, nothing is posted */
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_start(x);
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, e.a, 65); /* max_inline_data 64 */
	CHECK_EQ(ibv_wr_complete(x), ENOSPC, "inline data too long");
	ibv_wr_start(x);
	ibv_wr_send(x);
	struct ibv_sge five[5] = { { (uintptr_t)e.a, 1, e.ma->lkey } };
	ibv_wr_set_sge_list(x, 5, five); /* max_send_sge 4 */
	CHECK_EQ(ibv_wr_complete(x), ENOSPC, "too many SGEs");
	ibv_wr_start(x);
	for (int i = 0; i < 17; i++) { /* max_send_wr 16 */
		ibv_wr_send(x);
		ibv_wr_set_sge(x, e.ma->lkey, (uintptr_t)e.a, 1);
	}
	CHECK_EQ(ibv_wr_complete(x), ENOSPC, "more WRs than the send queue holds");
	ibv_wr_start(x);
	x->wr_id = 11;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, e.ma->lkey, (uintptr_t)e.a, 8);
	ibv_wr_abort(x);
	usleep(20000);
	CHECK_EQ(ibv_start_poll(e.ca, &pa), ENOENT, "nothing posted by the failed or aborted batches");
	CHECK_EQ(ibv_start_poll(e.cb, &pa), ENOENT, "nothing delivered by the failed or aborted batches");
	/* a wrong rkey: the completion error as the classic path reports it */
	ibv_wr_start(x);
	x->wr_id = 12;
	ibv_wr_rdma_write(x, e.mb->rkey + 1000, (uintptr_t)e.b);
	ibv_wr_set_sge(x, e.ma->lkey, (uintptr_t)e.a, 8);
	CHECK_EQ(ibv_wr_complete(x), 0, "post a write with a bad rkey");
	CHECK(poll1(e.ca, w) && w[0].wr_id == 12 && w[0].status == IBV_WC_REM_ACCESS_ERR,
	      "bad rkey: REM_ACCESS_ERR (status %d)", w[0].status);
	env_down(&e);
}

/* Every opcode the post-send API builds gives wr_complete the return of the classic
 * ibv_post_send of the same request (the memory-window opcodes among them). */
static void test_same_as_classic(void)
{
	struct {
		enum ibv_wr_opcode op;
		const char *name;
	} ops[] = { { IBV_WR_LOCAL_INV, "LOCAL_INV" }, { IBV_WR_SEND_WITH_INV, "SEND_WITH_INV" },
		    { IBV_WR_BIND_MW, "BIND_MW" } };
	for (unsigned i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		struct env e;
		struct xwc w[4];
		env_up(&e, IBV_QPT_RC, RC_OPS, 1);
		struct ibv_qp_ex *x = e.xa;
		post_recv(e.qb, e.b, 64, e.mb->lkey, 1);
		post_recv(e.qb, e.b, 64, e.mb->lkey, 2);
		/* a real window where the device has them, else none (the opcode is refused first) */
		struct ibv_mw *mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
		struct ibv_mw_bind_info bi = { .mr = e.ma, .addr = (uintptr_t)e.a, .length = 64,
					       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE };
		uint32_t key = mw ? mw->rkey : 0x12345678;
		struct ibv_send_wr cw = { .wr_id = 30, .opcode = ops[i].op, .send_flags = IBV_SEND_SIGNALED }, *bad;
		cw.invalidate_rkey = key;
		if (ops[i].op == IBV_WR_BIND_MW) {
			cw.bind_mw.mw = mw;
			cw.bind_mw.rkey = key;
			cw.bind_mw.bind_info = bi;
		}
		int classic = ibv_post_send(e.qa, &cw, &bad);
		ibv_wr_start(x);
		x->wr_id = 31;
		x->wr_flags = IBV_SEND_SIGNALED;
		if (ops[i].op == IBV_WR_LOCAL_INV)
			ibv_wr_local_inv(x, key);
		else if (ops[i].op == IBV_WR_SEND_WITH_INV)
			ibv_wr_send_inv(x, key);
		else
			ibv_wr_bind_mw(x, mw, key, &bi);
		int ex = ibv_wr_complete(x);
		CHECK(ex == classic, "%s: wr_complete %d, classic post_send %d", ops[i].name, ex, classic);
		if (!classic)
			poll_x(e.ca, w, 2);
		if (mw)
			ibv_dealloc_mw(mw);
		env_down(&e);
	}
}

/* UD through set_ud_addr, and a completion channel on an extended CQ. */
static void test_ud_channel(void)
{
	struct env e;
	struct xwc w[2];
	env_up(&e, IBV_QPT_UD, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM, 1);
	struct ibv_ah *ah = t_create_ah(e.pd, &e.gid, 0);
	CHECK(ah != NULL, "create ah");
	CHECK_EQ(ibv_req_notify_cq(ibv_cq_ex_to_cq(e.cb), 0), 0, "arm the cq_ex");
	t_fill(e.a, 512, 5);
	CHECK_EQ(post_recv(e.qb, e.b, 1024, e.mb->lkey, 1), 0, "post recv");
	ibv_wr_start(e.xa);
	e.xa->wr_id = 2;
	e.xa->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(e.xa, htonl(77));
	ibv_wr_set_ud_addr(e.xa, ah, e.qb->qp_num, 0x11111111);
	ibv_wr_set_sge(e.xa, e.ma->lkey, (uintptr_t)e.a, 512);
	CHECK_EQ(ibv_wr_complete(e.xa), 0, "UD wr_complete");
	struct pollfd pfd = { .fd = e.ch->fd, .events = POLLIN };
	CHECK_EQ(poll(&pfd, 1, 5000), 1, "channel event for the cq_ex");
	struct ibv_cq *evcq = NULL;
	void *evctx;
	CHECK(ibv_get_cq_event(e.ch, &evcq, &evctx) == 0 && evcq == ibv_cq_ex_to_cq(e.cb),
	      "the event names the cq_ex");
	if (evcq)
		ibv_ack_cq_events(evcq, 1);
	CHECK(poll1(e.ca, w) && w[0].wr_id == 2 && w[0].status == IBV_WC_SUCCESS, "UD send completion");
	CHECK(poll1(e.cb, w) && w[0].wr_id == 1 && w[0].byte_len == 512 + 40 && w[0].imm == 77 &&
	      w[0].src_qp == e.qa->qp_num && (w[0].flags & IBV_WC_GRH), "UD recv completion");
	CHECK(!memcmp(e.a, e.b + 40, 512), "UD data after the GRH");
	ibv_destroy_ah(ah);
	env_down(&e);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* once through the packet path (faults configured, all probabilities zero), in a
	 * child that sets it before touching the library; then in-process */
	pid_t pid = fork();
	if (pid == 0) {
		setenv("SOFTRDMA_FAULTS", "seed=9", 1);
		test_rc_ops();
		test_ud_channel();
		_exit(t_fail ? 1 : 0);
	}
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "extended QP/CQ over the packet path (status %d)", st);
	test_create();
	test_rc_ops();
	test_same_as_classic();
	test_ud_channel();
	return t_report();
}
