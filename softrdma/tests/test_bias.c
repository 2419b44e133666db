/*
 * The data-path locks keep their bias (src/lock.h) while one thread uses them: a thread that
 * creates two QPs of this process and one CQ, then posts WRITEs and SENDs between them and polls,
 * with pauses in which the agent runs its timers, ends with no bias revoked (and with the locks
 * it used biased to it); the same traffic with a second thread posting on the same QP and
 * polling the same CQ for a while revokes at least one bias. Counted by SOFTRDMA_STATS's
 * bias_owned and bias_revoked: each case runs in a child (this program again, "child CASE"),
 * with SOFTRDMA_STATS set and its stderr in a file, so that its counters start at zero and are
 * printed at its exit. Every WRITE and SEND is checked byte for byte (the child's exit status).
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <time.h>
#include "testlib.h"

static struct t_pair g_pair; /* buf: [0, 4096) sources, [4096, 8192) targets; each thread its own 256 bytes */
static pthread_mutex_t g_turn = PTHREAD_MUTEX_INITIALIZER; /* one thread's WR and its completions at a time */

/* n WRITEs of 8 bytes and n SENDs from q[0] to q[1], each polled; slot picks the thread's bytes.
 * Returns the number of mismatches. Under g_turn, so that a completion polled is this thread's. */
static long traffic(int slot, long n)
{
	struct t_pair *p = &g_pair;
	long bad = 0;
	uint8_t *src = p->buf + 256 * slot, *dst = p->buf + 4096 + 256 * slot;
	struct ibv_sge sge = { (uintptr_t)src, 8, p->mr->lkey };
	struct ibv_sge rsge = { (uintptr_t)dst + 64, 8, p->mr->lkey };
	struct ibv_send_wr w = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				 .send_flags = IBV_SEND_SIGNALED }, *badw;
	w.wr.rdma.remote_addr = (uintptr_t)dst;
	w.wr.rdma.rkey = p->mr->rkey;
	struct ibv_send_wr s = w;
	s.opcode = IBV_WR_SEND;
	struct ibv_recv_wr r = { .sg_list = &rsge, .num_sge = 1 }, *badr;
	struct ibv_wc wc;
	for (long i = 0; i < n; i++) {
		uint64_t v = ((uint64_t)i << 8) | (uint64_t)(0x50 + slot), got;
		pthread_mutex_lock(&g_turn);
		memcpy(src, &v, 8);
		w.wr_id = (uint64_t)i;
		if (ibv_post_send(p->q[0], &w, &badw) || t_wait_wc(p->cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS ||
		    wc.wr_id != (uint64_t)i)
			bad++;
		memcpy(&got, dst, 8);
		bad += got != v;
		if (ibv_post_recv(p->q[1], &r, &badr) || ibv_post_send(p->q[0], &s, &badw))
			bad++;
		for (int k = 0; k < 2; k++)
			if (t_wait_wc(p->cq, &wc) != 1 || wc.status != IBV_WC_SUCCESS)
				bad++;
		memcpy(&got, dst + 64, 8);
		bad += got != v;
		pthread_mutex_unlock(&g_turn);
	}
	return bad;
}

static void *second(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)traffic(1, 2000);
}

/* One case, in the child: "steady" (one thread) or "shared" (a second thread joins for a while). */
static int child_main(const char *which)
{
	if (t_pair_up(&g_pair, t_open_dev()))
		return 10;
	long bad = traffic(0, 5000);
	/* idle QPs while the agent's timers run (it wakes at least every few milliseconds) */
	struct timespec pause = { 0, 100 * 1000 * 1000 };
	nanosleep(&pause, NULL);
	if (!strcmp(which, "shared")) {
		pthread_t t;
		void *theirs;
		if (pthread_create(&t, NULL, second, NULL))
			return 11;
		bad += traffic(0, 2000);
		pthread_join(t, &theirs);
		bad += (long)(intptr_t)theirs;
	}
	nanosleep(&pause, NULL);
	bad += traffic(0, 5000);
	t_pair_down(&g_pair);
	ibv_close_device(g_pair.ctx);
	return bad ? 12 : 0;
}

/* The counter name of SOFTRDMA_STATS's line in text, or -1. */
static long stat_of(const char *text, const char *name)
{
	char key[32];
	snprintf(key, sizeof(key), " %s ", name);
	const char *p = strstr(text, key);
	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

/* Runs this program as "child which"; its exit status, and its stderr in text. */
static int run_child(const char *self, const char *which, char *text, size_t cap)
{
	char errfile[] = "/tmp/softrdma-bias.XXXXXX";
	int errfd = mkstemp(errfile);
	if (errfd < 0)
		return -1;
	unlink(errfile);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(errfd, 2);
		setenv("SOFTRDMA_STATS", "1", 1);
		/* with faults configured, QPs of one process go through the packet path and the agent */
		unsetenv("SOFTRDMA_FAULTS");
		execl("/proc/self/exe", self, "child", which, (char *)NULL);
		_exit(3);
	}
	int st = -1;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		st = -1;
	ssize_t n = pread(errfd, text, cap - 1, 0);
	text[n > 0 ? n : 0] = '\0';
	close(errfd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "child"))
		return child_main(argv[2]);
	char text[4096];

	int st = run_child(argv[0], "steady", text, sizeof(text));
	CHECK_EQ(st, 0, "one thread: every WRITE and SEND landed and completed");
	long owned = stat_of(text, "bias_owned"), revoked = stat_of(text, "bias_revoked");
	/* the send queue's, the responder's and the CQ's lock at least */
	CHECK(owned >= 3, "one thread: bias_owned %ld, want >= 3 (stderr: %s)", owned, text);
	CHECK_EQ(revoked, 0, "one thread (and the agent in the pauses): biases revoked");

	st = run_child(argv[0], "shared", text, sizeof(text));
	CHECK_EQ(st, 0, "two threads: every WRITE and SEND landed and completed");
	revoked = stat_of(text, "bias_revoked");
	CHECK(revoked >= 1, "two threads on one QP and CQ: bias_revoked %ld, want >= 1 (stderr: %s)", revoked,
	      text);
	return t_report();
}
