/*
 * softrdma librdmacm, endpoint unit: rdma_get_request, rdma_create_ep and rdma_destroy_ep,
 * the synchronous helpers built from the other calls (the API, cm_qp's QPs, cm_event's
 * events) as librdmacm builds them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <rdma/rdma_verbs.h>

#include "cm_units.h"

CM_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct cm_id *l = (struct cm_id *)listen;
	struct rdma_cm_event *ev;
	struct cm_id *child;

	if (!listen || !id || !l->sync)
		return fail(EINVAL);
	sync_ack_old(listen);
	for (;;) {
		if (rdma_get_cm_event(listen->channel, &ev))
			return -1;
		if (ev->status) {
			int st = ev->status;

			rdma_ack_cm_event(ev);
			return fail(st < 0 ? -st : st);
		}
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		rdma_ack_cm_event(ev);
	}
	child = (struct cm_id *)ev->id;
	/* the child keeps the request event in id->event, counted against it */
	pthread_mutex_lock(&g_lock);
	((struct cm_event *)ev)->owner = child;
	l->acked++;
	child->reported++;
	pthread_cond_broadcast(&g_cond);
	pthread_mutex_unlock(&g_lock);
	child->id.event = ev;
	if (l->ep_qp_attr) {
		struct ibv_qp_init_attr attr = *l->ep_qp_attr;

		if (rdma_create_qp(&child->id, l->ep_pd, &attr)) {
			int err = errno;

			rdma_reject(&child->id, NULL, 0);
			rdma_destroy_id(&child->id);
			return fail(err);
		}
		child->qp_from_ep = 1;
	}
	*id = &child->id;
	return 0;
}

CM_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
			     struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cid;
	struct cm_id *idp;
	int err;

	if (!id || !res)
		return fail(EINVAL);
	if (rdma_create_id(NULL, &cid, NULL, res->ai_port_space ? res->ai_port_space : RDMA_PS_TCP))
		return -1;
	idp = (struct cm_id *)cid;
	/* the QP type comes from the address info, as in librdmacm */
	if (qp_init_attr)
		qp_init_attr->qp_type = res->ai_qp_type ? res->ai_qp_type :
			(is_ud(idp) ? IBV_QPT_UD : IBV_QPT_RC);
	if (res->ai_flags & RAI_PASSIVE) {
		if (!res->ai_src_addr || rdma_bind_addr(cid, res->ai_src_addr))
			goto fail;
		if (qp_init_attr) {
			idp->ep_qp_attr = malloc(sizeof(*qp_init_attr));
			if (!idp->ep_qp_attr) {
				errno = ENOMEM;
				goto fail;
			}
			*idp->ep_qp_attr = *qp_init_attr;
			idp->ep_pd = pd;
		}
	} else {
		if (!res->ai_dst_addr ||
		    rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000) ||
		    rdma_resolve_route(cid, 2000))
			goto fail;
		if (qp_init_attr) {
			if (rdma_create_qp(cid, pd, qp_init_attr))
				goto fail;
			idp->qp_from_ep = 1;
		}
	}
	*id = cid;
	return 0;
fail:
	err = errno;
	rdma_destroy_id(cid);
	return fail(err);
}

CM_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}
