/* pd.c: protection domains, memory regions, memory access, address handles. */
#ifndef SRD_PD_H
#define SRD_PD_H
#include "srd.h"
#include "lock.h"

/* A host buffer: one resolved SGE, or inline data, or a packet's payload. */
struct srd_seg { uint8_t *p; uint32_t len; };

/* The MR table is read-locked around every resolution and the use of its result
 * (a brlock: no atomic instruction on the read side; lock.h). */
extern srd_brlock_t srd_mr_table_lock;
static inline void srd_mr_rdlock(void) { srd_br_rdlock(&srd_mr_table_lock); }
static inline void srd_mr_unlock(void) { srd_br_rdunlock(&srd_mr_table_lock); }
/* Resolves an SGE list against local MRs of pd; -1 on any protection violation. */
int srd_resolve_sgl(struct ibv_pd *pd, const struct ibv_sge *sge, int n, int need,
		    struct srd_seg *out, uint32_t *total);
/* Remote access check through an MR's or a memory window's rkey, for a request arriving at
 * qp (a type 2 window answers only the QP it was bound through); the host address or NULL. */
uint8_t *srd_resolve_rkey(struct ibv_pd *pd, const void *qp, uint32_t rkey, uint64_t va, uint64_t len,
			  int need);
/* Memory windows: the ops of the device context. */
struct ibv_mw *srd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int srd_dealloc_mw(struct ibv_mw *mw);
/* Executes a bind WQE posted on qp (PD qp_pd): 0, or -1 for a bind error (IBV_WC_MW_BIND_ERR). */
int srd_mw_bind(struct ibv_pd *qp_pd, const void *qp, uint32_t qpn, const struct ibv_mw *ibmw,
		uint32_t mw_rkey, uint32_t new_rkey,
		uint32_t mr_lkey, uint64_t addr, uint64_t length, unsigned access);
/* Invalidates the type 2 window with rkey in pd (LOCAL_INV, SEND_WITH_INV): 0 or -1. */
int srd_mw_invalidate(struct ibv_pd *pd, uint32_t rkey);
void srd_seg_copy_out(const struct srd_seg *s, int n, uint32_t off, uint8_t *dst, uint32_t len);
void srd_seg_copy_in(const struct srd_seg *s, int n, uint32_t off, const uint8_t *src, uint32_t len);

#endif
