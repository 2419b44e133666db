/* pd.c: protection domains, memory regions, memory access, address handles. */
#ifndef SRD_PD_H
#define SRD_PD_H
#include "srd.h"
#include "lock.h"
#include "odp.h"

/* A host buffer: one resolved SGE, or inline data, or a packet's payload. odp: the buffer
 * lies in an on-demand paging region, which may be unmapped: copies go through odp.c. */
struct srd_seg { uint8_t *p; uint32_t len; bool odp; };

/* Added to srd_resolve_sgl's need: ODP ranges are not faulted in (admitted) at resolution;
 * the copies into them are the access and report a hole (a receive WQE: only the bytes a
 * message fills are touched, as a NIC touches them). */
#define SRD_NEED_LAZY (1 << 30)

/* The MR table is read-locked around every resolution and the use of its result
 * (a brlock: no atomic instruction on the read side; lock.h). */
extern srd_brlock_t srd_mr_table_lock;
static inline void srd_mr_rdlock(void) { srd_br_rdlock(&srd_mr_table_lock); }
static inline void srd_mr_unlock(void) { srd_br_rdunlock(&srd_mr_table_lock); }
/* Resolves an SGE list against local MRs of pd; -1 on any protection violation, or when a
 * range of an ODP region cannot be faulted in (unmapped) unless need has SRD_NEED_LAZY. */
int srd_resolve_sgl(struct ibv_pd *pd, const struct ibv_sge *sge, int n, int need,
		    struct srd_seg *out, uint32_t *total);
/* Remote access check through an MR's or a memory window's rkey, for a request arriving at
 * qp (a type 2 window answers only the QP it was bound through); the host address or NULL.
 * A range of an ODP region is faulted in here (writable for a WRITE or an atomic): NULL when
 * that fails, the remote access error a NIC answers for a fault it cannot resolve. *odp: the
 * range lies in an ODP region (every access to it then goes through odp.c). */
uint8_t *srd_resolve_rkey(struct ibv_pd *pd, const void *qp, uint32_t rkey, uint64_t va, uint64_t len,
			  int need, bool *odp);
/* Memory windows: the ops of the device context. */
struct ibv_mw *srd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int srd_dealloc_mw(struct ibv_mw *mw);
/* Executes a bind WQE posted on qp (PD qp_pd): 0, or -1 for a bind error (IBV_WC_MW_BIND_ERR). */
int srd_mw_bind(struct ibv_pd *qp_pd, const void *qp, uint32_t qpn, const struct ibv_mw *ibmw,
		uint32_t mw_rkey, uint32_t new_rkey,
		uint32_t mr_lkey, uint64_t addr, uint64_t length, unsigned access);
/* Invalidates the type 2 window with rkey in pd (LOCAL_INV, SEND_WITH_INV): 0 or -1. */
int srd_mw_invalidate(struct ibv_pd *pd, uint32_t rkey);
/* Copies between a segment list (from byte off) and a flat buffer, which lies in an ODP region
 * when flat_odp: 0, or SRD_ODP_SRC_FAULT / SRD_ODP_DST_FAULT when the source / destination
 * had a hole in an ODP region (unmapped since it was admitted); never a signal. A copy stops
 * at its first hole. */
int srd_seg_copy_out_to(const struct srd_seg *s, int n, uint32_t off, uint8_t *dst, bool flat_odp, uint32_t len);
int srd_seg_copy_in_from(const struct srd_seg *s, int n, uint32_t off, const uint8_t *src, bool flat_odp,
			 uint32_t len);
/* The same with a flat buffer of this library's own (a packet, a stack buffer). */
static inline int srd_seg_copy_out(const struct srd_seg *s, int n, uint32_t off, uint8_t *dst, uint32_t len)
{
	return srd_seg_copy_out_to(s, n, off, dst, false, len);
}
static inline int srd_seg_copy_in(const struct srd_seg *s, int n, uint32_t off, const uint8_t *src, uint32_t len)
{
	return srd_seg_copy_in_from(s, n, off, src, false, len);
}
/* ibv_advise_mr (the verbs_context's advise_mr). */
int srd_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
		  struct ibv_sge *sg_list, uint32_t num_sge);

#endif
