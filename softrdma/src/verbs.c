/* Resource verbs: PD, MR, completion channels, CQ, SRQ, AH, QP and the QP state machine. */
#include "srd.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <arpa/inet.h>
#include <sched.h>

static struct srd_context *ctx_of(struct ibv_context *c)
{
	return container_of(c, struct srd_context, vctx.context);
}

/* ---------------------------------------------------------------- PD */

SRD_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct srd_pd *pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->ibpd.context = context;
	pd->ibpd.handle = (uint32_t)(uintptr_t)pd;
	return &pd->ibpd;
}

#define PD_OF(p) container_of((p), struct srd_pd, ibpd)
#define REF(x) __atomic_add_fetch(&(x)->refs, 1, __ATOMIC_ACQ_REL)
#define UNREF(x) __atomic_sub_fetch(&(x)->refs, 1, __ATOMIC_ACQ_REL)

SRD_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	/* like the kernel: a PD still holding objects cannot go */
	if (__atomic_load_n(&PD_OF(pd)->refs, __ATOMIC_ACQUIRE))
		return EBUSY;
	free(PD_OF(pd));
	return 0;
}

/* ---------------------------------------------------------------- MR */

static pthread_rwlock_t g_mr_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct srd_mr **g_mrs;
static uint32_t g_mr_cap, g_mr_hint = 1;
static uint8_t g_mr_gen;

void srd_mr_rdlock(void) { pthread_rwlock_rdlock(&g_mr_lock); }
void srd_mr_unlock(void) { pthread_rwlock_unlock(&g_mr_lock); }

struct srd_mr *srd_mr_get(uint32_t key)
{
	uint32_t idx = key >> 8;
	if (idx == 0 || idx >= g_mr_cap)
		return NULL;
	struct srd_mr *mr = g_mrs[idx];
	if (!mr || mr->ibmr.lkey != key)
		return NULL;
	return mr;
}

#define MR_ACCESS_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
		       IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | \
		       IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING)

SRD_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					   uint64_t iova, unsigned int access)
{
	if (!pd || (access & ~(unsigned)MR_ACCESS_ALL)) {
		errno = EINVAL;
		return NULL;
	}
	/* remote write / atomic without local write is refused by the IB spec */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE)) {
		errno = EINVAL;
		return NULL;
	}
	if (!addr && length) {
		errno = EINVAL;
		return NULL;
	}
	struct srd_mr *mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_rwlock_wrlock(&g_mr_lock);
	uint32_t idx = 0;
	for (uint32_t i = g_mr_hint; i < g_mr_cap; i++)
		if (!g_mrs[i]) { idx = i; break; }
	if (!idx) {
		for (uint32_t i = 1; i < g_mr_hint && i < g_mr_cap; i++)
			if (!g_mrs[i]) { idx = i; break; }
	}
	if (!idx) {
		uint32_t ncap = g_mr_cap ? g_mr_cap * 2 : 1024;
		if (ncap > (1u << 24)) {
			pthread_rwlock_unlock(&g_mr_lock);
			free(mr);
			errno = ENOMEM;
			return NULL;
		}
		struct srd_mr **n = realloc(g_mrs, ncap * sizeof(*n));
		if (!n) {
			pthread_rwlock_unlock(&g_mr_lock);
			free(mr);
			errno = ENOMEM;
			return NULL;
		}
		memset(n + g_mr_cap, 0, (ncap - g_mr_cap) * sizeof(*n));
		idx = g_mr_cap ? g_mr_cap : 1;
		g_mrs = n;
		g_mr_cap = ncap;
	}
	g_mr_hint = idx + 1;
	uint32_t key = (idx << 8) | (g_mr_gen++);
	mr->ibmr.context = pd->context;
	mr->ibmr.pd = pd;
	mr->ibmr.addr = addr;
	mr->ibmr.length = length;
	mr->ibmr.handle = idx;
	mr->ibmr.lkey = key;
	mr->ibmr.rkey = key;
	mr->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : iova;
	mr->access = (int)access;
	g_mrs[idx] = mr;
	REF(PD_OF(pd));
	pthread_rwlock_unlock(&g_mr_lock);
	return &mr->ibmr;
}

#undef ibv_reg_mr
SRD_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

#undef ibv_reg_mr_iova
SRD_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					  uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned)access);
}

SRD_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct srd_mr *mr = container_of(ibmr, struct srd_mr, ibmr);
	pthread_rwlock_wrlock(&g_mr_lock);
	uint32_t idx = ibmr->lkey >> 8;
	if (idx < g_mr_cap && g_mrs[idx] == mr)
		g_mrs[idx] = NULL;
	pthread_rwlock_unlock(&g_mr_lock);
	UNREF(PD_OF(ibmr->pd));
	free(mr);
	return 0;
}

SRD_EXPORT int ibv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd, void *addr,
			    size_t length, int access)
{
	struct srd_mr *mr = container_of(ibmr, struct srd_mr, ibmr);
	if (flags & ~(IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD |
		      IBV_REREG_MR_CHANGE_ACCESS))
		return IBV_REREG_MR_ERR_INPUT;
	if ((flags & IBV_REREG_MR_CHANGE_ACCESS) && (access & ~MR_ACCESS_ALL))
		return IBV_REREG_MR_ERR_INPUT;
	pthread_rwlock_wrlock(&g_mr_lock);
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		ibmr->addr = addr;
		ibmr->length = length;
		mr->iova = (uintptr_t)addr;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		UNREF(PD_OF(ibmr->pd));
		REF(PD_OF(pd));
		ibmr->pd = pd;
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		mr->access = access;
	pthread_rwlock_unlock(&g_mr_lock);
	return 0;
}

/* ---------------------------------------------------------------- channels */

SRD_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct srd_channel *ch = calloc(1, sizeof(*ch));
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->ibch.context = context;
	ch->ibch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (ch->ibch.fd < 0) {
		int e = errno;
		free(ch);
		errno = e;
		return NULL;
	}
	pthread_mutex_init(&ch->lock, NULL);
	return &ch->ibch;
}

SRD_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *ibch)
{
	struct srd_channel *ch = container_of(ibch, struct srd_channel, ibch);
	pthread_mutex_lock(&ch->lock);
	if (ibch->refcnt) {
		pthread_mutex_unlock(&ch->lock);
		errno = EBUSY;
		return EBUSY;
	}
	pthread_mutex_unlock(&ch->lock);
	close(ibch->fd);
	free(ch->queue);
	free(ch);
	return 0;
}

static void channel_notify(struct srd_cq *cq)
{
	struct srd_channel *ch = container_of(cq->ibcq.channel, struct srd_channel, ibch);
	pthread_mutex_lock(&ch->lock);
	if (ch->qlen == ch->qcap) {
		int ncap = ch->qcap ? ch->qcap * 2 : 16;
		struct srd_cq **n = malloc((size_t)ncap * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&ch->lock);
			return;
		}
		for (int i = 0; i < ch->qlen; i++)
			n[i] = ch->queue[(ch->qhead + i) % ch->qcap];
		free(ch->queue);
		ch->queue = n;
		ch->qhead = 0;
		ch->qcap = ncap;
	}
	ch->queue[(ch->qhead + ch->qlen) % ch->qcap] = cq;
	ch->qlen++;
	pthread_mutex_lock(&cq->ev_lock);
	cq->events++;
	pthread_mutex_unlock(&cq->ev_lock);
	pthread_mutex_unlock(&ch->lock);
	uint64_t one = 1;
	if (write(ch->ibch.fd, &one, 8) != 8)
		return;
}

SRD_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *ibch, struct ibv_cq **cq, void **cq_context)
{
	struct srd_channel *ch = container_of(ibch, struct srd_channel, ibch);
	uint64_t v;
	if (read(ibch->fd, &v, 8) != 8)
		return -1;
	pthread_mutex_lock(&ch->lock);
	if (!ch->qlen) {
		pthread_mutex_unlock(&ch->lock);
		errno = EAGAIN;
		return -1;
	}
	struct srd_cq *c = ch->queue[ch->qhead];
	ch->qhead = (ch->qhead + 1) % ch->qcap;
	ch->qlen--;
	pthread_mutex_unlock(&ch->lock);
	*cq = &c->ibcq;
	*cq_context = c->ibcq.cq_context;
	return 0;
}

SRD_EXPORT void ibv_ack_cq_events(struct ibv_cq *ibcq, unsigned int nevents)
{
	struct srd_cq *cq = container_of(ibcq, struct srd_cq, ibcq);
	pthread_mutex_lock(&cq->ev_lock);
	cq->acked += nevents;
	pthread_cond_broadcast(&cq->ev_cond);
	pthread_mutex_unlock(&cq->ev_lock);
}

/* ---------------------------------------------------------------- CQ */

SRD_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
					struct ibv_comp_channel *channel, int comp_vector)
{
	if (cqe < 1 || cqe > SRD_MAX_CQE || comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	struct srd_cq *cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	cq->cap = cqe + 1;
	cq->ring = calloc((size_t)cq->cap, sizeof(struct ibv_wc));
	if (!cq->ring) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&cq->lock, NULL);
	pthread_mutex_init(&cq->ev_lock, NULL);
	pthread_cond_init(&cq->ev_cond, NULL);
	cq->ibcq.context = context;
	cq->ibcq.channel = channel;
	cq->ibcq.cq_context = cq_context;
	cq->ibcq.cqe = cqe;
	pthread_mutex_init(&cq->ibcq.mutex, NULL);
	pthread_cond_init(&cq->ibcq.cond, NULL);
	if (channel) {
		struct srd_channel *ch = container_of(channel, struct srd_channel, ibch);
		pthread_mutex_lock(&ch->lock);
		channel->refcnt++;
		pthread_mutex_unlock(&ch->lock);
	}
	return &cq->ibcq;
}

SRD_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct srd_cq *cq = container_of(ibcq, struct srd_cq, ibcq);
	if (cqe < 1 || cqe > SRD_MAX_CQE)
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	if (cqe < cq->count) {
		pthread_mutex_unlock(&cq->lock);
		return EINVAL;
	}
	struct ibv_wc *n = calloc((size_t)cqe + 1, sizeof(*n));
	if (!n) {
		pthread_mutex_unlock(&cq->lock);
		return ENOMEM;
	}
	for (int i = 0; i < cq->count; i++)
		n[i] = cq->ring[(cq->head + i) % cq->cap];
	free(cq->ring);
	cq->ring = n;
	cq->head = 0;
	cq->cap = cqe + 1;
	ibcq->cqe = cqe;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

SRD_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct srd_cq *cq = container_of(ibcq, struct srd_cq, ibcq);
	if (__atomic_load_n(&cq->refs, __ATOMIC_ACQUIRE))
		return EBUSY; /* QPs still complete into it */
	if (ibcq->channel) {
		struct srd_channel *ch = container_of(ibcq->channel, struct srd_channel, ibch);
		/* drop undelivered events for this CQ, then wait for the acks of the delivered ones */
		pthread_mutex_lock(&ch->lock);
		int kept = 0;
		for (int i = 0; i < ch->qlen; i++) {
			struct srd_cq *c = ch->queue[(ch->qhead + i) % ch->qcap];
			if (c == cq) {
				uint64_t v;
				if (read(ch->ibch.fd, &v, 8) == 8) {
					pthread_mutex_lock(&cq->ev_lock);
					cq->acked++;
					pthread_mutex_unlock(&cq->ev_lock);
				}
			} else {
				ch->queue[(ch->qhead + kept) % ch->qcap] = c;
				kept++;
			}
		}
		ch->qlen = kept;
		ibcq->channel->refcnt--;
		pthread_mutex_unlock(&ch->lock);
	}
	pthread_mutex_lock(&cq->ev_lock);
	while (cq->acked != cq->events)
		pthread_cond_wait(&cq->ev_cond, &cq->ev_lock);
	pthread_mutex_unlock(&cq->ev_lock);
	free(cq->ring);
	free(cq);
	return 0;
}

void srd_cq_push(struct srd_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	bool notify = false, overflow = false;
	pthread_mutex_lock(&cq->lock);
	if (cq->count >= cq->ibcq.cqe) {
		overflow = !cq->overflow;
		cq->overflow = true;
	} else {
		cq->ring[(cq->head + cq->count) % cq->cap] = *wc;
		cq->count++;
		if (cq->armed == 1 || (cq->armed == 2 && (solicited || wc->status != IBV_WC_SUCCESS))) {
			cq->armed = 0;
			notify = cq->ibcq.channel != NULL;
		}
	}
	pthread_mutex_unlock(&cq->lock);
	if (notify)
		channel_notify(cq);
	if (overflow) {
		struct ibv_async_event ev = { .element.cq = &cq->ibcq, .event_type = IBV_EVENT_CQ_ERR };
		srd_async_post(ctx_of(cq->ibcq.context), &ev);
	}
}

int srd_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct srd_cq *cq = container_of(ibcq, struct srd_cq, ibcq);
	if (n < 0)
		return -1;
	/* cheap unlocked peek keeps the empty spin from bouncing the lock */
	if (!__atomic_load_n(&cq->count, __ATOMIC_ACQUIRE)) {
		/* The agent thread plays the NIC and needs a CPU to make progress; an
		 * application spinning on an empty CQ hands its core over now and then. */
		if ((++cq->empty_polls & 7) == 0)
			sched_yield();
		return 0;
	}
	pthread_mutex_lock(&cq->lock);
	int k = 0;
	while (k < n && cq->count) {
		wc[k++] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->cap;
		cq->count--;
	}
	pthread_mutex_unlock(&cq->lock);
	return k;
}

int srd_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct srd_cq *cq = container_of(ibcq, struct srd_cq, ibcq);
	pthread_mutex_lock(&cq->lock);
	if (cq->armed != 1)
		cq->armed = solicited_only ? 2 : 1;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

/* ---------------------------------------------------------------- receive queues */

static int rq_init(struct srd_rq *rq, int cap, int max_sge)
{
	pthread_mutex_init(&rq->lock, NULL);
	rq->cap = cap > 0 ? cap : 1;
	rq->max_sge = max_sge > 0 ? max_sge : 1;
	rq->ring = calloc((size_t)rq->cap, sizeof(*rq->ring));
	rq->sges = calloc((size_t)rq->cap * (size_t)rq->max_sge, sizeof(*rq->sges));
	if (!rq->ring || !rq->sges) {
		free(rq->ring);
		free(rq->sges);
		return ENOMEM;
	}
	for (int i = 0; i < rq->cap; i++)
		rq->ring[i].sge = rq->sges + (size_t)i * (size_t)rq->max_sge;
	return 0;
}

static void rq_free(struct srd_rq *rq)
{
	free(rq->ring);
	free(rq->sges);
}

/* caller holds rq->lock */
int srd_rq_pop(struct srd_rq *rq, struct srd_rwqe *out, struct ibv_sge *sges)
{
	if (!rq->count)
		return -1;
	struct srd_rwqe *w = &rq->ring[rq->head];
	out->wr_id = w->wr_id;
	out->num_sge = w->num_sge;
	memcpy(sges, w->sge, (size_t)w->num_sge * sizeof(*sges));
	out->sge = sges;
	rq->head = (rq->head + 1) % rq->cap;
	rq->count--;
	return 0;
}

/* ---------------------------------------------------------------- SRQ */

SRD_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	if (!attr || attr->attr.max_wr < 1 || attr->attr.max_wr > SRD_MAX_QP_WR ||
	    attr->attr.max_sge > SRD_MAX_SGE || attr->attr.srq_limit > attr->attr.max_wr) {
		errno = EINVAL;
		return NULL;
	}
	struct srd_srq *srq = calloc(1, sizeof(*srq));
	if (!srq || rq_init(&srq->rq, (int)attr->attr.max_wr, (int)attr->attr.max_sge)) {
		free(srq);
		errno = ENOMEM;
		return NULL;
	}
	srq->limit = attr->attr.srq_limit;
	REF(PD_OF(pd));
	srq->ibsrq.context = pd->context;
	srq->ibsrq.srq_context = attr->srq_context;
	srq->ibsrq.pd = pd;
	pthread_mutex_init(&srq->ibsrq.mutex, NULL);
	pthread_cond_init(&srq->ibsrq.cond, NULL);
	return &srq->ibsrq;
}

SRD_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct srd_srq *srq = container_of(ibsrq, struct srd_srq, ibsrq);
	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return EINVAL;
	pthread_mutex_lock(&srq->rq.lock);
	int rc = 0;
	if (mask & IBV_SRQ_MAX_WR) {
		if (attr->max_wr < 1 || attr->max_wr > SRD_MAX_QP_WR || (int)attr->max_wr < srq->rq.count) {
			rc = EINVAL;
		} else {
			struct srd_rq n;
			if (rq_init(&n, (int)attr->max_wr, srq->rq.max_sge)) {
				rc = ENOMEM;
			} else {
				for (int i = 0; i < srq->rq.count; i++) {
					struct srd_rwqe *w = &srq->rq.ring[(srq->rq.head + i) % srq->rq.cap];
					n.ring[i].wr_id = w->wr_id;
					n.ring[i].num_sge = w->num_sge;
					memcpy(n.ring[i].sge, w->sge, (size_t)w->num_sge * sizeof(struct ibv_sge));
				}
				n.count = srq->rq.count;
				rq_free(&srq->rq);
				srq->rq.ring = n.ring;
				srq->rq.sges = n.sges;
				srq->rq.cap = n.cap;
				srq->rq.head = 0;
			}
		}
	}
	if (!rc && (mask & IBV_SRQ_LIMIT)) {
		if (attr->srq_limit > (unsigned)srq->rq.cap)
			rc = EINVAL;
		else
			srq->limit = attr->srq_limit;
	}
	pthread_mutex_unlock(&srq->rq.lock);
	return rc;
}

SRD_EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct srd_srq *srq = container_of(ibsrq, struct srd_srq, ibsrq);
	pthread_mutex_lock(&srq->rq.lock);
	attr->max_wr = (uint32_t)srq->rq.cap;
	attr->max_sge = (uint32_t)srq->rq.max_sge;
	attr->srq_limit = srq->limit;
	pthread_mutex_unlock(&srq->rq.lock);
	return 0;
}

SRD_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct srd_srq *srq = container_of(ibsrq, struct srd_srq, ibsrq);
	if (__atomic_load_n(&srq->refs, __ATOMIC_ACQUIRE))
		return EBUSY;
	UNREF(PD_OF(ibsrq->pd));
	rq_free(&srq->rq);
	free(srq);
	return 0;
}

/* called with srq->rq.lock held, after a WQE was consumed */
void srd_srq_check_limit(struct srd_srq *srq)
{
	if (srq->limit && (unsigned)srq->rq.count < srq->limit) {
		srq->limit = 0; /* the limit event is one-shot until re-armed */
		struct ibv_async_event ev = { .element.srq = &srq->ibsrq,
					      .event_type = IBV_EVENT_SRQ_LIMIT_REACHED };
		srd_async_post(ctx_of(srq->ibsrq.context), &ev);
	}
}

int srd_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct srd_srq *srq = container_of(ibsrq, struct srd_srq, ibsrq);
	int rc = 0;
	pthread_mutex_lock(&srq->rq.lock);
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || wr->num_sge > srq->rq.max_sge) {
			rc = EINVAL;
			break;
		}
		if (srq->rq.count == srq->rq.cap) {
			rc = ENOMEM;
			break;
		}
		struct srd_rwqe *w = &srq->rq.ring[(srq->rq.head + srq->rq.count) % srq->rq.cap];
		w->wr_id = wr->wr_id;
		w->num_sge = wr->num_sge;
		memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
		srq->rq.count++;
	}
	pthread_mutex_unlock(&srq->rq.lock);
	if (rc)
		*bad = wr;
	return rc;
}

/* ---------------------------------------------------------------- AH */

SRD_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	if (!attr || attr->port_num != 1) {
		errno = EINVAL;
		return NULL;
	}
	/* RoCE address handles need a GRH with a valid source GID */
	if (!attr->is_global || attr->grh.sgid_index >= SRD_GID_TBL_LEN) {
		errno = EINVAL;
		return NULL;
	}
	struct srd_ah *ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->ibah.context = pd->context;
	ah->ibah.pd = pd;
	ah->attr = *attr;
	REF(PD_OF(pd));
	return &ah->ibah;
}

SRD_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	UNREF(PD_OF(ah->pd));
	free(container_of(ah, struct srd_ah, ibah));
	return 0;
}

SRD_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
				   struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
	(void)context;
	if (!(wc->wc_flags & IBV_WC_GRH) || !grh) {
		errno = EINVAL;
		return -1;
	}
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->port_num = port_num;
	ah_attr->is_global = 1;
	ah_attr->grh.hop_limit = 0xff;
	ah_attr->grh.sgid_index = 0;
	const uint8_t *raw = (const uint8_t *)grh;
	if (raw[20] == 0x45) {
		/* RoCE v2 over IPv4: an IPv4 header sits in the last 20 bytes */
		uint8_t *d = ah_attr->grh.dgid.raw;
		memset(d, 0, 16);
		d[10] = d[11] = 0xff;
		memcpy(d + 12, raw + 20 + 12, 4); /* IPv4 source address */
		ah_attr->grh.sgid_index = 1;
	} else {
		ah_attr->grh.dgid = grh->sgid;
	}
	ah_attr->sl = wc->sl;
	return 0;
}

SRD_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
						struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr attr;
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}

/* ---------------------------------------------------------------- QP */

static struct srd_qp *qp_of(struct ibv_qp *q)
{
	return container_of(q, struct srd_qp, ibqp);
}

SRD_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	if (!pd || !init || !init->send_cq || !init->recv_cq) {
		errno = EINVAL;
		return NULL;
	}
	if (init->qp_type != IBV_QPT_RC && init->qp_type != IBV_QPT_UC && init->qp_type != IBV_QPT_UD) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	struct ibv_qp_cap *c = &init->cap;
	if (c->max_send_wr > SRD_MAX_QP_WR || c->max_send_sge > SRD_MAX_SGE ||
	    c->max_inline_data > SRD_MAX_INLINE ||
	    (!init->srq && (c->max_recv_wr > SRD_MAX_QP_WR || c->max_recv_sge > SRD_MAX_SGE))) {
		errno = EINVAL;
		return NULL;
	}
	struct srd_qp *qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	qp->cap = *c;
	if (qp->cap.max_send_sge < 1)
		qp->cap.max_send_sge = 1;
	if (init->srq) {
		qp->cap.max_recv_wr = 0;
		qp->cap.max_recv_sge = 0;
	}
	qp->sq_cap = (int)(qp->cap.max_send_wr ? qp->cap.max_send_wr : 1);
	qp->sq = calloc((size_t)qp->sq_cap, sizeof(*qp->sq));
	qp->sq_sges = calloc((size_t)qp->sq_cap * qp->cap.max_send_sge, sizeof(struct ibv_sge));
	qp->sq_inline = qp->cap.max_inline_data ?
		malloc((size_t)qp->sq_cap * qp->cap.max_inline_data) : NULL;
	if (!qp->sq || !qp->sq_sges || (qp->cap.max_inline_data && !qp->sq_inline) ||
	    (!init->srq && rq_init(&qp->rq, (int)qp->cap.max_recv_wr, (int)qp->cap.max_recv_sge))) {
		free(qp->sq);
		free(qp->sq_sges);
		free(qp->sq_inline);
		free(qp);
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < qp->sq_cap; i++) {
		qp->sq[i].sge = qp->sq_sges + (size_t)i * qp->cap.max_send_sge;
		qp->sq[i].inline_buf = qp->sq_inline ? qp->sq_inline + (size_t)i * qp->cap.max_inline_data : NULL;
	}
	pthread_mutex_init(&qp->sq_lock, NULL);
	qp->srq = init->srq ? container_of(init->srq, struct srd_srq, ibsrq) : NULL;
	qp->dev = container_of(pd->context, struct srd_context, vctx.context)->dev;
	qp->sq_sig_all = init->sq_sig_all;
	qp->ibqp.context = pd->context;
	qp->ibqp.qp_context = init->qp_context;
	qp->ibqp.pd = pd;
	qp->ibqp.send_cq = init->send_cq;
	qp->ibqp.recv_cq = init->recv_cq;
	qp->ibqp.srq = init->srq;
	qp->ibqp.qp_type = init->qp_type;
	qp->ibqp.state = IBV_QPS_RESET;
	qp->ibqp.events_completed = 0;
	pthread_mutex_init(&qp->ibqp.mutex, NULL);
	pthread_cond_init(&qp->ibqp.cond, NULL);
	qp->state = IBV_QPS_RESET;
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->attr.path_mtu = IBV_MTU_1024;
	qp->attr.port_num = 1;
	int rc = srd_net_alloc_qpn(qp);
	if (rc) {
		if (!qp->srq)
			rq_free(&qp->rq);
		free(qp->sq);
		free(qp->sq_sges);
		free(qp->sq_inline);
		free(qp);
		errno = rc;
		return NULL;
	}
	init->cap = qp->cap;
	REF(PD_OF(pd));
	REF(container_of(init->send_cq, struct srd_cq, ibcq));
	REF(container_of(init->recv_cq, struct srd_cq, ibcq));
	if (qp->srq)
		REF(qp->srq);
	return &qp->ibqp;
}

SRD_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct srd_qp *qp = qp_of(ibqp);
	srd_net_free_qpn(qp); /* after this neither the agent nor peers can find it */
	UNREF(PD_OF(ibqp->pd));
	UNREF(container_of(ibqp->send_cq, struct srd_cq, ibcq));
	UNREF(container_of(ibqp->recv_cq, struct srd_cq, ibcq));
	if (qp->srq)
		UNREF(qp->srq);
	if (!qp->srq)
		rq_free(&qp->rq);
	free(qp->sq);
	free(qp->sq_sges);
	free(qp->sq_inline);
	free(qp);
	return 0;
}

/*
 * Attribute masks per transition and QP type, as the kernel's
 * ib_modify_qp_is_ok() table defines them (UD, UC, RC).
 */
enum { T_UD, T_UC, T_RC };
struct trans { bool valid; int req[3]; int opt[3]; };

static int type_ix(enum ibv_qp_type t)
{
	return t == IBV_QPT_UD ? T_UD : t == IBV_QPT_UC ? T_UC : T_RC;
}

static const struct trans *transition(enum ibv_qp_state cur, enum ibv_qp_state next)
{
	static struct trans tab[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1];
	static bool built;
	if (!built) {
		for (int s = 0; s <= IBV_QPS_ERR; s++) {
			tab[s][IBV_QPS_RESET].valid = true;
			tab[s][IBV_QPS_ERR].valid = true;
		}
		struct trans *t = &tab[IBV_QPS_RESET][IBV_QPS_INIT];
		t->valid = true;
		t->req[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
		t->req[T_UC] = t->req[T_RC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;

		t = &tab[IBV_QPS_INIT][IBV_QPS_INIT];
		t->valid = true;
		t->opt[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
		t->opt[T_UC] = t->opt[T_RC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;

		t = &tab[IBV_QPS_INIT][IBV_QPS_RTR];
		t->valid = true;
		t->req[T_UC] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		t->req[T_RC] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		t->opt[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
		t->opt[T_UC] = t->opt[T_RC] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;

		t = &tab[IBV_QPS_RTR][IBV_QPS_RTS];
		t->valid = true;
		t->req[T_UD] = t->req[T_UC] = IBV_QP_SQ_PSN;
		t->req[T_RC] = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			       IBV_QP_MAX_QP_RD_ATOMIC;
		t->opt[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY;
		t->opt[T_UC] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE;
		t->opt[T_RC] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
			       IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;

		t = &tab[IBV_QPS_RTS][IBV_QPS_RTS];
		t->valid = true;
		t->opt[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY;
		t->opt[T_UC] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE;
		t->opt[T_RC] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
			       IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER;

		t = &tab[IBV_QPS_RTS][IBV_QPS_SQD];
		t->valid = true;
		t->opt[T_UD] = t->opt[T_UC] = t->opt[T_RC] = IBV_QP_EN_SQD_ASYNC_NOTIFY;

		t = &tab[IBV_QPS_SQD][IBV_QPS_RTS];
		t->valid = true;
		t->opt[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY;
		t->opt[T_UC] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE;
		t->opt[T_RC] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
			       IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;

		t = &tab[IBV_QPS_SQD][IBV_QPS_SQD];
		t->valid = true;
		t->opt[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
		t->opt[T_UC] = IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
			       IBV_QP_PATH_MIG_STATE;
		t->opt[T_RC] = IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC |
			       IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
			       IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;

		t = &tab[IBV_QPS_SQE][IBV_QPS_RTS];
		t->valid = true;
		t->opt[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY;
		t->opt[T_UC] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS;
		/* SQE does not exist for RC: leave req/opt empty and reject below */
		built = true;
	}
	if (cur > IBV_QPS_ERR || next > IBV_QPS_ERR)
		return NULL;
	return &tab[cur][next];
}

static pthread_mutex_t g_trans_once = PTHREAD_MUTEX_INITIALIZER;

#define QP_ATTR_ALL ((1 << 21) - 1)

SRD_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct srd_qp *qp = qp_of(ibqp);
	if (!attr || (mask & ~QP_ATTR_ALL))
		return EINVAL;
	pthread_mutex_lock(&g_trans_once);
	pthread_mutex_lock(&qp->sq_lock);
	enum ibv_qp_state cur = (enum ibv_qp_state)qp->state;
	int rc = 0;
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur) {
		rc = EINVAL;
		goto out;
	}
	enum ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	const struct trans *t = transition(cur, next);
	if (!t || !t->valid) {
		rc = EINVAL;
		goto out;
	}
	if (cur == IBV_QPS_SQE && ibqp->qp_type == IBV_QPT_RC && next == IBV_QPS_RTS) {
		rc = EINVAL;
		goto out;
	}
	int ti = type_ix(ibqp->qp_type);
	int req = t->req[ti], opt = t->opt[ti];
	int given = mask & ~IBV_QP_STATE;
	if ((given & req) != req || (given & ~(req | opt | IBV_QP_CUR_STATE))) {
		rc = EINVAL;
		goto out;
	}
	/* value checks */
	if ((mask & IBV_QP_PORT) && attr->port_num != 1) { rc = EINVAL; goto out; }
	if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index != 0) { rc = EINVAL; goto out; }
	if ((mask & IBV_QP_PATH_MTU) && (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096)) {
		rc = EINVAL;
		goto out;
	}
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > SRD_MAX_RD_ATOM) { rc = EINVAL; goto out; }
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && attr->max_dest_rd_atomic > SRD_MAX_RD_ATOM) { rc = EINVAL; goto out; }
	if ((mask & IBV_QP_RETRY_CNT) && attr->retry_cnt > 7) { rc = EINVAL; goto out; }
	if ((mask & IBV_QP_RNR_RETRY) && attr->rnr_retry > 7) { rc = EINVAL; goto out; }
	if ((mask & IBV_QP_TIMEOUT) && attr->timeout > 31) { rc = EINVAL; goto out; }
	if ((mask & IBV_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31) { rc = EINVAL; goto out; }
	if ((mask & IBV_QP_DEST_QPN) && attr->dest_qp_num > SRD_HDR_PSN_MASK) { rc = EINVAL; goto out; }
	if (mask & IBV_QP_AV) {
		/* RoCE: every connected QP's path needs a GRH */
		if (!attr->ah_attr.is_global || attr->ah_attr.grh.sgid_index >= qp->dev->ngids ||
		    (attr->ah_attr.port_num && attr->ah_attr.port_num != 1)) {
			rc = EINVAL;
			goto out;
		}
	}
	if ((mask & IBV_QP_ACCESS_FLAGS) &&
	    (attr->qp_access_flags & ~(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				       IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND))) {
		rc = EINVAL;
		goto out;
	}

	/* apply */
	struct ibv_qp_attr *a = &qp->attr;
	if (mask & IBV_QP_PKEY_INDEX) a->pkey_index = attr->pkey_index;
	if (mask & IBV_QP_PORT) a->port_num = attr->port_num;
	if (mask & IBV_QP_QKEY) a->qkey = attr->qkey;
	if (mask & IBV_QP_ACCESS_FLAGS) a->qp_access_flags = attr->qp_access_flags;
	if (mask & IBV_QP_AV) a->ah_attr = attr->ah_attr;
	if (mask & IBV_QP_PATH_MTU) a->path_mtu = attr->path_mtu;
	if (mask & IBV_QP_DEST_QPN) a->dest_qp_num = attr->dest_qp_num;
	if (mask & IBV_QP_RQ_PSN) a->rq_psn = attr->rq_psn & SRD_HDR_PSN_MASK;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) a->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER) a->min_rnr_timer = attr->min_rnr_timer;
	if (mask & IBV_QP_SQ_PSN) a->sq_psn = attr->sq_psn & SRD_HDR_PSN_MASK;
	if (mask & IBV_QP_TIMEOUT) a->timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT) a->retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY) a->rnr_retry = attr->rnr_retry;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC) a->max_rd_atomic = attr->max_rd_atomic;
	if (mask & IBV_QP_ALT_PATH) {
		a->alt_ah_attr = attr->alt_ah_attr;
		a->alt_pkey_index = attr->alt_pkey_index;
		a->alt_port_num = attr->alt_port_num;
		a->alt_timeout = attr->alt_timeout;
	}
	if (mask & IBV_QP_PATH_MIG_STATE) a->path_mig_state = attr->path_mig_state;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) a->en_sqd_async_notify = attr->en_sqd_async_notify;

	if (next == IBV_QPS_RTR && cur == IBV_QPS_INIT) {
		qp->epsn = a->rq_psn;
		qp->msn = 0;
		qp->nak_sent = false;
		qp->recv_in_progress = false;
		if (ibqp->qp_type != IBV_QPT_UD) {
			srd_gid_to_sockaddr(&a->ah_attr.grh.dgid, (uint16_t)(a->dest_qp_num >> 8),
					    qp->dev->ifindex, &qp->peer);
			qp->peer_local = srd_gid_is_local(&a->ah_attr.grh.dgid) &&
					 srd_net_owns_qpn(a->dest_qp_num);
		}
	}
	if (next == IBV_QPS_RTS && cur == IBV_QPS_RTR) {
		qp->snd_psn = a->sq_psn;
		qp->una_psn = a->sq_psn;
		qp->retry_left = a->retry_cnt;
		qp->rnr_left = a->rnr_retry;
	}
	if ((mask & IBV_QP_SQ_PSN) && cur != IBV_QPS_RTR) {
		qp->snd_psn = qp->una_psn = a->sq_psn;
	}
	if (next == IBV_QPS_RESET && cur != IBV_QPS_RESET) {
		srd_qp_reset_transport(qp);
		qp->sq_head = qp->sq_tail = qp->sq_next_tx = 0;
		if (!qp->srq) {
			pthread_mutex_lock(&qp->rq.lock);
			qp->rq.head = qp->rq.count = 0;
			pthread_mutex_unlock(&qp->rq.lock);
		}
	}
	a->qp_state = next;
	a->cur_qp_state = next;
	ibqp->state = next;
	__atomic_store_n(&qp->state, (int)next, __ATOMIC_RELEASE);
	if (next == IBV_QPS_SQD && (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) && attr->en_sqd_async_notify) {
		/* nothing is ever in flight across a state change here: drained at once */
		struct ibv_async_event ev = { .element.qp = ibqp, .event_type = IBV_EVENT_SQ_DRAINED };
		srd_async_post(ctx_of(ibqp->context), &ev);
	}
	if (next == IBV_QPS_ERR && cur != IBV_QPS_ERR) {
		srd_flush_sq_locked(qp);
		pthread_mutex_unlock(&qp->sq_lock);
		pthread_mutex_unlock(&g_trans_once);
		srd_flush_rq(qp);
		return 0;
	}
out:
	pthread_mutex_unlock(&qp->sq_lock);
	pthread_mutex_unlock(&g_trans_once);
	if (!rc && next == IBV_QPS_RTS)
		srd_qp_kick(qp); /* WQEs posted while in SQD go now */
	return rc;
}

SRD_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
			    struct ibv_qp_init_attr *init)
{
	struct srd_qp *qp = qp_of(ibqp);
	(void)mask;
	pthread_mutex_lock(&qp->sq_lock);
	*attr = qp->attr;
	attr->qp_state = (enum ibv_qp_state)qp->state;
	attr->cur_qp_state = attr->qp_state;
	attr->sq_draining = 0;
	attr->cap = qp->cap;
	attr->sq_psn = qp->snd_psn;
	pthread_mutex_unlock(&qp->sq_lock);
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = ibqp->qp_context;
		init->send_cq = ibqp->send_cq;
		init->recv_cq = ibqp->recv_cq;
		init->srq = ibqp->srq;
		init->cap = qp->cap;
		init->qp_type = ibqp->qp_type;
		init->sq_sig_all = qp->sq_sig_all;
	}
	return 0;
}

/* Moves a QP to ERR from the data path (responder-detected errors, retry exhaustion). */
void srd_qp_to_error(struct srd_qp *qp, bool flush_sq_now)
{
	int old = __atomic_exchange_n(&qp->state, IBV_QPS_ERR, __ATOMIC_ACQ_REL);
	qp->ibqp.state = IBV_QPS_ERR;
	qp->attr.qp_state = IBV_QPS_ERR;
	if (old == IBV_QPS_ERR)
		return;
	if (flush_sq_now)
		srd_flush_sq_locked(qp);
	else
		srd_qp_kick(qp);
	srd_flush_rq(qp);
}

void srd_flush_rq(struct srd_qp *qp)
{
	if (qp->srq)
		return; /* SRQ WQEs stay with the SRQ */
	struct srd_cq *cq = container_of(qp->ibqp.recv_cq, struct srd_cq, ibcq);
	pthread_mutex_lock(&qp->rq.lock);
	while (qp->rq.count) {
		struct srd_rwqe *w = &qp->rq.ring[qp->rq.head];
		struct ibv_wc wc = { .wr_id = w->wr_id, .status = IBV_WC_WR_FLUSH_ERR,
				     .opcode = IBV_WC_RECV, .qp_num = qp->ibqp.qp_num };
		qp->rq.head = (qp->rq.head + 1) % qp->rq.cap;
		qp->rq.count--;
		srd_cq_push(cq, &wc, false);
	}
	pthread_mutex_unlock(&qp->rq.lock);
}

/* ---------------------------------------------------------------- unsupported object types */

SRD_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp; (void)gid; (void)lid;
	return EOPNOTSUPP;
}

SRD_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	(void)qp; (void)gid; (void)lid;
	return EOPNOTSUPP;
}
