/*
 * Protection domains and what hangs off them without a queue: memory regions
 * (the key table, registration) and the memory access every data path uses
 * (lkey/rkey resolution with bounds and access checks, copies between segment
 * lists), and address handles.
 * Owns: struct srd_pd, srd_mr, srd_ah, the MR table. Calls: odp (the access to ODP regions).
 */
#include "pd.h"
#include "odp.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/random.h>

/* ---------------------------------------------------------------- PD */

SRD_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct srd_pd *pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->ibpd.context = context;
	pd->ibpd.handle = (uint32_t)(uintptr_t)pd;
	struct srd_ucontext *u = srd_ctx_of(context)->uctx;
	pthread_mutex_lock(&u->lock);
	pd->next = u->pds;
	u->pds = pd;
	pthread_mutex_unlock(&u->lock);
	return &pd->ibpd;
}

/* an imported PD's own users gone: it goes, and its origin loses the reference it held */
static void unimport_pd(struct srd_pd *pd)
{
	UNREF(pd->origin);
	free(pd);
}

SRD_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct srd_pd *pd = PD_OF(ibpd);
	/* like the kernel: a PD still holding objects cannot go. An allocated PD that another
	 * context imported counts its imports as users: unlike the kernel, whose imported object
	 * outlives the first context's dealloc, softrdma keeps the memory an import points at. */
	if (pd->origin) { /* the dealloc of an imported PD: it ends the import */
		if (__atomic_load_n(&pd->refs, __ATOMIC_ACQUIRE))
			return EBUSY;
		unimport_pd(pd);
		return 0;
	}
	struct srd_ucontext *u = srd_ctx_of(ibpd->context)->uctx;
	pthread_mutex_lock(&u->lock); /* an import takes its reference under it */
	if (__atomic_load_n(&pd->refs, __ATOMIC_ACQUIRE)) {
		pthread_mutex_unlock(&u->lock);
		return EBUSY;
	}
	for (struct srd_pd **pp = &u->pds; *pp; pp = &(*pp)->next)
		if (*pp == pd) {
			*pp = pd->next;
			break;
		}
	pthread_mutex_unlock(&u->lock);
	free(pd);
	return 0;
}

/*
 * ibv_import_pd: a PD of this context's ucontext (an allocated one, found by its handle), as
 * a PD of this context. Its objects and the original's pass each other's "same PD" checks
 * (srd_pd_canon). NULL with EINVAL for a handle the ucontext does not hold.
 */
SRD_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t handle)
{
	struct srd_ucontext *u = srd_ctx_of(context)->uctx;
	struct srd_pd *imp = calloc(1, sizeof(*imp)), *origin = NULL;
	if (!imp) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&u->lock);
	for (struct srd_pd *pd = u->pds; pd; pd = pd->next)
		if (pd->ibpd.handle == handle) {
			origin = pd;
			REF(origin);
			break;
		}
	pthread_mutex_unlock(&u->lock);
	if (!origin) {
		free(imp);
		errno = EINVAL;
		return NULL;
	}
	imp->ibpd.context = context;
	imp->ibpd.handle = handle;
	imp->origin = origin;
	return &imp->ibpd;
}

/* ibv_unimport_pd: the imported PD object goes (it must have no users left, as with dealloc;
 * with users it stays: the call has no way to report). An allocated PD is left alone. */
SRD_EXPORT void ibv_unimport_pd(struct ibv_pd *ibpd)
{
	struct srd_pd *pd = ibpd ? PD_OF(ibpd) : NULL;
	if (pd && pd->origin && !__atomic_load_n(&pd->refs, __ATOMIC_ACQUIRE))
		unimport_pd(pd);
}

/* ---------------------------------------------------------------- MR */

/*
 * Keys: like a NIC's, a key is a 24-bit table index above an 8-bit key byte that
 * belongs to the consumer (ibv_inc_rkey changes only that byte). So that keys are
 * not predictable, the index is stored XORed with a per-process random salt and the
 * key byte is random (never the byte of the previous registration, so a key of one
 * MR with a neighbour's index never matches that neighbour). lkey == rkey.
 */
srd_brlock_t srd_mr_table_lock = SRD_BRLOCK_INIT(SRD_BR_MR);
static struct srd_mr **g_mrs;
static uint32_t g_mr_cap, g_mr_hint = 1;
static uint32_t g_mr_salt;        /* 24 bits */
static uint64_t g_mr_rng;         /* xorshift64*, written under the write lock */
static uint8_t g_mr_last;         /* key byte of the previous registration */
static pthread_once_t g_mr_once = PTHREAD_ONCE_INIT;

static uint64_t seed(void)
{
	uint64_t s = 0;
	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s))
		s = srd_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&s;
	return s | 1;
}

static uint64_t mr_rand(void)
{
	g_mr_rng ^= g_mr_rng >> 12;
	g_mr_rng ^= g_mr_rng << 25;
	g_mr_rng ^= g_mr_rng >> 27;
	return g_mr_rng * 2685821657736338717ull;
}

/* a child of fork() keeps the table and its salt, but must not repeat the parent's key bytes */
static void mr_atfork_child(void)
{
	g_mr_rng = seed();
}

static void mr_keys_init(void)
{
	g_mr_rng = seed();
	g_mr_salt = (uint32_t)(mr_rand() >> 40) & 0xffffffu;
	pthread_atfork(NULL, NULL, mr_atfork_child);
}

/* An index whose key would have a zero index part is never used (keys stay >= 0x100). */
static bool idx_usable(uint32_t i)
{
	return ((i ^ g_mr_salt) & 0xffffffu) != 0;
}


static uint32_t key_idx(uint32_t key)
{
	return ((key >> 8) ^ g_mr_salt) & 0xffffffu;
}

/* The table entry of key (a region or a window's key), or NULL. Table lock held. */
static struct srd_mr *slot_get(uint32_t key)
{
	uint32_t idx = key_idx(key);
	if (idx == 0 || idx >= g_mr_cap)
		return NULL;
	struct srd_mr *mr = g_mrs[idx];
	if (!mr || __atomic_load_n(&mr->ibmr.lkey, __ATOMIC_RELAXED) != key)
		return NULL;
	return mr;
}

/* The memory region of key (never a window), or NULL. */
static struct srd_mr *mr_get(uint32_t key)
{
	struct srd_mr *mr = slot_get(key);
	return mr && mr->kind == SRD_KEY_MR ? mr : NULL;
}

/*
 * The table's generation: raised by every change of the table or of a region in it (under the
 * write lock: registration, deregistration, re-registration, a window's allocation and
 * deallocation). A thread keeps copies of the entries of the regions it resolved lately in its
 * own record (struct srd_key_ent, lock.h), each with the generation it was copied at: while the
 * table is still at that generation, the copy is the entry, and a repeated key skips the table.
 * Windows' keys are not kept (a bind or an invalidation changes them under g_mw_lock, not the
 * write lock).
 */
static uint32_t g_mr_gen = 1;

static void gen_bump(void) /* write lock held */
{
	uint32_t g = __atomic_load_n(&g_mr_gen, __ATOMIC_RELAXED) + 1;
	__atomic_store_n(&g_mr_gen, g ? g : 1, __ATOMIC_RELAXED); /* never 0, the empty entries' */
}

/* The memory region of key (never a window) as this thread's copy of its entry, or NULL.
 * Table read lock held. */
static inline const struct srd_key_ent *key_mr(uint32_t key)
{
	struct srd_key_ent *e = &srd_tl_reader->keys[key & (SRD_KEY_CACHE - 1)];
	uint32_t gen = __atomic_load_n(&g_mr_gen, __ATOMIC_RELAXED);
	if (__builtin_expect(e->key == key && e->gen == gen, 1))
		return e;
	struct srd_mr *mr = slot_get(key);
	if (!mr || mr->kind != SRD_KEY_MR)
		return NULL;
	*e = (struct srd_key_ent){ .key = key, .gen = gen, .pd = srd_pd_canon(mr->ibmr.pd), .access = mr->access,
				   .iova = mr->iova, .length = mr->ibmr.length, .addr = (uintptr_t)mr->ibmr.addr };
	return e;
}

/*
 * Memory windows' state (bound region, range, rights, state, current key byte) and the
 * regions' counts of bound windows change under this mutex, taken inside the table's read
 * lock: a bind or an invalidation runs while the data path holds the read lock, and the table
 * write lock (deregistration, deallocation) still excludes every user of an entry.
 */
static pthread_mutex_t g_mw_lock = PTHREAD_MUTEX_INITIALIZER;

/* Takes a free table index for slot and makes its key; 0 when the table is full. Write lock held. */
static uint32_t key_alloc(struct srd_mr *slot)
{
	uint32_t idx = 0;
	for (uint32_t i = g_mr_hint; i < g_mr_cap; i++)
		if (!g_mrs[i] && idx_usable(i)) { idx = i; break; }
	if (!idx) {
		for (uint32_t i = 1; i < g_mr_hint && i < g_mr_cap; i++)
			if (!g_mrs[i] && idx_usable(i)) { idx = i; break; }
	}
	if (!idx) {
		uint32_t ncap = g_mr_cap ? g_mr_cap * 2 : 1024;
		if (ncap > (1u << 24)) {
			return 0;
		}
		struct srd_mr **n = realloc(g_mrs, ncap * sizeof(*n));
		if (!n) {
			return 0;
		}
		memset(n + g_mr_cap, 0, (ncap - g_mr_cap) * sizeof(*n));
		idx = g_mr_cap ? g_mr_cap : 1;
		if (!idx_usable(idx))
			idx++;
		g_mrs = n;
		g_mr_cap = ncap;
	}
	g_mr_hint = idx + 1;
	uint8_t kb;
	do
		kb = (uint8_t)(mr_rand() >> 56);
	while (kb == g_mr_last);
	g_mr_last = kb;
	uint32_t key = (((idx ^ g_mr_salt) & 0xffffffu) << 8) | kb;
	g_mrs[idx] = slot;
	return key;
}

#define MR_ACCESS_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
		       IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | \
		       IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING)

SRD_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					   uint64_t iova, unsigned int access)
{
	if (!pd || (access & ~(unsigned)MR_ACCESS_ALL)) {
		errno = EINVAL;
		return NULL;
	}
	/* remote write / atomic without local write is refused by the IB spec */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE)) {
		errno = EINVAL;
		return NULL;
	}
	/*
	 * Implicit ODP (as mlx5 defines it): addr NULL, length SIZE_MAX, IBV_ACCESS_ON_DEMAND: one
	 * region over the whole address space, iova == address, no zero-based view, no windows.
	 */
	bool implicit = !addr && length == SIZE_MAX && (access & IBV_ACCESS_ON_DEMAND);
	if (implicit && (access & (IBV_ACCESS_ZERO_BASED | IBV_ACCESS_MW_BIND))) {
		errno = EINVAL;
		return NULL;
	}
	if (!addr && length && !implicit) {
		errno = EINVAL;
		return NULL;
	}
	if (implicit)
		iova = 0;
	if (length && !(access & IBV_ACCESS_ON_DEMAND) && !srd_odp_mapped(addr, length)) {
		errno = EFAULT;
		return NULL;
	}
	struct srd_mr *mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_once(&g_mr_once, mr_keys_init);
	srd_br_wrlock(&srd_mr_table_lock);
	uint32_t key = key_alloc(mr);
	if (!key) {
		srd_br_wrunlock(&srd_mr_table_lock);
		free(mr);
		errno = ENOMEM;
		return NULL;
	}
	uint32_t idx = key_idx(key);
	mr->ibmr.context = pd->context;
	mr->ibmr.pd = pd;
	mr->ibmr.addr = addr;
	mr->ibmr.length = length;
	mr->ibmr.handle = idx;
	mr->ibmr.lkey = key;
	mr->ibmr.rkey = key;
	mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : iova;
	mr->access = (int)access;
	REF(PD_OF(pd));
	gen_bump();
	srd_br_wrunlock(&srd_mr_table_lock);
	return &mr->ibmr;
}

#undef ibv_reg_mr
SRD_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

#undef ibv_reg_mr_iova
SRD_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					  uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned)access);
}

/*
 * ibv_import_mr: the region with this handle (its key-table index), registered on pd's PD or
 * one it shares (an import of it, or its origin), as an object of pd: the same keys and length;
 * its address NULL, as the kernel's import reports it. NULL with EINVAL for any other handle.
 * The import is an alias: the region stays in the table under its own object.
 */
SRD_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t handle)
{
	struct srd_mr *imp = calloc(1, sizeof(*imp));
	if (!imp) {
		errno = ENOMEM;
		return NULL;
	}
	srd_mr_rdlock();
	struct srd_mr *mr = handle < g_mr_cap ? g_mrs[handle] : NULL;
	bool found = mr && mr->kind == SRD_KEY_MR && srd_pd_canon(mr->ibmr.pd) == srd_pd_canon(pd);
	if (found) {
		imp->ibmr = mr->ibmr;
		imp->iova = mr->iova;
		imp->access = mr->access;
	}
	srd_mr_unlock();
	if (!found) {
		free(imp);
		errno = EINVAL;
		return NULL;
	}
	imp->ibmr.context = pd->context;
	imp->ibmr.pd = pd;
	imp->ibmr.addr = NULL;
	imp->imported = true;
	REF(PD_OF(pd));
	return &imp->ibmr;
}

/* ibv_unimport_mr: an imported region object goes (the region stays); others are left alone */
SRD_EXPORT void ibv_unimport_mr(struct ibv_mr *ibmr)
{
	struct srd_mr *mr = ibmr ? container_of(ibmr, struct srd_mr, ibmr) : NULL;
	if (mr && mr->imported) {
		UNREF(PD_OF(ibmr->pd));
		free(mr);
	}
}

SRD_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct srd_mr *mr = container_of(ibmr, struct srd_mr, ibmr);
	if (mr->imported) { /* the dereg of an imported region ends the import */
		ibv_unimport_mr(ibmr);
		return 0;
	}
	srd_br_wrlock(&srd_mr_table_lock);
	if (mr->nmw) {
		/* like rxe (IBA 10.6.7.2.6): a region with bound memory windows stays */
		srd_br_wrunlock(&srd_mr_table_lock);
		return EINVAL;
	}
	uint32_t idx = key_idx(ibmr->lkey);
	if (idx < g_mr_cap && g_mrs[idx] == mr)
		g_mrs[idx] = NULL;
	gen_bump();
	srd_br_wrunlock(&srd_mr_table_lock);
	UNREF(PD_OF(ibmr->pd));
	free(mr);
	return 0;
}

/*
 * The provider half of a re-registration (what the kernel's rereg command checks and does):
 * 0, or the errno for IBV_REREG_MR_ERR_CMD. Changes are made together or not at all.
 * Keys: a re-registered region keeps its lkey and rkey (what rxe does for PD and access
 * changes; the IBA lets a CI keep them), for every kind of change, translation included: a
 * peer holding the rkey reaches the new memory. The new translation's iova is its address.
 */
static int rereg_cmd(struct srd_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length,
		     int access)
{
	struct ibv_mr *ibmr = &mr->ibmr;
	if (!flags)
		return EINVAL;
	int new_access = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? access : mr->access;
	if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
		if ((unsigned)access & ~(unsigned)MR_ACCESS_ALL)
			return EINVAL;
		/* remote write / atomic without local write is refused by the IB spec */
		if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
		    !(access & IBV_ACCESS_LOCAL_WRITE))
			return EINVAL;
		/* a region does not move between pinned and on-demand paging */
		if ((access ^ mr->access) & IBV_ACCESS_ON_DEMAND)
			return EOPNOTSUPP;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		/* a PD of another context is not a handle the command can find */
		if (!pd || pd->context != ibmr->context)
			return EINVAL;
	}
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && !(new_access & IBV_ACCESS_ON_DEMAND) &&
	    !srd_odp_mapped(addr, length))
		return EFAULT;
	srd_br_wrlock(&srd_mr_table_lock);
	/* memory windows bound to the region would keep the old range, rights or PD */
	pthread_mutex_lock(&g_mw_lock);
	int nmw = mr->nmw;
	pthread_mutex_unlock(&g_mw_lock);
	if (nmw) {
		srd_br_wrunlock(&srd_mr_table_lock);
		return EBUSY;
	}
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		ibmr->addr = addr;
		ibmr->length = length;
		mr->iova = (new_access & IBV_ACCESS_ZERO_BASED) ? 0 : (uintptr_t)addr;
	}
	struct ibv_pd *old_pd = NULL;
	if ((flags & IBV_REREG_MR_CHANGE_PD) && pd != ibmr->pd) {
		old_pd = ibmr->pd;
		REF(PD_OF(pd));
		ibmr->pd = pd;
	}
	mr->access = new_access;
	gen_bump();
	srd_br_wrunlock(&srd_mr_table_lock);
	if (old_pd)
		UNREF(PD_OF(old_pd));
	return 0;
}

/*
 * ibv_rereg_mr returns an enum ibv_rereg_mr_err_code, not an errno: IBV_REREG_MR_ERR_INPUT
 * for what libibverbs itself refuses (flags beyond IBV_REREG_MR_FLAGS_SUPPORTED, a translation
 * with no address or length, access bits without IBV_REREG_MR_CHANGE_ACCESS), and
 * IBV_REREG_MR_ERR_CMD for what the device refuses, errno set in both cases. Memory is never
 * pinned here, so the fork-range steps (ERR_DONT_FORK_NEW, ERR_DO_FORK_OLD,
 * ERR_CMD_AND_DO_FORK_NEW) cannot fail.
 */
SRD_EXPORT int ibv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd, void *addr,
			    size_t length, int access)
{
	if (!ibmr || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
	    ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length)) ||
	    (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	struct srd_mr *mr = container_of(ibmr, struct srd_mr, ibmr);
	if (mr->kind != SRD_KEY_MR || mr->imported) { /* an import is not the region's owner */
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	int err = rereg_cmd(mr, flags, pd, addr, length, access);
	if (err) {
		errno = err;
		return IBV_REREG_MR_ERR_CMD;
	}
	return 0;
}

/* ---------------------------------------------------------------- memory access */

/* The host address of iova va inside mr (checked by the caller). Integer arithmetic: an
 * implicit ODP region has addr NULL, and an offset added to a null pointer is undefined. */
static uint8_t *host_addr(const struct srd_mr *mr, uint64_t va)
{
	return (uint8_t *)((uintptr_t)mr->ibmr.addr + (uintptr_t)(va - mr->iova));
}

/* Resolves an SGE list against local MRs of pd; -1 on any protection violation. */
int srd_resolve_sgl(struct ibv_pd *pd, const struct ibv_sge *sge, int n, int need,
		       struct srd_seg *out, uint32_t *total)
{
	uint64_t t = 0;
	bool lazy = (need & SRD_NEED_LAZY) != 0;
	pd = srd_pd_canon(pd);
	need &= ~SRD_NEED_LAZY;
	for (int i = 0; i < n; i++) {
		out[i].p = NULL;
		out[i].len = sge[i].length;
		out[i].odp = false;
		if (!sge[i].length)
			continue;
		const struct srd_key_ent *mr = key_mr(sge[i].lkey);
		if (!mr || mr->pd != pd || (need && !(mr->access & need)))
			return -1;
		if (sge[i].addr < mr->iova || sge[i].addr - mr->iova > mr->length ||
		    sge[i].length > mr->length - (sge[i].addr - mr->iova))
			return -1;
		out[i].p = (uint8_t *)(mr->addr + (uintptr_t)(sge[i].addr - mr->iova)); /* as host_addr */
		if (mr->access & IBV_ACCESS_ON_DEMAND) {
			/* the page fault of an ODP region: resolved now, or a local protection error */
			out[i].odp = true;
			if (!lazy && srd_odp_fault(out[i].p, sge[i].length, need != 0))
				return -1;
		}
		t += sge[i].length;
	}
	if (total)
		*total = (uint32_t)(t > 0xffffffffu ? 0xffffffffu : t);
	return 0;
}

/* Remote access check; returns the host address or NULL (*odp: the range is on demand). */
uint8_t *srd_resolve_rkey(struct ibv_pd *pd, const void *qp, uint32_t rkey, uint64_t va, uint64_t len,
			  int need, bool *odp)
{
	*odp = false;
	pd = srd_pd_canon(pd);
	const struct srd_key_ent *k = key_mr(rkey);
	struct srd_mr *mr = k ? NULL : slot_get(rkey);
	if (mr && mr->kind == SRD_KEY_MW) {
		struct srd_mw *mw = container_of(mr, struct srd_mw, slot);
		uint8_t *p = NULL;
		pthread_mutex_lock(&g_mw_lock);
		if (mr->ibmr.lkey == rkey && mw->state == SRD_MW_VALID && mw->mr && mw->length &&
		    srd_pd_canon(mw->ibmw.pd) == pd && (mw->ibmw.type != IBV_MW_TYPE_2 || mw->qp == qp) &&
		    (mw->access & (unsigned)need) == (unsigned)need) {
			uint64_t off = (mw->access & IBV_ACCESS_ZERO_BASED) ? va : va - mw->addr;
			bool in = (mw->access & IBV_ACCESS_ZERO_BASED) || va >= mw->addr;
			if (in && off <= mw->length && len <= mw->length - off) {
				struct srd_mr *r = mw->mr; /* the bind checked the window lies inside it */
				p = (uint8_t *)r->ibmr.addr + (mw->addr + off - r->iova);
				*odp = (r->access & IBV_ACCESS_ON_DEMAND) != 0;
				if (*odp && srd_odp_fault(p, len, need != IBV_ACCESS_REMOTE_READ))
					p = NULL;
			}
		}
		pthread_mutex_unlock(&g_mw_lock);
		return p;
	}
	if (!k || k->pd != pd || !(k->access & need))
		return NULL;
	if (va < k->iova || va - k->iova > k->length || len > k->length - (va - k->iova))
		return NULL;
	uint8_t *p = (uint8_t *)(k->addr + (uintptr_t)(va - k->iova)); /* as host_addr */
	/* ODP: the page fault a NIC raises; one it cannot resolve is a remote access error */
	*odp = (k->access & IBV_ACCESS_ON_DEMAND) != 0;
	if (*odp && srd_odp_fault(p, len, need != IBV_ACCESS_REMOTE_READ))
		return NULL;
	return p;
}

/* One copy between buffers either of which may lie in an ODP region: 0 or SRD_ODP_*_FAULT,
 * the side with the hole. With ODP memory on both sides, the copy goes through a buffer of
 * ours, a page at a time: each step then has a single side that can fail. */
static __attribute__((noinline)) int copy_both_odp(uint8_t *dst, const uint8_t *src, size_t len)
{
	uint8_t b[4096];
	while (len) {
		size_t k = len < sizeof(b) ? len : sizeof(b);
		if (srd_odp_copy(b, src, k))
			return SRD_ODP_SRC_FAULT;
		if (srd_odp_copy(dst, b, k))
			return SRD_ODP_DST_FAULT;
		dst += k;
		src += k;
		len -= k;
	}
	return 0;
}

static inline int copy_buf(uint8_t *dst, bool dst_odp, const uint8_t *src, bool src_odp, size_t len)
{
	if (__builtin_expect(!dst_odp && !src_odp, 1)) {
		memcpy(dst, src, len);
		return 0;
	}
	if (dst_odp != src_odp)
		return srd_odp_copy(dst, src, len) ? (src_odp ? SRD_ODP_SRC_FAULT : SRD_ODP_DST_FAULT) : 0;
	return copy_both_odp(dst, src, len); /* its page-sized buffer off the common path's stack */
}

int srd_seg_copy_out_to(const struct srd_seg *s, int n, uint32_t off, uint8_t *dst, bool flat_odp, uint32_t len)
{
	for (int i = 0; i < n && len; i++) {
		if (off >= s[i].len) {
			off -= s[i].len;
			continue;
		}
		uint32_t k = s[i].len - off < len ? s[i].len - off : len;
		int f = copy_buf(dst, flat_odp, s[i].p + off, s[i].odp, k);
		if (f)
			return f;
		dst += k;
		len -= k;
		off = 0;
	}
	return 0;
}

int srd_seg_copy_in_from(const struct srd_seg *s, int n, uint32_t off, const uint8_t *src, bool flat_odp,
			 uint32_t len)
{
	for (int i = 0; i < n && len; i++) {
		if (off >= s[i].len) {
			off -= s[i].len;
			continue;
		}
		uint32_t k = s[i].len - off < len ? s[i].len - off : len;
		int f = copy_buf(s[i].p + off, s[i].odp, src, flat_odp, k);
		if (f)
			return f;
		src += k;
		len -= k;
		off = 0;
	}
	return 0;
}

/*
 * ibv_advise_mr: prefetch ranges of ODP regions. Errors as ibv_advise_mr(3) lists them:
 * EINVAL for flags other than IBV_ADVISE_MR_FLAG_FLUSH, a NULL PD or list, a key of another
 * PD, a memory window's key or a region without IBV_ACCESS_ON_DEMAND; EOPNOTSUPP for an
 * unknown advice; EFAULT for an lkey that names nothing, PREFETCH_WRITE on a region without
 * IBV_ACCESS_LOCAL_WRITE, a range outside its region, and (with IBV_ADVISE_MR_FLAG_FLUSH,
 * which asks for the work to be done before the call returns) a range that cannot be
 * faulted in. Without FLUSH the prefetch is best effort, as the kernel's deferred one is:
 * the keys and bounds are checked, a fault that fails is not reported. PREFETCH_NO_FAULT
 * maps only what is present: the device uses the CPU's page tables, so there is nothing
 * to do after the checks.
 */
int srd_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
		  struct ibv_sge *sg_list, uint32_t num_sge)
{
	if (!pd || (flags & ~(uint32_t)IBV_ADVISE_MR_FLAG_FLUSH) || (num_sge && !sg_list))
		return EINVAL;
	if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return EOPNOTSUPP;
	int rc = 0;
	srd_mr_rdlock();
	for (uint32_t i = 0; i < num_sge && !rc; i++) {
		const struct ibv_sge *g = &sg_list[i];
		struct srd_mr *slot = slot_get(g->lkey);
		if (!slot) {
			rc = EFAULT;
			break;
		}
		if (slot->kind != SRD_KEY_MR || srd_pd_canon(slot->ibmr.pd) != srd_pd_canon(pd) || !(slot->access & IBV_ACCESS_ON_DEMAND)) {
			rc = EINVAL;
			break;
		}
		if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE && !(slot->access & IBV_ACCESS_LOCAL_WRITE)) {
			rc = EFAULT;
			break;
		}
		if (g->addr < slot->iova || g->addr - slot->iova > slot->ibmr.length ||
		    g->length > slot->ibmr.length - (g->addr - slot->iova)) {
			rc = EFAULT;
			break;
		}
	}
	if (!rc && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT) {
		for (uint32_t i = 0; i < num_sge; i++) {
			struct srd_mr *mr = slot_get(sg_list[i].lkey);
			uint8_t *p = host_addr(mr, sg_list[i].addr);
			if (srd_odp_fault(p, sg_list[i].length, advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE) &&
			    (flags & IBV_ADVISE_MR_FLAG_FLUSH)) {
				rc = EFAULT;
				break;
			}
		}
	}
	srd_mr_unlock();
	return rc;
}


/* ---------------------------------------------------------------- MW */

/*
 * Memory windows, with kernel rxe's semantics: a window's rkey shares the key table with the
 * regions (index above a key byte the consumer changes with ibv_inc_rkey at every bind); a
 * type 1 window is valid from allocation and bound with ibv_bind_mw; a type 2 window starts
 * free, is bound through a BIND_MW work request on a QP of its PD, answers only that QP, and is
 * freed again by LOCAL_INV or a peer's SEND_WITH_INV.
 */
struct ibv_mw *srd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	if (!pd || (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)) {
		errno = EINVAL;
		return NULL;
	}
	struct srd_mw *mw = calloc(1, sizeof(*mw));
	if (!mw) {
		errno = ENOMEM;
		return NULL;
	}
	mw->slot.kind = SRD_KEY_MW;
	mw->slot.ibmr.pd = pd;
	mw->state = type == IBV_MW_TYPE_1 ? SRD_MW_VALID : SRD_MW_FREE;
	pthread_once(&g_mr_once, mr_keys_init);
	srd_br_wrlock(&srd_mr_table_lock);
	uint32_t key = key_alloc(&mw->slot);
	if (!key) {
		srd_br_wrunlock(&srd_mr_table_lock);
		free(mw);
		errno = ENOMEM;
		return NULL;
	}
	mw->slot.ibmr.lkey = key;
	mw->ibmw.context = pd->context;
	mw->ibmw.pd = pd;
	mw->ibmw.rkey = key;
	mw->ibmw.handle = key_idx(key);
	mw->ibmw.type = type;
	REF(PD_OF(pd));
	gen_bump();
	srd_br_wrunlock(&srd_mr_table_lock);
	return &mw->ibmw;
}

int srd_dealloc_mw(struct ibv_mw *ibmw)
{
	struct srd_mw *mw = container_of(ibmw, struct srd_mw, ibmw);
	srd_br_wrlock(&srd_mr_table_lock);
	uint32_t idx = (uint32_t)ibmw->handle;
	if (idx < g_mr_cap && g_mrs[idx] == &mw->slot)
		g_mrs[idx] = NULL;
	if (mw->mr)
		mw->mr->nmw--; /* deallocation unbinds */
	gen_bump();
	srd_br_wrunlock(&srd_mr_table_lock);
	UNREF(PD_OF(ibmw->pd));
	free(mw);
	return 0;
}

/*
 * The checks of a bind (IBA C10-72..75 and o10-36/37 as rxe applies them); MW lock held. The
 * window's access is not otherwise restricted: rdma-core's own tests bind with LOCAL_WRITE
 * beside REMOTE_WRITE, which rxe accepts (a remote access only ever asks for remote rights).
 */
static bool bind_ok(const struct srd_mw *mw, const struct srd_mr *mr, struct ibv_pd *qp_pd,
		    uint64_t addr, uint64_t length, unsigned access)
{
	if (mw->ibmw.type == IBV_MW_TYPE_1) {
		if (mw->state != SRD_MW_VALID || (access & IBV_ACCESS_ZERO_BASED))
			return false;
	} else {
		/* a bound type 2 window must be invalidated before it is bound again */
		if (mw->state != SRD_MW_FREE || srd_pd_canon(qp_pd) != srd_pd_canon(mw->ibmw.pd) || !mr || !length)
			return false;
	}
	if (!mr)
		return true;
	if (srd_pd_canon(mr->ibmr.pd) != srd_pd_canon(mw->ibmw.pd) || (mr->access & IBV_ACCESS_ZERO_BASED) ||
	    !(mr->access & IBV_ACCESS_MW_BIND))
		return false;
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		return false;
	return addr >= mr->iova && addr - mr->iova <= mr->ibmr.length &&
	       length <= mr->ibmr.length - (addr - mr->iova);
}

int srd_mw_bind(struct ibv_pd *qp_pd, const void *qp, uint32_t qpn, const struct ibv_mw *ibmw,
		uint32_t mw_rkey, uint32_t new_rkey, uint32_t mr_lkey, uint64_t addr, uint64_t length,
		unsigned access)
{
	int rc = -1;
	srd_mr_rdlock();
	/*
	 * The window is found by its key's index: after a bind through a work request the
	 * consumer's struct ibv_mw may still hold the previous key byte (only ibv_bind_mw updates
	 * it). The entry must still be this very window (it may have been deallocated since).
	 */
	uint32_t idx = key_idx(mw_rkey);
	struct srd_mr *slot = idx && idx < g_mr_cap ? g_mrs[idx] : NULL;
	if (slot && (slot->kind != SRD_KEY_MW || &container_of(slot, struct srd_mw, slot)->ibmw != ibmw))
		slot = NULL;
	struct srd_mr *mr = length ? mr_get(mr_lkey) : NULL;
	if (slot && slot->kind == SRD_KEY_MW && (mr || !length)) {
		struct srd_mw *mw = container_of(slot, struct srd_mw, slot);
		pthread_mutex_lock(&g_mw_lock);
		if (bind_ok(mw, mr, qp_pd, addr, length, access)) {
			if (mw->mr)
				mw->mr->nmw--;
			mw->mr = mr;
			if (mr)
				mr->nmw++;
			mw->addr = addr;
			mw->length = length;
			mw->access = access;
			mw->state = SRD_MW_VALID;
			mw->qp = mw->ibmw.type == IBV_MW_TYPE_2 ? qp : NULL;
			mw->qpn = qpn;
			__atomic_store_n(&slot->ibmr.lkey, (mw_rkey & ~0xffu) | (new_rkey & 0xffu), __ATOMIC_RELAXED);
			rc = 0;
		}
		pthread_mutex_unlock(&g_mw_lock);
	}
	srd_mr_unlock();
	return rc;
}

int srd_mw_invalidate(struct ibv_pd *pd, uint32_t rkey)
{
	int rc = -1;
	srd_mr_rdlock();
	/* only windows: a region registered with ibv_reg_mr cannot be invalidated (rxe: only
	 * fast-registration regions can, which user space cannot make) */
	struct srd_mr *slot = slot_get(rkey);
	if (slot && slot->kind == SRD_KEY_MW) {
		struct srd_mw *mw = container_of(slot, struct srd_mw, slot);
		pthread_mutex_lock(&g_mw_lock);
		if (slot->ibmr.lkey == rkey && mw->ibmw.type == IBV_MW_TYPE_2 && srd_pd_canon(mw->ibmw.pd) == srd_pd_canon(pd)) {
			if (mw->mr)
				mw->mr->nmw--;
			mw->mr = NULL;
			mw->addr = mw->length = 0;
			mw->access = 0;
			mw->qp = NULL;
			mw->state = SRD_MW_FREE;
			rc = 0;
		}
		pthread_mutex_unlock(&g_mw_lock);
	}
	srd_mr_unlock();
	return rc;
}

/* ---------------------------------------------------------------- AH */

SRD_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	if (!attr || attr->port_num != 1) {
		errno = EINVAL;
		return NULL;
	}
	/* RoCE address handles need a GRH with a valid source GID */
	if (!attr->is_global || attr->grh.sgid_index >= SRD_GID_TBL_LEN) {
		errno = EINVAL;
		return NULL;
	}
	struct srd_ah *ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->ibah.context = pd->context;
	ah->ibah.pd = pd;
	ah->attr = *attr;
	REF(PD_OF(pd));
	return &ah->ibah;
}

SRD_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	UNREF(PD_OF(ah->pd));
	free(container_of(ah, struct srd_ah, ibah));
	return 0;
}

SRD_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
				   struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
	(void)context;
	if (!(wc->wc_flags & IBV_WC_GRH) || !grh) {
		errno = EINVAL;
		return -1;
	}
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->port_num = port_num;
	ah_attr->is_global = 1;
	ah_attr->grh.hop_limit = 0xff;
	ah_attr->grh.sgid_index = 0;
	const uint8_t *raw = (const uint8_t *)grh;
	if (raw[20] == 0x45) {
		/* RoCE v2 over IPv4: an IPv4 header sits in the last 20 bytes */
		uint8_t *d = ah_attr->grh.dgid.raw;
		memset(d, 0, 16);
		d[10] = d[11] = 0xff;
		memcpy(d + 12, raw + 20 + 12, 4); /* IPv4 source address */
		ah_attr->grh.sgid_index = 1;
	} else {
		ah_attr->grh.dgid = grh->sgid;
	}
	ah_attr->sl = wc->sl;
	return 0;
}

SRD_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
						struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr attr;
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}

