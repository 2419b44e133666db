/*
 * A QP moved to ERR by its own requester while its responder is taking receive WQEs for a
 * peer's SENDs: every receive posted must complete exactly once, in the order posted, the
 * ones the SENDs filled with SUCCESS and their bytes, the rest with WR_FLUSH_ERR after them.
 *
 * Two QPs of this process, A and B. A's receives are posted first; a thread posts SENDs on B
 * to A (several KiB each), and when some of them have completed another thread posts on A a
 * SEND whose local key resolves to nothing, so A's requester fails (LOC_PROT_ERR) and moves A
 * to ERR while B's SENDs are still arriving. A's responder takes a receive WQE and completes
 * it under A's resp_lock; a flush of A's receive queue that does not hold it completes the
 * receives behind a WQE taken but not yet completed before it (an order no NIC shows), and
 * one that forgets the WQE of a SEND in progress loses it. The race is made likely, not
 * certain, so each form runs ROUNDS rounds.
 *
 * Two forms: in this process's in-process path (the sending thread runs A's responder with
 * the whole message), and again in a child with SOFTRDMA_FAULTS set, which sends every SEND
 * as packets of the path MTU through the agent (A's responder holds the WQE of a SEND in
 * progress across packets). Bounded by alarm().
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include "testlib.h"

#define NRECV 48           /* receives posted on A per round (and SENDs posted on B) */
#define MSG (16 * 1024)    /* bytes per SEND: 16 packets at the path MTU of 1024 */
#define ROUNDS 150

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;
static uint8_t *abuf, *bbuf;      /* A's receive slots, B's send slots: NRECV x MSG each */
static struct ibv_mr *amr, *bmr;
static bool packets;              /* SOFTRDMA_FAULTS set: the packet form */
static int g_gave_up;             /* rounds whose breaker fired on its 5 s limit */

struct round {
	struct ibv_cq *arcq, *ascq, *bcq; /* A's receive CQ, A's send CQ, B's send and receive CQ */
	struct ibv_qp *a, *b;
	unsigned fire_after;              /* B's SENDs completed before A's requester fails */
	unsigned seed;
	unsigned posted;                  /* SENDs B's thread posted */
	int go;                           /* the breaker runs: B's thread may start */
	unsigned fired_seen;              /* what the breaker had seen when it fired (posts or completions) */
	long long fired_ms;               /* how long it waited */
	int post_err;                     /* a post that failed (the test's own fault) */
	int bad_status;                   /* A's failing SEND completed with another status */
};

static struct ibv_qp *mk_qp(struct ibv_cq *scq, struct ibv_cq *rcq)
{
	struct ibv_qp_init_attr ia = { .send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = NRECV + 1, .max_recv_wr = NRECV, .max_send_sge = 1,
						.max_recv_sge = 1 } };
	return ibv_create_qp(pd, &ia);
}

/* B's thread: the NRECV SENDs (slot j), signaled, as fast as they post. */
static void *sender(void *arg)
{
	struct round *r = arg;
	while (!__atomic_load_n(&r->go, __ATOMIC_ACQUIRE))
		sched_yield();
	for (int j = 0; j < NRECV; j++) {
		struct ibv_sge s = { (uintptr_t)bbuf + (size_t)j * MSG, MSG, bmr->lkey };
		struct ibv_send_wr w = { .wr_id = (uint64_t)j, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED }, *bad;
		if (ibv_post_send(r->b, &w, &bad)) {
			__atomic_add_fetch(&r->post_err, 1, __ATOMIC_RELEASE);
			break;
		}
		__atomic_store_n(&r->posted, (unsigned)j + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/*
 * A's thread: once fire_after of B's SENDs completed (or B's thread stopped short), A posts a
 * SEND with a local key of nothing, and its requester moves A to ERR. In process a post
 * returns once its SEND completed, and the thread watches B's count of posts without a pause
 * (an empty poll of a CQ gives the core away now and then, and the sender would be done
 * before the move); as packets it polls B's CQ.
 */
static void *breaker(void *arg)
{
	struct round *r = arg;
	unsigned done = 0;
	struct ibv_wc wc[8];
	long long t0 = now_ms();
	__atomic_store_n(&r->go, 1, __ATOMIC_RELEASE);
	while (done < r->fire_after && !__atomic_load_n(&r->post_err, __ATOMIC_ACQUIRE) && now_ms() - t0 < 5000) {
		if (!packets) {
			done = __atomic_load_n(&r->posted, __ATOMIC_ACQUIRE);
			continue;
		}
		int n = ibv_poll_cq(r->bcq, 8, wc);
		done += n > 0 ? (unsigned)n : 0;
	}
	r->fired_seen = done;
	r->fired_ms = now_ms() - t0;
	struct ibv_sge s = { (uintptr_t)abuf, 64, amr->lkey ^ 0x5a5a00 };
	struct ibv_send_wr w = { .wr_id = 0xbad, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	if (ibv_post_send(r->a, &w, &bad)) {
		__atomic_add_fetch(&r->post_err, 1, __ATOMIC_RELEASE);
		return NULL;
	}
	if (t_wait_wc(r->ascq, wc) != 1 || wc[0].wr_id != 0xbad || wc[0].status != IBV_WC_LOC_PROT_ERR)
		r->bad_status++;
	return NULL;
}

/* Polls A's receive CQ until NRECV completions came, then 20 ms more for an extra one; stops
 * early after 1 s without a new completion (a receive that never completes). The number read
 * into wc (at most 2 * NRECV). */
static int collect(struct ibv_cq *cq, struct ibv_wc *wc)
{
	int n = 0;
	long long last = now_ms(), extra_until = -1;
	for (;;) {
		int k = ibv_poll_cq(cq, 2 * NRECV - n, wc + n);
		long long ms = now_ms();
		if (k > 0) {
			n += k;
			last = ms;
		}
		if (n >= NRECV && extra_until < 0)
			extra_until = ms + 20;
		if (n >= 2 * NRECV || (extra_until >= 0 && ms >= extra_until) || ms - last > 1000)
			return n;
		if (k <= 0)
			sched_yield();
	}
}

/* Whether receive slot p holds SEND seed's bytes, byte for byte. */
static bool holds_send(const uint8_t *p, unsigned seed)
{
	static uint8_t want[MSG];
	t_fill(want, MSG, seed);
	return !memcmp(p, want, MSG);
}

/*
 * One round. Returns 0, or 1 when A's receive completions broke the rule (printed once per
 * kind of breakage, with the round), counting what it saw in *flushed and *filled.
 */
static int one_round(int round, unsigned fire_after, int *filled, int *flushed)
{
	static const struct t_conn conn = { .access = IBV_ACCESS_LOCAL_WRITE, .rd_atomic = 1, .min_rnr_timer = 1,
					    .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
					    .sq_psn = 0x100, .rq_psn = 0x100 };
	struct round r = { .fire_after = fire_after, .seed = 1000u * (unsigned)round };
	r.arcq = ibv_create_cq(ctx, 2 * NRECV, NULL, NULL, 0);
	r.ascq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	r.bcq = ibv_create_cq(ctx, 2 * NRECV + 4, NULL, NULL, 0);
	if (!r.arcq || !r.ascq || !r.bcq || !(r.a = mk_qp(r.ascq, r.arcq)) || !(r.b = mk_qp(r.bcq, r.bcq)) ||
	    t_connect(r.a, r.b, &gid, &conn)) {
		fprintf(stderr, "round %d: setup failed\n", round);
		exit(2);
	}
	memset(abuf, 0, (size_t)NRECV * MSG);
	for (int j = 0; j < NRECV; j++) /* filled before: the sender's thread only posts */
		t_fill(bbuf + (size_t)j * MSG, MSG, r.seed + (unsigned)j);
	for (int j = 0; j < NRECV; j++) {
		struct ibv_sge s = { (uintptr_t)abuf + (size_t)j * MSG, MSG, amr->lkey };
		struct ibv_recv_wr w = { .wr_id = (uint64_t)j, .sg_list = &s, .num_sge = 1 }, *bad;
		if (ibv_post_recv(r.a, &w, &bad)) {
			fprintf(stderr, "round %d: post_recv failed\n", round);
			exit(2);
		}
	}
	pthread_t ts, tb;
	pthread_create(&ts, NULL, sender, &r);
	pthread_create(&tb, NULL, breaker, &r);
	pthread_join(ts, NULL);
	pthread_join(tb, NULL);

	struct ibv_wc wc[2 * NRECV];
	int n = collect(r.arcq, wc);
	int broken = 0, in_order = 1, seen_flush = 0, ok = 0, fl = 0;
	int count[NRECV] = { 0 };
	for (int i = 0; i < n; i++) {
		uint64_t id = wc[i].wr_id;
		if (id >= NRECV) {
			in_order = 0;
			continue;
		}
		count[id]++;
		if (id != (uint64_t)i)
			in_order = 0;
		if (wc[i].status == IBV_WC_SUCCESS) {
			ok++;
			if (seen_flush)
				in_order = 0; /* a SUCCESS after a flush */
			if (wc[i].byte_len != MSG || wc[i].opcode != IBV_WC_RECV ||
			    !holds_send(abuf + id * MSG, r.seed + (unsigned)id)) {
				if (!broken)
					fprintf(stderr, "round %d: receive %llu: SUCCESS with %u bytes, not SEND %llu's\n",
						round, (unsigned long long)id, wc[i].byte_len, (unsigned long long)id);
				broken = 1;
			}
		} else if (wc[i].status == IBV_WC_WR_FLUSH_ERR) {
			fl++;
			seen_flush = 1;
		} else {
			if (!broken)
				fprintf(stderr, "round %d: receive %llu completed with %s\n", round,
					(unsigned long long)id, ibv_wc_status_str(wc[i].status));
			broken = 1;
		}
	}
	int missing = 0, doubled = 0;
	for (int j = 0; j < NRECV; j++) {
		missing += count[j] == 0;
		doubled += count[j] > 1;
	}
	if (missing || doubled || n != NRECV) {
		fprintf(stderr, "round %d: %d completions for %d receives: %d never completed, %d more than once\n",
			round, n, NRECV, missing, doubled);
		broken = 1;
	} else if (!in_order) {
		fprintf(stderr, "round %d: receives completed out of the order posted:", round);
		for (int i = 0; i < n; i++)
			fprintf(stderr, " %llu%s", (unsigned long long)wc[i].wr_id,
				wc[i].status == IBV_WC_SUCCESS ? "" : "F");
		fputc('\n', stderr);
		broken = 1;
	}
	/* the SENDs completed before A's requester failed were placed; the rest may be either (when
	 * the breaker gave up waiting for them, after 5 s without the sender's progress on a busy
	 * machine, it fired anyway: the round still checks the completions, not this) */
	if (!broken && r.fired_seen >= fire_after && ok < (int)fire_after) {
		fprintf(stderr, "round %d: %d receives filled, fewer than the %u SENDs completed (%u seen after %lld ms)\n",
			round, ok, fire_after, r.fired_seen, r.fired_ms);
		broken = 1;
	}
	if (r.post_err || r.bad_status) {
		fprintf(stderr, "round %d: posts failed (%d), A's failing SEND completed otherwise (%d)\n", round,
			r.post_err, r.bad_status);
		broken = 1;
	}
	*filled += ok;
	*flushed += fl;
	g_gave_up += r.fired_seen < fire_after;

	/* B's SENDs that A no longer takes are flushed with B's move to ERR */
	struct ibv_qp_attr e = { .qp_state = IBV_QPS_ERR };
	ibv_modify_qp(r.b, &e, IBV_QP_STATE);
	if (ibv_destroy_qp(r.a) || ibv_destroy_qp(r.b) || ibv_destroy_cq(r.arcq) || ibv_destroy_cq(r.ascq) ||
	    ibv_destroy_cq(r.bcq)) {
		fprintf(stderr, "round %d: teardown failed\n", round);
		exit(2);
	}
	return broken;
}

static void stress(const char *form)
{
	unsigned rng = 0x5eed;
	int broken = 0, filled = 0, flushed = 0, rounds = 0;
	/* a few broken rounds tell enough (a lost receive costs a second's wait each) */
	while (rounds < ROUNDS && broken < 5) {
		rng = rng * 1103515245u + 12345u;
		unsigned fire_after = 1 + (rng >> 16) % (NRECV - 8); /* SENDs still arriving after it */
		broken += one_round(rounds++, fire_after, &filled, &flushed);
	}
	printf("%s: %d rounds, %d receives filled, %d flushed, %d rounds broken (%d fired on the 5 s limit)\n",
	       form, rounds, filled, flushed, broken, g_gave_up);
	CHECK(broken == 0, "%s: %d of %d rounds lost, doubled or reordered a receive's completion", form, broken,
	      rounds);
	CHECK(flushed > 0, "%s: some receives were flushed (the move to ERR came while SENDs arrived)", form);
}

int main(int argc, char **argv)
{
	(void)argc;
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(200); /* bounded: a hang is a failure */
	const char *faults = getenv("SOFTRDMA_FAULTS");
	packets = faults && *faults;
	if (!packets) {
		/* the packet form first, in a child, before this process opens the device:
		 * softrdma reads SOFTRDMA_FAULTS once per process */
		pid_t child = fork();
		if (child == 0) {
			setenv("SOFTRDMA_FAULTS", "seed=1", 1); /* no fault: every message as packets */
			execv("/proc/self/exe", argv);
			_exit(127);
		}
		int st = 0;
		CHECK(child > 0 && waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "packet path: child status %#x", st);
	}
	ctx = t_open_dev();
	pd = ibv_alloc_pd(ctx);
	abuf = aligned_alloc(4096, (size_t)NRECV * MSG);
	bbuf = aligned_alloc(4096, (size_t)NRECV * MSG);
	if (!pd || !abuf || !bbuf || ibv_query_gid(ctx, 1, 1, &gid)) {
		fprintf(stderr, "setup failed\n");
		return 2;
	}
	amr = ibv_reg_mr(pd, abuf, (size_t)NRECV * MSG, IBV_ACCESS_LOCAL_WRITE);
	bmr = ibv_reg_mr(pd, bbuf, (size_t)NRECV * MSG, IBV_ACCESS_LOCAL_WRITE);
	if (!amr || !bmr) {
		fprintf(stderr, "reg_mr failed\n");
		return 2;
	}
	stress(packets ? "packet path (SOFTRDMA_FAULTS)" : "in-process path");
	return t_report();
}
