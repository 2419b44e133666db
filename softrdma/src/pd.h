/* pd.c: protection domains, memory regions, memory access, address handles. */
#ifndef SRD_PD_H
#define SRD_PD_H
#include "srd.h"

/* A host buffer: one resolved SGE, or inline data, or a packet's payload. */
struct srd_seg { uint8_t *p; uint32_t len; };

/* The MR table is read-locked around every resolution and the use of its result. */
void srd_mr_rdlock(void);
void srd_mr_unlock(void);
/* Resolves an SGE list against local MRs of pd; -1 on any protection violation. */
int srd_resolve_sgl(struct ibv_pd *pd, const struct ibv_sge *sge, int n, int need,
		    struct srd_seg *out, uint32_t *total);
/* Remote access check; returns the host address or NULL. */
uint8_t *srd_resolve_rkey(struct ibv_pd *pd, uint32_t rkey, uint64_t va, uint64_t len, int need);
void srd_seg_copy_out(const struct srd_seg *s, int n, uint32_t off, uint8_t *dst, uint32_t len);
void srd_seg_copy_in(const struct srd_seg *s, int n, uint32_t off, const uint8_t *src, uint32_t len);

#endif
