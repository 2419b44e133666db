/*
 * The data path's locks (lock.h): the slow paths of srd_lock (futex, the bias and its
 * revocation) and of srd_brlock (the registry of reader records, the writer's wait, membarrier).
 * Owns: the reader registry. Calls: no other unit (a leaf).
 */
#define _GNU_SOURCE
#include "lock.h"
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>

/* ---------------------------------------------------------------- srd_lock */

static long futex(int *uaddr, int op, int val)
{
	return syscall(SYS_futex, uaddr, op, val, NULL, NULL, 0);
}

void srd_mutex_slow(srd_mutex_t *l)
{
	/* a short spin first: holders of these locks usually leave within a microsecond */
	for (int i = 0; i < 64; i++) {
		srd_cpu_relax();
		int free_ = 0;
		if (__atomic_load_n(&l->v, __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(&l->v, &free_, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return;
	}
	/* then sleep: mark the lock contended (2) so that its holder wakes us on release */
	while (__atomic_exchange_n(&l->v, 2, __ATOMIC_ACQUIRE) != 0)
		futex(&l->v, FUTEX_WAIT_PRIVATE, 2);
}

void srd_mutex_wake(srd_mutex_t *l)
{
	futex(&l->v, FUTEX_WAKE_PRIVATE, 1);
}

/* ---------------------------------------------------------------- srd_brlock */

__thread struct srd_reader *srd_tl_reader __attribute__((tls_model("initial-exec")));
int srd_br_fence = 1; /* until membarrier is known to work */
static struct srd_reader *g_readers;
static pthread_key_t g_reader_key;
static bool g_key_ok;

static void reader_release(struct srd_reader *r)
{
	for (int i = 0; i < SRD_BR_LOCKS; i++)
		__atomic_store_n(&r->nest[i], 0, __ATOMIC_RELEASE);
	__atomic_store_n(&r->free, 1, __ATOMIC_RELEASE);
}

/* The thread-exit callback: the exiting thread gives its record back and forgets it (a verb
 * called by a later exit callback of the same thread registers a record again). */
static void reader_exit(void *p)
{
	if (srd_tl_reader == p)
		srd_tl_reader = NULL;
	reader_release(p);
}

static void use_membarrier(void)
{
#if defined(__SANITIZE_THREAD__)
	/* ThreadSanitizer does not know membarrier's ordering: readers fence (and it sees that) */
	__atomic_store_n(&srd_br_fence, 1, __ATOMIC_RELAXED);
#else
	long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	bool ok = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
		  syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
	__atomic_store_n(&srd_br_fence, ok ? 0 : 1, __ATOMIC_SEQ_CST);
#endif
}

/* A child of fork() has one thread, this one: every other record's thread is gone. */
static void br_atfork_child(void)
{
	for (struct srd_reader *r = __atomic_load_n(&g_readers, __ATOMIC_ACQUIRE); r; r = r->next)
		if (r != srd_tl_reader && !r->free)
			reader_release(r);
	use_membarrier();
}

__attribute__((constructor)) static void br_init(void)
{
	g_key_ok = pthread_key_create(&g_reader_key, reader_exit) == 0;
	use_membarrier();
	pthread_atfork(NULL, NULL, br_atfork_child);
}

/* No thread-exit callback may point into an unloaded library. */
__attribute__((destructor)) static void br_fini(void)
{
	if (g_key_ok)
		pthread_key_delete(g_reader_key);
	g_key_ok = false;
}

/* The calling thread's record: a free one reused, else a new one on the registry. */
struct srd_reader *srd_br_register(void)
{
	struct srd_reader *r;
	for (r = __atomic_load_n(&g_readers, __ATOMIC_ACQUIRE); r; r = r->next) {
		int one = 1;
		if (__atomic_load_n(&r->free, __ATOMIC_RELAXED) &&
		    __atomic_compare_exchange_n(&r->free, &one, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			break;
	}
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			abort(); /* a few bytes once per thread: nothing sensible is left to do */
		r->next = __atomic_load_n(&g_readers, __ATOMIC_RELAXED);
		while (!__atomic_compare_exchange_n(&g_readers, &r->next, r, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			;
	}
	srd_tl_reader = r;
	if (g_key_ok)
		pthread_setspecific(g_reader_key, r);
	return r;
}

static void backoff(unsigned *spins)
{
	if (++*spins < 64) {
		srd_cpu_relax();
	} else if (*spins < 256) {
		sched_yield();
	} else {
		struct timespec ts = { 0, 20000 };
		nanosleep(&ts, NULL);
	}
}

/* Makes a flag just stored (seq_cst) seen by every thread of the process: after this, a
 * reader (or a lock's owner) not seen inside has not entered, and sees the flag when it does. */
static void barrier_all(void)
{
	if (__atomic_load_n(&srd_br_fence, __ATOMIC_RELAXED)) {
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	} else if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
		/* registered, yet refused (not seen on Linux): from now on readers fence themselves;
		 * a reader already inside without a fence has its record seen within a store
		 * buffer's drain, which the pause below outlasts by far */
		__atomic_store_n(&srd_br_fence, 1, __ATOMIC_SEQ_CST);
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
}

/* Raises the writer flag and makes it seen: after this, a reader not seen inside has not entered. */
static void raise_flag(srd_brlock_t *b)
{
	__atomic_store_n(&b->writer, 1, __ATOMIC_SEQ_CST);
	barrier_all();
}

/* ---------------------------------------------------------------- srd_lock's bias */

/* SOFTRDMA_STATS's bias_owned and bias_revoked: counted on the slow path only, once per lock */
unsigned long srd_lock_bias_owned, srd_lock_bias_revoked;

/*
 * The owner's fast path did not apply: this thread is not the owner, or the bias is off. Takes
 * the mutex; then, while the bias holds, either makes this thread the owner (no owner yet) or
 * revokes the bias (another thread owns it) and waits until the owner is not inside. The owner
 * stores inside = 1, fences (membarrier does it for it) and reads revoked; the revoker stores
 * revoked = 1, runs the barrier on every thread and reads inside: one of them sees the other's
 * store, so they are never both inside. The owner's release of inside orders its section before
 * the revoker's; once revoked, the owner takes the mutex like everyone.
 */
void srd_lock_slow(srd_lock_t *l)
{
	srd_mutex_lock(&l->m);
	if (__atomic_load_n(&l->revoked, __ATOMIC_RELAXED))
		return;
	struct srd_reader *me = srd_tl_reader;
	if (!me)
		me = srd_br_register();
	struct srd_reader *owner = __atomic_load_n(&l->owner, __ATOMIC_RELAXED);
	if (!owner) {
		__atomic_store_n(&l->owner, me, __ATOMIC_RELAXED); /* from the next take on */
		__atomic_fetch_add(&srd_lock_bias_owned, 1, __ATOMIC_RELAXED);
		return;
	}
	if (owner == me)
		return; /* first take of this thread after its record was set: it holds m */
	__atomic_store_n(&l->revoked, 1, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&srd_lock_bias_revoked, 1, __ATOMIC_RELAXED);
	barrier_all();
	unsigned spins = 0;
	while (__atomic_load_n(&l->inside, __ATOMIC_ACQUIRE))
		backoff(&spins);
}

/* A reader found a writer active: wait until it is gone (the caller then retries). */
void srd_br_wait(srd_brlock_t *b)
{
	unsigned spins = 0;
	while (__atomic_load_n(&b->writer, __ATOMIC_ACQUIRE))
		backoff(&spins);
}

/* A reader inside, or NULL. */
static struct srd_reader *reader_inside(srd_brlock_t *b)
{
	for (struct srd_reader *r = __atomic_load_n(&g_readers, __ATOMIC_ACQUIRE); r; r = r->next)
		if (__atomic_load_n(&r->nest[b->id], __ATOMIC_ACQUIRE))
			return r;
	return NULL;
}

void srd_br_wrlock(srd_brlock_t *b)
{
	srd_lock(&b->wmx);
	/* readers that waited for the previous writer go first (a little while at most) */
	unsigned spins = 0;
	while (__atomic_load_n(&b->waiting, __ATOMIC_ACQUIRE) && spins < 300)
		backoff(&spins);
	for (;;) {
		raise_flag(b);
		struct srd_reader *busy = reader_inside(b);
		if (!busy)
			return; /* readers arriving from now on see the flag and wait */
		/* a reader is inside: lower the flag so that readers keep entering (the one inside may
		 * need another reader's progress to leave), wait until it left, try again */
		__atomic_store_n(&b->writer, 0, __ATOMIC_RELEASE);
		spins = 0;
		while (__atomic_load_n(&busy->nest[b->id], __ATOMIC_ACQUIRE))
			backoff(&spins);
	}
}

void srd_br_wrunlock(srd_brlock_t *b)
{
	__atomic_store_n(&b->writer, 0, __ATOMIC_RELEASE);
	srd_unlock(&b->wmx);
}

void srd_br_reset(srd_brlock_t *b)
{
	__atomic_store_n(&b->writer, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->waiting, 0, __ATOMIC_RELAXED);
	srd_lock_init(&b->wmx);
}
