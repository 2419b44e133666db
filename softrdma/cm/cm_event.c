/*
 * softrdma librdmacm, event unit: event channels and the events queued on them, the calls that
 * take and acknowledge events (rdma_get_cm_event, rdma_ack_cm_event, rdma_event_str), and the
 * synchronous id's wait for the event its call produces. Calls only cm_util (g_lock, g_cond).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "cm_units.h"

struct cm_channel *channel_new(void)
{
	struct cm_channel *ch = calloc(1, sizeof(*ch));
	int fds[2];

	if (!ch)
		return NULL;
	if (pipe2(fds, O_CLOEXEC)) {
		free(ch);
		return NULL;
	}
	ch->ch.fd = fds[0];
	ch->wfd = fds[1];
	return ch;
}

/*
 * A thread blocked in rdma_get_cm_event on a channel being destroyed stays
 * blocked, as a read() of the kernel's rdma_cm fd would (rping's CM thread
 * is still waiting when its main thread tears down and returns). The
 * structure is then kept, so the sleeper never touches freed memory.
 */
void channel_free(struct cm_channel *ch)
{
	struct cm_event *e = ch->head, *n;

	for (; e; e = n) {
		n = e->next;
		free(e);
	}
	ch->head = ch->tail = NULL;
	ch->queued = 0;
	close(ch->ch.fd);
	close(ch->wfd);
	if (ch->waiters) {
		ch->closed = 1;
		return;
	}
	free(ch);
}

/* The channel's pipe holds one byte per queued event: the fd is readable
 * exactly while events wait, and every new event is a new edge for
 * edge-triggered pollers, as with the kernel's rdma_cm fd. */
void channel_push(struct cm_channel *ch, struct cm_event *e)
{
	char c = 'e';

	e->next = NULL;
	if (ch->tail)
		ch->tail->next = e;
	else
		ch->head = e;
	ch->tail = e;
	ch->queued++;
	if (write(ch->wfd, &c, 1) != 1) {
		/* cannot happen short of 64 KiB unread events */
	}
	e->owner->events_queued++;
	pthread_cond_broadcast(&g_cond);
}

void channel_unlink(struct cm_channel *ch, struct cm_event *e, struct cm_event *prev)
{
	char c;

	if (prev)
		prev->next = e->next;
	else
		ch->head = e->next;
	if (ch->tail == e)
		ch->tail = prev;
	e->next = NULL;
	ch->queued--;
	if (read(ch->ch.fd, &c, 1) != 1) {
		/* cannot happen: each queued event wrote its byte */
	}
	e->owner->events_queued--;
}

struct cm_event *event_new(struct cm_id *idp, enum rdma_cm_event_type type, int status)
{
	struct cm_event *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->owner = idp;
	e->ev.id = &idp->id;
	e->ev.event = type;
	e->ev.status = status;
	return e;
}

void post_event(struct cm_id *idp, enum rdma_cm_event_type type, int status)
{
	struct cm_event *e;

	if (!idp->chan)
		return;
	e = event_new(idp, type, status);
	if (e)
		channel_push(idp->chan, e);
}

/* Event data seen from the receiver: the peer's initiator depth is our
 * responder resources and vice versa, as the kernel's ib_cm reports them. */
void event_conn(struct cm_event *e, const struct wire_msg *m, int size)
{
	int n = m->pdata_len < size ? m->pdata_len : size;

	memcpy(e->pdata, m->pdata, n);
	e->ev.param.conn.private_data = e->pdata;
	e->ev.param.conn.private_data_len = size;
	e->ev.param.conn.responder_resources = m->initiator_depth;
	e->ev.param.conn.initiator_depth = m->responder_resources;
	e->ev.param.conn.flow_control = m->flow_control;
	e->ev.param.conn.retry_count = m->retry_count;
	e->ev.param.conn.rnr_retry_count = m->rnr_retry_count;
	e->ev.param.conn.srq = m->srq;
	e->ev.param.conn.qp_num = ntohl(m->qpn);
}

void event_pdata_only(struct cm_event *e, const struct wire_msg *m, int size)
{
	int n = m->pdata_len < size ? m->pdata_len : size;

	memcpy(e->pdata, m->pdata, n);
	e->ev.param.conn.private_data = e->pdata;
	e->ev.param.conn.private_data_len = size;
}

static void get_event_cleanup(void *arg)
{
	struct cm_channel *ch = arg;

	ch->waiters--;
	pthread_mutex_unlock(&g_lock);
}

CM_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct cm_channel *ch = (struct cm_channel *)channel;
	struct cm_event *e = NULL;
	volatile int rc = 0;	/* survives the cleanup handler's setjmp */

	if (!channel || !event)
		return fail(EINVAL);
	pthread_mutex_lock(&g_lock);
	ch->waiters++;
	/* blocking here is a cancellation point, like the read() it stands for */
	pthread_cleanup_push(get_event_cleanup, ch);
	while (!ch->head) {
		int fl;

		if (ch->closed) {
			pthread_cond_wait(&g_cond, &g_lock);
			continue;
		}
		fl = fcntl(ch->ch.fd, F_GETFL);
		if (fl >= 0 && (fl & O_NONBLOCK)) {
			rc = EAGAIN;
			break;
		}
		pthread_cond_wait(&g_cond, &g_lock);
	}
	if (!rc) {
		e = ch->head;
		channel_unlink(ch, e, NULL);
		e->owner->reported++;
		*event = &e->ev;
	}
	pthread_cleanup_pop(1);
	return rc ? fail(rc) : 0;
}

CM_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct cm_event *e = (struct cm_event *)event;

	if (!event)
		return fail(EINVAL);
	pthread_mutex_lock(&g_lock);
	e->owner->acked++;
	pthread_cond_broadcast(&g_cond);
	pthread_mutex_unlock(&g_lock);
	free(e);
	return 0;
}

CM_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	switch (event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
	case RDMA_CM_EVENT_ADDR_ERROR: return "RDMA_CM_EVENT_ADDR_ERROR";
	case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
	case RDMA_CM_EVENT_ROUTE_ERROR: return "RDMA_CM_EVENT_ROUTE_ERROR";
	case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
	case RDMA_CM_EVENT_CONNECT_RESPONSE: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
	case RDMA_CM_EVENT_CONNECT_ERROR: return "RDMA_CM_EVENT_CONNECT_ERROR";
	case RDMA_CM_EVENT_UNREACHABLE: return "RDMA_CM_EVENT_UNREACHABLE";
	case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
	case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
	case RDMA_CM_EVENT_DISCONNECTED: return "RDMA_CM_EVENT_DISCONNECTED";
	case RDMA_CM_EVENT_DEVICE_REMOVAL: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
	case RDMA_CM_EVENT_MULTICAST_JOIN: return "RDMA_CM_EVENT_MULTICAST_JOIN";
	case RDMA_CM_EVENT_MULTICAST_ERROR: return "RDMA_CM_EVENT_MULTICAST_ERROR";
	case RDMA_CM_EVENT_ADDR_CHANGE: return "RDMA_CM_EVENT_ADDR_CHANGE";
	case RDMA_CM_EVENT_TIMEWAIT_EXIT: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
	default: return "UNKNOWN EVENT";
	}
}

/* ------------------------------------------------------------- sync mode */

/* A synchronous id waits for the event its call produces, like librdmacm's
 * ucma_complete(); the event stays in id->event until the next call. */
int sync_complete(struct rdma_cm_id *id)
{
	struct rdma_cm_event *ev;
	int rc;

	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	rc = rdma_get_cm_event(id->channel, &ev);
	if (rc)
		return rc;
	id->event = ev;
	if (ev->status) {
		if (ev->event == RDMA_CM_EVENT_REJECTED)
			return fail(ECONNREFUSED);
		return fail(ev->status < 0 ? -ev->status : ev->status);
	}
	if (ev->event == RDMA_CM_EVENT_DISCONNECTED || ev->event == RDMA_CM_EVENT_UNREACHABLE ||
	    ev->event == RDMA_CM_EVENT_CONNECT_ERROR || ev->event == RDMA_CM_EVENT_ADDR_ERROR ||
	    ev->event == RDMA_CM_EVENT_ROUTE_ERROR)
		return fail(ECONNRESET);
	return 0;
}

void sync_ack_old(struct rdma_cm_id *id)
{
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
}
