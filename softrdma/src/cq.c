/*
 * Completion queues and completion channels: create/resize/destroy, poll,
 * req_notify, the push that every producer of completions uses, the
 * channel's event FIFO behind its eventfd, and the extended CQ
 * (ibv_create_cq_ex: start_poll/next_poll/end_poll and the read_* accessors).
 * Owns: struct srd_cq, srd_channel. Calls: events (CQ overrun).
 */
#include "cq.h"
#include "events.h"
#include "shm.h"
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
	if (!context || cqe < 1 || cqe > SRD_MAX_CQE || comp_vector < 0 ||
	    comp_vector >= context->num_comp_vectors) {
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
	srd_lock_init(&cq->lock);
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
	srd_lock(&cq->lock);
	if (cqe < cq->count) {
		srd_unlock(&cq->lock);
		return EINVAL;
	}
	struct ibv_wc *n = calloc((size_t)cqe + 1, sizeof(*n));
	if (!n) {
		srd_unlock(&cq->lock);
		return ENOMEM;
	}
	for (int i = 0; i < cq->count; i++)
		n[i] = cq->ring[(cq->head + i) % cq->cap];
	free(cq->ring);
	cq->ring = n;
	cq->head = 0;
	cq->cap = cqe + 1;
	ibcq->cqe = cqe;
	srd_unlock(&cq->lock);
	return 0;
}

SRD_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct srd_cq *cq = container_of(ibcq, struct srd_cq, ibcq);
	if (__atomic_load_n(&cq->refs, __ATOMIC_ACQUIRE))
		return EBUSY; /* QPs still complete into it */
	bool checking = srd_close_race_checking();
	if (checking && !srd_close_race_destroy(&cq->inside, "ibv_destroy_cq"))
		return EBUSY;
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
	if (!checking) /* checked: a late call reads the struct's mark (closerace.h) */
		free(cq);
	return 0;
}

void srd_cq_commit_slow(struct srd_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	bool notify = false, overflow = false;
	if (!wc) {
		overflow = !cq->overflow;
		cq->overflow = true;
	} else {
		__atomic_store_n(&cq->count, cq->count + 1, __ATOMIC_RELEASE); /* peeked without the lock */
		if (cq->armed == 1 || (cq->armed == 2 && (solicited || wc->status != IBV_WC_SUCCESS))) {
			cq->armed = 0;
			notify = cq->ibcq.channel != NULL;
		}
	}
	srd_unlock(&cq->lock);
	if (notify)
		channel_notify(cq);
	if (overflow) {
		struct ibv_async_event ev = { .element.cq = &cq->ibcq, .event_type = IBV_EVENT_CQ_ERR };
		srd_async_post(srd_ctx_of(cq->ibcq.context), &ev);
	}
}

void srd_cq_push(struct srd_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	struct ibv_wc *slot = srd_cq_begin(cq);
	if (slot)
		srd_wc_copy(slot, wc);
	srd_cq_commit(cq, slot, solicited);
}

bool (*srd_cq_idle_hook)(void);

/* A thread polling an empty CQ hands its core over (sched_yield) on every SOFTRDMA_YIELD_EVERY-th
 * (default 8; 0 never) empty poll, so that the threads sharing its core run: the agent, which
 * plays the NIC and needs a CPU when the poller does not carry its packets, and the peer's
 * poller, which two pollers of a ping-pong on one core wait for (on a 2-CPU host with other work
 * that is the common case, and the yield is then the hand-over: docs/netty.md). With
 * SOFTRDMA_YIELD_US=T it yields only once T microseconds of empty polls went by, looking at the
 * clock on those polls only, then at most once per T; a poll that finds a completion starts the
 * wait over. That keeps the yield out of a round trip whose peer answers from its own core, but a
 * poller sharing its core with its peer then pays T per hop: measured, it lost more than it won
 * (docs/softrdma.md, "The empty poll's yield"), so it is for A/B runs only. Both read once per
 * process. */
/* name's value (dflt when unset or empty), read on the first call and kept in *cache (0: not
 * read yet; else the value + 1) */
static unsigned env_once(unsigned *cache, const char *name, unsigned dflt)
{
	unsigned v = __atomic_load_n(cache, __ATOMIC_RELAXED);
	if (v)
		return v - 1;
	const char *e = getenv(name);
	v = e && *e ? (unsigned)strtoul(e, NULL, 10) : dflt;
	__atomic_store_n(cache, v + 1, __ATOMIC_RELAXED);
	return v;
}

static unsigned yield_every(void)
{
	static unsigned cache;
	return env_once(&cache, "SOFTRDMA_YIELD_EVERY", 8);
}

static uint64_t yield_after_ns(void)
{
	static unsigned cache;
	return (uint64_t)env_once(&cache, "SOFTRDMA_YIELD_US", 0) * 1000;
}

/* Relaxed atomics: the fields are the polling thread's; pollers racing on one CQ may lose a
 * count or a stamp, which only moves a yield. */
static void empty_poll(struct srd_cq *cq)
{
	unsigned every = yield_every();
	if (!every)
		return;
	unsigned polls = __atomic_load_n(&cq->empty_polls, __ATOMIC_RELAXED) + 1;
	if (polls < every) {
		__atomic_store_n(&cq->empty_polls, polls, __ATOMIC_RELAXED);
		return;
	}
	__atomic_store_n(&cq->empty_polls, 0, __ATOMIC_RELAXED);
	uint64_t after = yield_after_ns();
	if (after) {
		uint64_t now = srd_now_ns(), since = __atomic_load_n(&cq->empty_since_ns, __ATOMIC_RELAXED);
		if (!since) { /* the first look of this empty run */
			__atomic_store_n(&cq->empty_since_ns, now, __ATOMIC_RELAXED);
			return;
		}
		if (now - since < after)
			return;
	}
	sched_yield();
	if (after) /* the next yield after another full wait */
		__atomic_store_n(&cq->empty_since_ns, srd_now_ns(), __ATOMIC_RELAXED);
}

/* A poll found a completion: the next empty run waits afresh (SOFTRDMA_YIELD_US). The count of
 * empty polls goes on, as it always has: the yield on every 8th empty poll counts across
 * completions. */
static inline void found_completion(struct srd_cq *cq)
{
	if (__atomic_load_n(&cq->empty_since_ns, __ATOMIC_RELAXED))
		__atomic_store_n(&cq->empty_since_ns, 0, __ATOMIC_RELAXED);
}

static int poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc);

int srd_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	if (srd_close_race_checking()) {
		struct srd_cq *cq = container_of(ibcq, struct srd_cq, ibcq);
		if (!srd_close_race_enter(&cq->inside, "poll_cq"))
			return -1;
		int rc = poll_cq(ibcq, n, wc);
		srd_close_race_exit(&cq->inside);
		return rc;
	}
	return poll_cq(ibcq, n, wc);
}

static int poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
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
		empty_poll(cq);
		return 0;
	}
take:
	found_completion(cq);
	srd_lock(&cq->lock);
	int k = 0;
	while (k < n && cq->count) {
		srd_wc_copy(&wc[k++], &cq->ring[cq->head]);
		cq->head = cq->head + 1 == cq->cap ? 0 : cq->head + 1;
		__atomic_store_n(&cq->count, cq->count - 1, __ATOMIC_RELAXED);
	}
	srd_unlock(&cq->lock);
	return k;
}

int srd_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct srd_cq *cq = container_of(ibcq, struct srd_cq, ibcq);
	bool checking = srd_close_race_checking();
	if (checking && !srd_close_race_enter(&cq->inside, "req_notify_cq"))
		return EINVAL;
	srd_shm_poller_leaves(); /* this thread is about to wait for an event: the agent takes the rings */
	srd_lock(&cq->lock);
	if (cq->armed != 1)
		cq->armed = solicited_only ? 2 : 1;
	srd_unlock(&cq->lock);
	if (checking)
		srd_close_race_exit(&cq->inside);
	return 0;
}


/* ---------------------------------------------------------------- extended CQ */

/* The wc flags rxe accepts: no completion timestamps (a software device has no HCA
 * clock; query_device_ex reports hca_core_clock 0), no cvlan, flow tag or TM info. */
#define SRD_WC_EX_FLAGS (IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | \
			 IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | \
			 IBV_WC_EX_WITH_DLID_PATH_BITS)

static inline struct srd_cq *xcq(struct ibv_cq_ex *x)
{
	return container_of(x, struct srd_cq, cqx);
}

/* cq->lock held: makes the oldest completion current and consumes it; ENOENT when none. */
static int x_take(struct srd_cq *cq)
{
	if (!cq->count)
		return ENOENT;
	cq->cur = cq->ring[cq->head];
	cq->head = (cq->head + 1) % cq->cap;
	__atomic_store_n(&cq->count, cq->count - 1, __ATOMIC_RELAXED);
	cq->cqx.status = cq->cur.status;
	cq->cqx.wr_id = cq->cur.wr_id;
	return 0;
}

static int start_poll_take(struct srd_cq *cq);

/* start_poll takes the CQ's lock, which end_poll releases; on ENOENT nothing is held
 * (the caller must not call end_poll then). */
static int x_start_poll(struct ibv_cq_ex *x, struct ibv_poll_cq_attr *attr)
{
	struct srd_cq *cq = xcq(x);
	if (attr && attr->comp_mask)
		return EINVAL;
	if (srd_close_race_checking()) {
		/* the session is inside the CQ from start_poll to end_poll (closerace.h) */
		if (!srd_close_race_enter(&cq->inside, "start_poll"))
			return EINVAL;
		int rc = start_poll_take(cq);
		if (rc)
			srd_close_race_exit(&cq->inside); /* no session: nothing is held */
		else
			cq->poll_inside = true;
		return rc;
	}
	return start_poll_take(cq);
}

static int start_poll_take(struct srd_cq *cq)
{
	if (!__atomic_load_n(&cq->count, __ATOMIC_ACQUIRE)) {
		/* as srd_poll_cq: the poller takes waiting packets itself, and an empty spin
		 * hands the core over now and then */
		bool (*hook)(void) = __atomic_load_n(&srd_cq_idle_hook, __ATOMIC_ACQUIRE);
		if (!(hook && hook() && __atomic_load_n(&cq->count, __ATOMIC_ACQUIRE))) {
			empty_poll(cq);
			return ENOENT;
		}
	}
	found_completion(cq);
	srd_lock(&cq->lock);
	int rc = x_take(cq);
	if (rc)
		srd_unlock(&cq->lock);
	return rc;
}

static int x_next_poll(struct ibv_cq_ex *x)
{
	return x_take(xcq(x));
}

static void x_end_poll(struct ibv_cq_ex *x)
{
	struct srd_cq *cq = xcq(x);
	bool inside = cq->poll_inside; /* read under the lock the session holds */
	cq->poll_inside = false;
	srd_unlock(&cq->lock);
	if (inside)
		srd_close_race_exit(&cq->inside);
}

static enum ibv_wc_opcode x_read_opcode(struct ibv_cq_ex *x) { return xcq(x)->cur.opcode; }
static uint32_t x_read_vendor_err(struct ibv_cq_ex *x) { return xcq(x)->cur.vendor_err; }
static uint32_t x_read_byte_len(struct ibv_cq_ex *x) { return xcq(x)->cur.byte_len; }
static __be32 x_read_imm_data(struct ibv_cq_ex *x) { return xcq(x)->cur.imm_data; }
static uint32_t x_read_qp_num(struct ibv_cq_ex *x) { return xcq(x)->cur.qp_num; }
static uint32_t x_read_src_qp(struct ibv_cq_ex *x) { return xcq(x)->cur.src_qp; }
static unsigned int x_read_wc_flags(struct ibv_cq_ex *x) { return xcq(x)->cur.wc_flags; }
static uint32_t x_read_slid(struct ibv_cq_ex *x) { return xcq(x)->cur.slid; }
static uint8_t x_read_sl(struct ibv_cq_ex *x) { return xcq(x)->cur.sl; }
static uint8_t x_read_dlid_path_bits(struct ibv_cq_ex *x) { return xcq(x)->cur.dlid_path_bits; }

/* verbs_context->create_cq_ex. The CQ is an ordinary one (poll_cq, req_notify_cq,
 * channels, resize and destroy work on ibv_cq_ex_to_cq of it) with the polling
 * interface of struct ibv_cq_ex on top; like rxe, a read_* accessor exists only for
 * a field asked for in wc_flags. */
struct ibv_cq_ex *srd_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr)
{
	if (!attr) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->wc_flags & ~(uint64_t)SRD_WC_EX_FLAGS) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) {
		errno = EINVAL;
		return NULL;
	}
	/* no creation flags (single-threaded, timestamps) and no parent domains here */
	if (((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && attr->flags) ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) && attr->parent_domain)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->cqe > INT32_MAX || attr->comp_vector > INT32_MAX) {
		errno = EINVAL;
		return NULL;
	}
	struct ibv_cq *ibcq = ibv_create_cq(context, (int)attr->cqe, attr->cq_context, attr->channel,
					    (int)attr->comp_vector);
	if (!ibcq)
		return NULL;
	struct srd_cq *cq = srd_cq_of(ibcq);
	struct ibv_cq_ex *x = &cq->cqx;
	cq->ex = true;
	x->start_poll = x_start_poll;
	x->next_poll = x_next_poll;
	x->end_poll = x_end_poll;
	x->read_opcode = x_read_opcode;
	x->read_vendor_err = x_read_vendor_err;
	x->read_wc_flags = x_read_wc_flags;
	uint64_t f = attr->wc_flags;
	if (f & IBV_WC_EX_WITH_BYTE_LEN) x->read_byte_len = x_read_byte_len;
	if (f & IBV_WC_EX_WITH_IMM) x->read_imm_data = x_read_imm_data;
	if (f & IBV_WC_EX_WITH_QP_NUM) x->read_qp_num = x_read_qp_num;
	if (f & IBV_WC_EX_WITH_SRC_QP) x->read_src_qp = x_read_src_qp;
	if (f & IBV_WC_EX_WITH_SLID) x->read_slid = x_read_slid;
	if (f & IBV_WC_EX_WITH_SL) x->read_sl = x_read_sl;
	if (f & IBV_WC_EX_WITH_DLID_PATH_BITS) x->read_dlid_path_bits = x_read_dlid_path_bits;
	return x;
}
