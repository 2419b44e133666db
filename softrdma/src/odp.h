/* odp.c: the memory access of on-demand paging regions (IBV_ACCESS_ON_DEMAND). */
#ifndef SRD_ODP_H
#define SRD_ODP_H
#include "srd.h"

/*
 * Makes [p, p + len) present in this process's page tables, readable (write false) or
 * writable (write true), as the CPU would on a first access, without ever raising SIGSEGV
 * or SIGBUS: 0, or -1 when some page cannot be made so (unmapped, PROT_NONE, read-only for a
 * write, a file mapping past its end). The page fault a NIC raises for an ODP region, resolved
 * (or failed) by the kernel's fault handler.
 */
int srd_odp_fault(const void *p, size_t len, bool write);
/*
 * Whether every page of [p, p + len) is mapped (present or not): 1 or 0; never faults. The
 * kernel pins a region's pages at registration and answers EFAULT for a range with a hole; a
 * software device asks mincore(2), which fails with ENOMEM for an unmapped page. Used for
 * that check of ibv_reg_mr/ibv_rereg_mr (pd.c) as well as for ODP accesses.
 */
int srd_odp_mapped(const void *p, size_t len);
/* The failures of a copy with ODP memory on one side or both (pd.c): the side with the hole. */
enum { SRD_ODP_SRC_FAULT = 1, SRD_ODP_DST_FAULT = 2 };
/*
 * Copies len bytes from src to dst where either side may be memory of an ODP region that is
 * not mapped any more: through process_vm_writev(2) on this process, which reads src and
 * writes dst with the kernel's fault handling (a hole gives EFAULT, never a signal). 0, or -1
 * when some byte could not be copied, on either side (what was copied before the hole stays
 * copied).
 */
int srd_odp_copy(void *dst, const void *src, size_t len);
/*
 * A remote atomic on the aligned word p of an ODP region: fetch-and-add (add) of cmp_add, or
 * compare-and-swap of cmp_add with swap (written only when equal); *orig the value before.
 * A read and a write through process_vm_readv/writev, never a signal: 0, or -1 when the word
 * could not be read or written (nothing was changed). Atomic only against accesses that the
 * caller's lock excludes (responder.c: every atomic of the device takes it).
 */
int srd_odp_atomic(uint64_t *p, bool add, uint64_t cmp_add, uint64_t swap, uint64_t *orig);

#endif
