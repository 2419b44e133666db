/*
 * lock.c: the data path's locks, all cheaper than their pthread counterparts when nobody
 * contends, which is the case a post or a poll meets almost always.
 *
 * srd_mutex: a mutex (receive queue) whose uncontended take and release cost one atomic
 * instruction each, inlined at the call site; a contended taker spins a little, then sleeps
 * in the kernel (futex), so a busy holder costs waiters no CPU.
 *
 * srd_lock: that mutex biased to the first thread that takes it (send queue, responder, CQ):
 * that thread takes and releases it with plain stores, inlined at the call site; any other
 * thread's first take revokes the bias for good (below), after which it is the plain mutex.
 *
 * srd_brlock: a reader-writer lock for the tables every verb reads and only control verbs
 * change (the MR key table, the QPN table). A reader announces itself in its own thread's
 * record with a plain store and checks that no writer is active: no atomic read-modify-write,
 * no shared cache line written. A writer sets its flag, then makes every running thread of the
 * process execute a full barrier (membarrier(2), MEMBARRIER_CMD_PRIVATE_EXPEDITED: the flag is
 * now seen by every reader that starts later, and the record of every reader already inside is
 * seen by the writer) and checks that no record says "inside". Where membarrier is not
 * available, readers execute the barrier themselves (one fence).
 *
 * Readers are preferred, as with the default pthread rwlock this replaces: a writer that finds
 * a reader inside lowers its flag again and waits with the flag down, so readers keep entering
 * (one of them may hold a lock that the reader inside needs to finish), then tries again; a
 * reader waits only while a writer holds the lock. Read sections nest. A writer also lets
 * readers that waited for the previous writer in first (bounded), so a stream of writers
 * cannot starve them. Records belong to threads and are reused after a thread exits.
 */
#ifndef SRD_LOCK_H
#define SRD_LOCK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One spin-wait pause (PAUSE on x86, YIELD on AArch64), also a compiler barrier: for every
 * busy-wait loop of softrdma. */
static inline void srd_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* The futex mutex under srd_lock_t: taking and releasing it uncontended is one atomic
 * instruction each. */
typedef struct {
	int v; /* 0 free, 1 held, 2 held and someone may sleep on it */
} srd_mutex_t;

struct srd_reader;

/*
 * srd_lock_t: a mutex biased to one thread. The first thread that takes it becomes its owner;
 * the owner takes and releases it with plain stores (its own "inside" flag, then a check that
 * the bias still holds), no atomic read-modify-write. The first time another thread takes it,
 * that thread revokes the bias for good: under the mutex m it raises "revoked", makes every
 * thread of the process execute a full barrier (membarrier, as the brlock's writer does) and
 * waits until the owner is not inside; from then on everyone, the owner included, takes m.
 * The common case of the in-process data path, one thread posting and polling, thus takes
 * its send queue, responder, receive queue and CQ without an atomic instruction.
 */
typedef struct {
	srd_mutex_t m;
	struct srd_reader *owner; /* the thread it is biased to; set once, under m */
	int inside;               /* the owner is inside without m (written by the owner only) */
	int revoked;              /* the bias is off for good (set once, under m) */
} srd_lock_t;

void srd_mutex_slow(srd_mutex_t *l);
void srd_mutex_wake(srd_mutex_t *l);
void srd_lock_slow(srd_lock_t *l);
/* Locks that became biased to a thread, and biases revoked since the process started (both
 * counted on the slow path, printed by SOFTRDMA_STATS): a revocation in steady state means two
 * threads share a lock that one of them was meant to own, and costs every later take an atomic. */
extern unsigned long srd_lock_bias_owned, srd_lock_bias_revoked;

extern __thread struct srd_reader *srd_tl_reader __attribute__((tls_model("initial-exec")));
extern int srd_br_fence; /* readers fence themselves: no membarrier */

static inline void srd_mutex_init(srd_mutex_t *l)
{
	__atomic_store_n(&l->v, 0, __ATOMIC_RELAXED);
}

static inline void srd_mutex_lock(srd_mutex_t *l)
{
	int free_ = 0;
	if (!__atomic_compare_exchange_n(&l->v, &free_, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		srd_mutex_slow(l);
}

static inline void srd_mutex_unlock(srd_mutex_t *l)
{
	if (__atomic_exchange_n(&l->v, 0, __ATOMIC_RELEASE) != 1)
		srd_mutex_wake(l);
}

static inline void srd_lock_init(srd_lock_t *l)
{
	__atomic_store_n(&l->m.v, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&l->owner, NULL, __ATOMIC_RELAXED);
	__atomic_store_n(&l->inside, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&l->revoked, 0, __ATOMIC_RELAXED);
}

static inline void srd_lock(srd_lock_t *l)
{
	struct srd_reader *me = srd_tl_reader;
	if (__builtin_expect(me != NULL && __atomic_load_n(&l->owner, __ATOMIC_RELAXED) == me, 1)) {
		__atomic_store_n(&l->inside, 1, __ATOMIC_RELAXED);
		if (__atomic_load_n(&srd_br_fence, __ATOMIC_RELAXED))
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
		else
			__atomic_signal_fence(__ATOMIC_SEQ_CST); /* membarrier supplies the fence */
		if (__builtin_expect(!__atomic_load_n(&l->revoked, __ATOMIC_ACQUIRE), 1))
			return;
		__atomic_store_n(&l->inside, 0, __ATOMIC_RELEASE);
	}
	srd_lock_slow(l);
}

static inline void srd_unlock(srd_lock_t *l)
{
	/* only the owner sets inside, and only on its way in without m */
	if (__atomic_load_n(&l->inside, __ATOMIC_RELAXED) &&
	    __atomic_load_n(&l->owner, __ATOMIC_RELAXED) == srd_tl_reader)
		__atomic_store_n(&l->inside, 0, __ATOMIC_RELEASE);
	else
		srd_mutex_unlock(&l->m);
}

/* The brlocks of the library, one reader-record slot each. */
enum { SRD_BR_MR = 0, SRD_BR_QPN = 1, SRD_BR_ATOMIC = 2, SRD_BR_LOCKS = 3 };

typedef struct {
	int writer;    /* 1 while a writer checks the readers' records or holds the lock */
	int waiting;   /* readers that found a writer holding it and wait to enter */
	int id;        /* SRD_BR_* */
	srd_lock_t wmx; /* between writers */
} srd_brlock_t;

#define SRD_BRLOCK_INIT(which) { .writer = 0, .waiting = 0, .id = (which), .wmx = { .m = { 0 } } }

/* A key this thread resolved lately (pd.c): a copy of a memory region's entry in the MR table
 * as it was at table generation gen, good while the table is still at that generation. */
struct srd_key_ent {
	uint32_t key, gen;
	const void *pd;
	int access;
	uint64_t iova, length;
	uintptr_t addr;
};
#define SRD_KEY_CACHE 4 /* entries, a power of two: a key's low bits (its random byte) pick one */

struct srd_reader {
	unsigned nest[SRD_BR_LOCKS]; /* read sections this thread is inside, per lock */
	int free;                    /* 1: its thread exited; another thread may take it */
	struct srd_reader *next;     /* the registry: a list that only grows */
	struct srd_key_ent keys[SRD_KEY_CACHE]; /* pd.c's cache, read and written by this thread only */
};

struct srd_reader *srd_br_register(void);
void srd_br_wait(srd_brlock_t *b);
void srd_br_wrlock(srd_brlock_t *b);
void srd_br_wrunlock(srd_brlock_t *b);
/* In a child of fork(): the lock as new (the parent's other threads do not exist there). */
void srd_br_reset(srd_brlock_t *b);

static inline void srd_br_rdlock(srd_brlock_t *b)
{
	struct srd_reader *r = srd_tl_reader;
	if (__builtin_expect(r == NULL, 0))
		r = srd_br_register();
	unsigned *n = &r->nest[b->id];
	unsigned depth = __atomic_load_n(n, __ATOMIC_RELAXED);
	if (depth) {
		__atomic_store_n(n, depth + 1, __ATOMIC_RELAXED);
		return;
	}
	bool counted = false;
	for (;;) {
		__atomic_store_n(n, 1, __ATOMIC_RELAXED);
		if (__atomic_load_n(&srd_br_fence, __ATOMIC_RELAXED))
			__atomic_thread_fence(__ATOMIC_SEQ_CST);
		else
			__atomic_signal_fence(__ATOMIC_SEQ_CST); /* membarrier supplies the fence */
		if (__builtin_expect(!__atomic_load_n(&b->writer, __ATOMIC_ACQUIRE), 1)) {
			if (counted)
				__atomic_fetch_sub(&b->waiting, 1, __ATOMIC_RELEASE);
			return;
		}
		__atomic_store_n(n, 0, __ATOMIC_RELEASE);
		if (!counted) {
			counted = true;
			__atomic_fetch_add(&b->waiting, 1, __ATOMIC_ACQ_REL);
		}
		srd_br_wait(b);
	}
}

static inline void srd_br_rdunlock(srd_brlock_t *b)
{
	unsigned *n = &srd_tl_reader->nest[b->id];
	__atomic_store_n(n, __atomic_load_n(n, __ATOMIC_RELAXED) - 1, __ATOMIC_RELEASE);
}

#endif
