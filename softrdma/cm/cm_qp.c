/*
 * softrdma librdmacm, QP unit: the QP attributes of each state a connection moves an id's QP
 * through (rdma_init_qp_attr), the moves themselves, and the QPs, CQs and SRQs the library
 * creates for ids (rdma_create_qp and rdma_create_srq, with their _ex forms and destroys).
 * Calls cm_id (is_ud), cm_device (default_pd) and cm_util.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_verbs.h>

#include "cm_units.h"

/* ------------------------------------------------------------ QP helpers */

uint8_t clamp_u8(unsigned v, unsigned max)
{
	return v > max ? max : v;
}

static int init_qp_attr_locked(struct cm_id *idp, struct ibv_qp_attr *a, int *mask)
{
	enum ibv_qp_state st = a->qp_state;

	if (!idp->dev)
		return fail(EINVAL);
	memset(a, 0, sizeof(*a));
	a->qp_state = st;
	*mask = IBV_QP_STATE;
	switch (st) {
	case IBV_QPS_INIT:
		a->pkey_index = 0;
		a->port_num = idp->id.port_num;
		*mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (is_ud(idp)) {
			a->qkey = idp->qkey;
			*mask |= IBV_QP_QKEY;
		} else {
			if (!idp->remote_known)
				a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
			else
				a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
					(idp->responder_resources ?
					 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC : 0);
			*mask |= IBV_QP_ACCESS_FLAGS;
		}
		return 0;
	case IBV_QPS_RTR:
		if (is_ud(idp))
			return 0;
		if (!idp->remote_known)
			return fail(EINVAL);
		a->path_mtu = idp->remote_mtu && idp->remote_mtu < idp->mtu ? idp->remote_mtu : idp->mtu;
		a->dest_qp_num = idp->remote_qpn;
		a->rq_psn = idp->remote_psn;
		a->ah_attr.is_global = 1;
		a->ah_attr.grh.dgid = idp->dgid;
		a->ah_attr.grh.sgid_index = idp->gid_index;
		a->ah_attr.grh.hop_limit = DEFAULT_HOP_LIMIT;
		a->ah_attr.grh.traffic_class = idp->tos;
		a->ah_attr.port_num = idp->id.port_num;
		*mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (idp->id.qp_type == IBV_QPT_RC) {
			a->max_dest_rd_atomic = idp->responder_resources;
			a->min_rnr_timer = 0;
			*mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
		return 0;
	case IBV_QPS_RTS:
		a->sq_psn = idp->psn;
		*mask |= IBV_QP_SQ_PSN;
		if (idp->id.qp_type == IBV_QPT_RC) {
			if (!idp->remote_known)
				return fail(EINVAL);
			a->timeout = idp->ack_timeout;
			a->retry_cnt = idp->retry_count;
			a->rnr_retry = idp->rnr_retry_count;
			a->max_rd_atomic = idp->initiator_depth;
			*mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_MAX_QP_RD_ATOMIC;
		}
		return 0;
	default:
		return fail(EINVAL);
	}
}

static int modify_qp_to(struct cm_id *idp, enum ibv_qp_state st)
{
	struct ibv_qp_attr a;
	int mask, rc;

	a.qp_state = st;
	if (init_qp_attr_locked(idp, &a, &mask))
		return -1;
	rc = ibv_modify_qp(idp->id.qp, &a, mask);
	if (rc)
		return fail(rc > 0 ? rc : EINVAL);
	return 0;
}

/* INIT again (access flags now known), then RTR and RTS, as librdmacm does. */
int qp_connect(struct cm_id *idp)
{
	if (!idp->id.qp)
		return 0;
	if (modify_qp_to(idp, IBV_QPS_INIT) || modify_qp_to(idp, IBV_QPS_RTR) ||
	    modify_qp_to(idp, IBV_QPS_RTS))
		return -1;
	return 0;
}

void qp_to_err(struct cm_id *idp)
{
	struct ibv_qp_attr a;

	if (!idp->id.qp)
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	ibv_modify_qp(idp->id.qp, &a, IBV_QP_STATE);
}

CM_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	int rc;

	if (!id || !qp_attr || !qp_attr_mask)
		return fail(EINVAL);
	pthread_mutex_lock(&g_lock);
	rc = init_qp_attr_locked((struct cm_id *)id, qp_attr, qp_attr_mask);
	pthread_mutex_unlock(&g_lock);
	return rc;
}

/* ------------------------------------------------------- QPs, CQs and SRQs */

static void destroy_cqs(struct rdma_cm_id *id)
{
	if (id->recv_cq) {
		ibv_destroy_cq(id->recv_cq);
		if (id->send_cq == id->recv_cq)
			id->send_cq = NULL;
		id->recv_cq = NULL;
	}
	if (id->recv_cq_channel) {
		ibv_destroy_comp_channel(id->recv_cq_channel);
		if (id->send_cq_channel == id->recv_cq_channel)
			id->send_cq_channel = NULL;
		id->recv_cq_channel = NULL;
	}
	if (id->send_cq) {
		ibv_destroy_cq(id->send_cq);
		id->send_cq = NULL;
	}
	if (id->send_cq_channel) {
		ibv_destroy_comp_channel(id->send_cq_channel);
		id->send_cq_channel = NULL;
	}
}

static int create_cq(struct rdma_cm_id *id, int size, struct ibv_comp_channel **chp, struct ibv_cq **cqp)
{
	*chp = ibv_create_comp_channel(id->verbs);
	if (!*chp)
		return -1;
	*cqp = ibv_create_cq(id->verbs, size > 0 ? size : 1, id, *chp, 0);
	return *cqp ? 0 : -1;
}

CM_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct cm_id *idp = (struct cm_id *)id;
	struct ibv_qp *qp;
	int made_send = 0, made_recv = 0, err;

	if (!id || !attr || !id->verbs || id->qp)
		return fail(EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : default_pd(idp);
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		if (!attr->pd)
			return fail(ENOMEM);
	}
	if (attr->pd->context != id->verbs)
		return fail(EINVAL);
	if (is_ud(idp) ? attr->qp_type != IBV_QPT_UD :
	    attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UC)
		return fail(EINVAL);
	if (!attr->recv_cq) {
		made_recv = 1;
		if (create_cq(id, attr->cap.max_recv_wr, &id->recv_cq_channel, &id->recv_cq))
			goto fail_cq;
		attr->recv_cq = id->recv_cq;
	}
	if (!attr->send_cq) {
		made_send = 1;
		if (create_cq(id, attr->cap.max_send_wr, &id->send_cq_channel, &id->send_cq))
			goto fail_cq;
		attr->send_cq = id->send_cq;
	}
	if (!attr->srq && id->srq)
		attr->srq = id->srq;
	if (attr->comp_mask == IBV_QP_INIT_ATTR_PD) {
		struct ibv_qp_init_attr ia;

		memset(&ia, 0, sizeof(ia));
		ia.qp_context = attr->qp_context;
		ia.send_cq = attr->send_cq;
		ia.recv_cq = attr->recv_cq;
		ia.srq = attr->srq;
		ia.cap = attr->cap;
		ia.qp_type = attr->qp_type;
		ia.sq_sig_all = attr->sq_sig_all;
		qp = ibv_create_qp(attr->pd, &ia);
		if (qp)
			attr->cap = ia.cap;
	} else {
		qp = ibv_create_qp_ex(id->verbs, attr);
	}
	if (!qp)
		goto fail_cq;
	pthread_mutex_lock(&g_lock);
	id->qp = qp;
	id->qp_type = attr->qp_type;
	if (modify_qp_to(idp, IBV_QPS_INIT) ||
	    (is_ud(idp) && (modify_qp_to(idp, IBV_QPS_RTR) || modify_qp_to(idp, IBV_QPS_RTS)))) {
		err = errno;
		id->qp = NULL;
		pthread_mutex_unlock(&g_lock);
		ibv_destroy_qp(qp);
		errno = err;
		goto fail_cq;
	}
	if (!id->pd)
		id->pd = attr->pd;
	pthread_mutex_unlock(&g_lock);
	return 0;

fail_cq:
	err = errno ? errno : ENOMEM;
	if (made_recv) {
		if (id->recv_cq)
			ibv_destroy_cq(id->recv_cq);
		if (id->recv_cq_channel)
			ibv_destroy_comp_channel(id->recv_cq_channel);
		id->recv_cq = NULL;
		id->recv_cq_channel = NULL;
		attr->recv_cq = NULL;
	}
	if (made_send) {
		if (id->send_cq)
			ibv_destroy_cq(id->send_cq);
		if (id->send_cq_channel)
			ibv_destroy_comp_channel(id->send_cq_channel);
		id->send_cq = NULL;
		id->send_cq_channel = NULL;
		attr->send_cq = NULL;
	}
	return fail(err);
}

CM_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex ex;
	int rc;

	if (!id || !qp_init_attr)
		return fail(EINVAL);
	memset(&ex, 0, sizeof(ex));
	ex.qp_context = qp_init_attr->qp_context;
	ex.send_cq = qp_init_attr->send_cq;
	ex.recv_cq = qp_init_attr->recv_cq;
	ex.srq = qp_init_attr->srq;
	ex.cap = qp_init_attr->cap;
	ex.qp_type = qp_init_attr->qp_type;
	ex.sq_sig_all = qp_init_attr->sq_sig_all;
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd ? pd : id->pd;
	rc = rdma_create_qp_ex(id, &ex);
	if (rc)
		return rc;
	qp_init_attr->send_cq = ex.send_cq;
	qp_init_attr->recv_cq = ex.recv_cq;
	qp_init_attr->srq = ex.srq;
	qp_init_attr->cap = ex.cap;
	return 0;
}

CM_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (!id || !id->qp)
		return;
	ibv_destroy_qp(id->qp);
	id->qp = NULL;
	destroy_cqs(id);
}

CM_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq_init_attr ia;
	struct ibv_pd *pd;

	if (!id || !attr || !id->verbs || id->srq)
		return fail(EINVAL);
	if (attr->comp_mask & ~(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD))
		return fail(ENOSYS);
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC)
		return fail(ENOSYS);
	pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) && attr->pd ? attr->pd :
		(id->pd ? id->pd : default_pd((struct cm_id *)id));
	if (!pd)
		return fail(ENOMEM);
	memset(&ia, 0, sizeof(ia));
	ia.srq_context = attr->srq_context;
	ia.attr = attr->attr;
	id->srq = ibv_create_srq(pd, &ia);
	if (!id->srq)
		return -1;
	attr->attr = ia.attr;
	return 0;
}

CM_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ex;
	int rc;

	if (!attr)
		return fail(EINVAL);
	memset(&ex, 0, sizeof(ex));
	ex.srq_context = attr->srq_context;
	ex.attr = attr->attr;
	ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	ex.srq_type = IBV_SRQT_BASIC;
	ex.pd = pd;
	rc = rdma_create_srq_ex(id, &ex);
	if (!rc)
		attr->attr = ex.attr;
	return rc;
}

CM_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (!id || !id->srq)
		return;
	ibv_destroy_srq(id->srq);
	id->srq = NULL;
}
