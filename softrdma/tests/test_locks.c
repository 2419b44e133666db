/*
 * The data path's locks under concurrent writers (src/lock.h): while one thread posts WRITEs
 * and SENDs between two QPs of this process and polls their completions (readers of the MR and
 * QPN tables, takers of the SQ, responder, RQ and CQ locks), other threads register and
 * deregister memory regions, create and destroy QPs (writers of both tables) and start and
 * end threads that post on their own QP pair (reader records taken and given back). Every
 * WRITE must land byte for byte, every completion be a success, and nothing may hang
 * (the Makefile's timeout). Also: a region deregistered while posts run is refused afterwards;
 * and the locks' bias (lock.h): a QP and a CQ used by one thread, then posted on and polled by
 * two threads at once (the second revokes the bias while the first may be inside), deliver
 * every completion exactly once.
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include "testlib.h"

#define ROUNDS 20000

static int poll1(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (long spins = 0; spins < 200000000L; spins++) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n;
	}
	return 0;
}

/* n WRITEs of 8 bytes (a counter) and n SENDs, from the buffer's first 4 KiB to its second;
 * returns the number of mismatches */
static long traffic(struct t_pair *p, long n)
{
	long bad = 0;
	struct ibv_sge sge = { (uintptr_t)p->buf, 8, p->mr->lkey };
	struct ibv_sge rsge = { (uintptr_t)p->buf + 4096 + 64, 8, p->mr->lkey };
	struct ibv_send_wr w = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED }, *badw;
	w.wr.rdma.remote_addr = (uintptr_t)p->buf + 4096;
	w.wr.rdma.rkey = p->mr->rkey;
	struct ibv_send_wr s = w;
	s.opcode = IBV_WR_SEND;
	struct ibv_recv_wr r = { .sg_list = &rsge, .num_sge = 1 }, *badr;
	struct ibv_wc wc;
	for (long i = 0; i < n; i++) {
		uint64_t v = ((uint64_t)i << 8) | 0x5a;
		memcpy(p->buf, &v, 8);
		w.wr_id = (uint64_t)i;
		if (ibv_post_send(p->q[0], &w, &badw) || poll1(p->cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS ||
		    wc.wr_id != (uint64_t)i)
			bad++;
		uint64_t got;
		memcpy(&got, p->buf + 4096, 8);
		if (got != v)
			bad++;
		if (ibv_post_recv(p->q[1], &r, &badr) || ibv_post_send(p->q[0], &s, &badw))
			bad++;
		for (int k = 0; k < 2; k++)
			if (poll1(p->cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
				bad++;
		memcpy(&got, p->buf + 4096 + 64, 8);
		if (got != v)
			bad++;
	}
	return bad;
}

static struct ibv_context *g_ctx;
static int g_stop;

/* writer of both tables: regions registered and deregistered, QPs created and destroyed */
static void *churn(void *arg)
{
	struct ibv_pd *pd = arg;
	long *loops = calloc(1, sizeof(long));
	static char area[16][4096] __attribute__((aligned(4096)));
	struct ibv_cq *cq = ibv_create_cq(g_ctx, 4, NULL, NULL, 0);
	while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE) && cq) {
		struct ibv_mr *m[16];
		for (int i = 0; i < 16; i++)
			m[i] = ibv_reg_mr(pd, area[i], 4096, IBV_ACCESS_LOCAL_WRITE);
		struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
							.max_recv_sge = 1 } };
		struct ibv_qp *qp = ibv_create_qp(pd, &ia);
		for (int i = 0; i < 16; i++)
			if (m[i])
				ibv_dereg_mr(m[i]);
		if (qp)
			ibv_destroy_qp(qp);
		(*loops)++;
	}
	if (cq)
		ibv_destroy_cq(cq);
	return loops;
}

/* a short-lived thread with its own pair: takes a reader record, gives it back at exit */
static void *visitor(void *arg)
{
	(void)arg;
	struct t_pair p = { 0 };
	long *bad = calloc(1, sizeof(long));
	if (t_pair_up(&p, g_ctx)) {
		*bad = 1000000; /* counted as a failure; the half-built pair is left as it is */
		return bad;
	}
	*bad = traffic(&p, 200);
	t_pair_down(&p);
	return bad;
}

/* two threads post WRITEs on one QP and poll one CQ; every wr_id must complete once (a lost
 * completion fails after 10 s of polling instead of hanging) */
static int poll_for(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long spins = 1;; spins++) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n;
		if (spins % 4096 == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec > 10)
				return 0;
		}
	}
}

#define SHARED_N 200000
static struct t_pair *g_sp;
static pthread_barrier_t g_start;
static unsigned char g_seen[2 * SHARED_N];

static void *shared_poster(void *arg)
{
	long id = (long)arg, *bad = calloc(1, sizeof(long));
	struct ibv_sge sge = { (uintptr_t)g_sp->buf, 8, g_sp->mr->lkey };
	struct ibv_send_wr w = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED }, *badw;
	w.wr.rdma.remote_addr = (uintptr_t)g_sp->buf + 4096 + 128;
	w.wr.rdma.rkey = g_sp->mr->rkey;
	struct ibv_wc wc;
	pthread_barrier_wait(&g_start);
	for (long i = 0; i < SHARED_N; i++) {
		w.wr_id = (uint64_t)(id * SHARED_N + i);
		/* the queue holds 16: the other thread's WQEs may fill it for a moment */
		int rc;
		for (long tries = 0; (rc = ibv_post_send(g_sp->q[0], &w, &badw)) == ENOMEM && tries < 100000000L; tries++)
			;
		if (rc || poll_for(g_sp->cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS ||
		    wc.wr_id >= 2 * SHARED_N) {
			(*bad)++;
			continue;
		}
		__atomic_add_fetch(&g_seen[wc.wr_id], 1, __ATOMIC_RELAXED);
	}
	return bad;
}

int main(void)
{
	g_ctx = t_open_dev();
	struct t_pair p = { 0 };
	CHECK(t_pair_up(&p, g_ctx) == 0, "setup");
	CHECK_EQ(traffic(&p, 100), 0, "mismatches before any writer runs");

	pthread_t w[2];
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&w[i], NULL, churn, p.pd) == 0, "churn thread");
	long bad = 0, visitors = 0, visitor_bad = 0;
	for (int round = 0; round < ROUNDS / 1000; round++) {
		bad += traffic(&p, 1000);
		pthread_t v;
		if (pthread_create(&v, NULL, visitor, NULL) == 0) {
			void *ret;
			pthread_join(v, &ret);
			visitor_bad += *(long *)ret;
			free(ret);
			visitors++;
		}
	}
	__atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
	long loops = 0;
	for (int i = 0; i < 2; i++) {
		void *ret;
		pthread_join(w[i], &ret);
		loops += *(long *)ret;
		free(ret);
	}
	CHECK_EQ(bad, 0, "WRITE/SEND mismatches or failed completions while the tables changed");
	CHECK_EQ(visitor_bad, 0, "mismatches in the short-lived threads");
	CHECK(loops > 0, "the writers ran");
	printf("writers: %ld rounds of 16 registrations and a QP; %ld short-lived threads\n", loops, visitors);
	CHECK_EQ(visitors, ROUNDS / 1000, "short-lived threads");

	/* the bias: p's locks were taken by this thread only; now a second thread shares them */
	g_sp = &p;
	pthread_barrier_init(&g_start, NULL, 2);
	pthread_t other;
	CHECK(pthread_create(&other, NULL, shared_poster, (void *)1L) == 0, "second poster");
	long *mine = shared_poster((void *)0L), *theirs = NULL;
	pthread_join(other, (void **)&theirs);
	CHECK_EQ(*mine + *theirs, 0, "failed posts or completions with two threads on one QP and CQ");
	free(mine);
	free(theirs);
	long once = 0;
	for (long i = 0; i < 2 * SHARED_N; i++)
		once += g_seen[i] == 1;
	CHECK_EQ(once, 2 * SHARED_N, "WRITEs completed exactly once with two threads on one QP and CQ");
	CHECK_EQ(traffic(&p, 1000), 0, "mismatches on one thread again after the bias was revoked");

	/* a region deregistered while posting: refused afterwards with a local protection error */
	struct ibv_mr *tmp = ibv_reg_mr(p.pd, p.buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CHECK(tmp != NULL, "register");
	struct ibv_sge sge = { (uintptr_t)p.buf, 8, tmp ? tmp->lkey : 0 };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED, .wr_id = 77 }, *badw;
	wr.wr.rdma.remote_addr = (uintptr_t)p.buf + 4096;
	wr.wr.rdma.rkey = p.mr->rkey;
	struct ibv_wc wc;
	CHECK(ibv_post_send(p.q[0], &wr, &badw) == 0 && poll1(p.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS,
	      "WRITE through the extra region");
	if (tmp)
		ibv_dereg_mr(tmp);
	CHECK(ibv_post_send(p.q[0], &wr, &badw) == 0 && poll1(p.cq, &wc) == 1, "WRITE after dereg completes");
	CHECK_EQ(wc.status, IBV_WC_LOC_PROT_ERR, "status of a WRITE through a deregistered lkey");

	t_pair_down(&p);
	ibv_close_device(g_ctx);
	return t_report();
}
