/* cq.c: completion queues and completion channels. */
#ifndef SRD_CQ_H
#define SRD_CQ_H
#include "srd.h"
#include <stddef.h>

void srd_cq_push(struct srd_cq *cq, const struct ibv_wc *wc, bool solicited);
/*
 * A completion is written into the ring and copied out of it as three 16-byte words. A poll
 * usually reads a slot a few nanoseconds after it was written, while the stores are still in
 * the store buffer: a load is forwarded from a store only when that store covers it, so
 * writing the fields one by one (4- and 8-byte stores) and copying 16 bytes at a time stalls
 * each copy until the stores drain. With the same three words on both sides each load is
 * served by one store. The packing below is struct ibv_wc's layout on a little-endian
 * machine (checked at compile time); elsewhere the fields are written one by one.
 */
typedef uint64_t srd_wc_words __attribute__((vector_size(16), aligned(8), may_alias));

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SRD_WC_WORDS 1
_Static_assert(sizeof(struct ibv_wc) == 48 && offsetof(struct ibv_wc, status) == 8 &&
	       offsetof(struct ibv_wc, opcode) == 12 && offsetof(struct ibv_wc, vendor_err) == 16 &&
	       offsetof(struct ibv_wc, byte_len) == 20 && offsetof(struct ibv_wc, imm_data) == 24 &&
	       offsetof(struct ibv_wc, qp_num) == 28 && offsetof(struct ibv_wc, src_qp) == 32 &&
	       offsetof(struct ibv_wc, wc_flags) == 36 && offsetof(struct ibv_wc, pkey_index) == 40 &&
	       offsetof(struct ibv_wc, slid) == 42 && offsetof(struct ibv_wc, sl) == 44 &&
	       offsetof(struct ibv_wc, dlid_path_bits) == 45 && sizeof(enum ibv_wc_status) == 4 &&
	       sizeof(enum ibv_wc_opcode) == 4, "struct ibv_wc's layout");
#endif

/* Writes a completion (vendor_err, pkey_index, slid, sl and dlid_path_bits 0). imm: imm_data
 * or invalidated_rkey, by flags. */
static inline void srd_wc_put(struct ibv_wc *wc, uint64_t wr_id, enum ibv_wc_status st,
			      enum ibv_wc_opcode op, uint32_t byte_len, uint32_t imm, uint32_t qpn,
			      uint32_t src_qp, unsigned flags)
{
#ifdef SRD_WC_WORDS
	srd_wc_words *d = (srd_wc_words *)wc;
	d[0] = (srd_wc_words){ wr_id, (uint64_t)(uint32_t)st | (uint64_t)(uint32_t)op << 32 };
	d[1] = (srd_wc_words){ (uint64_t)byte_len << 32, (uint64_t)imm | (uint64_t)qpn << 32 };
	d[2] = (srd_wc_words){ (uint64_t)src_qp | (uint64_t)flags << 32, 0 };
#else
	*wc = (struct ibv_wc){ .wr_id = wr_id, .status = st, .opcode = op, .byte_len = byte_len,
			       .imm_data = imm, .qp_num = qpn, .src_qp = src_qp, .wc_flags = flags };
#endif
}

/* Copies a completion, in the words srd_wc_put wrote it with. */
static inline void srd_wc_copy(struct ibv_wc *dst, const struct ibv_wc *src)
{
#ifdef SRD_WC_WORDS
	const srd_wc_words *s = (const srd_wc_words *)src;
	srd_wc_words *d = (srd_wc_words *)dst;
	srd_wc_words a = s[0], b = s[1], c = s[2];
	d[0] = a;
	d[1] = b;
	d[2] = c;
#else
	*dst = *src;
#endif
}

/* The push in two steps, so that a producer writes its completion into the ring in place:
 * srd_cq_begin takes the CQ's lock and returns the slot to fill (every field), or NULL when
 * the CQ is full; srd_cq_commit(cq, that slot or NULL, ...) publishes it (or reports the
 * overrun), releases the lock and notifies. */
static inline struct ibv_wc *srd_cq_begin(struct srd_cq *cq)
{
	srd_lock(&cq->lock);
	if (cq->count >= cq->ibcq.cqe)
		return NULL;
	int i = cq->head + cq->count;
	return &cq->ring[i >= cq->cap ? i - cq->cap : i];
}

/* srd_cq_commit when the CQ is armed or full */
void srd_cq_commit_slow(struct srd_cq *cq, const struct ibv_wc *wc, bool solicited);

static inline void srd_cq_commit(struct srd_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	if (__builtin_expect(wc == NULL || cq->armed, 0)) {
		srd_cq_commit_slow(cq, wc, solicited);
		return;
	}
	__atomic_store_n(&cq->count, cq->count + 1, __ATOMIC_RELEASE); /* peeked without the lock */
	srd_unlock(&cq->lock);
}

int srd_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc);
/* Set by the agent: an empty poll first lets the polling thread take the packets that wait
 * in this process's same-host rings (returns whether it took any), so a busy poller needs
 * no other thread to progress. A call up at run time, listed in tests/layering.sh's hooks. */
extern bool (*srd_cq_idle_hook)(void);
int srd_req_notify_cq(struct ibv_cq *ibcq, int solicited_only);
struct ibv_cq_ex *srd_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr);

#endif
