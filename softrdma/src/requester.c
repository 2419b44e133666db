/*
 * The requester: posting sends, running the send queue (segmentation,
 * the RC window, fences and max_rd_atomic), delivery to a QP of this process
 * in the caller's thread through the responder, UD sends, and the RC
 * requester's reliability: cumulative ACKs, go-back-N on a sequence NAK or a
 * timeout, RNR waits, READ/atomic responses.
 * Owns: the requester half of struct srd_qp (send ring, PSNs, timers), under qp->sq_lock.
 * Calls: responder, sq, pd, device (addresses), faults, net.
 */
#include "requester.h"
#include "shm.h"
#include "responder.h"
#include "sq.h"
#include "pd.h"
#include "device.h"
#include "faults.h"
#include "net.h"
#include "rq.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* SOFTRDMA_DEBUG: trace retransmission timeouts (read once) */
static bool debug_trace(void)
{
	static int on = -1;
	int v = __atomic_load_n(&on, __ATOMIC_RELAXED);
	if (v < 0) {
		v = getenv("SOFTRDMA_DEBUG") != NULL;
		__atomic_store_n(&on, v, __ATOMIC_RELAXED);
	}
	return v;
}

/* The send side failed: complete the oldest WQE with st, then error the QP. */
static void requester_fail(struct srd_qp *qp, enum ibv_wc_status st)
{
	if (qp->sq_tail != qp->sq_head)
		srd_sq_complete_tail(qp, st);
	srd_qp_to_error(qp, true);
}
void srd_req_reset(struct srd_qp *qp)
{
	qp->snd_psn = qp->una_psn = qp->sent_psn = 0;
	qp->outstanding_rd = 0;
	qp->timer_deadline_ns = 0;
	qp->rnr_wait = false;
	__atomic_store_n(&qp->shm_stamp, 0, __ATOMIC_RELAXED);
}

/* The PSNs (packets) a message of opcode op and len bytes takes. */
static inline uint32_t msg_pkts(const struct srd_qp *qp, enum ibv_wr_opcode op, uint32_t len)
{
	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD)
		return 1;
	/* the MTU is a power of two (128 << path_mtu): a shift, not a division */
	unsigned shift = 7u + (unsigned)qp->attr.path_mtu;
	return len ? (uint32_t)(((uint64_t)len + (1u << shift) - 1) >> shift) : 1;
}

static uint32_t wqe_pkts(struct srd_qp *qp, const struct srd_swqe *w)
{
	return msg_pkts(qp, w->opcode, w->length);
}

static void arm_timer(struct srd_qp *qp)
{
	uint64_t t = timeout_ns(qp->attr.timeout);
	if (!t) {
		qp->timer_deadline_ns = 0;
		return;
	}
	qp->timer_deadline_ns = srd_now_ns() + t;
	srd_timer_hint(true);
}

static bool is_local_op(const struct srd_swqe *w);

/*
 * Whether the last packet of w may go without asking for an ACK: w is an unsignaled SEND or
 * WRITE of an RC QP, and a SEND or WRITE already queued right behind it goes out next in the
 * same run of the send queue (no fence, no READ or atomic to wait for, inside the window), so
 * its ACK, cumulative, covers w as well. A WRITE chained with the SEND that announces it (the
 * form of transports without immediate data) then costs one ACK, not two. If the later packet
 * is lost, the timer resends from w's, as for any missing ACK. sq_lock held.
 */
static bool ack_left_to_next(struct srd_qp *qp, const struct srd_swqe *w)
{
	if (qp->ttype != IBV_QPT_RC || qp->sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED) || srd_is_rd(w) ||
	    is_local_op(w))
		return false;
	unsigned next = qp->sq_next_tx + 1;
	if (next == qp->sq_head)
		return false;
	const struct srd_swqe *n = &qp->sq[next & (unsigned)(qp->sq_cap - 1)];
	if (srd_is_rd(n) || is_local_op(n) || (n->send_flags & IBV_SEND_FENCE))
		return false;
	uint32_t last = psn_add(w->first_psn, w->npkts + wqe_pkts(qp, n) - 1);
	return psn_diff(last, qp->una_psn) < WINDOW;
}

/* Sends packet k of w (for READ: a request starting at response k). False when the payload
 * could not be gathered (a hole in an ODP region since its admission): nothing is sent. */
static bool send_pkt(struct srd_qp *qp, struct srd_swqe *w, uint32_t k, const struct srd_seg *src,
		     int nsrc, uint32_t *sent)
{
	uint32_t mtu = mtu_bytes(qp->attr.path_mtu);
	struct pkt_hdr h;
	memset(&h, 0, sizeof(h));
	h.dqpn = qp->attr.dest_qp_num;
	h.sqpn = qp->ibqp.qp_num;
	h.psn = psn_add(w->first_psn, k);
	h.total = w->length;
	h.rkey = w->rkey;
	if (qp->xrc == SRD_XRC_INI) {
		h.flags = F_XRC;
		h.xsrqn = w->xrc_srqn;
	}
	memcpy(h.sgid, qp->dev->gids[qp->attr.ah_attr.grh.sgid_index].raw, 16);
	uint8_t buf[4096];
	uint32_t len = 0;
	*sent = 1;
	switch (w->opcode) {
	case IBV_WR_RDMA_READ: {
		/* chunks sit at fixed multiples of READ_CHUNK inside the message */
		uint32_t n = READ_CHUNK - k % READ_CHUNK;
		if (n > w->npkts - k)
			n = w->npkts - k;
		h.op = OP_READ_REQ;
		h.va = w->remote_addr + (uint64_t)k * mtu;
		uint64_t end = (uint64_t)(k + n) * mtu;
		if (end > w->length)
			end = w->length;
		h.len = (uint32_t)(end - (uint64_t)k * mtu);
		h.flags |= F_FIRST | F_LAST;
		*sent = n;
		srd_xmit(qp, &qp->peer, &h, NULL, 0);
		return true;
	}
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		h.op = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? OP_CAS : OP_FAA;
		h.va = w->remote_addr;
		h.cmp = w->compare_add;
		h.swap = w->swap;
		h.flags |= F_FIRST | F_LAST;
		srd_xmit(qp, &qp->peer, &h, NULL, 0);
		return true;
	default:
		break;
	}
	h.op = (w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) ? OP_WRITE : OP_SEND;
	uint32_t off = k * mtu;
	len = w->length - off < mtu ? w->length - off : mtu;
	if (w->length == 0)
		len = 0;
	if (len && srd_seg_copy_out(src, nsrc, off, buf, len))
		return false;
	h.len = len;
	h.va = w->remote_addr + off;
	if (k == 0)
		h.flags |= F_FIRST;
	if (k + 1 == w->npkts) {
		h.flags |= F_LAST;
		if (ack_left_to_next(qp, w))
			h.flags |= F_NOACK;
		if (w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
			h.flags |= F_IMM;
			h.imm = w->imm;
		}
		if (w->opcode == IBV_WR_SEND_WITH_INV) {
			h.flags |= F_INV;
			h.imm = w->imm;
		}
		if (w->send_flags & IBV_SEND_SOLICITED)
			h.flags |= F_SOLICITED;
	}
	if ((k + 1) % ACKREQ_EVERY == 0)
		h.flags |= F_ACKREQ;
	srd_xmit(qp, &qp->peer, &h, buf, len);
	return true;
}

/* A UD send; false when the gather list had a hole in an ODP region (nothing is sent). */
static bool ud_send(struct srd_qp *qp, struct srd_swqe *w, const struct srd_seg *src, int nsrc)
{
	/* an MTU at most: a gather list with ODP memory is copied here first, so that a hole is the
	 * sender's local error before any receive WQE is taken */
	uint8_t buf[4096];
	struct srd_seg flat = { buf, w->length, false };
	for (int i = 0; i < nsrc; i++) {
		if (src[i].odp && src[i].len) {
			if (srd_seg_copy_out(src, nsrc, 0, buf, w->length))
				return false;
			src = &flat;
			nsrc = 1;
			break;
		}
	}
	const union ibv_gid *sgid = &qp->dev->gids[w->ud_av.grh.sgid_index < qp->dev->ngids ? w->ud_av.grh.sgid_index : 0];
	bool imm = w->opcode == IBV_WR_SEND_WITH_IMM;
	bool sol = (w->send_flags & IBV_SEND_SOLICITED) != 0;
	if (!srd_faults_enabled() && srd_gid_is_local(&w->ud_av.grh.dgid)) {
		srd_net_rdlock();
		struct srd_qp *dst = srd_net_lookup(w->ud_qpn);
		if (dst) {
			srd_ud_deliver(dst, w->ud_qkey, qp->ibqp.qp_num, sgid->raw, src, nsrc, w->length, imm, w->imm, sol);
			srd_net_unlock();
			return true;
		}
		srd_net_unlock();
	}
	struct pkt_hdr h;
	memset(&h, 0, sizeof(h));
	h.op = OP_UD_SEND;
	h.flags = F_FIRST | F_LAST | (imm ? F_IMM : 0) | (sol ? F_SOLICITED : 0);
	h.imm = w->imm;
	h.dqpn = w->ud_qpn;
	h.sqpn = qp->ibqp.qp_num;
	h.rkey = w->ud_qkey;
	h.len = w->length;
	memcpy(h.sgid, sgid->raw, 16);
	if (src != &flat && srd_seg_copy_out(src, nsrc, 0, buf, w->length))
		return false;
	struct sockaddr_in6 to;
	srd_gid_to_sockaddr(&w->ud_av.grh.dgid, (uint16_t)(w->ud_qpn >> 8), qp->dev->ifindex, &to);
	srd_xmit(qp, &to, &h, buf, w->length);
	return true;
}

/* ---------------------------------------------------------------- in-process delivery */

/* X_QUEUE: the direct post did nothing; the WR goes to the send queue as usual */
enum { X_DONE = 0, X_RNR = -1, X_LOST = -2, X_QUEUE = -3 };

/* The request a send WR or WQE of qp makes of its responder: the whole message. */
static inline void req_init(struct srd_req *r, const struct srd_qp *qp, enum ibv_wr_opcode op,
			    unsigned send_flags, uint32_t imm, uint32_t rkey, uint32_t srqn, uint32_t len,
			    uint64_t va, uint64_t cmp, uint64_t swap, const struct srd_seg *src, int nsrc,
			    const struct srd_seg *ldst, int nldst)
{
	/* every field assigned (the switch sets op): an initializer would zero the struct first,
	 * which gcc does with a rep stos once the struct is this large */
	r->flags = F_FIRST | F_LAST;
	r->sqpn = qp->ibqp.qp_num;
	r->imm = imm;
	r->rkey = rkey;
	r->srqn = srqn;
	r->len = r->total = len;
	r->va = va;
	r->cmp = cmp;
	r->swap = swap;
	r->src = src;
	r->nsrc = nsrc;
	r->ldst = ldst;
	r->nldst = nldst;
	switch (op) {
	case IBV_WR_SEND_WITH_IMM: r->flags |= F_IMM; r->op = OP_SEND; break;
	case IBV_WR_SEND_WITH_INV: r->flags |= F_INV; r->op = OP_SEND; break;
	case IBV_WR_SEND: r->op = OP_SEND; break;
	case IBV_WR_RDMA_WRITE_WITH_IMM: r->flags |= F_IMM; /* fall through */
	case IBV_WR_RDMA_WRITE: r->op = OP_WRITE; break;
	case IBV_WR_RDMA_READ: r->op = OP_READ_REQ; break;
	case IBV_WR_ATOMIC_CMP_AND_SWP: r->op = OP_CAS; break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD: r->op = OP_FAA; break;
	default: r->op = 0; break;
	}
	if (send_flags & IBV_SEND_SOLICITED)
		r->flags |= F_SOLICITED;
	if (qp->xrc == SRD_XRC_INI)
		r->flags |= F_XRC;
}

/* Executes request r of qp (a message of npkts PSNs) directly on dst, a QP of this process,
 * through the responder, which places a READ's data and an atomic's value in r->ldst.
 * Returns X_* or an ibv_wc_status (>0) for the requester; X_LOST only when nothing was done.
 * sq_lock of qp held, MR and QPN table read locks held. */
static int deliver_local(struct srd_qp *qp, struct srd_qp *dst, const struct srd_req *r, uint32_t npkts,
			 uint64_t *rnr_delay)
{
	srd_lock(&dst->resp_lock);
	if (!srd_resp_accepts(dst, qp->ibqp.qp_num) || dst->ttype != qp->ttype) {
		srd_unlock(&dst->resp_lock);
		return X_LOST; /* like a packet to a QP that is not listening */
	}
	struct srd_resp out;
	int s = srd_resp_execute(dst, r, &out);
	int ret = X_DONE;
	if (s == SYN_ACK) {
		if (out.pend)
			srd_recv_complete(dst, &out.rw, IBV_WC_SUCCESS, out.wc_op, out.wc_len,
					  (r->flags & F_INV) ? SRD_WC_INV : (r->flags & F_IMM) != 0, r->imm, 0, false,
					  (r->flags & F_SOLICITED) != 0);
	} else if (s == SYN_RNR) {
		*rnr_delay = rnr_ns(dst->attr.min_rnr_timer);
		ret = X_RNR;
	} else if (s == RESP_LOCAL_FAULT) {
		ret = IBV_WC_LOC_PROT_ERR; /* our own ODP memory had a hole */
	} else if (s != RESP_DROP) { /* UC: a dropped message is done */
		ret = (int)syn_status(s);
	}
	if (ret == X_DONE)
		dst->epsn = psn_add(dst->epsn, npkts);
	srd_unlock(&dst->resp_lock);
	return ret;
}

static bool is_local_op(const struct srd_swqe *w)
{
	return w->opcode == IBV_WR_BIND_MW || w->opcode == IBV_WR_LOCAL_INV;
}

/* Local operations at the tail whose predecessors completed complete now (in order). */
static void complete_local_tail(struct srd_qp *qp)
{
	while (qp->sq_tail != qp->sq_next_tx) {
		struct srd_swqe *w = &qp->sq[qp->sq_tail % (unsigned)qp->sq_cap];
		if (!is_local_op(w) || !w->local_done)
			break;
		srd_sq_complete_tail(qp, IBV_WC_SUCCESS);
	}
}

/*
 * A local operation (memory window bind, local invalidate) reached by the send queue: it is
 * executed once, in order, sends nothing and completes after everything posted before it
 * (rxe: IBV_WC_MW_BIND_ERR for a failed bind, IBV_WC_LOC_QP_OP_ERR for a failed
 * invalidation, and the QP goes to ERR). False when the send queue stops here.
 */
static bool local_op(struct srd_qp *qp, struct srd_swqe *w)
{
	if (!w->local_done) {
		int bad = w->opcode == IBV_WR_BIND_MW
			  ? srd_mw_bind(qp->ibqp.pd, qp, qp->ibqp.qp_num, w->mw, w->mw_rkey, w->mw_new_rkey,
					w->mw_mr_lkey, w->mw_addr, w->mw_length, w->mw_access)
			  : srd_mw_invalidate(qp->ibqp.pd, w->imm);
		if (bad) {
			if (qp->sq_next_tx == qp->sq_tail || qp->ttype != IBV_QPT_RC) {
				while (qp->sq_tail != qp->sq_next_tx)
					srd_sq_complete_tail(qp, IBV_WC_SUCCESS);
				requester_fail(qp, w->opcode == IBV_WR_BIND_MW ? IBV_WC_MW_BIND_ERR
									       : IBV_WC_LOC_QP_OP_ERR);
			}
			return false;
		}
		w->local_done = true;
	}
	if (!w->psn_assigned) {
		w->psn_assigned = true;
		w->npkts = 0;
		w->first_psn = qp->snd_psn;
	}
	qp->sq_next_tx++;
	complete_local_tail(qp);
	return true;
}

/* Gives w, the send queue's next WQE to transmit, its npkts PSNs; sq_lock held. */
static void assign_psn(struct srd_qp *qp, struct srd_swqe *w, uint32_t npkts)
{
	w->npkts = npkts;
	w->first_psn = qp->snd_psn;
	qp->snd_psn = psn_add(qp->snd_psn, npkts);
	w->psn_assigned = true;
	w->tx_pkt = 0;
	w->resp_pkt = 0;
	w->rereq_pkt = 0;
	if (qp->ttype == IBV_QPT_RC && srd_is_rd(w))
		qp->outstanding_rd++;
}

/* What follows the in-process execution of w, the send queue's next WQE to transmit, with
 * result r (deliver_local's): false when the send queue stops here. sq_lock held. */
static bool local_outcome(struct srd_qp *qp, struct srd_swqe *w, int r, uint64_t rnr_delay)
{
	enum ibv_qp_type type = qp->ttype;
	if (r == X_DONE) {
		qp->una_psn = psn_add(w->first_psn, w->npkts);
		qp->sq_next_tx++;
		srd_sq_complete_tail(qp, IBV_WC_SUCCESS);
		if (type == IBV_QPT_RC) {
			qp->retry_left = qp->attr.retry_cnt;
			qp->rnr_left = qp->attr.rnr_retry;
		}
		return true;
	}
	if (type == IBV_QPT_UC && r != IBV_WC_LOC_PROT_ERR) {
		/* unreliable: a message nobody took is simply gone (our own memory's hole is not) */
		qp->sq_next_tx++;
		srd_sq_complete_tail(qp, IBV_WC_SUCCESS);
		return true;
	}
	if (r == X_RNR) {
		if (qp->rnr_left == 0) {
			requester_fail(qp, IBV_WC_RNR_RETRY_EXC_ERR);
			return false;
		}
		if (qp->rnr_left != 7)
			qp->rnr_left--;
		qp->rnr_wait = true;
		qp->timer_deadline_ns = srd_now_ns() + rnr_delay;
		srd_timer_hint(true);
		return false;
	}
	if (r == X_LOST) {
		if (!qp->timer_deadline_ns)
			arm_timer(qp);
		return false;
	}
	requester_fail(qp, (enum ibv_wc_status)r);
	return false;
}

/* Runs the send queue as far as it can go; sq_lock held. */
void srd_sq_progress(struct srd_qp *qp)
{
	int st = __atomic_load_n(&qp->state, __ATOMIC_ACQUIRE);
	if (st == IBV_QPS_ERR) {
		srd_flush_sq_locked(qp);
		return;
	}
	if (st != IBV_QPS_RTS || qp->rnr_wait)
		return;
	enum ibv_qp_type type = qp->ttype;
	bool local = type != IBV_QPT_UD && qp->peer_local && !srd_faults_enabled();
	complete_local_tail(qp);
	while (qp->sq_next_tx != qp->sq_head) {
		struct srd_swqe *w = &qp->sq[qp->sq_next_tx & (unsigned)(qp->sq_cap - 1)];
		if (is_local_op(w)) {
			if (!local_op(qp, w))
				return;
			continue;
		}
		if (type == IBV_QPT_RC && !w->psn_assigned) {
			int max_rd = qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1;
			if (srd_is_rd(w) && qp->outstanding_rd >= max_rd)
				break;
			if ((w->send_flags & IBV_SEND_FENCE) && qp->outstanding_rd > 0)
				break;
		}
		if (!w->psn_assigned)
			assign_psn(qp, w, wqe_pkts(qp, w));
		struct srd_seg lseg[SRD_MAX_SGE];
		struct srd_seg inl = { w->inline_buf, w->length, false };
		const struct srd_seg *src = &inl;
		int nsrc = 1;
		srd_mr_rdlock();
		if (!((w->send_flags & IBV_SEND_INLINE) && w->inline_buf)) {
			int need = srd_is_rd(w) ? IBV_ACCESS_LOCAL_WRITE : 0;
			if (srd_resolve_sgl(qp->ibqp.pd, w->sge, w->num_sge, need, lseg, NULL)) {
				srd_mr_unlock();
				/* everything before this WQE must complete first */
				if (qp->sq_next_tx == qp->sq_tail || type != IBV_QPT_RC) {
					while (qp->sq_tail != qp->sq_next_tx)
						srd_sq_complete_tail(qp, IBV_WC_SUCCESS);
					requester_fail(qp, IBV_WC_LOC_PROT_ERR);
				}
				return;
			}
			src = lseg;
			nsrc = w->num_sge;
		}
		if (type == IBV_QPT_UD) {
			/*
			 * IBA C10-93.1.1, as rxe does it: a UD message longer than the port's active
			 * MTU emits no packet and raises no error; the send completes successfully
			 * and nothing arrives.
			 */
			bool sent = w->length > mtu_bytes(srd_active_mtu()) || ud_send(qp, w, src, nsrc);
			srd_mr_unlock();
			if (!sent) {
				requester_fail(qp, IBV_WC_LOC_PROT_ERR);
				return;
			}
			qp->sq_next_tx++;
			srd_sq_complete_tail(qp, IBV_WC_SUCCESS);
			continue;
		}
		if (local) {
			uint64_t rnr_delay = 0;
			srd_net_rdlock();
			struct srd_qp *dst = srd_net_lookup(qp->attr.dest_qp_num);
			int r = X_LOST;
			if (dst) {
				struct srd_req req;
				req_init(&req, qp, w->opcode, w->send_flags, w->imm, w->rkey, w->xrc_srqn, w->length,
					 w->remote_addr, w->compare_add, w->swap, src, nsrc, lseg, w->num_sge);
				r = deliver_local(qp, dst, &req, w->npkts, &rnr_delay);
			}
			srd_net_unlock();
			srd_mr_unlock();
			if (!local_outcome(qp, w, r, rnr_delay))
				return;
			continue;
		}
		/* remote: stream packets while the window allows */
		bool blocked = false;
		srd_batch_begin();
		while (w->tx_pkt < w->npkts) {
			if (type == IBV_QPT_RC &&
			    psn_diff(psn_add(w->first_psn, w->tx_pkt), qp->una_psn) >= WINDOW) {
				blocked = true;
				break;
			}
			uint32_t sent;
			if (!send_pkt(qp, w, w->tx_pkt, src, nsrc, &sent)) {
				/* the gather list lost a page since its admission: as a failed resolution,
				 * once everything before this WQE completed (else resolved again then) */
				srd_batch_end();
				srd_mr_unlock();
				if (qp->sq_next_tx == qp->sq_tail || type != IBV_QPT_RC) {
					while (qp->sq_tail != qp->sq_next_tx)
						srd_sq_complete_tail(qp, IBV_WC_SUCCESS);
					requester_fail(qp, IBV_WC_LOC_PROT_ERR);
				} else if (!qp->timer_deadline_ns) {
					arm_timer(qp);
				}
				return;
			}
			w->tx_pkt += sent;
			uint32_t end = psn_add(w->first_psn, w->tx_pkt);
			if (psn_diff(end, qp->sent_psn) > 0)
				qp->sent_psn = end;
		}
		srd_batch_end();
		srd_mr_unlock();
		if (type == IBV_QPT_RC && !qp->timer_deadline_ns)
			arm_timer(qp);
		if (blocked)
			return;
		qp->sq_next_tx++;
		if (type == IBV_QPT_UC)
			srd_sq_complete_tail(qp, IBV_WC_SUCCESS);
	}
}

/* Go-back-N: resend from the packet with PSN psn (or the oldest outstanding).
 * read_exact: re-request a READ from psn itself rather than from its chunk's start (the
 * responder has executed that chunk: a later response of it or after it arrived). */
static void go_back(struct srd_qp *qp, uint32_t psn, bool read_exact)
{
	for (unsigned i = qp->sq_tail; i != qp->sq_head; i++) {
		struct srd_swqe *w = &qp->sq[i % (unsigned)qp->sq_cap];
		if (!w->psn_assigned)
			break;
		int32_t d = psn_diff(psn, w->first_psn);
		if (d < (int32_t)w->npkts) {
			uint32_t k = d > 0 ? (uint32_t)d : 0;
			if (w->opcode == IBV_WR_RDMA_READ)
				/* re-request the whole chunk holding the first missing response: the
				 * responder knows chunks only by their first PSN */
				k = read_exact ? w->resp_pkt : w->resp_pkt - w->resp_pkt % READ_CHUNK;
			if (srd_is_rd(w) && w->opcode != IBV_WR_RDMA_READ)
				k = 0;
			w->tx_pkt = k;
			qp->sq_next_tx = i;
			/* a READ re-requested at a gap: later requests went out and their answers
			 * are on the way; they are not sent again (the timeout covers their losses) */
			if (read_exact && w->opcode == IBV_WR_RDMA_READ)
				return;
			/* later WQEs start over from their first packet */
			for (unsigned j = i + 1; j != qp->sq_head; j++) {
				struct srd_swqe *x = &qp->sq[j % (unsigned)qp->sq_cap];
				if (!x->psn_assigned)
					break;
				x->tx_pkt = 0;
				if (x->opcode == IBV_WR_RDMA_READ)
					/* a READ with every response in is not asked again */
					x->tx_pkt = x->resp_pkt == x->npkts ? x->npkts
						: x->resp_pkt - x->resp_pkt % READ_CHUNK;
			}
			return;
		}
	}
}

/* lim, or the first missing response of the oldest READ/atomic still waiting for one if that
 * is older: the oldest unacknowledged PSN never moves past a response that has not arrived,
 * else the re-requested responses would be dropped as stale (outside the window). */
static uint32_t rd_limit(const struct srd_qp *qp, uint32_t lim)
{
	for (unsigned i = qp->sq_tail; i != qp->sq_head; i++) {
		const struct srd_swqe *w = &qp->sq[i % (unsigned)qp->sq_cap];
		if (!w->psn_assigned)
			break;
		if (srd_is_rd(w) && w->resp_pkt < w->npkts) {
			uint32_t got = psn_add(w->first_psn, w->resp_pkt);
			if (psn_diff(lim, got) > 0)
				lim = got;
			break;
		}
	}
	return lim;
}

/*
 * Cumulative acknowledgment up to and including psn; sq_lock held. A WQE the ACK covers
 * completes even when go-back-N rewound the send queue to it and it was not sent again yet
 * (an RNR wait stops the queue between the rewind and the resend): the responder has all of
 * it (srd_sq_complete_tail moves the next WQE to send past it). The oldest unacknowledged
 * PSN then never passes a WQE still on the queue.
 */
static void ack_upto(struct srd_qp *qp, uint32_t psn)
{
	bool progress = false;
	while (qp->sq_tail != qp->sq_head) {
		struct srd_swqe *w = &qp->sq[qp->sq_tail % (unsigned)qp->sq_cap];
		if (!w->psn_assigned)
			break;
		uint32_t last = psn_add(w->first_psn, w->npkts - 1);
		if (srd_is_rd(w)) {
			/* a READ/atomic completes with its last response, which may have come
			 * while an older WQE still waited for its ACK */
			if (w->resp_pkt != w->npkts)
				break;
		} else if (psn_diff(psn, last) < 0) {
			break;
		}
		srd_sq_complete_tail(qp, IBV_WC_SUCCESS);
		progress = true;
	}
	uint32_t lim = rd_limit(qp, psn_add(psn, 1));
	if (psn_diff(lim, qp->una_psn) > 0) {
		qp->una_psn = lim;
		progress = true;
	}
	if (progress) {
		qp->retry_left = qp->attr.retry_cnt;
		qp->rnr_left = qp->attr.rnr_retry;
		if (qp->una_psn == qp->snd_psn && qp->sq_tail == qp->sq_next_tx) {
			qp->timer_deadline_ns = 0;
			qp->rnr_wait = false; /* what the RNR wait was for was taken after all */
		} else if (!qp->rnr_wait) {
			arm_timer(qp); /* (an RNR wait keeps its own deadline) */
		}
	}
}

/*
 * A response (ACK, NAK, RNR NAK, READ or atomic response) is valid only while the
 * requester runs (RTS, SQD) and only for a PSN inside the outstanding window: at or
 * after the oldest unacknowledged PSN and before the next PSN not yet transmitted.
 * Anything else (a PSN never sent, a stale one) is dropped without touching state.
 */
static bool response_valid(const struct srd_qp *qp, const struct pkt_hdr *h)
{
	int st = __atomic_load_n(&qp->state, __ATOMIC_ACQUIRE);
	if ((st != IBV_QPS_RTS && st != IBV_QPS_SQD) || qp->ttype != IBV_QPT_RC)
		return false;
	return psn_diff(h->psn, qp->una_psn) >= 0 && psn_diff(h->psn, qp->sent_psn) < 0;
}

void srd_requester_rx(struct srd_qp *qp, const struct pkt_hdr *h, const uint8_t *payload)
{
	srd_lock(&qp->sq_lock);
	bool dbg = debug_trace();
	if (dbg)
		qp->dbg_rx_ns = srd_now_ns();
	if (!response_valid(qp, h)) {
		ST(invalid);
		qp->dbg_rx_invalid += dbg;
		srd_unlock(&qp->sq_lock);
		return;
	}
	qp->dbg_rx_valid += dbg;
	if (h->op == OP_ACK) {
		switch (h->syndrome) {
		case SYN_ACK:
			ack_upto(qp, h->psn);
			break;
		case SYN_NAK_SEQ:
			ack_upto(qp, psn_add(h->psn, SRD_HDR_PSN_MASK)); /* psn - 1 */
			go_back(qp, h->psn, false);
			break;
		case SYN_RNR:
			ST(rnr);
			if (qp->rnr_wait)
				break; /* already waiting to resend this PSN: a repeat counts once */
			ack_upto(qp, psn_add(h->psn, SRD_HDR_PSN_MASK));
			if (qp->rnr_left == 0) {
				requester_fail(qp, IBV_WC_RNR_RETRY_EXC_ERR);
				break;
			}
			if (qp->rnr_left != 7)
				qp->rnr_left--;
			go_back(qp, h->psn, false);
			qp->rnr_wait = true;
			qp->timer_deadline_ns = srd_now_ns() + rnr_ns(h->imm);
			srd_timer_hint(true);
			break;
		default: {
			ack_upto(qp, psn_add(h->psn, SRD_HDR_PSN_MASK));
			requester_fail(qp, syn_status(h->syndrome));
			break;
		}
		}
		srd_sq_progress(qp);
		srd_unlock(&qp->sq_lock);
		return;
	}
	/* READ / atomic responses: find the WQE whose PSN range holds h->psn */
	for (unsigned i = qp->sq_tail; i != qp->sq_head; i++) {
		struct srd_swqe *w = &qp->sq[i % (unsigned)qp->sq_cap];
		if (!w->psn_assigned)
			break;
		int32_t d = psn_diff(h->psn, w->first_psn);
		if (d < 0 || d >= (int32_t)w->npkts)
			continue;
		if (!srd_is_rd(w) || (h->op == OP_READ_RESP) != (w->opcode == IBV_WR_RDMA_READ))
			break; /* a response of the wrong kind */
		if ((uint32_t)d != w->resp_pkt) {
			/*
			 * A response beyond the next one expected: the ones between were lost (or
			 * are late). As IB requesters do, re-request at once from the first missing
			 * response instead of waiting out the timeout; once per missing PSN, so the
			 * rest of the old answer, still arriving, does not trigger it again.
			 */
			if ((uint32_t)d > w->resp_pkt && w->rereq_pkt != w->resp_pkt + 1) {
				w->rereq_pkt = w->resp_pkt + 1;
				ST(read_gap);
				go_back(qp, psn_add(w->first_psn, w->resp_pkt), true);
			}
			break; /* out of order: dropped */
		}
		if (h->op == OP_READ_RESP) {
			uint32_t mtu = mtu_bytes(qp->attr.path_mtu), off = (uint32_t)d * mtu;
			if (h->len != (w->length - off < mtu ? w->length - off : mtu))
				break; /* not the length this response must have */
		}
		/* everything before this WQE is implicitly acknowledged */
		ack_upto(qp, psn_add(w->first_psn, SRD_HDR_PSN_MASK));
		struct srd_seg lseg[SRD_MAX_SGE];
		srd_mr_rdlock();
		int bad = srd_resolve_sgl(qp->ibqp.pd, w->sge, w->num_sge, IBV_ACCESS_LOCAL_WRITE, lseg, NULL);
		/* a copy meeting a hole in an ODP region (unmapped since the resolution just
		 * made) is the same local protection error */
		if (!bad) {
			if (h->op == OP_READ_RESP && h->len)
				bad = srd_seg_copy_in(lseg, w->num_sge, (uint32_t)d * mtu_bytes(qp->attr.path_mtu),
						      payload, h->len);
			else if (h->op == OP_ATOMIC_RESP)
				bad = srd_seg_copy_in(lseg, w->num_sge, 0, (const uint8_t *)&h->cmp, 8);
		}
		srd_mr_unlock();
		if (bad) {
			if (qp->sq_tail == i)
				requester_fail(qp, IBV_WC_LOC_PROT_ERR);
			break;
		}
		w->resp_pkt++;
		qp->retry_left = qp->attr.retry_cnt; /* forward progress */
		/* a response of a later READ while an earlier one misses some: una stays there */
		uint32_t lim = rd_limit(qp, psn_add(h->psn, 1));
		if (psn_diff(lim, qp->una_psn) > 0)
			qp->una_psn = lim;
		if (w->resp_pkt == w->npkts && qp->sq_tail == i) {
			qp->una_psn = psn_add(w->first_psn, w->npkts);
			srd_sq_complete_tail(qp, IBV_WC_SUCCESS);
			qp->retry_left = qp->attr.retry_cnt;
			/* later WQEs already acknowledged may complete now */
			while (qp->sq_tail != qp->sq_next_tx) {
				struct srd_swqe *x = &qp->sq[qp->sq_tail % (unsigned)qp->sq_cap];
				if (srd_is_rd(x) && x->resp_pkt == x->npkts)
					srd_sq_complete_tail(qp, IBV_WC_SUCCESS);
				else
					break;
			}
			/* and una moves to the oldest PSN still owed: the new tail's first missing
			 * response (or first packet), or past everything assigned */
			uint32_t owed = qp->snd_psn;
			if (qp->sq_tail != qp->sq_head) {
				struct srd_swqe *x = &qp->sq[qp->sq_tail % (unsigned)qp->sq_cap];
				if (x->psn_assigned)
					owed = psn_add(x->first_psn, srd_is_rd(x) ? x->resp_pkt : 0);
			}
			if (psn_diff(owed, qp->una_psn) > 0)
				qp->una_psn = owed;
			if (qp->una_psn == qp->snd_psn && qp->sq_tail == qp->sq_next_tx)
				qp->timer_deadline_ns = 0;
			else
				arm_timer(qp);
		} else {
			arm_timer(qp);
		}
		break;
	}
	srd_sq_progress(qp);
	srd_unlock(&qp->sq_lock);
}

int srd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	if (srd_close_race_checking()) {
		struct srd_qp *qp = srd_qp_of(ibqp);
		if (!srd_close_race_enter(&qp->inside, "post_send")) {
			*bad = wr;
			return EINVAL;
		}
		int rc = srd_post_send_wrs(ibqp, wr, bad, false);
		srd_close_race_exit(&qp->inside);
		return rc;
	}
	return srd_post_send_wrs(ibqp, wr, bad, false);
}

/* The checks of a send WR at post time: 0, or the errno the post returns for it (EINVAL, or
 * ENOMEM for a full send queue). *len: its payload bytes; *inl: its data goes inline. */
static inline int wr_check(const struct srd_qp *qp, const struct ibv_send_wr *wr, uint32_t *len_out,
			   bool *inl_out)
{
	enum ibv_qp_type t = qp->ttype;
	bool ok;
	switch (wr->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		ok = true;
		break;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
		ok = t == IBV_QPT_RC;
		break;
	case IBV_WR_BIND_MW:
		ok = (t == IBV_QPT_RC || t == IBV_QPT_UC) && wr->bind_mw.mw;
		break;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		ok = t != IBV_QPT_UD;
		break;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		ok = t == IBV_QPT_RC;
		break;
	default:
		ok = false;
	}
	if (!ok || wr->num_sge < 0 || wr->num_sge > (int)qp->cap.max_send_sge)
		return EINVAL;
	if (qp->sq_head - qp->sq_tail >= (unsigned)qp->sq_depth)
		return ENOMEM;
	uint64_t len = 0;
	for (int i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	if (wr->opcode == IBV_WR_BIND_MW || wr->opcode == IBV_WR_LOCAL_INV)
		len = 0; /* no data: the scatter list is ignored */
	bool inl = (wr->send_flags & IBV_SEND_INLINE) &&
		   (wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_SEND_WITH_IMM ||
		    wr->opcode == IBV_WR_SEND_WITH_INV ||
		    wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM);
	if (inl && len > qp->cap.max_inline_data)
		return EINVAL;
	if (len > 0x80000000ull)
		return EINVAL;
	if (t == IBV_QPT_UD && !wr->wr.ud.ah)
		return EINVAL;
	if (srd_is_rd(&(struct srd_swqe){ .opcode = wr->opcode }) && wr->opcode != IBV_WR_RDMA_READ &&
	    (wr->num_sge < 1 || len != 8))
		return EINVAL;
	*len_out = (uint32_t)len;
	*inl_out = inl;
	return 0;
}

/* Writes checked WR wr as the send queue's next WQE (at sq_head, not yet counted) and returns it. */
static struct srd_swqe *wqe_fill(struct srd_qp *qp, const struct ibv_send_wr *wr, uint32_t len, bool inl)
{
	struct srd_swqe *w = &qp->sq[qp->sq_head & (unsigned)(qp->sq_cap - 1)];
	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->send_flags = wr->send_flags & ~(inl ? 0u : (unsigned)IBV_SEND_INLINE);
	w->imm = wr->imm_data;
	w->num_sge = wr->num_sge;
	w->length = len;
	w->signaled = qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	w->psn_assigned = false;
	w->local_done = false;
	w->tx_pkt = w->resp_pkt = w->rereq_pkt = 0;
	w->xrc_srqn = wr->qp_type.xrc.remote_srqn;
	if (wr->opcode == IBV_WR_BIND_MW || wr->opcode == IBV_WR_LOCAL_INV)
		w->num_sge = 0;
	if (wr->opcode == IBV_WR_BIND_MW) {
		const struct ibv_mw_bind_info *bi = &wr->bind_mw.bind_info;
		w->mw = wr->bind_mw.mw;
		w->mw_rkey = wr->bind_mw.mw->rkey;
		w->mw_new_rkey = wr->bind_mw.rkey;
		w->mw_mr_lkey = bi->mr ? bi->mr->lkey : 0;
		w->mw_addr = bi->addr;
		w->mw_length = bi->mr ? bi->length : 0;
		w->mw_access = bi->mw_access_flags;
	}
	if (w->num_sge == 0) {
		/* nothing to copy */
	} else if (inl) {
		uint32_t off = 0;
		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(w->inline_buf + off, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
			off += wr->sg_list[i].length;
		}
		w->num_sge = 0;
	} else if (wr->num_sge == 1) {
		w->sge[0] = wr->sg_list[0]; /* the common case: no call to memcpy */
	} else {
		memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
	}
	if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->compare_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
	} else if (qp->ttype == IBV_QPT_UD) {
		w->ud_av = container_of(wr->wr.ud.ah, struct srd_ah, ibah)->attr;
		w->ud_qpn = wr->wr.ud.remote_qpn;
		/* a q_key with the high bit set means "use the QP's own" */
		w->ud_qkey = (wr->wr.ud.remote_qkey & 0x80000000u) ? qp->attr.qkey : wr->wr.ud.remote_qkey;
	} else {
		w->remote_addr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
	}
	return w;
}

/*
 * Whether checked WR wr of qp may be executed straight from the WR (post_direct): the QP
 * sends (RTS) to a peer in this process with no fault injection, is not waiting out an RNR,
 * and its send queue is empty (nothing posted earlier is pending, so nothing is overtaken and
 * no fence or max_rd_atomic can hold it back); a connected, non-XRC QP; a SEND, WRITE (with or
 * without immediate), READ or atomic. sq_lock held.
 */
static inline bool direct_ok(const struct srd_qp *qp, const struct ibv_send_wr *wr)
{
	if (qp->sq_head != qp->sq_tail || !qp->peer_local || qp->rnr_wait || qp->xrc != SRD_XRC_NONE ||
	    __atomic_load_n(&qp->state, __ATOMIC_ACQUIRE) != IBV_QPS_RTS)
		return false;
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		break;
	default:
		return false;
	}
	return (qp->ttype == IBV_QPT_RC || qp->ttype == IBV_QPT_UC) && !srd_faults_enabled();
}

/*
 * The direct post: checked WR wr (len bytes, inline or not) executed on the peer without a
 * WQE written to the send queue and read back, in the caller's thread, as srd_sq_progress
 * would execute it as the queue's only WQE. Returns X_QUEUE when nothing was done (a local
 * key that does not resolve, a peer gone or not listening: the send queue then meets the
 * same and answers it as it always does); else deliver_local's result for a message of
 * *npkts PSNs. sq_lock held; direct_ok(qp, wr).
 */
static int post_direct(struct srd_qp *qp, const struct ibv_send_wr *wr, uint32_t len, bool inl,
		       uint32_t *npkts, uint64_t *rnr_delay)
{
	struct srd_seg seg[SRD_MAX_SGE];
	int n = wr->num_sge;
	bool rd = wr->opcode == IBV_WR_RDMA_READ || wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		  wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
	srd_mr_rdlock();
	if (inl) {
		/* inline data is the caller's memory, read during the post: no key */
		for (int i = 0; i < n; i++)
			seg[i] = (struct srd_seg){ (uint8_t *)(uintptr_t)wr->sg_list[i].addr,
						   wr->sg_list[i].length, false };
	} else if (srd_resolve_sgl(qp->ibqp.pd, wr->sg_list, n, rd ? IBV_ACCESS_LOCAL_WRITE : 0, seg, NULL)) {
		srd_mr_unlock();
		return X_QUEUE;
	}
	srd_net_rdlock();
	struct srd_qp *dst = srd_net_lookup(qp->attr.dest_qp_num);
	int r = X_QUEUE;
	if (dst) {
		struct srd_req req;
		const struct srd_seg *src = seg;
		if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
			req_init(&req, qp, wr->opcode, wr->send_flags, wr->imm_data, wr->wr.atomic.rkey, 0, len,
				 wr->wr.atomic.remote_addr, wr->wr.atomic.compare_add, wr->wr.atomic.swap, src, n, seg, n);
		else
			req_init(&req, qp, wr->opcode, wr->send_flags, wr->imm_data, wr->wr.rdma.rkey, 0, len,
				 wr->wr.rdma.remote_addr, 0, 0, src, n, seg, n);
		*npkts = msg_pkts(qp, wr->opcode, len);
		r = deliver_local(qp, dst, &req, *npkts, rnr_delay);
		if (r == X_LOST)
			r = X_QUEUE; /* not listening: nothing was done */
	}
	srd_net_unlock();
	srd_mr_unlock();
	return r;
}

/* whole: post every WR of the list or none (ibv_wr_complete); else up to the first bad one */
int srd_post_send_wrs(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad, bool whole)
{
	struct srd_qp *qp = srd_qp_of(ibqp);
	int rc = 0;
	srd_lock(&qp->sq_lock);
	unsigned head0 = qp->sq_head;
	int st = qp->state;
	if (st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_RTR || qp->xrc == SRD_XRC_TGT) {
		srd_unlock(&qp->sq_lock);
		*bad = wr;
		return EINVAL;
	}
	bool queued = false; /* a WQE went to the send queue: run it */
	for (; wr; wr = wr->next) {
		uint32_t len;
		bool inl;
		rc = wr_check(qp, wr, &len, &inl);
		if (rc)
			break;
		/* with the send queue empty, a WR for a peer in this process runs from the WR; a list
		 * posted whole runs only after every WR of it passed its checks */
		if ((!whole || !wr->next) && direct_ok(qp, wr)) {
			uint32_t npkts = 0;
			uint64_t rnr_delay = 0;
			int r = post_direct(qp, wr, len, inl, &npkts, &rnr_delay);
			if (r == X_DONE) {
				/* as local_outcome for the queue's only WQE */
				qp->snd_psn = psn_add(qp->snd_psn, npkts);
				qp->una_psn = qp->snd_psn;
				if (qp->ttype == IBV_QPT_RC) {
					qp->retry_left = qp->attr.retry_cnt;
					qp->rnr_left = qp->attr.rnr_retry;
				}
				if (qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED)) {
					enum ibv_wr_opcode op = wr->opcode;
					srd_sq_cqe(qp, wr->wr_id, IBV_WC_SUCCESS, srd_wc_opcode(op),
						   op == IBV_WR_RDMA_READ ? len :
						   op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 8 : 0);
				}
				continue;
			}
			if (r != X_QUEUE) {
				/* executed without completing (RNR, an error the responder found, UC's
				 * lost message): the WQE is queued as transmitted once, and the send
				 * queue goes on from there as it would have */
				struct srd_swqe *w = wqe_fill(qp, wr, len, inl);
				qp->sq_head++;
				assign_psn(qp, w, npkts);
				local_outcome(qp, w, r, rnr_delay);
				queued = true;
				continue;
			}
		}
		wqe_fill(qp, wr, len, inl);
		qp->sq_head++;
		queued = true;
	}
	if (rc) {
		*bad = wr;
		if (whole)
			qp->sq_head = head0; /* nothing of the list was transmitted yet: drop it all */
	}
	if (queued) {
		/* a peer in this process is reached without packets (unless faults are injected,
		 * whose packets then leave one by one): no batch to open and close */
		bool batch = !qp->peer_local || qp->ttype == IBV_QPT_UD;
		if (batch)
			srd_batch_begin();
		srd_sq_progress(qp);
		if (batch)
			srd_batch_end();
	}
	srd_unlock(&qp->sq_lock);
	return rc;
}

/* The agent's visit of a QP: a kick runs the send queue; an expired timer ends an RNR
 * wait or retransmits from the oldest unacknowledged PSN (go-back-N), up to retry_cnt
 * times. Returns whether a timer is still armed. */
bool srd_requester_service(struct srd_qp *qp, bool kick, uint64_t now)
{
	if (!kick && !qp->timer_deadline_ns)
		return false;
	srd_lock(&qp->sq_lock);
	if (qp->timer_deadline_ns && now >= qp->timer_deadline_ns) {
		qp->timer_deadline_ns = 0;
		if (qp->rnr_wait) {
			qp->rnr_wait = false;
		} else if (qp->sq_tail != qp->sq_next_tx || qp->una_psn != qp->snd_psn ||
			   (qp->peer_local && qp->sq_tail != qp->sq_head)) {
			ST(timeouts);
			if (debug_trace()) {
				struct srd_swqe *w = &qp->sq[qp->sq_tail % (unsigned)qp->sq_cap];
				/* when (ms), since this QP's previous timeout and its last response from
				 * the peer (ms), and the responses since the previous timeout: a starved
				 * agent shows as long gaps, a silent peer as no responses at all */
				fprintf(stderr, "softrdma: timeout qp %06x una %06x snd %06x tail %u next %u head %u "
					"op %d first %06x npk %u tx %u resp %u retry %d t %.3f prev %.3f lastrx %.3f "
					"rx %u/%u\n", qp->ibqp.qp_num,
					qp->una_psn, qp->snd_psn, qp->sq_tail, qp->sq_next_tx, qp->sq_head,
					w->opcode, w->first_psn, w->npkts, w->tx_pkt, w->resp_pkt, qp->retry_left,
					now / 1e6, qp->dbg_timeout_ns ? (now - qp->dbg_timeout_ns) / 1e6 : -1.0,
					qp->dbg_rx_ns ? (now - qp->dbg_rx_ns) / 1e6 : -1.0, qp->dbg_rx_valid,
					qp->dbg_rx_invalid);
			}
			qp->dbg_timeout_ns = now;
			qp->dbg_rx_valid = qp->dbg_rx_invalid = 0;
			/*
			 * "Lost" or "not read yet": a peer on this host whose ring still holds what we
			 * sent it last (or a response waiting in our own ring) is alive and only not
			 * scheduled; a NIC would have answered for it, so the wait costs no retry and
			 * nothing is sent again (it is all still queued). A peer whose ring's owner is
			 * gone will never answer: the QP fails now, as it would after its retries.
			 */
			int peer = srd_net_peer_state(qp);
			if (peer == SRD_PEER_GONE) {
				ST(peer_gone);
				requester_fail(qp, IBV_WC_RETRY_EXC_ERR);
			} else if (peer == SRD_PEER_UNREAD || srd_shm_pending()) {
				ST(unread_waits);
				arm_timer(qp);
			} else if (qp->retry_left == 0) {
				requester_fail(qp, IBV_WC_RETRY_EXC_ERR);
			} else {
				qp->retry_left--;
				go_back(qp, qp->una_psn, false);
			}
		}
		kick = true;
	}
	if (kick)
		srd_sq_progress(qp);
	bool armed = qp->timer_deadline_ns != 0;
	srd_unlock(&qp->sq_lock);
	return armed;
}
