/* Minimal test harness for softrdma's C tests: counts checks, prints "N passed, N failed". */
#ifndef TESTLIB_H
#define TESTLIB_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stdint.h>
#include <unistd.h>
#include <time.h>

static int t_pass, t_fail;

#define CHECK(cond, ...) do { \
	if (cond) { t_pass++; } else { t_fail++; \
		fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
		fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } \
} while (0)

#define CHECK_EQ(a, b, what) do { long long _a = (long long)(a), _b = (long long)(b); \
	CHECK(_a == _b, "%s: got %lld, want %lld", what, _a, _b); } while (0)

/* Milliseconds of the monotonic clock: what the tests' deadlines are measured in (a count of
 * sleeps is not time on a loaded machine, where each sleep can last milliseconds). */
__attribute__((unused)) static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int t_report(void)
{
	printf("%d passed, %d failed\n", t_pass, t_fail);
	return t_fail ? 1 : 0;
}

/* Whole reads and writes on the pipes that tests with a second process use for their exchange:
 * a short one means the other side died, and the test cannot go on. */
__attribute__((unused)) static void xread(int fd, void *p, size_t n)
{
	if (read(fd, p, n) != (ssize_t)n) {
		fprintf(stderr, "pipe read failed\n");
		exit(1);
	}
}

__attribute__((unused)) static void xwrite(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		exit(1);
}

__attribute__((unused)) static unsigned long t_checksum(const unsigned char *p, size_t n)
{
	unsigned long h = 1469598103934665603ul;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ul;
	return h;
}

__attribute__((unused)) static void t_fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (unsigned char)(seed >> 16);
	}
}
#ifdef INFINIBAND_VERBS_H
/* The first RDMA device, opened; exits 2 (not a test failure) when there is none. */
__attribute__((unused)) static struct ibv_context *t_open_dev(void)
{
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l || n < 1) {
		fprintf(stderr, "no RDMA device\n");
		exit(2);
	}
	struct ibv_context *c = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	if (!c) {
		fprintf(stderr, "cannot open device\n");
		exit(2);
	}
	return c;
}

/*
 * Where a send WR's remote side goes depends on its opcode: wr.atomic (with compare_add and
 * swap) for the two atomics, wr.rdma for the rest.
 */
__attribute__((unused)) static void t_wr_remote(struct ibv_send_wr *w, uint64_t raddr, uint32_t rkey,
						uint64_t compare_add, uint64_t swap)
{
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		w->wr.atomic.remote_addr = raddr;
		w->wr.atomic.rkey = rkey;
		w->wr.atomic.compare_add = compare_add;
		w->wr.atomic.swap = swap;
	} else {
		w->wr.rdma.remote_addr = raddr;
		w->wr.rdma.rkey = rkey;
	}
}

/* Waits up to ~5 s for one completion on cq, polled into *wc: 1, 0 when none came, or ibv_poll_cq's error. */
__attribute__((unused)) static int t_wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (int i = 0; i < 500000; i++) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n;
		usleep(10);
	}
	return 0;
}

/*
 * Moving a QP from RESET to RTS facing a peer QP: what the tests vary. The rest is the same in
 * every test: port 1, P_Key index 0, GID index 1, path MTU 1024. Which attributes go into the
 * mask follows the QP's type (the kernel's table): UD takes the Q_Key and no path; RC and an
 * XRC target take responder resources and the RNR timer at RTR; UC and an XRC initiator do not;
 * RC and an XRC initiator take the retry counts and initiator depth at RTS; an XRC target takes
 * only its timeout and SQ PSN there; UC only its SQ PSN.
 */
struct t_conn {
	int access;              /* qp_access_flags (all but UD) */
	uint32_t qkey;           /* UD */
	uint32_t rq_psn, sq_psn;
	uint8_t rd_atomic;       /* max_dest_rd_atomic at RTR and max_rd_atomic at RTS */
	uint8_t min_rnr_timer;
	uint8_t hop_limit;       /* of the GRH to the peer */
	uint8_t timeout, retry_cnt, rnr_retry;
};

/* RESET (or INIT) to INIT; ibv_modify_qp's return value */
__attribute__((unused)) static int t_qp_init(struct ibv_qp *q, const struct t_conn *c)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .pkey_index = 0, .qkey = c->qkey,
				 .qp_access_flags = c->access };
	return ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			     (q->qp_type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS));
}

/* The attributes of INIT to RTR facing QP dqpn at gid, in *a; returns the mask q's type takes */
__attribute__((unused)) static int t_rtr_attr(const struct ibv_qp *q, uint32_t dqpn, const union ibv_gid *gid,
					      const struct t_conn *c, struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = IBV_MTU_1024;
	a->dest_qp_num = dqpn;
	a->rq_psn = c->rq_psn;
	a->max_dest_rd_atomic = c->rd_atomic;
	a->min_rnr_timer = c->min_rnr_timer;
	a->ah_attr.is_global = 1;
	a->ah_attr.grh.dgid = *gid;
	a->ah_attr.grh.sgid_index = 1;
	a->ah_attr.grh.hop_limit = c->hop_limit;
	a->ah_attr.port_num = 1;
	if (q->qp_type == IBV_QPT_UD)
		return IBV_QP_STATE;
	int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (q->qp_type == IBV_QPT_RC || q->qp_type == IBV_QPT_XRC_RECV)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	return mask;
}

/* An address handle to gid through port 1 and GID index 1, as t_rtr_attr's path (UD sends) */
__attribute__((unused)) static struct ibv_ah *t_create_ah(struct ibv_pd *pd, const union ibv_gid *gid, uint8_t hop_limit)
{
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	aa.grh.dgid = *gid;
	aa.grh.sgid_index = 1;
	aa.grh.hop_limit = hop_limit;
	return ibv_create_ah(pd, &aa);
}

/* INIT to RTR facing QP dqpn at gid; ibv_modify_qp's return value */
__attribute__((unused)) static int t_qp_rtr(struct ibv_qp *q, uint32_t dqpn, const union ibv_gid *gid,
					    const struct t_conn *c)
{
	struct ibv_qp_attr a;
	int mask = t_rtr_attr(q, dqpn, gid, c, &a);
	return ibv_modify_qp(q, &a, mask);
}

/* RTR to RTS; ibv_modify_qp's return value */
__attribute__((unused)) static int t_qp_rts(struct ibv_qp *q, const struct t_conn *c)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .sq_psn = c->sq_psn, .timeout = c->timeout,
				 .retry_cnt = c->retry_cnt, .rnr_retry = c->rnr_retry, .max_rd_atomic = c->rd_atomic };
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (q->qp_type == IBV_QPT_RC || q->qp_type == IBV_QPT_XRC_SEND)
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	else if (q->qp_type == IBV_QPT_XRC_RECV)
		mask |= IBV_QP_TIMEOUT;
	return ibv_modify_qp(q, &a, mask);
}

/*
 * q from RESET through INIT and RTR up to `upto` (INIT, RTR or RTS), facing QP dqpn at gid.
 * 0, or the first failing step's return value with *failed (when not NULL) naming the step.
 */
__attribute__((unused)) static int t_qp_up(struct ibv_qp *q, enum ibv_qp_state upto, uint32_t dqpn,
					   const union ibv_gid *gid, const struct t_conn *c, const char **failed)
{
	int rc = t_qp_init(q, c);
	const char *step = "to INIT";
	if (!rc && upto != IBV_QPS_INIT) {
		rc = t_qp_rtr(q, dqpn, gid, c);
		step = "to RTR";
		if (!rc && upto != IBV_QPS_RTR) {
			rc = t_qp_rts(q, c);
			step = "to RTS";
		}
	}
	if (rc && failed)
		*failed = step;
	return rc;
}

/* a and b to RTS, facing each other (a's steps, then b's): 0, or the first failure's value */
__attribute__((unused)) static int t_connect(struct ibv_qp *a, struct ibv_qp *b, const union ibv_gid *gid,
					     const struct t_conn *c)
{
	int rc = t_qp_up(a, IBV_QPS_RTS, b->qp_num, gid, c, NULL);
	return rc ? rc : t_qp_up(b, IBV_QPS_RTS, a->qp_num, gid, c, NULL);
}

/* a and b to RTS, facing each other (a's steps, then b's), each of the six steps one CHECK */
__attribute__((unused)) static void t_check_connect(struct ibv_qp *a, struct ibv_qp *b, const union ibv_gid *gid,
						    const struct t_conn *c)
{
	struct ibv_qp *q[2] = { a, b };
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(t_qp_init(q[i], c), 0, "to INIT");
		CHECK_EQ(t_qp_rtr(q[i], q[1 - i]->qp_num, gid, c), 0, "to RTR");
		CHECK_EQ(t_qp_rts(q[i], c), 0, "to RTS");
	}
}

/* Two RC QPs of one context sharing one CQ, connected to each other, over one registered 8 KiB
 * buffer (zeroed, page-aligned): the in-process loop the lock tests drive */
struct t_pair {
	struct ibv_context *ctx; /* not owned: t_pair_down leaves it open */
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *q[2];
	struct ibv_mr *mr;
	uint8_t *buf;
};

/* 0, or -1 with whatever was made left for t_pair_down */
__attribute__((unused)) static int t_pair_up(struct t_pair *p, struct ibv_context *ctx)
{
	static const struct t_conn conn = { .access = IBV_ACCESS_REMOTE_WRITE, .rd_atomic = 1,
					    .min_rnr_timer = 1, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7 };
	union ibv_gid gid;
	p->ctx = ctx;
	p->pd = ibv_alloc_pd(ctx);
	p->cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	p->buf = aligned_alloc(4096, 8192);
	if (!p->pd || !p->cq || !p->buf || ibv_query_gid(ctx, 1, 1, &gid))
		return -1;
	memset(p->buf, 0, 8192);
	p->mr = ibv_reg_mr(p->pd, p->buf, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_init_attr ia = { .send_cq = p->cq, .recv_cq = p->cq, .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
							.max_recv_sge = 1 } };
		p->q[i] = ibv_create_qp(p->pd, &ia);
	}
	if (!p->mr || !p->q[0] || !p->q[1])
		return -1;
	return t_connect(p->q[0], p->q[1], &gid, &conn) ? -1 : 0;
}

__attribute__((unused)) static void t_pair_down(struct t_pair *p)
{
	ibv_destroy_qp(p->q[0]);
	ibv_destroy_qp(p->q[1]);
	ibv_dereg_mr(p->mr);
	ibv_destroy_cq(p->cq);
	ibv_dealloc_pd(p->pd);
	free(p->buf);
}
#endif

#endif
