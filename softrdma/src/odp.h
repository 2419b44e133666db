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
/*
 * Copies len bytes from src to dst where either side may be memory of an ODP region that is
 * not mapped any more: through process_vm_writev(2) on this process, which reads src and
 * writes dst with the kernel's fault handling (a hole gives EFAULT, never a signal). 0, or -1
 * when some byte could not be copied (what was copied before the hole stays copied).
 */
int srd_odp_copy(void *dst, const void *src, size_t len);

#endif
