/*
 * Completion queues and completion channels: create/resize/destroy, poll,
 * req_notify, the push that every producer of completions uses, and the
 * channel's event FIFO behind its eventfd.
 * Owns: struct srd_cq, srd_channel. Calls: events (CQ overrun).
 */
#include "cq.h"
#include "events.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sched.h>
#include <sys/eventfd.h>

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
		int i = cq->head + cq->count;
		cq->ring[i >= cq->cap ? i - cq->cap : i] = *wc;
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
		srd_async_post(srd_ctx_of(cq->ibcq.context), &ev);
	}
}

bool (*srd_cq_idle_hook)(void);

int srd_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct srd_cq *cq = container_of(ibcq, struct srd_cq, ibcq);
	if (n < 0)
		return -1;
	/* cheap unlocked peek keeps the empty spin from bouncing the lock */
	if (!__atomic_load_n(&cq->count, __ATOMIC_ACQUIRE)) {
		bool (*hook)(void) = __atomic_load_n(&srd_cq_idle_hook, __ATOMIC_ACQUIRE);
		if (hook && hook() && __atomic_load_n(&cq->count, __ATOMIC_ACQUIRE))
			goto take;
		/* The agent thread plays the NIC and needs a CPU to make progress; an
		 * application spinning on an empty CQ hands its core over now and then. */
		if ((++cq->empty_polls & 7) == 0)
			sched_yield();
		return 0;
	}
take:
	pthread_mutex_lock(&cq->lock);
	int k = 0;
	while (k < n && cq->count) {
		wc[k++] = cq->ring[cq->head];
		cq->head = cq->head + 1 == cq->cap ? 0 : cq->head + 1;
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

