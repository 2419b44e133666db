/*
 * In-process verb cost on softrdma: two RC QPs of one process, so every post
 * executes synchronously in the caller (no system call, no thread hop).
 * Prints ns per operation for WRITE (post + poll) and SEND/RECV (post_recv +
 * post_send + two polls). This is the C baseline the Java benchmarks compare with.
 * `inproc_lat [iterations] [rounds]`: after a warm-up round, each of the rounds times
 * the iterations; it prints the best round (least disturbed by other load on the
 * machine) and the median, in wall-clock time, and the best in the thread's CPU time.
 *
 * `inproc_lat --timeline [seconds]`: is the CPU itself in a slow mode, or is softrdma? For the
 * given time (default 5 s), slices of about 10 ms alternate the SEND pair with three reference
 * loops that call no verb: "l1", loads and stores with a dependency through memory in a 4 KiB
 * array (the L1 data cache and store forwarding, as the verbs' path uses them), "ld", four
 * independent loads from that array per step (the L1 data cache alone), and "alu", a chain of
 * multiplies in registers. Each slice prints the thread's CPU time per operation of the four
 * and the CPU it ran on; the summary counts the slices where the SEND pair took more than 1.4
 * times its best slice, and how many of those had each reference loop slow (1.4 times its
 * best) too. On the 2-vCPU build VMs the SEND pair doubles for 0.1 to 5 s at a time and the l1
 * loop doubles with it while the alu loop does not (docs/measurements/performance.md, "Why JMH forks settle
 * in one of two modes").
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

static double clock_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
static double cpu_ns(void) { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

#define MAX_ROUNDS 64

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* The reference loops of --timeline: no verb, no system call. */
static volatile uint64_t ref_l1[512]; /* 4 KiB: stays in the L1 data cache */

__attribute__((noinline)) static uint64_t ref_l1_loop(long n)
{
	uint64_t s = 0;
	for (long i = 0; i < n; i++) {
		ref_l1[i & 511] += s;          /* a store ... */
		s += ref_l1[(i * 7) & 511];    /* ... and a load that may depend on an earlier one */
	}
	return s;
}

__attribute__((noinline)) static uint64_t ref_ld_loop(long n)
{
	uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
	for (long i = 0; i < n; i++) {
		s0 += ref_l1[(i * 4) & 511];
		s1 += ref_l1[(i * 4 + 1) & 511];
		s2 += ref_l1[(i * 4 + 2) & 511];
		s3 += ref_l1[(i * 4 + 3) & 511];
	}
	return s0 + s1 + s2 + s3;
}

__attribute__((noinline)) static uint64_t ref_alu_loop(uint64_t x, long n)
{
	for (long i = 0; i < n; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		__asm__ volatile("" : "+r"(x)); /* keep the chain: one multiply-add per step */
	}
	return x;
}

#define TL_SLICES 4096

/* --timeline: slices of SEND pairs, l1, ld and alu loops; per slice the CPU ns/op of each. */
static int timeline(struct ibv_qp *q[2], struct ibv_cq *cq, struct ibv_send_wr *sw, struct ibv_recv_wr *rw,
		    double seconds)
{
	static double send_ns[TL_SLICES], l1_ns[TL_SLICES], ld_ns[TL_SLICES], alu_ns[TL_SLICES];
	const long pairs = 50000, refs = 2000000; /* a slice: about 5 + 1.5 + 2 + 3 ms on the build VM */
	struct ibv_send_wr *bad;
	struct ibv_recv_wr *rbad;
	struct ibv_wc wc[2];
	uint64_t sink = 0;
	double start = now_ns();
	int n = 0;
	printf("slice  time_s  cpu  send_pair_ns  l1_ns  ld_ns  alu_ns  (the thread's CPU time per operation)\n");
	while (n < TL_SLICES && now_ns() - start < seconds * 1e9) {
		double c0 = cpu_ns();
		for (long i = 0; i < pairs; i++) {
			if (ibv_post_recv(q[1], rw, &rbad) || ibv_post_send(q[0], sw, &bad))
				die("post send");
			int got = 0;
			while (got < 2)
				got += ibv_poll_cq(cq, 2 - got, wc + got);
			if (wc[0].status != IBV_WC_SUCCESS || wc[1].status != IBV_WC_SUCCESS)
				die("send completion");
		}
		double c1 = cpu_ns();
		sink += ref_l1_loop(refs);
		double c2 = cpu_ns();
		sink += ref_ld_loop(refs);
		double c3 = cpu_ns();
		sink = ref_alu_loop(sink, refs);
		double c4 = cpu_ns();
		send_ns[n] = (c1 - c0) / pairs;
		l1_ns[n] = (c2 - c1) / refs;
		ld_ns[n] = (c3 - c2) / refs;
		alu_ns[n] = (c4 - c3) / refs;
		printf("%5d %7.2f %4d %13.1f %6.2f %6.2f %7.2f\n", n, (now_ns() - start) / 1e9, sched_getcpu(),
		       send_ns[n], l1_ns[n], ld_ns[n], alu_ns[n]);
		n++;
	}
	if (n == 0)
		return 1;
	double best_send = send_ns[0], best_l1 = l1_ns[0], best_ld = ld_ns[0], best_alu = alu_ns[0];
	for (int i = 1; i < n; i++) {
		best_send = send_ns[i] < best_send ? send_ns[i] : best_send;
		best_l1 = l1_ns[i] < best_l1 ? l1_ns[i] : best_l1;
		best_ld = ld_ns[i] < best_ld ? ld_ns[i] : best_ld;
		best_alu = alu_ns[i] < best_alu ? alu_ns[i] : best_alu;
	}
	int slow = 0, slow_l1 = 0, slow_ld = 0, slow_alu = 0, fast_l1_slow = 0;
	for (int i = 0; i < n; i++) {
		bool s = send_ns[i] > 1.4 * best_send, l = l1_ns[i] > 1.4 * best_l1;
		slow += s;
		slow_l1 += s && l;
		slow_ld += s && ld_ns[i] > 1.4 * best_ld;
		slow_alu += s && alu_ns[i] > 1.4 * best_alu;
		fast_l1_slow += !s && l;
	}
	printf("summary: %d slices; best send pair %.1f ns, l1 %.2f ns, ld %.2f ns, alu %.2f ns (CPU time per operation)\n"
	       "         send pair slow (> 1.4 x best) in %d slices: the l1 loop slow too in %d, the ld loop in %d,\n"
	       "         the alu loop in %d; the l1 loop slow while the send pair was not: %d slices (sink %llu)\n",
	       n, best_send, best_l1, best_ld, best_alu, slow, slow_l1, slow_ld, slow_alu, fast_l1_slow,
	       (unsigned long long)(sink & 1));
	return 0;
}

int main(int argc, char **argv)
{
	bool tl = argc > 1 && !strcmp(argv[1], "--timeline");
	double tl_seconds = tl && argc > 2 ? atof(argv[2]) : 5;
	long iters = !tl && argc > 1 ? atol(argv[1]) : 200000;
	int rounds = !tl && argc > 2 ? atoi(argv[2]) : 9;
	if (iters < 1 || rounds < 1 || rounds > MAX_ROUNDS || !(tl_seconds > 0)) {
		fprintf(stderr, "usage: inproc_lat [iterations >= 1] [rounds 1..%d]\n"
				"       inproc_lat --timeline [seconds > 0]\n", MAX_ROUNDS);
		return 2;
	}
	double wr_wall[MAX_ROUNDS], wr_cpu[MAX_ROUNDS], sr_wall[MAX_ROUNDS], sr_cpu[MAX_ROUNDS];
	int n;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l || !n)
		die("ibv_get_device_list");
	struct ibv_context *ctx = ibv_open_device(l[0]);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 1024, NULL, NULL, 0);
	static char buf[2][4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!ctx || !pd || !cq || !mr)
		die("setup");
	struct ibv_qp *q[2];
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1,
							.max_recv_sge = 1 } };
		q[i] = ibv_create_qp(pd, &ia);
		if (!q[i])
			die("ibv_create_qp");
	}
	union ibv_gid gid;
	ibv_query_gid(ctx, 1, 1, &gid);
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
					 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
		if (ibv_modify_qp(q[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			die("INIT");
		struct ibv_qp_attr r = { .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
					 .dest_qp_num = q[1 - i]->qp_num, .max_dest_rd_atomic = 1, .min_rnr_timer = 1 };
		r.ah_attr.is_global = 1;
		r.ah_attr.grh.dgid = gid;
		r.ah_attr.grh.sgid_index = 1;
		r.ah_attr.port_num = 1;
		if (ibv_modify_qp(q[i], &r, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
			die("RTR");
		struct ibv_qp_attr s = { .qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
					 .max_rd_atomic = 1 };
		if (ibv_modify_qp(q[i], &s, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
			die("RTS");
	}
	struct ibv_sge sge = { (uintptr_t)buf[0], 8, mr->lkey };
	struct ibv_sge rsge = { (uintptr_t)buf[1], 64, mr->lkey };
	struct ibv_send_wr w = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	w.wr.rdma.remote_addr = (uintptr_t)buf[1];
	w.wr.rdma.rkey = mr->rkey;
	struct ibv_recv_wr rw = { .sg_list = &rsge, .num_sge = 1 }, *rbad;
	struct ibv_wc wc[2];
	if (tl) {
		struct ibv_send_wr sw = w;
		sw.opcode = IBV_WR_SEND;
		int rc = timeline(q, cq, &sw, &rw, tl_seconds);
		ibv_destroy_qp(q[0]);
		ibv_destroy_qp(q[1]);
		ibv_dereg_mr(mr);
		ibv_destroy_cq(cq);
		ibv_dealloc_pd(pd);
		ibv_close_device(ctx);
		ibv_free_device_list(l);
		return rc;
	}
	for (int pass = 0; pass <= rounds; pass++) {
		double c0 = cpu_ns();
		double t0 = now_ns();
		for (long i = 0; i < iters; i++) {
			if (ibv_post_send(q[0], &w, &bad))
				die("post write");
			while (ibv_poll_cq(cq, 1, wc) == 0)
				;
			if (wc[0].status != IBV_WC_SUCCESS)
				die("write completion");
		}
		double t1 = now_ns();
		double c1 = cpu_ns();
		struct ibv_send_wr sw = w;
		sw.opcode = IBV_WR_SEND;
		for (long i = 0; i < iters; i++) {
			if (ibv_post_recv(q[1], &rw, &rbad) || ibv_post_send(q[0], &sw, &bad))
				die("post send");
			int got = 0;
			while (got < 2)
				got += ibv_poll_cq(cq, 2 - got, wc + got);
			if (wc[0].status != IBV_WC_SUCCESS || wc[1].status != IBV_WC_SUCCESS)
				die("send completion");
		}
		double t2 = now_ns();
		double c2 = cpu_ns();
		if (pass > 0) { /* the first pass warms caches and branch predictors */
			wr_wall[pass - 1] = (t1 - t0) / iters;
			wr_cpu[pass - 1] = (c1 - c0) / iters;
			sr_wall[pass - 1] = (t2 - t1) / iters;
			sr_cpu[pass - 1] = (c2 - c1) / iters;
		}
	}
	qsort(wr_wall, (size_t)rounds, sizeof(double), cmp_double);
	qsort(wr_cpu, (size_t)rounds, sizeof(double), cmp_double);
	qsort(sr_wall, (size_t)rounds, sizeof(double), cmp_double);
	qsort(sr_cpu, (size_t)rounds, sizeof(double), cmp_double);
	printf("in-process RC, %d rounds of %ld iterations (ns/op: best, median wall-clock; best CPU time):\n"
	       "  RDMA WRITE 8 B post+poll                 %6.1f %6.1f %6.1f\n"
	       "  SEND 8 B post_recv+post_send+poll (x2)   %6.1f %6.1f %6.1f\n",
	       rounds, iters, wr_wall[0], wr_wall[rounds / 2], wr_cpu[0], sr_wall[0], sr_wall[rounds / 2],
	       sr_cpu[0]);
	ibv_destroy_qp(q[0]);
	ibv_destroy_qp(q[1]);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(l);
	return 0;
}
