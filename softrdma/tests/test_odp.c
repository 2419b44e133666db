/*
 * On-demand paging: IBV_ACCESS_ON_DEMAND regions (explicit and implicit), ibv_advise_mr and
 * the odp caps of ibv_query_device_ex. Data moves into and out of memory that was mmap'd and
 * never touched, memory mapped after an implicit region was registered, and a shared file
 * mapping; memory unmapped (or made inaccessible) after registration gives the completion
 * errors of an unresolvable page fault, never a signal. A thread that unmaps and maps again
 * (MAP_FIXED) the target pages in a tight loop while a peer's WRITE, READ, CMP_SWP and
 * FETCH_ADD reach them: the process lives, and each operation either succeeds (with the right
 * data where the memory stayed mapped) or fails with the remote access error. Atomics through
 * an ODP region and through a pinned one on one word, from several threads, stay atomic
 * with respect to each other. Everything runs
 * on the in-process path and once more, in a child, through the packet path.
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testlib.h"

#define ODP_ACC (IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define LEN (256 * 1024)

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;
static long page;

struct pair {
	struct ibv_cq *ca, *cb;
	struct ibv_qp *qa, *qb;
	struct ibv_srq *srq;
};

static struct ibv_qp *mkqp(struct ibv_cq *cq, enum ibv_qp_type t, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = t,
				       .cap = { .max_send_wr = 32, .max_recv_wr = 32, .max_send_sge = 4,
						.max_recv_sge = 4 } };
	return ibv_create_qp(pd, &ia);
}

static const struct t_conn conn = {
	.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	.qkey = 0x11111111, .rq_psn = 1, .sq_psn = 1, .rd_atomic = 4, .min_rnr_timer = 1, .hop_limit = 64,
	.timeout = 12, .retry_cnt = 7, .rnr_retry = 7 };

/* Two connected QPs (qb on an SRQ when srq is set). */
static void pair_up(struct pair *p, enum ibv_qp_type t, bool srq)
{
	memset(p, 0, sizeof(*p));
	p->ca = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	p->cb = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (srq) {
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 2 } };
		p->srq = ibv_create_srq(pd, &sa);
	}
	p->qa = mkqp(p->ca, t, NULL);
	p->qb = mkqp(p->cb, t, p->srq);
	if (!p->ca || !p->cb || !p->qa || !p->qb || (srq && !p->srq)) {
		fprintf(stderr, "setup failed: %s\n", strerror(errno));
		exit(2);
	}
	t_check_connect(p->qa, p->qb, &gid, &conn);
}

static void pair_down(struct pair *p)
{
	ibv_destroy_qp(p->qa);
	ibv_destroy_qp(p->qb);
	if (p->srq)
		ibv_destroy_srq(p->srq);
	ibv_destroy_cq(p->ca);
	ibv_destroy_cq(p->cb);
}

static int post_recv(struct pair *p, void *addr, uint32_t len, uint32_t lkey, uint64_t id)
{
	struct ibv_sge s = { (uintptr_t)addr, len, lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bad;
	return p->srq ? ibv_post_srq_recv(p->srq, &w, &bad) : ibv_post_recv(p->qb, &w, &bad);
}

static int post1(struct ibv_qp *q, enum ibv_wr_opcode op, void *addr, uint32_t len, uint32_t lkey,
		 uint64_t raddr, uint32_t rkey, uint64_t add)
{
	struct ibv_sge s = { (uintptr_t)addr, len, lkey };
	struct ibv_send_wr w = { .wr_id = op, .sg_list = &s, .num_sge = 1, .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	t_wr_remote(&w, raddr, rkey, add, 0);
	return ibv_post_send(q, &w, &bad);
}

/* Posts one WR on a fresh RC pair and returns the requester's completion status. */
static int one_op(struct pair *p, enum ibv_wr_opcode op, void *addr, uint32_t len, uint32_t lkey,
		  uint64_t raddr, uint32_t rkey)
{
	struct ibv_wc wc = { .status = -1 };
	CHECK_EQ(post1(p->qa, op, addr, len, lkey, raddr, rkey, 1), 0, "post");
	if (!t_wait_wc(p->ca, &wc))
		return -2;
	return wc.status;
}

/* Pages of [p, p+n) present in memory. */
static size_t resident(void *p, size_t n)
{
	unsigned char v[LEN / 4096 + 1];
	if (mincore(p, n, v))
		return (size_t)-1;
	size_t r = 0;
	for (size_t i = 0; i < (n + (size_t)page - 1) / (size_t)page; i++)
		r += v[i] & 1;
	return r;
}

static void *fresh(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	return p;
}

/* ---------------------------------------------------------------- caps and registration */

static void test_caps_and_reg(void)
{
	struct ibv_device_attr_ex ax;
	memset(&ax, 0, sizeof(ax));
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &ax), 0, "query_device_ex");
	CHECK_EQ(ax.odp_caps.general_caps, IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT, "general odp caps");
	CHECK_EQ(ax.odp_caps.per_transport_caps.rc_odp_caps,
		 IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
		 IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV, "rc odp caps");
	CHECK_EQ(ax.odp_caps.per_transport_caps.ud_odp_caps, IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV,
		 "ud odp caps");
	CHECK_EQ(ax.odp_caps.per_transport_caps.uc_odp_caps, 0, "uc odp caps");

	/* an ODP region is not pinned or faulted in: registration touches nothing */
	unsigned char *m = fresh(LEN);
	struct ibv_mr *mr = ibv_reg_mr(pd, m, LEN, ODP_ACC);
	CHECK(mr != NULL, "explicit ODP registration: %s", strerror(errno));
	CHECK_EQ(resident(m, LEN), 0, "pages resident after ODP registration");
	ibv_dereg_mr(mr);
	munmap(m, LEN);
	/* an ODP region may even cover a hole (a pinned one gets EFAULT) */
	m = fresh(3 * (size_t)page);
	munmap(m + page, (size_t)page);
	errno = 0;
	CHECK(ibv_reg_mr(pd, m, 3 * (size_t)page, IBV_ACCESS_LOCAL_WRITE) == NULL && errno == EFAULT,
	      "pinned region over a hole: errno %d", errno);
	mr = ibv_reg_mr(pd, m, 3 * (size_t)page, ODP_ACC);
	CHECK(mr != NULL, "ODP region over a hole");
	if (mr)
		ibv_dereg_mr(mr);
	munmap(m, 3 * (size_t)page);

	/* implicit ODP: NULL, SIZE_MAX, ON_DEMAND, and nothing else */
	mr = ibv_reg_mr(pd, NULL, SIZE_MAX, ODP_ACC);
	CHECK(mr != NULL && mr->addr == NULL && mr->length == SIZE_MAX, "implicit ODP registration");
	if (mr)
		ibv_dereg_mr(mr);
	errno = 0;
	CHECK(!ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE) && errno == EINVAL,
	      "NULL, SIZE_MAX without ON_DEMAND: errno %d", errno);
	errno = 0;
	CHECK(!ibv_reg_mr(pd, NULL, 4096, ODP_ACC) && errno == EINVAL, "NULL, 4096 with ON_DEMAND: errno %d", errno);
	errno = 0;
	CHECK(!ibv_reg_mr(pd, NULL, SIZE_MAX, ODP_ACC | IBV_ACCESS_ZERO_BASED) && errno == EINVAL,
	      "implicit zero-based: errno %d", errno);
	errno = 0;
	CHECK(!ibv_reg_mr(pd, NULL, SIZE_MAX, ODP_ACC | IBV_ACCESS_MW_BIND) && errno == EINVAL,
	      "implicit with MW_BIND: errno %d", errno);
}

/* ---------------------------------------------------------------- data into untouched memory */

static void data_ops(struct ibv_mr *ma, unsigned char *a, struct ibv_mr *mb, unsigned char *b,
		     const char *tag)
{
	struct pair p;
	struct ibv_wc wc;
	pair_up(&p, IBV_QPT_RC, false);
	/* WRITE from a filled buffer into untouched ODP memory */
	t_fill(a, 100000, 1);
	CHECK_EQ(one_op(&p, IBV_WR_RDMA_WRITE, a, 100000, ma->lkey, (uintptr_t)b + 10, mb->rkey), 0,
		 "write status");
	CHECK(!memcmp(a, b + 10, 100000), "%s: write data", tag);
	/* READ of untouched ODP memory (zeros) into untouched ODP memory */
	memset(a + 120000, 0x5a, 30000);
	CHECK_EQ(one_op(&p, IBV_WR_RDMA_READ, a + 120000, 30000, ma->lkey, (uintptr_t)b + 140000, mb->rkey), 0,
		 "read of untouched status");
	unsigned char zero[30000] = { 0 };
	CHECK(!memcmp(a + 120000, zero, 30000), "%s: read of untouched memory gives zeros", tag);
	t_fill(b + 200000, 20000, 2);
	CHECK_EQ(one_op(&p, IBV_WR_RDMA_READ, a + 200000, 20000, ma->lkey, (uintptr_t)b + 200000, mb->rkey), 0,
		 "read status");
	CHECK(!memcmp(a + 200000, b + 200000, 20000), "%s: read data", tag);
	/* SEND into an untouched ODP receive buffer */
	t_fill(a + 50000, 5000, 3);
	CHECK_EQ(post_recv(&p, b + 240000, 8000, mb->lkey, 9), 0, "post recv");
	CHECK_EQ(one_op(&p, IBV_WR_SEND, a + 50000, 5000, ma->lkey, 0, 0), 0, "send status");
	CHECK(t_wait_wc(p.cb, &wc) && wc.status == IBV_WC_SUCCESS && wc.byte_len == 5000, "%s: recv completion",
	      tag);
	CHECK(!memcmp(a + 50000, b + 240000, 5000), "%s: send data", tag);
	/* atomics on an untouched ODP word */
	uint64_t *target = (uint64_t *)(b + LEN - 64);
	CHECK_EQ(one_op(&p, IBV_WR_ATOMIC_FETCH_AND_ADD, a + 8, 8, ma->lkey, (uintptr_t)target, mb->rkey), 0,
		 "fetch-add status");
	CHECK(*(uint64_t *)(a + 8) == 0 && *target == 1, "%s: fetch-add values %llu %llu", tag,
	      (unsigned long long)*(uint64_t *)(a + 8), (unsigned long long)*target);
	pair_down(&p);

	/* SEND to an SRQ whose receive buffer is ODP */
	pair_up(&p, IBV_QPT_RC, true);
	t_fill(a, 3000, 4);
	unsigned char *rb = b + LEN - 8192;
	CHECK_EQ(post_recv(&p, rb, 4096, mb->lkey, 11), 0, "post srq recv");
	CHECK_EQ(one_op(&p, IBV_WR_SEND, a, 3000, ma->lkey, 0, 0), 0, "srq send status");
	CHECK(t_wait_wc(p.cb, &wc) && wc.status == IBV_WC_SUCCESS && wc.byte_len == 3000 && wc.wr_id == 11,
	      "%s: srq recv completion", tag);
	CHECK(!memcmp(a, rb, 3000), "%s: srq data", tag);
	pair_down(&p);

	/* UD: send from and receive into ODP memory */
	pair_up(&p, IBV_QPT_UD, false);
	struct ibv_ah *ah = t_create_ah(pd, &gid, 64);
	CHECK(ah != NULL, "create ah");
	unsigned char *ub = b + LEN - 16384;
	t_fill(a + 4096, 900, 5);
	CHECK_EQ(post_recv(&p, ub, 1024, mb->lkey, 12), 0, "post ud recv");
	struct ibv_sge s = { (uintptr_t)a + 4096, 900, ma->lkey };
	struct ibv_send_wr w = { .wr_id = 13, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	w.wr.ud.ah = ah;
	w.wr.ud.remote_qpn = p.qb->qp_num;
	w.wr.ud.remote_qkey = 0x11111111;
	CHECK_EQ(ibv_post_send(p.qa, &w, &bad), 0, "post ud send");
	CHECK(t_wait_wc(p.ca, &wc) && wc.status == IBV_WC_SUCCESS, "%s: ud send", tag);
	CHECK(t_wait_wc(p.cb, &wc) && wc.status == IBV_WC_SUCCESS && wc.byte_len == 940, "%s: ud recv %d %u",
	      tag, wc.status, wc.byte_len);
	CHECK(!memcmp(a + 4096, ub + 40, 900), "%s: ud data", tag);
	ibv_destroy_ah(ah);
	pair_down(&p);
}

static void test_explicit(void)
{
	unsigned char *a = fresh(LEN), *b = fresh(LEN);
	struct ibv_mr *ma = ibv_reg_mr(pd, a, LEN, ODP_ACC), *mb = ibv_reg_mr(pd, b, LEN, ODP_ACC);
	CHECK(ma && mb, "register");
	data_ops(ma, a, mb, b, "explicit ODP, anonymous");
	ibv_dereg_mr(ma);
	ibv_dereg_mr(mb);
	munmap(a, LEN);
	munmap(b, LEN);

	/* a shared file mapping: the data lands in the file */
	char path[] = "/tmp/softrdma-odp-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0 && ftruncate(fd, LEN) == 0, "temporary file");
	unlink(path);
	a = fresh(LEN);
	b = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(b != MAP_FAILED, "map the file");
	ma = ibv_reg_mr(pd, a, LEN, ODP_ACC);
	mb = ibv_reg_mr(pd, b, LEN, ODP_ACC);
	data_ops(ma, a, mb, b, "explicit ODP, file");
	unsigned char back[1000];
	CHECK(pread(fd, back, sizeof(back), 10) == (ssize_t)sizeof(back), "read the file");
	t_fill(a, 100000, 1);
	CHECK(!memcmp(back, a, sizeof(back)), "the RDMA WRITE reached the file");
	ibv_dereg_mr(ma);
	ibv_dereg_mr(mb);
	munmap(a, LEN);
	munmap(b, LEN);
	close(fd);
}

static void test_implicit(void)
{
	struct ibv_mr *imr = ibv_reg_mr(pd, NULL, SIZE_MAX, ODP_ACC);
	CHECK(imr != NULL, "implicit registration");
	if (!imr)
		return;
	/* memory mapped after the implicit region was registered */
	unsigned char *a = fresh(LEN), *b = fresh(LEN);
	data_ops(imr, a, imr, b, "implicit ODP");
	/* heap and stack memory are in it too */
	unsigned char *h = malloc(4096);
	unsigned char st[512];
	t_fill(st, sizeof(st), 6);
	struct pair p;
	pair_up(&p, IBV_QPT_RC, false);
	CHECK_EQ(one_op(&p, IBV_WR_RDMA_WRITE, st, sizeof(st), imr->lkey, (uintptr_t)h + 7, imr->rkey), 0,
		 "implicit write stack to heap");
	CHECK(!memcmp(st, h + 7, sizeof(st)), "implicit: stack to heap data");
	pair_down(&p);
	free(h);
	munmap(a, LEN);
	munmap(b, LEN);
	ibv_dereg_mr(imr);
}

/* ---------------------------------------------------------------- unresolvable faults */

static void faults_on(struct ibv_mr *mr, unsigned char *hole, unsigned char *good, const char *tag)
{
	struct pair p;
	struct ibv_wc wc;
	/* responder side: WRITE, READ, atomic into the hole: remote access error */
	pair_up(&p, IBV_QPT_RC, false);
	CHECK_EQ(one_op(&p, IBV_WR_RDMA_WRITE, good, 64, mr->lkey, (uintptr_t)hole, mr->rkey),
		 IBV_WC_REM_ACCESS_ERR, tag);
	pair_down(&p);
	pair_up(&p, IBV_QPT_RC, false);
	CHECK_EQ(one_op(&p, IBV_WR_RDMA_READ, good, 64, mr->lkey, (uintptr_t)hole, mr->rkey),
		 IBV_WC_REM_ACCESS_ERR, tag);
	pair_down(&p);
	pair_up(&p, IBV_QPT_RC, false);
	CHECK_EQ(one_op(&p, IBV_WR_ATOMIC_FETCH_AND_ADD, good, 8, mr->lkey, (uintptr_t)hole, mr->rkey),
		 IBV_WC_REM_ACCESS_ERR, tag);
	pair_down(&p);
	/* a WRITE that ends in the hole */
	pair_up(&p, IBV_QPT_RC, false);
	CHECK_EQ(one_op(&p, IBV_WR_RDMA_WRITE, good, 8192, mr->lkey, (uintptr_t)hole - 4096, mr->rkey),
		 IBV_WC_REM_ACCESS_ERR, tag);
	pair_down(&p);
	/* requester side: a gather from the hole, a READ landing in it: local protection error */
	pair_up(&p, IBV_QPT_RC, false);
	CHECK_EQ(one_op(&p, IBV_WR_SEND, hole, 64, mr->lkey, 0, 0), IBV_WC_LOC_PROT_ERR, tag);
	pair_down(&p);
	pair_up(&p, IBV_QPT_RC, false);
	CHECK_EQ(one_op(&p, IBV_WR_RDMA_READ, hole, 64, mr->lkey, (uintptr_t)good, mr->rkey),
		 IBV_WC_LOC_PROT_ERR, tag);
	pair_down(&p);
	/* receiver side: a receive buffer in the hole: local protection error there, the
	 * requester sees the remote operational error */
	pair_up(&p, IBV_QPT_RC, false);
	CHECK_EQ(post_recv(&p, hole, 64, mr->lkey, 5), 0, "post recv");
	CHECK_EQ(one_op(&p, IBV_WR_SEND, good, 64, mr->lkey, 0, 0), IBV_WC_REM_OP_ERR, tag);
	wc.status = -1;
	CHECK(t_wait_wc(p.cb, &wc) && wc.wr_id == 5 && wc.status == IBV_WC_LOC_PROT_ERR, "%s: receiver status %d",
	      tag, wc.status);
	pair_down(&p);
	/* a receive buffer that starts mapped and runs into the hole: only a message reaching the
	 * hole fails (the bytes a NIC would touch) */
	pair_up(&p, IBV_QPT_RC, false);
	CHECK_EQ(post_recv(&p, hole - 4096, 8192, mr->lkey, 6), 0, "post recv");
	CHECK_EQ(one_op(&p, IBV_WR_SEND, good, 100, mr->lkey, 0, 0), 0, tag);
	CHECK(t_wait_wc(p.cb, &wc) && wc.wr_id == 6 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 100,
	      "%s: a short message before the hole", tag);
	CHECK(!memcmp(hole - 4096, good, 100), "%s: short message data", tag);
	CHECK_EQ(post_recv(&p, hole - 4096, 8192, mr->lkey, 7), 0, "post recv");
	CHECK_EQ(one_op(&p, IBV_WR_SEND, good, 6000, mr->lkey, 0, 0), IBV_WC_REM_OP_ERR, tag);
	CHECK(t_wait_wc(p.cb, &wc) && wc.wr_id == 7 && wc.status == IBV_WC_LOC_PROT_ERR,
	      "%s: a message reaching the hole %d", tag, wc.status);
	pair_down(&p);
	/* UD: a datagram into the hole */
	pair_up(&p, IBV_QPT_UD, false);
	struct ibv_ah *ah = t_create_ah(pd, &gid, 64);
	CHECK_EQ(post_recv(&p, hole, 256, mr->lkey, 8), 0, "post ud recv");
	struct ibv_sge s = { (uintptr_t)good, 16, mr->lkey };
	struct ibv_send_wr w = { .wr_id = 13, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	w.wr.ud.ah = ah;
	w.wr.ud.remote_qpn = p.qb->qp_num;
	w.wr.ud.remote_qkey = 0x11111111;
	CHECK_EQ(ibv_post_send(p.qa, &w, &bad), 0, "post ud send");
	CHECK(t_wait_wc(p.ca, &wc) && wc.status == IBV_WC_SUCCESS, "%s: ud send", tag);
	CHECK(t_wait_wc(p.cb, &wc) && wc.wr_id == 8 && wc.status == IBV_WC_LOC_PROT_ERR, "%s: ud recv into the hole %d",
	      tag, wc.status);
	ibv_destroy_ah(ah);
	pair_down(&p);
}

static void test_faults(void)
{
	/* explicit: a page unmapped after registration */
	size_t n = 8 * (size_t)page;
	unsigned char *m = fresh(n);
	struct ibv_mr *mr = ibv_reg_mr(pd, m, n, ODP_ACC);
	CHECK(mr != NULL, "register");
	munmap(m + 4 * page, (size_t)page);
	memset(m, 0x77, 4 * (size_t)page);
	faults_on(mr, m + 4 * page, m, "explicit, unmapped after registration");
	ibv_dereg_mr(mr);
	munmap(m, n);

	/* explicit: made PROT_NONE after registration */
	m = fresh(n);
	mr = ibv_reg_mr(pd, m, n, ODP_ACC);
	mprotect(m + 4 * page, (size_t)page, PROT_NONE);
	memset(m, 0x66, 4 * (size_t)page);
	faults_on(mr, m + 4 * page, m, "explicit, PROT_NONE");
	ibv_dereg_mr(mr);
	munmap(m, n);

	/* implicit: a hole in the address space */
	struct ibv_mr *imr = ibv_reg_mr(pd, NULL, SIZE_MAX, ODP_ACC);
	m = fresh(n);
	munmap(m + 4 * page, (size_t)page);
	memset(m, 0x55, 4 * (size_t)page);
	faults_on(imr, m + 4 * page, m, "implicit, unmapped");
	munmap(m, n);

	/* a shared file mapping past the end of its file: SIGBUS for the CPU, a fault error here */
	char path[] = "/tmp/softrdma-odp-XXXXXX";
	int fd = mkstemp(path);
	unlink(path);
	CHECK(fd >= 0 && ftruncate(fd, 4 * page) == 0, "temporary file");
	unsigned char *f = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(f != MAP_FAILED, "map the file");
	m = fresh(n);
	memset(m, 0x44, n);
	struct pair p;
	pair_up(&p, IBV_QPT_RC, false);
	CHECK_EQ(one_op(&p, IBV_WR_RDMA_WRITE, m, 64, imr->lkey, (uintptr_t)f + 5 * page, imr->rkey),
		 IBV_WC_REM_ACCESS_ERR, "WRITE past the end of a mapped file");
	pair_down(&p);
	pair_up(&p, IBV_QPT_RC, false);
	CHECK_EQ(one_op(&p, IBV_WR_RDMA_WRITE, m, 64, imr->lkey, (uintptr_t)f + 3 * page, imr->rkey), 0,
		 "WRITE inside the file");
	pair_down(&p);
	unsigned char back[64];
	CHECK(pread(fd, back, 64, 3 * page) == 64 && !memcmp(back, m, 64), "file data");
	munmap(f, n);
	munmap(m, n);
	close(fd);
	ibv_dereg_mr(imr);
}

/* ---------------------------------------------------------------- racing the application's munmap */

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#define RACE_PAGES 4

static unsigned char *race_mem;       /* RACE_PAGES pages at a fixed address, churned */
static int race_stop, race_lost;
static unsigned long race_gen;        /* odd while the pages are being replaced */
static unsigned long race_cycles;

static unsigned char race_byte(size_t i)
{
	return (unsigned char)(i * 13 + 7);
}

/* Reads our own memory through the kernel: false where it is not mapped (no signal). */
static bool pvm_read(void *dst, const void *src, size_t n)
{
	struct iovec l = { dst, n }, r = { (void *)src, n };
	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)n;
}

/*
 * The application's side: the target pages unmapped and mapped again (MAP_FIXED_NOREPLACE, so
 * that a range something else took meanwhile is never clobbered), or replaced by an
 * inaccessible mapping and then by a fresh one (MAP_FIXED), in a tight loop with a calm
 * spell every 64th time. Page 2 (the READ source) is filled with race_byte after each new
 * mapping; race_gen is even while the pages stay mapped.
 */
static void *churn(void *arg)
{
	(void)arg;
	size_t n = RACE_PAGES * (size_t)page;
	for (unsigned long i = 0; !__atomic_load_n(&race_stop, __ATOMIC_ACQUIRE); i++) {
		__atomic_add_fetch(&race_gen, 1, __ATOMIC_SEQ_CST);
		void *q;
		if (i & 1) {
			q = mmap(race_mem, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			if (q != MAP_FAILED)
				q = mmap(race_mem, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		} else {
			munmap(race_mem, n);
			q = mmap(race_mem, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
				 -1, 0);
		}
		if (q != race_mem) {
			if (q != MAP_FAILED)
				munmap(q, n);
			__atomic_store_n(&race_lost, 1, __ATOMIC_RELEASE);
			break;
		}
		for (size_t k = 0; k < (size_t)page; k++)
			race_mem[2 * page + k] = race_byte(k);
		__atomic_add_fetch(&race_gen, 1, __ATOMIC_SEQ_CST);
		race_cycles++;
		if (i % 64 == 63) {
			/* a calm spell now and then: operations that meet no replacement, whose data
			 * the test checks */
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One kind of operation against the churned pages until both outcomes were seen often enough. */
static void race_op(enum ibv_wr_opcode op, struct ibv_mr *lmr, unsigned char *local, struct ibv_mr *tmr,
		    const char *path)
{
	const char *name = op == IBV_WR_RDMA_WRITE ? "WRITE" : op == IBV_WR_RDMA_READ ? "READ" :
			   op == IBV_WR_ATOMIC_CMP_AND_SWP ? "CMP_SWP" : "FETCH_ADD";
	struct pair p;
	pair_up(&p, IBV_QPT_RC, false);
	unsigned long ok = 0, err = 0, checked = 0, bad_status = 0, bad_data = 0;
	int last_bad = 0;
	uint64_t *word = (uint64_t *)(race_mem + 3 * page + 64);
	double t0 = now_s();
	for (unsigned iter = 1;; iter++) {
		unsigned long g0 = __atomic_load_n(&race_gen, __ATOMIC_SEQ_CST);
		uint32_t len = 8;
		uint64_t raddr = (uintptr_t)word, cmp = 0, swap = iter, add = 3;
		struct ibv_sge s = { (uintptr_t)local, 0, lmr->lkey };
		struct ibv_send_wr w = { .wr_id = iter, .sg_list = &s, .num_sge = 1, .opcode = op,
					 .send_flags = IBV_SEND_SIGNALED }, *bad;
		switch (op) {
		case IBV_WR_RDMA_WRITE: /* two pages less a little, from byte 50: several packets */
			len = 2 * (uint32_t)page - 100;
			raddr = (uintptr_t)race_mem + 50;
			t_fill(local, len, iter);
			break;
		case IBV_WR_RDMA_READ:
			len = (uint32_t)page;
			raddr = (uintptr_t)race_mem + 2 * page;
			memset(local, 0xee, len);
			break;
		case IBV_WR_ATOMIC_CMP_AND_SWP:
			if (!pvm_read(&cmp, word, 8))
				cmp = 0;
			/* fall through */
		default:
			memset(local, 0xee, 8);
			break;
		}
		s.length = len;
		t_wr_remote(&w, raddr, tmr->rkey, op == IBV_WR_ATOMIC_FETCH_AND_ADD ? add : cmp, swap);
		struct ibv_wc wc = { .status = -1 };
		if (ibv_post_send(p.qa, &w, &bad) || !t_wait_wc(p.ca, &wc)) {
			CHECK(0, "%s, %s: post or completion failed at operation %u", path, name, iter);
			break;
		}
		if (wc.status == IBV_WC_SUCCESS) {
			ok++;
			/* the data, where the pages stayed mapped from before the post until now */
			bool good = true;
			static unsigned char back[2 * 65536];
			uint64_t orig, now = 0;
			memcpy(&orig, local, 8);
			switch (op) {
			case IBV_WR_RDMA_WRITE:
				good = !pvm_read(back, race_mem + 50, len) || !memcmp(back, local, len);
				break;
			case IBV_WR_RDMA_READ:
				for (uint32_t k = 0; k < len && good; k++)
					good = local[k] == race_byte(k);
				break;
			case IBV_WR_ATOMIC_CMP_AND_SWP:
				good = !pvm_read(&now, word, 8) || (orig == cmp && now == swap);
				break;
			default:
				good = !pvm_read(&now, word, 8) || now == orig + add;
				break;
			}
			unsigned long g1 = __atomic_load_n(&race_gen, __ATOMIC_SEQ_CST);
			if (g0 == g1 && !(g0 & 1)) {
				checked++;
				bad_data += !good;
			}
		} else {
			if (wc.status == IBV_WC_REM_ACCESS_ERR) {
				err++;
			} else {
				bad_status++;
				last_bad = wc.status;
			}
			pair_down(&p); /* both QPs are in ERR now */
			pair_up(&p, IBV_QPT_RC, false);
		}
		double t = now_s() - t0;
		if ((t > 0.3 && ok >= 200 && err >= 50) || t > 10 || __atomic_load_n(&race_lost, __ATOMIC_ACQUIRE))
			break;
	}
	pair_down(&p);
	printf("%s, %s racing munmap: %lu succeeded (%lu with the pages mapped throughout, data checked), "
	       "%lu remote access errors, %lu other\n", path, name, ok, checked, err, bad_status);
	CHECK(!__atomic_load_n(&race_lost, __ATOMIC_ACQUIRE), "%s: the churned range was taken by another mapping", path);
	CHECK(ok > 0 && err > 0, "%s, %s: both outcomes seen (%lu succeeded, %lu access errors)", path, name, ok, err);
	CHECK(checked > 0, "%s, %s: some successes with the pages mapped throughout", path, name);
	CHECK_EQ(bad_data, 0, "operations with the pages mapped throughout and wrong data");
	CHECK(bad_status == 0, "%s, %s: %lu completions with another status (last %d)", path, name, bad_status,
	      last_bad);
}

/*
 * The requester's own side churned: a WRITE gathering from the pages, a READ landing in them.
 * Each completes successfully (the data right where the pages stayed mapped) or with the
 * local protection error, whether the hole was there at the admission or came after it.
 */
static void race_local(enum ibv_wr_opcode op, struct ibv_mr *rmr, unsigned char *remote, struct ibv_mr *tmr,
		       const char *path)
{
	const char *name = op == IBV_WR_RDMA_WRITE ? "WRITE from" : "READ into";
	struct pair p;
	pair_up(&p, IBV_QPT_RC, false);
	unsigned long ok = 0, err = 0, checked = 0, bad_status = 0, bad_data = 0;
	int last_bad = 0;
	uint32_t len = (uint32_t)page;
	double t0 = now_s();
	for (unsigned iter = 1;; iter++) {
		unsigned long g0 = __atomic_load_n(&race_gen, __ATOMIC_SEQ_CST);
		/* WRITE: page 2 (race_byte) to remote; READ: remote (race_byte) to pages 0-1 */
		unsigned char *l = op == IBV_WR_RDMA_WRITE ? race_mem + 2 * page : race_mem + 100;
		memset(remote + page, 0xee, len);
		struct ibv_sge s = { (uintptr_t)l, len, tmr->lkey };
		struct ibv_send_wr w = { .wr_id = iter, .sg_list = &s, .num_sge = 1, .opcode = op,
					 .send_flags = IBV_SEND_SIGNALED }, *bad;
		w.wr.rdma.remote_addr = (uintptr_t)remote + (op == IBV_WR_RDMA_WRITE ? page : 0);
		w.wr.rdma.rkey = rmr->rkey;
		struct ibv_wc wc = { .status = -1 };
		if (ibv_post_send(p.qa, &w, &bad) || !t_wait_wc(p.ca, &wc)) {
			CHECK(0, "%s, %s: post or completion failed at operation %u", path, name, iter);
			break;
		}
		if (wc.status == IBV_WC_SUCCESS) {
			ok++;
			static unsigned char back[65536];
			bool good = true;
			if (op == IBV_WR_RDMA_WRITE) {
				for (uint32_t k = 0; k < len && good; k++)
					good = remote[page + k] == race_byte(k);
			} else {
				good = !pvm_read(back, l, len) || !memcmp(back, remote, len);
			}
			unsigned long g1 = __atomic_load_n(&race_gen, __ATOMIC_SEQ_CST);
			if (g0 == g1 && !(g0 & 1)) {
				checked++;
				bad_data += !good;
			}
		} else {
			if (wc.status == IBV_WC_LOC_PROT_ERR) {
				err++;
			} else {
				bad_status++;
				last_bad = wc.status;
			}
			pair_down(&p);
			pair_up(&p, IBV_QPT_RC, false);
		}
		double t = now_s() - t0;
		if ((t > 0.3 && ok >= 200 && err >= 50) || t > 10 || __atomic_load_n(&race_lost, __ATOMIC_ACQUIRE))
			break;
	}
	pair_down(&p);
	printf("%s, %s churned local memory: %lu succeeded (%lu with the pages mapped throughout, data checked), "
	       "%lu local protection errors, %lu other\n", path, name, ok, checked, err, bad_status);
	CHECK(ok > 0 && err > 0, "%s, %s: both outcomes seen (%lu succeeded, %lu local protection errors)", path, name,
	      ok, err);
	CHECK(checked > 0, "%s, %s: some successes with the pages mapped throughout", path, name);
	CHECK_EQ(bad_data, 0, "operations with the pages mapped throughout and wrong data");
	CHECK(bad_status == 0, "%s, %s: %lu completions with another status (last %d)", path, name, bad_status,
	      last_bad);
}

static void test_race(const char *path)
{
	size_t n = RACE_PAGES * (size_t)page;
	race_mem = fresh(n);
	race_stop = race_lost = 0;
	race_gen = race_cycles = 0;
	for (size_t k = 0; k < (size_t)page; k++)
		race_mem[2 * page + k] = race_byte(k);
	struct ibv_mr *tmr = ibv_reg_mr(pd, race_mem, n, ODP_ACC);
	unsigned char *local = malloc(2 * (size_t)page);
	struct ibv_mr *lmr = ibv_reg_mr(pd, local, 2 * (size_t)page, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					IBV_ACCESS_REMOTE_READ);
	CHECK(tmr && local && lmr, "race setup");
	pthread_t th;
	CHECK_EQ(pthread_create(&th, NULL, churn, NULL), 0, "churn thread");
	race_op(IBV_WR_RDMA_WRITE, lmr, local, tmr, path);
	race_op(IBV_WR_RDMA_READ, lmr, local, tmr, path);
	race_op(IBV_WR_ATOMIC_CMP_AND_SWP, lmr, local, tmr, path);
	race_op(IBV_WR_ATOMIC_FETCH_AND_ADD, lmr, local, tmr, path);
	/* the remote buffer holds race_byte in its first page for the READs */
	for (size_t k = 0; k < (size_t)page; k++)
		local[k] = race_byte(k);
	race_local(IBV_WR_RDMA_WRITE, lmr, local, tmr, path);
	race_local(IBV_WR_RDMA_READ, lmr, local, tmr, path);
	__atomic_store_n(&race_stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	printf("%s: the pages were replaced %lu times\n", path, race_cycles);
	ibv_dereg_mr(lmr);
	ibv_dereg_mr(tmr);
	free(local);
	munmap(race_mem, n);
}

/* ---------------------------------------------------------------- atomics, ODP and not, on one word */

#define MIX_THREADS 4
#define MIX_OPS 10000
static pthread_barrier_t mix_start;

struct mixer {
	struct pair p;
	struct ibv_mr *lmr;    /* the results */
	uint64_t *res;         /* MIX_OPS results */
	uint64_t word;         /* the target's address */
	uint32_t rkey;         /* the implicit ODP region's or the pinned region's */
	int failed;
};

static void *mix_run(void *arg)
{
	struct mixer *m = arg;
	pthread_barrier_wait(&mix_start); /* all at once */
	for (int i = 0; i < MIX_OPS; i++) {
		struct ibv_sge s = { (uintptr_t)&m->res[i], 8, m->lmr->lkey };
		struct ibv_send_wr w = { .wr_id = (uint64_t)i, .sg_list = &s, .num_sge = 1,
					 .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .send_flags = IBV_SEND_SIGNALED }, *bad;
		w.wr.atomic.remote_addr = m->word;
		w.wr.atomic.rkey = m->rkey;
		w.wr.atomic.compare_add = 1;
		struct ibv_wc wc;
		if (ibv_post_send(m->p.qa, &w, &bad) || !t_wait_wc(m->p.ca, &wc) || wc.status != IBV_WC_SUCCESS) {
			m->failed = i + 1;
			break;
		}
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * One word reached at once through a pinned region (a CPU atomic) and through the implicit
 * ODP region (a read and a write through the kernel) by threads on their own QP pairs: the
 * device's atomics are atomic with respect to each other whatever the region. Every
 * fetch-and-add must see a distinct value, and the word must end at the number of adds.
 */
static void test_mixed_atomics(const char *path)
{
	uint64_t *word = aligned_alloc(4096, 4096);
	*word = 0;
	struct ibv_mr *pin = ibv_reg_mr(pd, word, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	struct ibv_mr *imr = ibv_reg_mr(pd, NULL, SIZE_MAX, ODP_ACC);
	uint64_t *res = calloc(MIX_THREADS * MIX_OPS, 8);
	struct ibv_mr *lmr = ibv_reg_mr(pd, res, MIX_THREADS * MIX_OPS * 8, IBV_ACCESS_LOCAL_WRITE);
	CHECK(pin && imr && res && lmr, "mixed atomics setup");
	struct mixer m[MIX_THREADS];
	pthread_t th[MIX_THREADS];
	for (int t = 0; t < MIX_THREADS; t++) {
		memset(&m[t], 0, sizeof(m[t]));
		pair_up(&m[t].p, IBV_QPT_RC, false);
		m[t].lmr = lmr;
		m[t].res = res + t * MIX_OPS;
		m[t].word = (uintptr_t)word;
		m[t].rkey = t & 1 ? imr->rkey : pin->rkey;
	}
	pthread_barrier_init(&mix_start, NULL, MIX_THREADS);
	for (int t = 0; t < MIX_THREADS; t++)
		CHECK_EQ(pthread_create(&th[t], NULL, mix_run, &m[t]), 0, "mixer thread");
	for (int t = 0; t < MIX_THREADS; t++) {
		pthread_join(th[t], NULL);
		CHECK(!m[t].failed, "%s: mixed atomics, thread %d failed at operation %d", path, t, m[t].failed - 1);
		pair_down(&m[t].p);
	}
	pthread_barrier_destroy(&mix_start);
	CHECK_EQ(*word, MIX_THREADS * MIX_OPS, "the word after every fetch-and-add, ODP and pinned");
	qsort(res, MIX_THREADS * MIX_OPS, 8, cmp_u64);
	int dup = 0;
	for (int i = 0; i < MIX_THREADS * MIX_OPS; i++)
		dup += res[i] != (uint64_t)i;
	CHECK(dup == 0, "%s: each fetch-and-add saw its own value (%d did not)", path, dup);
	ibv_dereg_mr(lmr);
	ibv_dereg_mr(imr);
	ibv_dereg_mr(pin);
	free(res);
	free(word);
}

/* ---------------------------------------------------------------- ibv_advise_mr */

static void test_advise(void)
{
	unsigned char *m = fresh(LEN);
	struct ibv_mr *mr = ibv_reg_mr(pd, m, LEN, ODP_ACC);
	struct ibv_sge s = { (uintptr_t)m, 16 * (uint32_t)page, mr->lkey };
	CHECK_EQ(resident(m, LEN), 0, "nothing resident before advice");
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, IBV_ADVISE_MR_FLAG_FLUSH, &s, 1), 0,
		 "PREFETCH_NO_FAULT");
	CHECK_EQ(resident(m, LEN), 0, "PREFETCH_NO_FAULT faults nothing in");
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &s, 1), 0,
		 "PREFETCH_WRITE");
	CHECK_EQ(resident(m, LEN), 16, "PREFETCH_WRITE made the 16 pages present");
	s.addr = (uintptr_t)m + 32 * page;
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &s, 1), 0, "PREFETCH (deferred)");
	CHECK_EQ(resident(m, LEN), 32, "PREFETCH made 16 more pages present");
	s.addr = (uintptr_t)m;

	/* errors */
	struct ibv_sge bad = s;
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 2, &s, 1), EINVAL, "unknown flag");
	CHECK_EQ(ibv_advise_mr(pd, (enum ibv_advise_mr_advice)7, 0, &s, 1), EOPNOTSUPP, "unknown advice");
	bad.lkey = mr->lkey ^ 0x100;
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &bad, 1), EFAULT,
		 "bad lkey");
	bad = s;
	bad.addr = (uintptr_t)m + LEN - 100;
	bad.length = 200;
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &bad, 1), EFAULT,
		 "range past the region");
	bad.addr = (uintptr_t)m - 4096;
	bad.length = 100;
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad, 1), EFAULT, "range before the region");
	struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
	CHECK_EQ(ibv_advise_mr(pd2, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &s, 1), EINVAL, "key of another PD");
	ibv_dealloc_pd(pd2);
	unsigned char *pin = malloc(4096);
	struct ibv_mr *pmr = ibv_reg_mr(pd, pin, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge ps = { (uintptr_t)pin, 4096, pmr->lkey };
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &ps, 1), EINVAL, "a region without ON_DEMAND");
	ibv_dereg_mr(pmr);
	free(pin);
	struct ibv_mr *ro = ibv_reg_mr(pd, m, LEN, IBV_ACCESS_ON_DEMAND | IBV_ACCESS_REMOTE_READ);
	struct ibv_sge rs = { (uintptr_t)m, 4096, ro->lkey };
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, &rs, 1), EFAULT,
		 "PREFETCH_WRITE without LOCAL_WRITE");
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &rs, 1), 0, "PREFETCH without LOCAL_WRITE");
	ibv_dereg_mr(ro);
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	bad = s;
	bad.lkey = mw->rkey;
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad, 1), EINVAL, "a memory window's key");
	ibv_dealloc_mw(mw);
	/* a hole: EFAULT when the prefetch is synchronous (FLUSH), accepted when deferred */
	munmap(m + 40 * page, (size_t)page);
	bad = s;
	bad.addr = (uintptr_t)m + 39 * page;
	bad.length = 3 * (uint32_t)page;
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &bad, 1), EFAULT,
		 "FLUSH over a hole");
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, &bad, 1), 0, "deferred over a hole");
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &s, 0), 0, "no SGE");
	/* two SGEs, the second bad: the call fails */
	struct ibv_sge two[2] = { s, s };
	two[1].lkey ^= 0x100;
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, two, 2), EFAULT, "second SGE bad");
	/* the implicit region: any mapped range */
	struct ibv_mr *imr = ibv_reg_mr(pd, NULL, SIZE_MAX, ODP_ACC);
	unsigned char *q = fresh(LEN);
	struct ibv_sge is = { (uintptr_t)q + page, 4 * (uint32_t)page, imr->lkey };
	CHECK_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &is, 1), 0,
		 "implicit PREFETCH_WRITE");
	CHECK_EQ(resident(q, LEN), 4, "implicit prefetch made 4 pages present");
	munmap(q, LEN);
	ibv_dereg_mr(imr);
	ibv_dereg_mr(mr);
	munmap(m, LEN);
}

static void all_data(void)
{
	test_explicit();
	test_implicit();
	test_faults();
}

static void open_all(void)
{
	ctx = t_open_dev();
	pd = ibv_alloc_pd(ctx);
	if (!pd || ibv_query_gid(ctx, 1, 1, &gid)) {
		fprintf(stderr, "setup failed\n");
		exit(2);
	}
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	page = sysconf(_SC_PAGESIZE);
	/* the packet path (faults configured, all probabilities zero) in a child that starts
	 * before this process touches the library */
	pid_t pid = fork();
	if (pid == 0) {
		setenv("SOFTRDMA_FAULTS", "seed=9", 1);
		open_all();
		all_data();
		test_race("packet path");
		test_mixed_atomics("packet path");
		printf("packet path: ");
		t_report();
		_exit(t_fail ? 1 : 0);
	}
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the ODP data and fault tests over the packet path (status %d)",
	      st);
	open_all();
	test_caps_and_reg();
	all_data();
	test_race("in-process");
	test_mixed_atomics("in-process");
	test_advise();
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return t_report();
}
