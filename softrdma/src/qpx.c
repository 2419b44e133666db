/*
 * The extended QP: verbs_context->create_qp_ex (ibv_create_qp_ex with more than
 * IBV_QP_INIT_ATTR_PD), ibv_qp_to_qp_ex and the ibv_wr_* post-send API, whose
 * builders fill classic send WRs in a batch that wr_complete posts whole through
 * the requester's post_send.
 * Owns: a QP's batch (struct srd_xbatch; ibv_destroy_qp frees it with the QP).
 * Calls: qp (create, destroy), requester (post), closerace (the session's mark).
 */
#include "closerace.h"
#include "requester.h"
#include "qp.h"
#include "qpx.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* What rxe accepts per QP type (IBV_QP_EX_WITH_*). */
#define XOPS_RC (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND | \
		 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
		 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | \
		 IBV_QP_EX_WITH_SEND_WITH_INV)
#define XOPS_UC (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND | \
		 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV)
#define XOPS_UD (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)

static inline struct srd_xbatch *xb_of(struct ibv_qp_ex *qx)
{
	return container_of(qx, struct srd_qp, qpx)->xb;
}

/* A builder's new WR: wr_id and send flags come from the ibv_qp_ex fields. NULL (and
 * the batch's error set) when the batch is not open or the send queue has no room. */
static struct ibv_send_wr *x_new(struct ibv_qp_ex *qx, enum ibv_wr_opcode op)
{
	struct srd_qp *qp = container_of(qx, struct srd_qp, qpx);
	struct srd_xbatch *b = qp->xb;
	if (!b->open) {
		return NULL; /* a builder outside wr_start..wr_complete: ignored */
	}
	if (b->err)
		return NULL;
	if (b->n >= qp->sq_depth) {
		b->err = ENOSPC; /* more WRs than the send queue holds */
		return NULL;
	}
	struct ibv_send_wr *w = &b->wr[b->n];
	struct ibv_sge *sg = w->sg_list;
	memset(w, 0, sizeof(*w));
	w->sg_list = sg;
	w->wr_id = qx->wr_id;
	w->send_flags = qx->wr_flags & ~(unsigned)IBV_SEND_INLINE;
	w->opcode = op;
	b->n++;
	return w;
}

/* The WR the setters apply to: the newest one built. */
static struct ibv_send_wr *x_cur(struct ibv_qp_ex *qx)
{
	struct srd_xbatch *b = xb_of(qx);
	if (!b->open || b->err || !b->n)
		return NULL;
	return &b->wr[b->n - 1];
}

static void x_atomic_cmp_swp(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, uint64_t compare,
			     uint64_t swap)
{
	struct ibv_send_wr *w = x_new(qx, IBV_WR_ATOMIC_CMP_AND_SWP);
	if (w) {
		w->wr.atomic.rkey = rkey;
		w->wr.atomic.remote_addr = addr;
		w->wr.atomic.compare_add = compare;
		w->wr.atomic.swap = swap;
	}
}

static void x_atomic_fetch_add(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, uint64_t add)
{
	struct ibv_send_wr *w = x_new(qx, IBV_WR_ATOMIC_FETCH_AND_ADD);
	if (w) {
		w->wr.atomic.rkey = rkey;
		w->wr.atomic.remote_addr = addr;
		w->wr.atomic.compare_add = add;
	}
}

static void x_bind_mw(struct ibv_qp_ex *qx, struct ibv_mw *mw, uint32_t rkey,
		      const struct ibv_mw_bind_info *info)
{
	struct ibv_send_wr *w = x_new(qx, IBV_WR_BIND_MW);
	if (w) {
		w->bind_mw.mw = mw;
		w->bind_mw.rkey = rkey;
		if (info)
			w->bind_mw.bind_info = *info;
	}
}

static void x_local_inv(struct ibv_qp_ex *qx, uint32_t rkey)
{
	struct ibv_send_wr *w = x_new(qx, IBV_WR_LOCAL_INV);
	if (w)
		w->invalidate_rkey = rkey;
}

static void x_rdma(struct ibv_qp_ex *qx, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr, __be32 imm)
{
	struct ibv_send_wr *w = x_new(qx, op);
	if (w) {
		w->wr.rdma.rkey = rkey;
		w->wr.rdma.remote_addr = addr;
		w->imm_data = imm;
	}
}

static void x_rdma_read(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr)
{
	x_rdma(qx, IBV_WR_RDMA_READ, rkey, addr, 0);
}

static void x_rdma_write(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr)
{
	x_rdma(qx, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}

static void x_rdma_write_imm(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, __be32 imm)
{
	x_rdma(qx, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}

static void x_send(struct ibv_qp_ex *qx)
{
	x_new(qx, IBV_WR_SEND);
}

static void x_send_imm(struct ibv_qp_ex *qx, __be32 imm)
{
	struct ibv_send_wr *w = x_new(qx, IBV_WR_SEND_WITH_IMM);
	if (w)
		w->imm_data = imm;
}

static void x_send_inv(struct ibv_qp_ex *qx, uint32_t rkey)
{
	struct ibv_send_wr *w = x_new(qx, IBV_WR_SEND_WITH_INV);
	if (w)
		w->invalidate_rkey = rkey;
}

static void x_set_ud_addr(struct ibv_qp_ex *qx, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct ibv_send_wr *w = x_cur(qx);
	if (w) {
		w->wr.ud.ah = ah;
		w->wr.ud.remote_qpn = qpn;
		w->wr.ud.remote_qkey = qkey;
	}
}

static void x_set_xrc_srqn(struct ibv_qp_ex *qx, uint32_t remote_srqn)
{
	struct ibv_send_wr *w = x_cur(qx);
	if (w)
		w->qp_type.xrc.remote_srqn = remote_srqn;
}

static void x_set_sge_list(struct ibv_qp_ex *qx, size_t n, const struct ibv_sge *list)
{
	struct srd_qp *qp = container_of(qx, struct srd_qp, qpx);
	struct ibv_send_wr *w = x_cur(qx);
	if (!w)
		return;
	if (n > qp->cap.max_send_sge) {
		qp->xb->err = ENOSPC;
		return;
	}
	if (n)
		memcpy(w->sg_list, list, n * sizeof(*list));
	w->num_sge = (int)n;
	w->send_flags &= ~(unsigned)IBV_SEND_INLINE;
}

static void x_set_sge(struct ibv_qp_ex *qx, uint32_t lkey, uint64_t addr, uint32_t length)
{
	/* a zero length means no data (no SGE), as on rxe */
	struct ibv_sge s = { .addr = addr, .length = length, .lkey = lkey };
	x_set_sge_list(qx, length ? 1 : 0, &s);
}

static void x_set_inline_data_list(struct ibv_qp_ex *qx, size_t n, const struct ibv_data_buf *bufs)
{
	struct srd_qp *qp = container_of(qx, struct srd_qp, qpx);
	struct ibv_send_wr *w = x_cur(qx);
	if (!w)
		return;
	/* copied now: the caller may reuse its buffers as soon as this returns */
	uint8_t *dst = qp->xb->inl + (size_t)(w - qp->xb->wr) * qp->cap.max_inline_data;
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		if (total + bufs[i].length > qp->cap.max_inline_data) {
			qp->xb->err = ENOSPC;
			return;
		}
		if (bufs[i].length)
			memcpy(dst + total, bufs[i].addr, bufs[i].length);
		total += bufs[i].length;
	}
	w->sg_list[0].addr = (uintptr_t)dst;
	w->sg_list[0].length = (uint32_t)total;
	w->sg_list[0].lkey = 0;
	w->num_sge = total ? 1 : 0;
	w->send_flags |= IBV_SEND_INLINE;
}

static void x_set_inline_data(struct ibv_qp_ex *qx, void *addr, size_t length)
{
	struct ibv_data_buf b = { .addr = addr, .length = length };
	x_set_inline_data_list(qx, 1, &b);
}

static void x_start(struct ibv_qp_ex *qx)
{
	struct srd_xbatch *b = xb_of(qx);
	b->n = 0;
	b->err = 0;
	b->open = true;
	if (srd_close_race_checking() && !b->inside) {
		/* the session is inside the QP from wr_start to wr_complete/wr_abort (closerace.h);
		 * on a destroyed QP it is refused: wr_complete answers EINVAL */
		struct srd_qp *qp = container_of(qx, struct srd_qp, qpx);
		if (srd_close_race_enter(&qp->inside, "wr_start"))
			b->inside = true;
		else
			b->err = EINVAL;
	}
}

/* the session ends: out of the QP for the close-race check */
static void x_session_end(struct ibv_qp_ex *qx, struct srd_xbatch *b)
{
	if (b->inside) {
		b->inside = false;
		srd_close_race_exit(&container_of(qx, struct srd_qp, qpx)->inside);
	}
}

static int x_complete(struct ibv_qp_ex *qx)
{
	struct srd_xbatch *b = xb_of(qx);
	if (!b->open)
		return EINVAL;
	b->open = false;
	int rc = 0;
	if (b->err) {
		rc = b->err;
	} else if (b->n) {
		for (int i = 0; i < b->n; i++)
			b->wr[i].next = i + 1 < b->n ? &b->wr[i + 1] : NULL;
		struct ibv_send_wr *bad = NULL;
		rc = srd_post_send_wrs(&qx->qp_base, b->wr, &bad, true);
	}
	x_session_end(qx, b);
	return rc;
}

static void x_abort(struct ibv_qp_ex *qx)
{
	struct srd_xbatch *b = xb_of(qx);
	b->open = false;
	b->n = 0;
	x_session_end(qx, b);
}

static struct srd_xbatch *xbatch_new(struct srd_qp *qp, uint64_t ops)
{
	struct srd_xbatch *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->ops = ops;
	size_t nsge = qp->cap.max_send_sge ? qp->cap.max_send_sge : 1;
	b->wr = calloc((size_t)qp->sq_cap, sizeof(*b->wr));
	b->sge = calloc((size_t)qp->sq_cap * nsge, sizeof(*b->sge));
	b->inl = qp->cap.max_inline_data ? malloc((size_t)qp->sq_cap * qp->cap.max_inline_data) : NULL;
	if (!b->wr || !b->sge || (qp->cap.max_inline_data && !b->inl)) {
		free(b->wr);
		free(b->sge);
		free(b->inl);
		free(b);
		return NULL;
	}
	for (int i = 0; i < qp->sq_cap; i++)
		b->wr[i].sg_list = b->sge + (size_t)i * nsge;
	struct ibv_qp_ex *x = &qp->qpx;
	/* as rxe: only the opcodes asked for get a builder; the setters are always there */
	if (ops & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP) x->wr_atomic_cmp_swp = x_atomic_cmp_swp;
	if (ops & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) x->wr_atomic_fetch_add = x_atomic_fetch_add;
	if (ops & IBV_QP_EX_WITH_BIND_MW) x->wr_bind_mw = x_bind_mw;
	if (ops & IBV_QP_EX_WITH_LOCAL_INV) x->wr_local_inv = x_local_inv;
	if (ops & IBV_QP_EX_WITH_RDMA_READ) x->wr_rdma_read = x_rdma_read;
	if (ops & IBV_QP_EX_WITH_RDMA_WRITE) x->wr_rdma_write = x_rdma_write;
	if (ops & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) x->wr_rdma_write_imm = x_rdma_write_imm;
	if (ops & IBV_QP_EX_WITH_SEND) x->wr_send = x_send;
	if (ops & IBV_QP_EX_WITH_SEND_WITH_IMM) x->wr_send_imm = x_send_imm;
	if (ops & IBV_QP_EX_WITH_SEND_WITH_INV) x->wr_send_inv = x_send_inv;
	x->wr_set_ud_addr = x_set_ud_addr;
	x->wr_set_xrc_srqn = x_set_xrc_srqn;
	x->wr_set_inline_data = x_set_inline_data;
	x->wr_set_inline_data_list = x_set_inline_data_list;
	x->wr_set_sge = x_set_sge;
	x->wr_set_sge_list = x_set_sge_list;
	x->wr_start = x_start;
	x->wr_complete = x_complete;
	x->wr_abort = x_abort;
	return b;
}

/* verbs_context->create_qp_ex (ibv_create_qp_ex with more than IBV_QP_INIT_ATTR_PD). */
struct ibv_qp *srd_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr)
{
	if (!attr) {
		errno = EINVAL;
		return NULL;
	}
	const uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
			       IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	if ((attr->comp_mask & ~known) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	uint64_t ops = 0;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		ops = attr->send_ops_flags;
		uint64_t sup = attr->qp_type == IBV_QPT_RC || attr->qp_type == IBV_QPT_XRC_SEND ? XOPS_RC :
			       attr->qp_type == IBV_QPT_UC ? XOPS_UC : attr->qp_type == IBV_QPT_UD ? XOPS_UD : 0;
		if (ops & ~sup) {
			errno = EOPNOTSUPP;
			return NULL;
		}
	}
	struct ibv_qp *ibqp;
	if (attr->qp_type == IBV_QPT_XRC_RECV) {
		/* a TGT QP: in an XRC domain, no PD, no queues */
		if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd || attr->xrcd->context != context ||
		    (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
			errno = EINVAL;
			return NULL;
		}
		return srd_qp_create(context, NULL, (struct ibv_qp_init_attr *)attr,
				 container_of(attr->xrcd, struct srd_xrcd, ibxrcd));
	}
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd || attr->pd->context != context) {
		errno = EINVAL;
		return NULL;
	}
	ibqp = srd_qp_create(context, attr->pd, (struct ibv_qp_init_attr *)attr, NULL);
	if (!ibqp || !(attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
		return ibqp;
	struct srd_qp *qp = srd_qp_of(ibqp);
	qp->xb = xbatch_new(qp, ops);
	if (!qp->xb) {
		ibv_destroy_qp(ibqp);
		errno = ENOMEM;
		return NULL;
	}
	return ibqp;
}

SRD_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *ibqp)
{
	/* as libibverbs: only a QP created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS has one */
	struct srd_qp *qp = srd_qp_of(ibqp);
	return qp->xb ? &qp->qpx : NULL;
}
