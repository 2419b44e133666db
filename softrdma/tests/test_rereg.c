/*
 * softrdma: ibv_rereg_mr (translation, PD and access changes, its return codes and errno,
 * a region with bound memory windows refused) and UD messages longer than the port's active
 * MTU (completed successfully, nothing delivered: IBA C10-93.1.1 as rxe does it).
 * Runs with SOFTRDMA_MTU=1024 (set before the device is opened) so the UD boundary is 1024.
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <unistd.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdbool.h>
#include "testlib.h"

#define BUF 65536
#define ALL_RIGHTS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

struct pair {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cqa, *cqb;
	struct ibv_qp *qa, *qb;
	union ibv_gid gid;
};

static struct ibv_qp *mkqp(struct pair *p, struct ibv_cq *cq, enum ibv_qp_type t)
{
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = t,
				       .cap = { .max_send_wr = 32, .max_recv_wr = 32, .max_send_sge = 2,
						.max_recv_sge = 2 } };
	return ibv_create_qp(p->pd, &ia);
}

static const struct t_conn conn = {
	.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, .qkey = 0x1234, .rq_psn = 7, .sq_psn = 7,
	.rd_atomic = 4, .min_rnr_timer = 1, .hop_limit = 64, .timeout = 12, .retry_cnt = 7, .rnr_retry = 7 };

/* new connected QPs on p's context and PD (after an error moved the old ones to ERR) */
static void pair_qps(struct pair *p, enum ibv_qp_type t)
{
	p->qa = mkqp(p, p->cqa, t);
	p->qb = mkqp(p, p->cqb, t);
	if (!p->qa || !p->qb || t_connect(p->qa, p->qb, &p->gid, &conn)) {
		fprintf(stderr, "setup failed: %s\n", strerror(errno));
		exit(2);
	}
}

static void pair_qps_down(struct pair *p)
{
	ibv_destroy_qp(p->qa);
	ibv_destroy_qp(p->qb);
}

static void pair_up(struct pair *p, enum ibv_qp_type t)
{
	memset(p, 0, sizeof(*p));
	p->ctx = t_open_dev();
	p->pd = ibv_alloc_pd(p->ctx);
	p->cqa = ibv_create_cq(p->ctx, 64, NULL, NULL, 0);
	p->cqb = ibv_create_cq(p->ctx, 64, NULL, NULL, 0);
	ibv_query_gid(p->ctx, 1, 1, &p->gid);
	if (!p->pd || !p->cqa || !p->cqb) {
		fprintf(stderr, "setup failed: %s\n", strerror(errno));
		exit(2);
	}
	pair_qps(p, t);
}

static void pair_down(struct pair *p)
{
	pair_qps_down(p);
	ibv_destroy_cq(p->cqa);
	ibv_destroy_cq(p->cqb);
	CHECK_EQ(ibv_dealloc_pd(p->pd), 0, "dealloc pd at the end");
	ibv_close_device(p->ctx);
}

/* one signaled work request of op with one SGE; its completion's status, or -1 when none came */
static int do_send(struct ibv_qp *q, struct ibv_cq *cq, enum ibv_wr_opcode op, void *addr, uint32_t len,
		   uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge s = { (uintptr_t)addr, len, lkey };
	struct ibv_send_wr w = { .wr_id = 9, .sg_list = &s, .num_sge = 1, .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	w.wr.rdma.remote_addr = raddr;
	w.wr.rdma.rkey = rkey;
	if (ibv_post_send(q, &w, &bad))
		return -2;
	struct ibv_wc wc;
	return t_wait_wc(cq, &wc) ? (int)wc.status : -1;
}

static void post_recv(struct ibv_qp *q, void *addr, uint32_t len, uint32_t lkey, uint64_t id)
{
	struct ibv_sge s = { (uintptr_t)addr, len, lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bad;
	CHECK_EQ(ibv_post_recv(q, &w, &bad), 0, "post recv");
}

/* ibv_rereg_mr's result and errno, as one value to compare: rc * 1000 - errno */
static int rereg(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t len, int access)
{
	errno = 0;
	int rc = ibv_rereg_mr(mr, flags, pd, addr, len, access);
	return rc ? rc * 1000 - errno : 0;
}
#define ERR(code, e) ((code) * 1000 - (e))

static void test_bad_flows(void)
{
	struct ibv_context *ctx = t_open_dev();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	unsigned char *a = aligned_alloc(4096, BUF);
	struct ibv_mr *mr = ibv_reg_mr(pd, a, BUF, ALL_RIGHTS | IBV_ACCESS_MW_BIND);
	CHECK(mr != NULL, "reg");
	uint32_t lkey = mr->lkey, rkey = mr->rkey;

	/* what libibverbs refuses before the device: IBV_REREG_MR_ERR_INPUT, EINVAL */
	CHECK_EQ(rereg(mr, 8, NULL, NULL, 0, 0), ERR(IBV_REREG_MR_ERR_INPUT, EINVAL), "unknown flag");
	CHECK_EQ(rereg(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, BUF, 0),
		 ERR(IBV_REREG_MR_ERR_INPUT, EINVAL), "translation without an address");
	CHECK_EQ(rereg(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, a, 0, 0),
		 ERR(IBV_REREG_MR_ERR_INPUT, EINVAL), "translation without a length");
	CHECK_EQ(rereg(mr, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, IBV_ACCESS_LOCAL_WRITE),
		 ERR(IBV_REREG_MR_ERR_INPUT, EINVAL), "access bits without CHANGE_ACCESS");

	/* what the device refuses: IBV_REREG_MR_ERR_CMD, errno set */
	CHECK_EQ(rereg(mr, 0, NULL, NULL, 0, 0), ERR(IBV_REREG_MR_ERR_CMD, EINVAL), "no flags");
	CHECK_EQ(rereg(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE),
		 ERR(IBV_REREG_MR_ERR_CMD, EINVAL), "remote write without local write");
	CHECK_EQ(rereg(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 1 << 30),
		 ERR(IBV_REREG_MR_ERR_CMD, EINVAL), "unknown access bit");
	CHECK_EQ(rereg(mr, IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0, 0), ERR(IBV_REREG_MR_ERR_CMD, EINVAL), "no PD");
	struct ibv_context *ctx2 = t_open_dev();
	struct ibv_pd *other = ibv_alloc_pd(ctx2);
	CHECK_EQ(rereg(mr, IBV_REREG_MR_CHANGE_PD, other, NULL, 0, 0), ERR(IBV_REREG_MR_ERR_CMD, EINVAL),
		 "PD of another context");
	/* a hole in the new range: the kernel cannot pin it (EFAULT) */
	long page = sysconf(_SC_PAGESIZE);
	unsigned char *m = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(m + page, page);
	CHECK_EQ(rereg(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, m, 3 * page, 0),
		 ERR(IBV_REREG_MR_ERR_CMD, EFAULT), "unmapped page in the new range");
	/* a refusal changes nothing, in the whole or in part */
	CHECK_EQ(rereg(mr, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD, other, m, page, 0),
		 ERR(IBV_REREG_MR_ERR_CMD, EINVAL), "translation with a bad PD");
	CHECK(mr->addr == a && mr->length == BUF && mr->pd == pd && mr->lkey == lkey && mr->rkey == rkey,
	      "a refused re-registration leaves the region as it was");
	CHECK_EQ(ibv_dealloc_pd(other), 0, "the other PD gained no reference");

	/* a region with a bound memory window stays (EBUSY) until the window goes */
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	CHECK(mw != NULL, "alloc mw");
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);
	union ibv_gid gid;
	ibv_query_gid(ctx, 1, 1, &gid);
	CHECK_EQ(t_qp_up(qp, IBV_QPS_RTS, qp->qp_num, &gid, &conn, NULL), 0, "loopback QP");
	struct ibv_mw_bind bind = { .wr_id = 1, .send_flags = IBV_SEND_SIGNALED,
				    .bind_info = { mr, (uintptr_t)a, 4096, IBV_ACCESS_REMOTE_READ } };
	CHECK_EQ(ibv_bind_mw(qp, mw, &bind), 0, "bind mw");
	struct ibv_wc wc;
	CHECK(t_wait_wc(cq, &wc) && wc.status == IBV_WC_SUCCESS, "bind completed");
	CHECK_EQ(rereg(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, ALL_RIGHTS),
		 ERR(IBV_REREG_MR_ERR_CMD, EBUSY), "rereg of a region with a bound window");
	CHECK_EQ(ibv_dealloc_mw(mw), 0, "dealloc mw");
	CHECK_EQ(rereg(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, ALL_RIGHTS), 0, "rereg once unbound");
	/* on-demand paging is not switched on or off by a re-registration */
	CHECK_EQ(rereg(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, ALL_RIGHTS | IBV_ACCESS_ON_DEMAND),
		 ERR(IBV_REREG_MR_ERR_CMD, EOPNOTSUPP), "to on-demand paging");

	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	munmap(m, page);
	munmap(m + 2 * page, page);
	CHECK_EQ(ibv_dereg_mr(mr), 0, "dereg");
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "dealloc pd");
	ibv_close_device(ctx2);
	ibv_close_device(ctx);
	free(a);
}

static void test_changes(void)
{
	struct pair p;
	struct ibv_wc wc;
	pair_up(&p, IBV_QPT_RC);
	unsigned char *a = aligned_alloc(4096, BUF), *b = aligned_alloc(4096, BUF), *c = aligned_alloc(4096, BUF);
	memset(b, 0, BUF);
	memset(c, 0, BUF);
	struct ibv_mr *ma = ibv_reg_mr(p.pd, a, BUF, ALL_RIGHTS);
	struct ibv_mr *mb = ibv_reg_mr(p.pd, b, BUF, ALL_RIGHTS);
	uint32_t lkey = mb->lkey, rkey = mb->rkey;

	/* translation: the same keys now name c; a WRITE lands there byte for byte */
	CHECK_EQ(rereg(mb, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, c + 4096, 8192, 0), 0, "rereg translation");
	CHECK(mb->addr == c + 4096 && mb->length == 8192, "mr->addr and mr->length follow");
	CHECK(mb->lkey == lkey && mb->rkey == rkey, "keys kept");
	t_fill(a, 8192, 11);
	CHECK_EQ(do_send(p.qa, p.cqa, IBV_WR_RDMA_WRITE, a, 8192, ma->lkey, (uintptr_t)c + 4096, rkey),
		 IBV_WC_SUCCESS, "write to the new range");
	CHECK(!memcmp(c + 4096, a, 8192), "byte-exact in the new memory");
	CHECK(b[0] == 0 && b[8191] == 0, "the old memory untouched");
	/* the new range as a receive buffer */
	post_recv(p.qb, c + 4096, 4096, lkey, 2);
	t_fill(a, 4096, 12);
	CHECK_EQ(do_send(p.qa, p.cqa, IBV_WR_SEND, a, 4096, ma->lkey, 0, 0), IBV_WC_SUCCESS, "send");
	CHECK(t_wait_wc(p.cqb, &wc) && wc.status == IBV_WC_SUCCESS && wc.byte_len == 4096, "received in the new range");
	CHECK(!memcmp(c + 4096, a, 4096), "byte-exact receive");

	/* access: READ allowed, then taken away */
	CHECK_EQ(rereg(mb, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_READ), 0, "rereg access");
	memset(a, 0, 4096);
	CHECK_EQ(do_send(p.qa, p.cqa, IBV_WR_RDMA_READ, a, 4096, ma->lkey, (uintptr_t)c + 4096, rkey),
		 IBV_WC_SUCCESS, "read with REMOTE_READ");
	CHECK(!memcmp(c + 4096, a, 4096), "byte-exact read");
	CHECK_EQ(rereg(mb, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE), 0, "drop REMOTE_READ");
	CHECK(mb->lkey == lkey && mb->rkey == rkey, "keys kept after an access change");
	CHECK_EQ(do_send(p.qa, p.cqa, IBV_WR_RDMA_READ, a, 64, ma->lkey, (uintptr_t)c + 4096, rkey),
		 IBV_WC_REM_ACCESS_ERR, "read without REMOTE_READ");
	pair_qps_down(&p);

	/* the old range is no longer the region: a SEND gathering from it is a local protection error */
	pair_qps(&p, IBV_QPT_RC);
	CHECK_EQ(do_send(p.qa, p.cqa, IBV_WR_SEND, b, 64, lkey, 0, 0), IBV_WC_LOC_PROT_ERR, "send from the old range");
	pair_qps_down(&p);

	/* PD: a region of another PD is refused until moved into the QPs' PD; the PD it left is free */
	pair_qps(&p, IBV_QPT_RC);
	struct ibv_pd *pd2 = ibv_alloc_pd(p.ctx);
	struct ibv_mr *m2 = ibv_reg_mr(pd2, b, 4096, ALL_RIGHTS);
	CHECK_EQ(ibv_dealloc_pd(pd2), EBUSY, "a PD with a region stays");
	CHECK_EQ(rereg(mb, IBV_REREG_MR_CHANGE_ACCESS | IBV_REREG_MR_CHANGE_TRANSLATION, NULL, c, 4096, ALL_RIGHTS),
		 0, "translation and access together");
	t_fill(b, 4096, 13);
	CHECK_EQ(do_send(p.qa, p.cqa, IBV_WR_RDMA_WRITE, b, 4096, m2->lkey, (uintptr_t)c, rkey),
		 IBV_WC_LOC_PROT_ERR, "a region of another PD is refused");
	pair_qps_down(&p);
	pair_qps(&p, IBV_QPT_RC);
	CHECK_EQ(rereg(m2, IBV_REREG_MR_CHANGE_PD, p.pd, NULL, 0, 0), 0, "rereg PD");
	CHECK(m2->pd == p.pd, "mr->pd follows");
	CHECK_EQ(ibv_dealloc_pd(pd2), 0, "the PD it left is free");
	memset(c, 0, 4096);
	CHECK_EQ(do_send(p.qa, p.cqa, IBV_WR_RDMA_WRITE, b, 4096, m2->lkey, (uintptr_t)c, rkey),
		 IBV_WC_SUCCESS, "write from the moved region");
	CHECK(!memcmp(c, b, 4096), "byte-exact");
	CHECK_EQ(ibv_dereg_mr(m2), 0, "dereg m2");
	CHECK_EQ(ibv_dereg_mr(mb), 0, "dereg mb");
	CHECK_EQ(ibv_dereg_mr(ma), 0, "dereg ma");
	pair_down(&p);
	free(a);
	free(b);
	free(c);
}

static void test_ud_mtu(void)
{
	struct ibv_port_attr pa;
	struct pair p;
	pair_up(&p, IBV_QPT_UD);
	CHECK_EQ(ibv_query_port(p.ctx, 1, &pa), 0, "query port");
	CHECK_EQ(pa.active_mtu, IBV_MTU_1024, "SOFTRDMA_MTU=1024 is the active MTU");
	unsigned char *a = aligned_alloc(4096, BUF), *b = aligned_alloc(4096, BUF);
	struct ibv_mr *ma = ibv_reg_mr(p.pd, a, BUF, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *mb = ibv_reg_mr(p.pd, b, BUF, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_ah *ah = t_create_ah(p.pd, &p.gid, 0);
	post_recv(p.qb, b, 8192, mb->lkey, 1);
	post_recv(p.qb, b, 8192, mb->lkey, 2);
	int sizes[] = { 1025, 4096, 5000, 1024 };
	for (int i = 0; i < 4; i++) {
		t_fill(a, (size_t)sizes[i], (unsigned)i);
		struct ibv_sge s = { (uintptr_t)a, (uint32_t)sizes[i], ma->lkey };
		struct ibv_send_wr w = { .wr_id = 100 + i, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED }, *bad;
		w.wr.ud.ah = ah;
		w.wr.ud.remote_qpn = p.qb->qp_num;
		w.wr.ud.remote_qkey = 0x1234;
		CHECK_EQ(ibv_post_send(p.qa, &w, &bad), 0, "UD post is accepted whatever its length");
		struct ibv_wc wc;
		CHECK(t_wait_wc(p.cqa, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)(100 + i),
		      "UD send of %d bytes completes successfully", sizes[i]);
		if (sizes[i] > 1024) {
			usleep(20000);
			CHECK_EQ(ibv_poll_cq(p.cqb, 1, &wc), 0, "nothing arrives for a message over the MTU");
		} else {
			CHECK(t_wait_wc(p.cqb, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1 &&
			      wc.byte_len == (uint32_t)sizes[i] + 40, "an MTU-sized message arrives in the first receive");
			CHECK(!memcmp(b + 40, a, (size_t)sizes[i]), "byte-exact");
		}
	}
	ibv_destroy_ah(ah);
	pair_qps_down(&p); /* the second receive was never consumed: it goes with its QP */
	p.qa = mkqp(&p, p.cqa, IBV_QPT_UD);
	p.qb = mkqp(&p, p.cqb, IBV_QPT_UD);
	ibv_dereg_mr(ma);
	ibv_dereg_mr(mb);
	pair_down(&p);
	free(a);
	free(b);
}

int main(void)
{
	setenv("SOFTRDMA_MTU", "1024", 1);
	test_bad_flows();
	test_changes();
	test_ud_mtu();
	return t_report();
}
