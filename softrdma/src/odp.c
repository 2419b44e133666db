/*
 * On-demand paging: the memory access of regions registered with IBV_ACCESS_ON_DEMAND.
 *
 * A NIC reaches an ODP region through its own page tables, filled on a page fault from the
 * process's page tables (which the kernel fills first, faulting the pages in); a fault it
 * cannot resolve fails the operation with a completion error. softrdma reaches all memory
 * through this process's address space, so a "page fault" is the CPU's own: what has to be
 * avoided is an access that the CPU cannot resolve, which would be SIGSEGV/SIGBUS in the
 * library's thread (the JVM, for one, would die of it). Two system calls give the fault
 * handling without the signal:
 *
 * - madvise(MADV_POPULATE_READ / MADV_POPULATE_WRITE) (Linux 5.14) faults the pages of a
 *   range in, readable or writable, and answers an error where a real access would have
 *   been a signal (ENOMEM: unmapped; EINVAL: PROT_NONE or read-only for a write; EFAULT:
 *   SIGBUS, e.g. a file mapping past the end of its file). Used to admit an access before
 *   it is made (srd_odp_fault).
 * - process_vm_writev(2) on this very process (no ptrace permission needed for oneself)
 *   copies with the kernel's user-copy routines, which fault pages in on both sides and
 *   stop with EFAULT at a hole. Used for every copy into or out of ODP memory (srd_odp_copy),
 *   so that an unmap racing a copy already admitted still cannot crash the process; and,
 *   as an 8-byte read and write, for the atomics on ODP memory (srd_odp_atomic), whose
 *   atomicity is the caller's lock (responder.c): no system call gives a signal-free CPU
 *   atomic.
 *
 * Where a kernel lacks MADV_POPULATE_* (EINVAL on a range known good, checked once), a
 * page-by-page probe through process_vm_readv (one byte per page) stands in: it faults the
 * page in for reading; for a write, the byte read is written back with process_vm_writev
 * (a race with a concurrent writer of that one byte is the price of that fallback). Where
 * process_vm_* is refused (seccomp: EPERM/ENOSYS), the copies fall back to memcpy and the
 * atomics to CPU atomics after the admission check, and an unmap racing an access is the
 * application's bug, as it is for a pinned region.
 * Owns: nothing but two one-time probes. Calls: no other unit (a leaf below pd.c).
 */
#include "odp.h"
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/uio.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static long g_page;
static bool g_populate;  /* madvise(MADV_POPULATE_*) works */
static bool g_pvm;       /* process_vm_readv/writev on ourselves works */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static char g_probe[1] __attribute__((aligned(64)));

static void odp_init(void)
{
	g_page = sysconf(_SC_PAGESIZE);
	/* a page of this library's own writable data: certainly mapped and writable */
	uintptr_t pg = (uintptr_t)g_probe & ~((uintptr_t)g_page - 1);
	g_populate = madvise((void *)pg, (size_t)g_page, MADV_POPULATE_WRITE) == 0;
	char b = 0;
	struct iovec l = { &b, 1 }, r = { g_probe, 1 };
	g_pvm = process_vm_readv(getpid(), &l, 1, &r, 1, 0) == 1;
}

/* One byte of our own memory at p, read (and written back for a write) through the kernel. */
static int probe_byte(const void *p, bool write)
{
	char b;
	struct iovec l = { &b, 1 }, r = { (void *)p, 1 };
	if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != 1)
		return -1;
	if (write && process_vm_writev(getpid(), &l, 1, &r, 1, 0) != 1)
		return -1;
	return 0;
}

int srd_odp_fault(const void *p, size_t len, bool write)
{
	if (!len)
		return 0;
	pthread_once(&g_once, odp_init);
	uintptr_t start = (uintptr_t)p & ~((uintptr_t)g_page - 1);
	uintptr_t end = (uintptr_t)p + len;
	if (end < (uintptr_t)p)
		return -1;
	if (g_populate) {
		for (;;) {
			if (madvise((void *)start, end - start, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0)
				return 0;
			if (errno != EINTR && errno != EAGAIN)
				return -1;
		}
	}
	if (!g_pvm)
		return srd_odp_mapped(p, len) ? 0 : -1;
	for (uintptr_t a = start; a < end; a += (uintptr_t)g_page)
		if (probe_byte((const void *)(a < (uintptr_t)p ? (uintptr_t)p : a), write))
			return -1;
	return 0;
}

int srd_odp_mapped(const void *p, size_t len)
{
	pthread_once(&g_once, odp_init);
	uintptr_t start = (uintptr_t)p & ~((uintptr_t)g_page - 1);
	uintptr_t end = (uintptr_t)p + len;
	if (end < (uintptr_t)p)
		return 0;
	unsigned char vec[1024];
	while (start < end) {
		size_t chunk = (size_t)g_page * sizeof(vec);
		if (end - start < chunk)
			chunk = end - start;
		if (mincore((void *)start, chunk, vec) != 0)
			return 0;
		start += chunk;
	}
	return 1;
}

int srd_odp_copy(void *dst, const void *src, size_t len)
{
	pthread_once(&g_once, odp_init);
	if (!g_pvm) {
		memcpy(dst, src, len);
		return 0;
	}
	/* one call moves at most MAX_RW_COUNT (INT_MAX & PAGE_MASK) bytes: loop on what is left */
	while (len) {
		struct iovec l = { (void *)src, len }, r = { dst, len };
		ssize_t n = process_vm_writev(getpid(), &l, 1, &r, 1, 0);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return -1;
		}
		src = (const uint8_t *)src + n;
		dst = (uint8_t *)dst + n;
		len -= (size_t)n;
	}
	return 0;
}

/* 8 bytes of our own memory at p read into *v, or *v written there, through the kernel. */
static int rw8(uint64_t *p, uint64_t *v, bool write)
{
	for (;;) {
		struct iovec l = { v, 8 }, r = { p, 8 };
		ssize_t n = write ? process_vm_writev(getpid(), &l, 1, &r, 1, 0)
				  : process_vm_readv(getpid(), &l, 1, &r, 1, 0);
		if (n == 8)
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		return -1; /* an aligned word never straddles a page: nothing was moved */
	}
}

int srd_odp_atomic(uint64_t *p, bool add, uint64_t cmp_add, uint64_t swap, uint64_t *orig)
{
	pthread_once(&g_once, odp_init);
	if (!g_pvm) {
		if (add) {
			*orig = __atomic_fetch_add(p, cmp_add, __ATOMIC_SEQ_CST);
		} else {
			*orig = cmp_add;
			__atomic_compare_exchange_n(p, orig, swap, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
		}
		return 0;
	}
	uint64_t v;
	if (rw8(p, &v, false))
		return -1;
	*orig = v;
	if (add)
		v += cmp_add;
	else if (v == cmp_add)
		v = swap;
	else
		return 0; /* a compare that fails writes nothing */
	return rw8(p, &v, true);
}
