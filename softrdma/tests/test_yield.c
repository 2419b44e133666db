/* The yield of a thread polling an empty CQ (cq.c, empty_poll; docs/softrdma.md, SOFTRDMA_YIELD_US),
 * whether it polls with ibv_poll_cq or ibv_start_poll: by default on every 8th empty poll; with
 * SOFTRDMA_YIELD_US=20 only after 20 us of finding nothing, then at most once per 20 us;
 * SOFTRDMA_YIELD_EVERY=0 never. The yields are
 * counted by interposing sched_yield in this executable (softrdma calls libc's through its PLT),
 * for the polling thread only. Each policy runs in a child of its own: softrdma reads the
 * variables once per process. */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include "testlib.h"

#define MAX_YIELDS 200000
static __thread int counting;
static uint64_t yield_at[MAX_YIELDS];
static long yields;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* default visibility: the tests are built with -fvisibility=hidden, and a hidden definition interposes nothing */
__attribute__((visibility("default"))) int sched_yield(void)
{
	if (counting) {
		if (yields < MAX_YIELDS)
			yield_at[yields] = now_ns();
		yields++;
	}
	return (int)syscall(SYS_sched_yield);
}

/* Polls the empty CQ (extended: with ibv_start_poll) for ms milliseconds or polls times,
 * whichever ends first; returns the polls made, the yields in the globals. */
static long poll_empty(struct ibv_cq_ex *cq, bool extended, uint64_t ms, long polls, uint64_t *start)
{
	struct ibv_wc wc;
	struct ibv_poll_cq_attr attr = { 0 };
	yields = 0;
	counting = 1;
	*start = now_ns();
	uint64_t end = *start + ms * 1000000u;
	long n = 0;
	while (n < polls && ((n & 255) || now_ns() < end)) {
		int rc = extended ? ibv_start_poll(cq, &attr) : ibv_poll_cq(ibv_cq_ex_to_cq(cq), 1, &wc);
		if (rc != (extended ? ENOENT : 0)) {
			counting = 0;
			CHECK(0, "poll of an empty CQ returned %d", rc);
			return n;
		}
		n++;
	}
	counting = 0;
	return n;
}

static int child(const char *mode)
{
	struct ibv_context *ctx = t_open_dev();
	for (int extended = 0; extended <= 1; extended++) {
		/* a CQ of its own per form: an empty run is the CQ's, and would go on across the two */
		struct ibv_cq_init_attr_ex ca = { .cqe = 16, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN };
		struct ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &ca);
		if (!cq) {
			fprintf(stderr, "%s: ibv_create_cq_ex: %s\n", mode, strerror(errno));
			return 2;
		}
		const char *how = extended ? "ibv_start_poll" : "ibv_poll_cq";
		uint64_t start;
		if (!strcmp(mode, "wait")) {
			long n = poll_empty(cq, extended, 100, 1L << 40, &start);
			uint64_t took = now_ns() - start, prev = start, min_gap = UINT64_MAX;
			long kept = yields < MAX_YIELDS ? yields : MAX_YIELDS;
			for (long i = 0; i < kept; i++) {
				if (yield_at[i] - prev < min_gap)
					min_gap = yield_at[i] - prev;
				prev = yield_at[i];
			}
			printf("wait, %s: %ld empty polls in %.1f ms, %ld yields, shortest gap %.1f us\n", how, n,
			       took / 1e6, yields, yields ? min_gap / 1e3 : 0.0);
			CHECK(yields >= 1, "%s: no yield in %.1f ms of empty polls: the agent would never get the core",
			      how, took / 1e6);
			CHECK(yields <= (long)(took / 20000) + 1, "%s: %ld yields in %.1f ms: more than one per 20 us",
			      how, yields, took / 1e6);
			CHECK(min_gap >= 20000 || !yields, "%s: a yield %.1f us after the previous one (or the start)",
			      how, min_gap / 1e3);
		} else if (!strcmp(mode, "every")) {
			long n = poll_empty(cq, extended, 10000, 80000, &start);
			printf("every 8th, %s: %ld empty polls, %ld yields\n", how, n, yields);
			CHECK_EQ(n, 80000, "empty polls made");
			CHECK_EQ(yields, n / 8, "yields by default (one per 8 empty polls)");
		} else {
			long n = poll_empty(cq, extended, 100, 1L << 40, &start);
			printf("never, %s: %ld empty polls, %ld yields\n", how, n, yields);
			CHECK(n > 0, "no poll made");
			CHECK_EQ(yields, 0, "yields with SOFTRDMA_YIELD_EVERY=0");
		}
		CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0, "ibv_destroy_cq");
	}
	CHECK_EQ(ibv_close_device(ctx), 0, "ibv_close_device");
	return t_report();
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(120); /* bounded: a hang is a failure */
	if (argc > 1)
		return child(argv[1]);
	static const char *const modes[][3] = { /* mode, SOFTRDMA_YIELD_US, SOFTRDMA_YIELD_EVERY */
		{ "wait", "20", NULL }, { "every", NULL, NULL }, { "never", NULL, "0" },
	};
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		pid_t pid = fork();
		if (pid == 0) {
			unsetenv("SOFTRDMA_YIELD_US");
			unsetenv("SOFTRDMA_YIELD_EVERY");
			if (modes[i][1])
				setenv("SOFTRDMA_YIELD_US", modes[i][1], 1);
			if (modes[i][2])
				setenv("SOFTRDMA_YIELD_EVERY", modes[i][2], 1);
			execl("/proc/self/exe", argv[0], modes[i][0], (char *)NULL);
			_exit(127);
		}
		int st = 0;
		CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "%s: child status %#x", modes[i][0], st);
	}
	return t_report();
}
