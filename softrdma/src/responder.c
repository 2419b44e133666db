/*
 * The responder: one set of access checks and one execution of SEND, WRITE
 * (with immediate), READ and atomics, used by the in-process path (the
 * requester's thread calls srd_resp_execute with a whole message) and by the
 * packet path (srd_responder_rx, per packet, with RC sequence checks,
 * duplicates, ACK/NAK/RNR and READ/atomic responses); UD delivery.
 * Owns: the responder half of struct srd_qp (epsn, the receive in progress,
 * the atomic result cache), under qp->resp_lock.
 * Calls: pd (memory access), rq, events, sq (QP to ERR), net (transmission), xrc (the XRC
 * SRQ a request to a TGT QP names; the shadows of other processes' TGT QPs).
 * XRC across processes: a TGT QP's request for another process's XRC SRQ is relayed there
 * (see "XRC across processes" below).
 *
 * Lock order (never taken in the other direction):
 *   requester qp->sq_lock  <  responder qp->resp_lock  <  rq/srq lock  <  cq lock
 * A receive WQE is taken and completed under resp_lock, so every flush of a receive queue
 * (srd_flush_rq: a move to ERR by either side or by ibv_modify_qp, a post_recv in ERR)
 * holds it too, and the receives complete in the order they were posted.
 * The QPN table's read lock is held around any use of a QP found by number.
 */
#include "responder.h"
#include "rq.h"
#include "events.h"
#include "sq.h"
#include "net.h"
#include "xrc.h"
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

/* A TGT QP's relay to another process ("XRC across processes" below), under resp_lock. */
struct srd_relay {
	bool busy;             /* a relay waits for its answer */
	bool dropped;          /* requests were dropped meanwhile */
	uint32_t inc;          /* the TGT QP's incarnation: new at each reset */
	uint32_t sqpn;         /* the requester */
	struct pkt_hdr h;      /* the relay as sent */
	uint64_t start_ns, sent_ns;
	uint8_t payload[MAX_PKT - sizeof(struct pkt_hdr)];
	/* the packets that came behind it, in PSN order from the relayed one's + 1 */
	uint8_t (*held)[MAX_PKT];  /* RELAY_HOLD slots, a ring from hhead */
	int hhead, nheld;
};
#define RELAY_HOLD 64

static bool ready(struct srd_qp *qp)
{
	int s = __atomic_load_n(&qp->state, __ATOMIC_ACQUIRE);
	return s == IBV_QPS_RTR || s == IBV_QPS_RTS || s == IBV_QPS_SQD;
}

bool srd_resp_accepts(struct srd_qp *qp, uint32_t sqpn)
{
	return ready(qp) && qp->ttype != IBV_QPT_UD && sqpn == qp->attr.dest_qp_num;
}

/* The handles other processes opened on TGT QP qp (ibv_open_qp) get its async event too. */
static void notify_openers(struct srd_qp *qp, enum ibv_event_type ev)
{
	uint16_t ports[16];
	uint32_t ids[16];
	int n = srd_xrc_ropen_list(qp, ports, ids, 16);
	for (int i = 0; i < n; i++) {
		static const struct in6_addr lo4 = { .s6_addr = { [10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1 } };
		struct sockaddr_in6 to = { .sin6_family = AF_INET6, .sin6_addr = lo4, .sin6_port = htons(ports[i]) };
		struct pkt_hdr h;
		memset(&h, 0, sizeof(h));
		h.op = OP_XRC_CTRL;
		h.syndrome = XCTL_EVENT;
		h.dqpn = ids[i];
		h.sqpn = qp->ibqp.qp_num;
		h.imm = (uint32_t)ev;
		srd_xmit(qp, &to, &h, NULL, 0);
	}
}

/* A responder-detected error: the QP goes to ERR, then the async event (also to the handles
 * other processes opened on a TGT QP). */
static void responder_error(struct srd_qp *qp, enum ibv_event_type ev_type)
{
	if (qp->shadow) {
		/* a shadow's error goes back to the TGT QP's process, which raises it there */
		qp->shadow_ev = ev_type;
		qp->state = IBV_QPS_ERR;
		return;
	}
	if (qp->xrc == SRD_XRC_TGT)
		notify_openers(qp, ev_type);
	/* in ERR before the event: an application that queries the QP on the event sees ERR */
	srd_qp_to_error(qp, false);
	struct ibv_async_event ev = { .element.qp = &qp->ibqp, .event_type = ev_type };
	srd_async_post(srd_ctx_of(qp->ibqp.context), &ev);
}

/*
 * The access checks of a remote WRITE, READ or atomic: the QP allows the
 * operation (atomics: 8-byte aligned), and [va, va + len) lies in an MR of the
 * QP's PD that grants it. Returns SYN_ACK with *where set (NULL for len 0)
 * and *odp (it lies in an ODP region: every access goes through odp.c),
 * or, after the responder error, SYN_NAK_INV (invalid request) or
 * SYN_NAK_ACCESS (remote access error).
 */
static int access_check(struct srd_qp *qp, int right, uint32_t rkey, uint64_t va, uint64_t len,
			uint8_t **where, bool *odp)
{
	*where = NULL;
	*odp = false;
	if (!(qp->attr.qp_access_flags & right) ||
	    (right == IBV_ACCESS_REMOTE_ATOMIC && (va & 7))) {
		responder_error(qp, IBV_EVENT_QP_REQ_ERR);
		return SYN_NAK_INV;
	}
	if (!len)
		return SYN_ACK;
	*where = srd_resolve_rkey(qp->rpd, qp, rkey, va, len, right, odp);
	if (!*where) {
		responder_error(qp, IBV_EVENT_QP_ACCESS_ERR);
		return SYN_NAK_ACCESS;
	}
	return SYN_ACK;
}

/*
 * The target of a WRITE, READ or atomic had a hole when it was accessed, after its admission
 * (an ODP region unmapped in between): what a NIC answers for a page fault it cannot resolve,
 * the remote access error (NAK; the QP to ERR with IBV_EVENT_QP_ACCESS_ERR).
 */
static int access_fault(struct srd_qp *qp)
{
	responder_error(qp, IBV_EVENT_QP_ACCESS_ERR);
	return SYN_NAK_ACCESS;
}

/* A receive WQE for the message: SYN_ACK, or RNR (RC) / drop (UC) when none is posted. */
static int take_or_rnr(struct srd_qp *qp, struct srd_rwqe *rw, struct ibv_sge *sges)
{
	if (srd_take_rwqe(qp, rw, sges))
		return SYN_ACK;
	return qp->ttype == IBV_QPT_RC ? SYN_RNR : RESP_DROP;
}

static int exec_send(struct srd_qp *qp, const struct srd_req *r, struct srd_resp *out)
{
	bool rc = qp->ttype == IBV_QPT_RC;
	if (r->flags & F_FIRST) {
		if (qp->recv_in_progress && !rc) {
			/* UC: reuse the WQE of the aborted message */
		} else {
			int s = take_or_rnr(qp, &qp->cur_rwqe, qp->cur_sges);
			if (s != SYN_ACK)
				return s;
		}
		qp->recv_in_progress = true;
		qp->recv_off = 0;
	} else if (!qp->recv_in_progress) {
		return SYN_ACK; /* stray middle packet (UC after loss) */
	}
	struct srd_seg rseg[SRD_MAX_SGE];
	uint32_t room;
	/* ODP receive buffers: only the bytes placed are touched; a hole there is the same local
	 * protection error as a bad lkey */
	bool bad = srd_resolve_sgl(qp->rpd, qp->cur_rwqe.sge, qp->cur_rwqe.num_sge,
				   IBV_ACCESS_LOCAL_WRITE | SRD_NEED_LAZY, rseg, &room) != 0;
	if (!bad && qp->recv_off + r->len > room) {
		srd_recv_complete(qp, &qp->cur_rwqe, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, false, 0, 0, false, true);
		qp->recv_in_progress = false;
		responder_error(qp, IBV_EVENT_QP_REQ_ERR);
		return SYN_NAK_INV;
	}
	/* copy piecewise from the source segments into the receive segments */
	uint32_t off = qp->recv_off;
	int f = 0;
	for (int i = 0; i < r->nsrc && !bad && !f; i++) {
		if (r->src[i].len)
			f = srd_seg_copy_in_from(rseg, qp->cur_rwqe.num_sge, off, r->src[i].p, r->src[i].odp,
						 r->src[i].len);
		off += r->src[i].len;
	}
	if (f == SRD_ODP_SRC_FAULT)
		return RESP_LOCAL_FAULT; /* the sender's gather list (in-process): it stopped sending */
	if (f)
		bad = true;
	if (bad) {
		srd_recv_complete(qp, &qp->cur_rwqe, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, false, 0, 0, false, true);
		qp->recv_in_progress = false;
		responder_error(qp, IBV_EVENT_QP_FATAL);
		return SYN_NAK_OP;
	}
	qp->recv_off += r->len;
	if ((r->flags & F_LAST) && (r->flags & F_INV) && srd_mw_invalidate(qp->rpd, r->imm)) {
		/* SEND with Invalidate naming no window of ours that can be invalidated: an invalid
		 * request (rxe: the receive completes with the status, the QP goes to ERR) */
		srd_recv_complete(qp, &qp->cur_rwqe, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV, 0, false, 0, 0, false, true);
		qp->recv_in_progress = false;
		responder_error(qp, IBV_EVENT_QP_REQ_ERR);
		return SYN_NAK_INV;
	}
	if (r->flags & F_LAST) {
		out->pend = true;
		out->rw = qp->cur_rwqe;
		out->wc_op = IBV_WC_RECV;
		out->wc_len = qp->recv_off;
		qp->recv_in_progress = false;
	}
	return SYN_ACK;
}

static int exec_write(struct srd_qp *qp, const struct srd_req *r, struct srd_resp *out)
{
	/* the whole message range is checked on its first packet */
	uint64_t span = r->len;
	if ((r->flags & F_FIRST) && r->total > span)
		span = r->total;
	uint8_t *t;
	bool odp;
	int s = access_check(qp, IBV_ACCESS_REMOTE_WRITE, r->rkey, r->va, span, &t, &odp);
	if (s != SYN_ACK)
		return s;
	/* the payload is placed before a receive WQE is taken (WRITE with immediate): a hole in
	 * the target fails the WRITE without consuming one (an RNR places this packet again) */
	int f = r->len ? srd_seg_copy_out_to(r->src, r->nsrc, 0, t, odp, r->len) : 0;
	if (f == SRD_ODP_DST_FAULT) {
		qp->write_in_progress = false;
		return access_fault(qp);
	}
	if (f) {
		qp->write_in_progress = true; /* the sender's gather list (in-process): it stopped */
		return RESP_LOCAL_FAULT;
	}
	if ((r->flags & F_LAST) && (r->flags & F_IMM)) {
		struct ibv_sge rs[SRD_MAX_SGE]; /* the completion needs only the WQE's wr_id */
		s = take_or_rnr(qp, &out->rw, rs);
		if (s != SYN_ACK)
			return s; /* RNR: this last packet comes again, the WRITE stays in progress */
		out->rw.sge = NULL;
		out->pend = true;
		out->wc_op = IBV_WC_RECV_RDMA_WITH_IMM;
		out->wc_len = r->total;
	}
	qp->write_in_progress = !(r->flags & F_LAST);
	return SYN_ACK;
}

/*
 * RC opcode sequence: a multi-packet SEND or WRITE in progress continues with
 * middle/last packets of the same operation; anything else starts with a first
 * packet. A violation is an invalid request (NAK, QP to ERR); the receive WQE
 * the broken SEND held completes flushed rather than being lost.
 */
static int sequence_check(struct srd_qp *qp, const struct srd_req *r)
{
	bool first = (r->flags & F_FIRST) != 0;
	int cur = qp->recv_in_progress ? OP_SEND : qp->write_in_progress ? OP_WRITE : 0;
	if (qp->ttype != IBV_QPT_RC || (cur ? r->op == cur && !first : first))
		return SYN_ACK;
	if (qp->recv_in_progress)
		srd_recv_complete(qp, &qp->cur_rwqe, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, false, 0, 0,
				  false, true);
	qp->recv_in_progress = qp->write_in_progress = false;
	responder_error(qp, IBV_EVENT_QP_REQ_ERR);
	return SYN_NAK_INV;
}

/*
 * The atomics' lock. softrdma advertises IBV_ATOMIC_HCA (as rxe): an atomic is atomic with
 * respect to the other atomics of the device, not to the CPU's accesses. On ordinary memory
 * the atomic is a CPU atomic, which cannot be made signal-free; on ODP memory, which may be
 * unmapped at any moment, it is a read and a write through process_vm_readv/writev (odp.c),
 * which is not atomic by itself. Both kinds can reach the same word (an implicit region covers
 * every region; two regions may cover one page), so every atomic takes this lock: the CPU
 * atomics as readers (among themselves they are atomic already; a reader's side is a store to
 * its own thread's record, lock.h), the ODP read-modify-writes as writers, alone. Its scope is
 * this process, which is the device's: two processes' responders on one shared mapping are
 * two devices, whose ODP atomics are not atomic against each other (their CPU atomics still
 * are, being the CPU's).
 */
static srd_brlock_t g_atomic_lock = SRD_BRLOCK_INIT(SRD_BR_ATOMIC);

void srd_resp_atfork_child(void)
{
	srd_br_reset(&g_atomic_lock);
}

/* The atomic of r on the checked, aligned word a: 0 with *orig, or -1 when a word of an ODP
 * region could not be accessed (unmapped since its admission; nothing changed). */
static int exec_atomic(const struct srd_req *r, uint64_t *a, bool odp, uint64_t *orig)
{
	if (odp) {
		srd_br_wrlock(&g_atomic_lock);
		int rc = srd_odp_atomic(a, r->op == OP_FAA, r->cmp, r->swap, orig);
		srd_br_wrunlock(&g_atomic_lock);
		return rc;
	}
	srd_br_rdlock(&g_atomic_lock);
	if (r->op == OP_FAA) {
		*orig = __atomic_fetch_add(a, r->cmp, __ATOMIC_SEQ_CST);
	} else {
		*orig = r->cmp;
		__atomic_compare_exchange_n(a, orig, r->swap, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	}
	srd_br_rdunlock(&g_atomic_lock);
	return 0;
}

int srd_resp_execute(struct srd_qp *qp, const struct srd_req *r, struct srd_resp *out)
{
	out->pend = false;
	if (r->op != OP_SEND && r->op != OP_WRITE && r->op != OP_READ_REQ && r->op != OP_CAS &&
	    r->op != OP_FAA)
		return RESP_IGNORE;
	if (qp->xrc || (r->flags & F_XRC)) {
		enum ibv_event_type ev;
		int x = srd_xrc_select(qp, (r->flags & F_XRC) != 0, r->srqn, &ev);
		if (x != SYN_ACK) {
			if (qp->recv_in_progress && qp->srq)
				srd_recv_complete(qp, &qp->cur_rwqe, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, false, 0,
						  0, false, true);
			qp->recv_in_progress = qp->write_in_progress = false;
			responder_error(qp, ev);
			return x;
		}
	}
	int s = sequence_check(qp, r);
	if (s != SYN_ACK)
		return s;
	switch (r->op) {
	case OP_SEND:
		return exec_send(qp, r, out);
	case OP_WRITE:
		return exec_write(qp, r, out);
	case OP_READ_REQ:
	case OP_CAS:
	case OP_FAA: {
		if (qp->ttype != IBV_QPT_RC) {
			responder_error(qp, IBV_EVENT_QP_REQ_ERR);
			return SYN_NAK_INV;
		}
		bool rd = r->op == OP_READ_REQ;
		uint8_t *p;
		bool odp;
		int s = access_check(qp, rd ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_ATOMIC, r->rkey,
				     r->va, rd ? r->len : 8, &p, &odp);
		if (s != SYN_ACK)
			return s;
		if (rd) {
			/* in-process: the data moves now, from the source into the requester's segments
			 * (the packet path answers with answer_read) */
			int f = r->ldst && r->len ? srd_seg_copy_in_from(r->ldst, r->nldst, 0, p, odp, r->len) : 0;
			if (f == SRD_ODP_SRC_FAULT)
				return access_fault(qp);
			return f ? RESP_LOCAL_FAULT : SYN_ACK;
		}
		if (exec_atomic(r, (uint64_t *)p, odp, &out->orig))
			return access_fault(qp);
		if (r->ldst && srd_seg_copy_in(r->ldst, r->nldst, 0, (const uint8_t *)&out->orig, 8))
			return RESP_LOCAL_FAULT;
		return SYN_ACK;
	}
	default:
		return RESP_IGNORE;
	}
}

static uint32_t next_incarnation(void);

void srd_resp_reset(struct srd_qp *qp)
{
	srd_lock(&qp->resp_lock);
	if (qp->relay) {
		/* a relay in flight is forgotten; the SRQ's process sees a new incarnation */
		qp->relay->busy = false;
		qp->relay->nheld = 0;
		qp->relay->dropped = false;
		qp->relay->inc = next_incarnation();
	}
	qp->epsn = 0;
	qp->recv_in_progress = false;
	qp->write_in_progress = false;
	qp->nak_sent = false;
	memset(qp->atomic_cache, 0, sizeof(qp->atomic_cache));
	srd_unlock(&qp->resp_lock);
}

/* ---------------------------------------------------------------- the packet path */

static void send_ack(struct srd_qp *qp, uint32_t dqpn, uint32_t psn, int syn, uint32_t extra)
{
	struct pkt_hdr h;
	memset(&h, 0, sizeof(h));
	h.op = OP_ACK;
	h.syndrome = (uint8_t)syn;
	h.dqpn = dqpn;
	h.sqpn = qp->ibqp.qp_num;
	h.psn = psn & SRD_HDR_PSN_MASK;
	h.imm = extra;
	srd_xmit(qp, &qp->peer, &h, NULL, 0);
}

static void send_atomic_resp(struct srd_qp *qp, uint32_t dqpn, uint32_t psn, uint64_t orig)
{
	struct pkt_hdr a;
	memset(&a, 0, sizeof(a));
	a.op = OP_ATOMIC_RESP;
	a.dqpn = dqpn;
	a.sqpn = qp->ibqp.qp_num;
	a.psn = psn;
	a.cmp = orig;
	srd_xmit(qp, &qp->peer, &a, NULL, 0);
}

/*
 * Sends the responses of READ request r. A source in an ODP region is copied packet by packet
 * through odp.c into a buffer of ours first (the transmission copies its payload with memcpy):
 * a hole met there, or a source the rkey no longer reaches, is the remote access error (the
 * NAK at the PSN of the first response not sent, the responses before it having gone out; the
 * QP to ERR, unless r is a duplicate: a stray old request never breaks the connection). False
 * then.
 */
static bool answer_read(struct srd_qp *qp, const struct pkt_hdr *r, bool dup)
{
	uint32_t mtu = mtu_bytes(qp->attr.path_mtu);
	uint32_t n = r->len ? (r->len + mtu - 1) / mtu : 1;
	bool odp = false;
	srd_mr_rdlock();
	uint8_t *src = r->len ? srd_resolve_rkey(qp->rpd, qp, r->rkey, r->va, r->len,
						     IBV_ACCESS_REMOTE_READ, &odp)
			      : (uint8_t *)1;
	uint32_t i = 0;
	if (src) {
		uint8_t bounce[4096]; /* an MTU at most */
		srd_batch_begin();
		for (; i < n; i++) {
			struct pkt_hdr h;
			memset(&h, 0, sizeof(h));
			h.op = OP_READ_RESP;
			h.dqpn = r->sqpn;
			h.sqpn = qp->ibqp.qp_num;
			h.psn = psn_add(r->psn, i);
			uint32_t off = i * mtu;
			h.len = r->len - off < mtu ? r->len - off : mtu;
			if (!r->len)
				h.len = 0;
			h.flags = (i == 0 ? F_FIRST : 0) | (i + 1 == n ? F_LAST : 0);
			const uint8_t *p = h.len ? src + off : NULL;
			if (h.len && odp) {
				if (srd_odp_copy(bounce, p, h.len))
					break;
				p = bounce;
			}
			srd_xmit(qp, &qp->peer, &h, p, h.len);
		}
		srd_batch_end();
	}
	srd_mr_unlock();
	if (src && i == n)
		return true;
	send_ack(qp, r->sqpn, psn_add(r->psn, i), SYN_NAK_ACCESS, 0);
	if (!dup)
		responder_error(qp, IBV_EVENT_QP_ACCESS_ERR);
	return false;
}

/* A request at a PSN already executed: acknowledge or answer again, never apply twice. */
static void duplicate(struct srd_qp *qp, const struct pkt_hdr *h)
{
	ST(dup_rx);
	if (h->op == OP_READ_REQ) {
		answer_read(qp, h, true);
	} else if (h->op == OP_CAS || h->op == OP_FAA) {
		for (int i = 0; i < 16; i++)
			if (qp->atomic_cache[i].valid && qp->atomic_cache[i].psn == h->psn)
				send_atomic_resp(qp, h->sqpn, h->psn, qp->atomic_cache[i].val);
	} else if (h->flags & (F_LAST | F_ACKREQ)) {
		send_ack(qp, h->sqpn, psn_add(qp->epsn, SRD_HDR_PSN_MASK), SYN_ACK, 0);
	}
}

static bool relay_wanted(const struct srd_qp *qp, const struct pkt_hdr *h);
static void relay_start(struct srd_qp *qp, const struct pkt_hdr *h, const uint8_t *payload);
static void relay_hold(struct srd_relay *rl, const struct pkt_hdr *h, const uint8_t *payload, int32_t d);

/* One request packet for qp, resp_lock held (srd_responder_rx, and the packets a relay held). */
static void rx_locked(struct srd_qp *qp, const struct pkt_hdr *h, const uint8_t *payload)
{
	if (!srd_resp_accepts(qp, h->sqpn))
		return;
	bool rc = qp->ttype == IBV_QPT_RC;
	int32_t d = psn_diff(h->psn, qp->epsn);
	if (qp->relay && qp->relay->busy && d >= 0) {
		/* a relayed request is being placed: later ones wait behind it, held in order up to
		 * RELAY_HOLD packets; the rest the requester sends again (a sequence NAK once the
		 * relay is answered) */
		relay_hold(qp->relay, h, payload, d);
		return;
	}
	if (!rc) {
		/* UC: a gap loses the message in progress; resynchronise on a first packet */
		if (d != 0) {
			if (!(h->flags & F_FIRST)) {
				qp->epsn = psn_add(h->psn, 1);
				qp->recv_in_progress = false;
				return;
			}
			qp->recv_in_progress = false;
			qp->epsn = h->psn;
		}
	} else if (d > 0) {
		if (!qp->nak_sent) {
			ST(nak_seq);
			qp->nak_sent = true;
			send_ack(qp, h->sqpn, qp->epsn, SYN_NAK_SEQ, 0);
		}
		return;
	} else if (d < 0) {
		duplicate(qp, h);
		return;
	}
	if (relay_wanted(qp, h)) {
		relay_start(qp, h, payload);
		return;
	}
	uint32_t advance = 1;
	struct srd_resp out = { 0 };
	struct srd_seg seg = { (uint8_t *)payload, h->op == OP_READ_REQ ? 0 : h->len, false };
	struct srd_req r = { .op = h->op, .flags = h->flags, .sqpn = h->sqpn, .imm = h->imm,
			     .rkey = h->rkey, .srqn = h->xsrqn, .len = h->len, .total = h->total, .va = h->va,
			     .cmp = h->cmp, .swap = h->swap, .src = &seg, .nsrc = 1 };
	srd_mr_rdlock();
	int s = srd_resp_execute(qp, &r, &out);
	srd_mr_unlock();
	if (s == RESP_IGNORE) {
		ST(invalid); /* an opcode no request has: dropped, the PSN stays expected */
		return;
	}
	if (s == SYN_RNR) {
		send_ack(qp, h->sqpn, qp->epsn, SYN_RNR, qp->attr.min_rnr_timer);
		return;
	}
	if (s == RESP_DROP) {
		qp->epsn = psn_add(h->psn, 1); /* UC drops it */
		return;
	}
	if (s != SYN_ACK) {
		if (rc || h->op == OP_READ_REQ || h->op == OP_CAS || h->op == OP_FAA)
			send_ack(qp, h->sqpn, h->psn, s, 0);
		return;
	}
	if (h->op == OP_READ_REQ) {
		if (!answer_read(qp, h, false))
			return;
		uint32_t mtu = mtu_bytes(qp->attr.path_mtu);
		advance = h->len ? (h->len + mtu - 1) / mtu : 1;
	} else if (h->op == OP_CAS || h->op == OP_FAA) {
		int slot = qp->atomic_cache_next++ & 15;
		qp->atomic_cache[slot].psn = h->psn;
		qp->atomic_cache[slot].val = out.orig;
		qp->atomic_cache[slot].valid = true;
		send_atomic_resp(qp, h->sqpn, h->psn, out.orig);
	}
	qp->epsn = psn_add(h->psn, advance);
	qp->nak_sent = false;
	if (rc && (h->op == OP_SEND || h->op == OP_WRITE) && wants_ack(h))
		send_ack(qp, h->sqpn, h->psn, SYN_ACK, 0);
	/* a receive completion is written only after the ACK is on the wire, as hardware
	 * acknowledges on placement: the application can never answer before the ACK */
	if (out.pend) {
		srd_batch_flush();
		/* src_qp 0: libibverbs defines it for UD only, and rxe fills it from a DETH alone */
		srd_recv_complete(qp, &out.rw, IBV_WC_SUCCESS, out.wc_op, out.wc_len,
				  (h->flags & F_INV) ? SRD_WC_INV : (h->flags & F_IMM) != 0, h->imm, 0, false, (h->flags & F_SOLICITED) != 0);
	}
}

void srd_responder_rx(struct srd_qp *qp, const struct pkt_hdr *h, const uint8_t *payload)
{
	srd_lock(&qp->resp_lock);
	rx_locked(qp, h, payload);
	srd_unlock(&qp->resp_lock);
}

/* ---------------------------------------------------------------- XRC across processes */

/*
 * A request to a TGT QP naming an XRC SRQ of another process of this host (the SRQ number's
 * port is not ours) is relayed: this process (A) hands the packet to the SRQ's (B) with
 * OP_XRC_RELAY and keeps the TGT QP's expected PSN where it is; B executes it on a shadow of
 * the TGT QP (xrc.c) with its own responder code (the SRQ's WQE, B's PD and keys, the SRQ's
 * CQ and its limit event, the completion written there) and answers with OP_XRC_RELAY_RESP;
 * A then acknowledges, NAKs or RNR-NAKs the requester as a local execution would have, and
 * moves on. Requests arriving meanwhile are dropped, and once the relay is answered one
 * sequence NAK makes the requester send them again, so the TGT QP's PSN order holds. No
 * thread waits on another process: a relay is a packet each way, its answer handled by
 * whichever thread takes it. A relay not answered is sent again every RELAY_RESEND_NS (B
 * answers a repeat from its record of the last answer, never executing twice); when the
 * SRQ's port is not listed by a live process of the TGT QP's domain (B exited, or no such
 * SRQ) or after RELAY_GIVEUP_NS, the request is NAKed as for an SRQ that does not exist.
 */
#define RELAY_RESEND_NS 10000000ull   /* 10 ms */
#define RELAY_GIVEUP_NS 10000000000ull /* 10 s */


static uint32_t g_incarnation;

static uint32_t next_incarnation(void)
{
	uint32_t v;
	do
		v = __atomic_add_fetch(&g_incarnation, 1, __ATOMIC_RELAXED) & SRD_HDR_PSN_MASK;
	while (!v);
	return v;
}

void srd_relay_free(struct srd_qp *qp)
{
	if (qp->relay)
		free(qp->relay->held);
	free(qp->relay);
	qp->relay = NULL;
}

static bool relay_op(int op)
{
	return op == OP_SEND || op == OP_WRITE || op == OP_CAS || op == OP_FAA;
}

/* An XRC request to a TGT QP for an SRQ number whose port is another process's (QPN table
 * read lock held). A READ is not relayed: it meets "no such SRQ" (invalid request). */
static bool relay_wanted(const struct srd_qp *qp, const struct pkt_hdr *h)
{
	if (qp->xrc != SRD_XRC_TGT || !(h->flags & F_XRC) || !relay_op(h->op) ||
	    (h->xsrqn & ~SRD_HDR_PSN_MASK) || !(h->xsrqn >> 8))
		return false;
	return !srd_net_port_ours((uint16_t)(h->xsrqn >> 8));
}

static void relay_to(const struct srd_relay *rl, struct sockaddr_in6 *to)
{
	static const struct in6_addr lo4 = { .s6_addr = { [10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1 } };
	memset(to, 0, sizeof(*to));
	to->sin6_family = AF_INET6;
	to->sin6_addr = lo4;
	to->sin6_port = htons((uint16_t)(rl->h.xsrqn >> 8));
}

static void relay_send(struct srd_qp *qp, struct srd_relay *rl, uint64_t now)
{
	struct sockaddr_in6 to;
	relay_to(rl, &to);
	struct pkt_hdr h = rl->h;
	srd_xmit(qp, &to, &h, h.len ? rl->payload : NULL, h.len);
	rl->sent_ns = now;
	srd_timer_hint(true);
}

/* resp_lock held; the packet stays unacknowledged, the PSN expected, until the answer */
static void relay_start(struct srd_qp *qp, const struct pkt_hdr *h, const uint8_t *payload)
{
	struct srd_relay *rl = qp->relay;
	if (!rl) {
		rl = calloc(1, sizeof(*rl));
		if (!rl)
			return; /* dropped: the requester sends it again */
		rl->inc = next_incarnation();
		__atomic_store_n(&qp->relay, rl, __ATOMIC_RELEASE); /* the agent's scan looks unlocked */
	}
	rl->h = *h;
	rl->h.op = OP_XRC_RELAY;
	rl->h.syndrome = h->op;
	rl->h.pad = (uint8_t)(qp->attr.qp_access_flags &
			      (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC));
	rl->h.dqpn = rl->inc;
	rl->h.sqpn = qp->ibqp.qp_num;
	srd_xrc_dom_key(qp->xrcd, rl->h.sgid);
	if (h->len)
		memcpy(rl->payload, payload, h->len);
	rl->sqpn = h->sqpn;
	rl->busy = true;
	rl->start_ns = srd_now_ns();
	relay_send(qp, rl, rl->start_ns);
}

/* A packet d PSNs after the one being relayed: held when it is the next in order and there is
 * room, else dropped (the requester sends it again). resp_lock held. */
static void relay_hold(struct srd_relay *rl, const struct pkt_hdr *h, const uint8_t *payload, int32_t d)
{
	if (d == 0 || d <= rl->nheld)
		return; /* the relayed packet again, or one held already */
	if (!rl->held)
		rl->held = malloc((size_t)RELAY_HOLD * MAX_PKT);
	if (!rl->held || d != rl->nheld + 1 || rl->nheld == RELAY_HOLD) {
		rl->dropped = true;
		return;
	}
	uint8_t *slot = rl->held[(rl->hhead + rl->nheld) % RELAY_HOLD];
	memcpy(slot, h, sizeof(*h));
	if (h->len && h->op != OP_READ_REQ)
		memcpy(slot + sizeof(*h), payload, h->len);
	rl->nheld++;
}

/* The relay was answered with an ACK: the held packets run now, in order, until one is relayed
 * in turn (the rest stay held behind it); with none left, a sequence NAK asks the requester
 * for what was dropped. resp_lock held. */
static void relay_drain(struct srd_qp *qp, struct srd_relay *rl)
{
	uint8_t pkt[MAX_PKT];
	while (rl->nheld && !rl->busy && ready(qp)) {
		const uint8_t *slot = rl->held[rl->hhead];
		struct pkt_hdr ph;
		memcpy(&ph, slot, sizeof(ph));
		memcpy(pkt, slot + sizeof(ph), ph.op == OP_READ_REQ ? 0 : ph.len);
		rl->hhead = (rl->hhead + 1) % RELAY_HOLD;
		rl->nheld--;
		rx_locked(qp, &ph, pkt);
	}
	if (rl->busy)
		return;
	rl->nheld = 0;
	if (rl->dropped && ready(qp)) {
		rl->dropped = false;
		ST(nak_seq);
		qp->nak_sent = true;
		send_ack(qp, rl->sqpn, qp->epsn, SYN_NAK_SEQ, 0);
	}
}

/* The answer to the relay: what a local execution would have sent, now. resp_lock held. */
static void relay_finish(struct srd_qp *qp, struct srd_relay *rl, int syn, enum ibv_event_type ev,
			 uint64_t orig)
{
	uint8_t op = rl->h.syndrome;
	uint32_t psn = rl->h.psn;
	rl->busy = false;
	if (syn != SYN_ACK) {
		/* the requester sends everything from psn again (RNR), or the QP is broken */
		rl->nheld = 0;
		rl->dropped = false;
	}
	if (syn == SYN_RNR) {
		send_ack(qp, rl->sqpn, psn, SYN_RNR, qp->attr.min_rnr_timer);
		return;
	}
	if (syn != SYN_ACK) {
		send_ack(qp, rl->sqpn, psn, syn, 0);
		responder_error(qp, ev);
		return;
	}
	if (op == OP_CAS || op == OP_FAA) {
		int slot = qp->atomic_cache_next++ & 15;
		qp->atomic_cache[slot].psn = psn;
		qp->atomic_cache[slot].val = orig;
		qp->atomic_cache[slot].valid = true;
		send_atomic_resp(qp, rl->sqpn, psn, orig);
	} else if (wants_ack(&rl->h)) {
		send_ack(qp, rl->sqpn, psn, SYN_ACK, 0);
	}
	qp->epsn = psn_add(psn, 1);
	qp->nak_sent = false;
	relay_drain(qp, rl);
}

static bool loopback_from(const struct sockaddr_in6 *from)
{
	const struct in6_addr *a = &from->sin6_addr;
	return from->sin6_family == AF_INET6 &&
	       (IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127));
}

void srd_relay_resp_rx(struct srd_qp *qp, const struct pkt_hdr *h, const struct sockaddr_in6 *from)
{
	srd_lock(&qp->resp_lock);
	struct srd_relay *rl = qp->relay;
	bool known = h->syndrome == SYN_ACK || h->syndrome == SYN_RNR || h->syndrome == SYN_NAK_INV ||
		     h->syndrome == SYN_NAK_ACCESS || h->syndrome == SYN_NAK_OP;
	if (!rl || !rl->busy || !ready(qp) || !known || !loopback_from(from) || h->psn != rl->h.psn ||
	    h->rkey != rl->inc || h->xsrqn != rl->h.xsrqn || ntohs(from->sin6_port) != (h->xsrqn >> 8)) {
		ST(invalid);
		srd_unlock(&qp->resp_lock);
		return;
	}
	enum ibv_event_type ev = (enum ibv_event_type)h->imm;
	if (ev != IBV_EVENT_QP_ACCESS_ERR && ev != IBV_EVENT_QP_FATAL)
		ev = IBV_EVENT_QP_REQ_ERR;
	relay_finish(qp, rl, h->syndrome, ev, h->cmp);
	srd_unlock(&qp->resp_lock);
}

bool srd_relay_service(struct srd_qp *qp, uint64_t now)
{
	if (!__atomic_load_n(&qp->relay, __ATOMIC_ACQUIRE))
		return false;
	srd_lock(&qp->resp_lock);
	struct srd_relay *rl = qp->relay;
	bool pending = rl && rl->busy;
	if (pending && !ready(qp)) {
		rl->busy = pending = false;
	} else if (pending && (int64_t)(now - rl->sent_ns) >= (int64_t)RELAY_RESEND_NS) {
		/* no answer yet: is the SRQ's process still there? (now was read before the scan:
		 * a relay started since then is younger than now says, hence the signed test) */
		if ((int64_t)(now - rl->start_ns) >= (int64_t)RELAY_GIVEUP_NS ||
		    !srd_xrc_port_held(qp->xrcd, (uint16_t)(rl->h.xsrqn >> 8))) {
			relay_finish(qp, rl, SYN_NAK_INV, IBV_EVENT_QP_REQ_ERR, 0);
			pending = false;
		} else {
			relay_send(qp, rl, now);
		}
	}
	srd_unlock(&qp->resp_lock);
	return pending;
}

/* In the SRQ's process: executes one relayed request on the shadow of its TGT QP and answers. */
void srd_relay_rx(const struct pkt_hdr *h, const uint8_t *payload, const struct sockaddr_in6 *from)
{
	uint16_t port = (uint16_t)(h->xsrqn >> 8);
	if (!loopback_from(from) || !relay_op(h->syndrome) || (h->xsrqn & ~SRD_HDR_PSN_MASK) ||
	    !srd_net_port_ours(port)) {
		ST(invalid);
		return;
	}
	int syn;
	enum ibv_event_type ev = IBV_EVENT_QP_REQ_ERR;
	uint64_t orig = 0;
	srd_xrc_shadow_lock();
	struct srd_shadow *sh = srd_xrc_shadow_get(ntohs(from->sin6_port), h->sqpn, h->dqpn);
	if (!sh) {
		srd_xrc_shadow_unlock();
		return; /* no memory: as a lost packet, the relay comes again */
	}
	struct srd_qp *q = &sh->qp;
	if (sh->last_valid && sh->last_psn == h->psn) {
		/* the relay again (our answer was lost): the same answer, nothing executed twice */
		syn = sh->last_syn;
		ev = (enum ibv_event_type)sh->last_ev;
		orig = sh->last_orig;
	} else if (q->state == IBV_QPS_ERR) {
		syn = SYN_NAK_INV; /* a TGT QP in ERR (not reset since) relays nothing */
	} else {
		syn = srd_xrc_shadow_select(sh, h->xsrqn, h->sgid, &ev);
		if (syn != SYN_ACK) {
			if (q->recv_in_progress && q->srq)
				srd_recv_complete(q, &q->cur_rwqe, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, false, 0,
						  0, false, true);
			q->recv_in_progress = q->write_in_progress = false;
			q->state = IBV_QPS_ERR;
		} else {
			q->attr.qp_access_flags = h->pad;
			struct srd_resp out = { 0 };
			struct srd_seg seg = { (uint8_t *)payload, h->len, false };
			struct srd_req r = { .op = h->syndrome, .flags = h->flags & ~F_XRC, .sqpn = h->sqpn,
					     .imm = h->imm, .rkey = h->rkey, .len = h->len, .total = h->total,
					     .va = h->va, .cmp = h->cmp, .swap = h->swap, .src = &seg, .nsrc = 1 };
			srd_mr_rdlock();
			syn = srd_resp_execute(q, &r, &out);
			srd_mr_unlock();
			if (syn == SYN_ACK) {
				orig = out.orig;
				if (out.pend) /* as a local XRC SRQ completion: the TGT QP's number, src_qp 0 */
					srd_recv_complete(q, &out.rw, IBV_WC_SUCCESS, out.wc_op, out.wc_len,
							  (h->flags & F_INV) ? SRD_WC_INV : (h->flags & F_IMM) != 0,
							  h->imm, 0, false, (h->flags & F_SOLICITED) != 0);
			} else if (syn != SYN_RNR) {
				if (syn != SYN_NAK_INV && syn != SYN_NAK_ACCESS && syn != SYN_NAK_OP)
					syn = SYN_NAK_INV; /* (nothing else can come of a checked request) */
				ev = (enum ibv_event_type)q->shadow_ev;
				q->state = IBV_QPS_ERR;
			}
		}
		if (syn != SYN_RNR) {
			sh->last_valid = true;
			sh->last_psn = h->psn;
			sh->last_syn = syn;
			sh->last_ev = (int)ev;
			sh->last_orig = orig;
		}
	}
	srd_xrc_shadow_unlock();
	struct pkt_hdr a;
	memset(&a, 0, sizeof(a));
	a.op = OP_XRC_RELAY_RESP;
	a.syndrome = (uint8_t)syn;
	a.dqpn = h->sqpn;
	a.psn = h->psn;
	a.imm = (uint32_t)ev;
	a.rkey = h->dqpn;
	a.cmp = orig;
	a.xsrqn = h->xsrqn;
	srd_xmit_port(port, from, &a, NULL, 0);
}

/* ---------------------------------------------------------------- UD */

static void write_grh(uint8_t *grh, const uint8_t *sgid, const uint8_t *dgid, uint32_t paylen)
{
	memset(grh, 0, 40);
	const struct in6_addr *s = (const struct in6_addr *)sgid;
	if (IN6_IS_ADDR_V4MAPPED(s)) {
		/* RoCE v2 over IPv4: the IPv4 header occupies the last 20 bytes */
		uint8_t *ip = grh + 20;
		uint16_t tot = htons((uint16_t)(paylen + 20 + 8 + 12 + 4));
		ip[0] = 0x45;
		memcpy(ip + 2, &tot, 2);
		ip[8] = 64;
		ip[9] = 17;
		memcpy(ip + 12, sgid + 12, 4);
		memcpy(ip + 16, dgid + 12, 4);
	} else {
		uint32_t vtf = htonl(6u << 28);
		uint16_t pl = htons((uint16_t)paylen);
		memcpy(grh, &vtf, 4);
		memcpy(grh + 4, &pl, 2);
		grh[6] = 0x1b;
		grh[7] = 64;
		memcpy(grh + 8, sgid, 16);
		memcpy(grh + 24, dgid, 16);
	}
}

/* Delivers one UD datagram to dst; resp_lock not held. */
void srd_ud_deliver(struct srd_qp *dst, uint32_t qkey, uint32_t src_qpn, const uint8_t *sgid,
		    const struct srd_seg *src, int nsrc, uint32_t len, bool imm, uint32_t imm_data,
		    bool sol)
{
	srd_lock(&dst->resp_lock);
	if (!ready(dst) || dst->ttype != IBV_QPT_UD || dst->attr.qkey != qkey) {
		srd_unlock(&dst->resp_lock);
		return;
	}
	struct srd_rwqe rw;
	struct ibv_sge rs[SRD_MAX_SGE];
	if (!srd_take_rwqe(dst, &rw, rs)) {
		srd_unlock(&dst->resp_lock);
		return; /* UD: no receive posted, datagram dropped */
	}
	struct srd_seg rseg[SRD_MAX_SGE];
	uint32_t room;
	if (srd_resolve_sgl(dst->rpd, rw.sge, rw.num_sge, IBV_ACCESS_LOCAL_WRITE | SRD_NEED_LAZY, rseg, &room)) {
		srd_recv_complete(dst, &rw, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, false, 0, 0, false, true);
		srd_unlock(&dst->resp_lock);
		return;
	}
	if (room < len + 40) {
		srd_recv_complete(dst, &rw, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, false, 0, 0, false, true);
		srd_unlock(&dst->resp_lock);
		return;
	}
	uint8_t grh[40];
	union ibv_gid dgid = dst->dev->gids[IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)sgid) && dst->dev->ngids > 1 ? 1 : 0];
	write_grh(grh, sgid, dgid.raw, len);
	/* an ODP receive buffer with a hole where the datagram lands: a local protection error */
	bool bad = srd_seg_copy_in(rseg, rw.num_sge, 0, grh, 40) != 0;
	uint32_t off = 40;
	for (int i = 0; i < nsrc && !bad; i++) {
		if (src[i].len && srd_seg_copy_in(rseg, rw.num_sge, off, src[i].p, src[i].len))
			bad = true;
		off += src[i].len;
	}
	if (bad) {
		srd_recv_complete(dst, &rw, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, false, 0, 0, false, true);
		srd_unlock(&dst->resp_lock);
		return;
	}
	srd_recv_complete(dst, &rw, IBV_WC_SUCCESS, IBV_WC_RECV, len + 40, imm, imm_data, src_qpn, true, sol);
	srd_unlock(&dst->resp_lock);
}

