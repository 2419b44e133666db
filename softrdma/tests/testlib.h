/* Minimal test harness for softrdma's C tests: counts checks, prints "N passed, N failed". */
#ifndef TESTLIB_H
#define TESTLIB_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

static int t_pass, t_fail;

#define CHECK(cond, ...) do { \
	if (cond) { t_pass++; } else { t_fail++; \
		fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
		fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } \
} while (0)

#define CHECK_EQ(a, b, what) do { long long _a = (long long)(a), _b = (long long)(b); \
	CHECK(_a == _b, "%s: got %lld, want %lld", what, _a, _b); } while (0)

static int t_report(void)
{
	printf("%d passed, %d failed\n", t_pass, t_fail);
	return t_fail ? 1 : 0;
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
#endif

#endif
