/*
 * softrdma librdmacm, thread unit: the one background thread per process that polls the ids'
 * sockets, accepts listeners' connections, reads records and hands them to the state machine,
 * and fires deadlines and connect retries; its wake-up pipe, its start (with the CM timeouts
 * read from the environment) and its reset in a child after fork. Calls cm_conn, cm_id,
 * cm_device and cm_util.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "cm_units.h"

static int g_thread_started;
static int g_wake[2] = { -1, -1 };
static uint64_t g_gen;
int g_timeout_ms = 15000;
int g_refused_retry_ms = 3000;

/* How long a listener stops accepting when the process is out of descriptors. */
#define ACCEPT_PAUSE_MS 100

void wake_thread(void)
{
	char c = 'w';

	if (g_wake[1] >= 0 && write(g_wake[1], &c, 1) < 0) {
		/* a full pipe already guarantees a wake-up */
	}
}

/* Wait until the thread has re-scanned the id list (g_lock held). */
void wait_thread_pass(void)
{
	uint64_t g0;

	if (!g_thread_started)
		return;
	g0 = g_gen;
	wake_thread();
	while (g_gen == g0)
		pthread_cond_wait(&g_cond, &g_lock);
}

static void *cm_thread(void *arg);

/*
 * The CM thread does not survive fork(). The child forgets the parent's ids
 * and devices (closing its copies of their sockets, so a parent's listener
 * or connection does not outlive the parent in the child) and starts afresh.
 */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&g_lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&g_lock);
}

static void atfork_child(void)
{
	for (struct cm_id *i = g_ids; i; i = i->next)
		if (i->sock >= 0)
			close(i->sock);
	g_ids = NULL;
	if (g_wake[0] >= 0) {
		close(g_wake[0]);
		close(g_wake[1]);
	}
	g_wake[0] = g_wake[1] = -1;
	g_thread_started = 0;
	devices_forget();
	pthread_mutex_init(&g_lock, NULL);
	pthread_cond_init(&g_cond, NULL);
}

__attribute__((constructor)) static void cm_register_atfork(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

int start_thread(void)
{
	pthread_t t;
	sigset_t all, old;
	int rc;

	const char *tmo = getenv("SOFTRDMA_CM_TIMEOUT_MS");

	if (g_thread_started)
		return 0;
	/* read when the first id or channel appears, so a test can set it late */
	const char *rr = getenv("SOFTRDMA_CM_REFUSED_RETRY_MS");

	if (tmo && atoi(tmo) > 0)
		g_timeout_ms = atoi(tmo);
	if (rr && atoi(rr) >= 0)
		g_refused_retry_ms = atoi(rr);
	if (pipe2(g_wake, O_NONBLOCK | O_CLOEXEC))
		return -1;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t, NULL, cm_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		close(g_wake[0]);
		close(g_wake[1]);
		g_wake[0] = g_wake[1] = -1;
		return fail(rc);
	}
	pthread_detach(t);
	g_thread_started = 1;
	return 0;
}

/*
 * Take the connections waiting on a listener's socket, up to its backlog of
 * pending ids (the rest wait in the kernel's queue until a pending request
 * arrives or times out). Out of descriptors (EMFILE and the like), the
 * listener stops accepting for a moment instead of polling readable forever.
 * A connection from another host is closed at once unless SOFTRDMA_REMOTE is set.
 */
static void accept_new(struct cm_id *l)
{
	while (l->npending < l->backlog) {
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		int s = accept4(l->sock, (struct sockaddr *)&from, &fl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct cm_id *c;
		int one = 1;

		if (s < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				l->accept_paused_until = now_ms() + ACCEPT_PAUSE_MS;
			return;
		}
		if (!peer_allowed((struct sockaddr *)&from)) {
			close(s); /* another host, not opted in: no event, no pending id */
			continue;
		}
		setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = id_new(NULL, NULL, l->id.ps, l->id.qp_type);
		if (!c) {
			close(s);
			l->accept_paused_until = now_ms() + ACCEPT_PAUSE_MS;
			return;
		}
		c->internal = 1;
		c->listener = l;
		c->sock = s;
		c->state = ST_PENDING;
		c->deadline_ms = now_ms() + g_timeout_ms;
		l->npending++;
	}
}

/* Whether the CM thread polls a listener's socket now; otherwise, when to look again (0: when a pending id ends). */
static int listener_polled(struct cm_id *l, uint64_t now, uint64_t *again)
{
	*again = 0;
	if (l->accept_paused_until > now) {
		*again = l->accept_paused_until;
		return 0;
	}
	return l->npending < l->backlog;
}

static void read_sock(struct cm_id *idp)
{
	int fd = idp->sock;

	while (idp->sock == fd && fd >= 0) {
		ssize_t n = recv(fd, idp->rbuf + idp->rlen, sizeof(idp->rbuf) - idp->rlen, 0);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			peer_closed(idp);
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		idp->rlen += n;
		if (idp->rlen == sizeof(idp->rbuf)) {
			struct wire_msg m;

			memcpy(&m, idp->rbuf, sizeof(m));
			idp->rlen = 0;
			handle_msg(idp, &m);
			/* handle_msg may have freed an internal id */
			if (!id_valid(idp))
				return;
		}
	}
}

/* States whose socket carries (or awaits) a CM conversation. A bound but
 * unconnected TCP socket polls as hung up, so the others are left out. */
static int polled_state(enum id_state st)
{
	switch (st) {
	case ST_LISTEN:
	case ST_PENDING:
	case ST_CONNECTING:
	case ST_RESP_WAIT:
	case ST_REQ_RCVD:
	case ST_ACCEPTED:
	case ST_ESTABLISHED:
	case ST_DISC_SENT:
		return 1;
	default:
		return 0;
	}
}

static void *cm_thread(void *arg)
{
	struct pollfd *pfd = NULL;
	struct cm_id **map = NULL;
	int cap = 0;

	(void)arg;
	pthread_mutex_lock(&g_lock);
	for (;;) {
		int n = 0, timeout = -1, rc;
		uint64_t now = now_ms();
		char buf[64];

		int count = 1;
		for (struct cm_id *i = g_ids; i; i = i->next)
			count++;
		if (count > cap) {
			cap = count * 2;
			free(pfd);
			free(map);
			pfd = calloc(cap, sizeof(*pfd));
			map = calloc(cap, sizeof(*map));
			if (!pfd || !map)
				abort();
		}
		pfd[n].fd = g_wake[0];
		pfd[n].events = POLLIN;
		map[n++] = NULL;
		for (struct cm_id *i = g_ids; i; i = i->next)
			i->npending = 0;
		for (struct cm_id *i = g_ids; i; i = i->next)
			if (i->state == ST_PENDING && i->listener)
				i->listener->npending++;
		for (struct cm_id *i = g_ids; i; i = i->next) {
			if (i->deadline_ms) {
				int left = i->deadline_ms > now ? (int)(i->deadline_ms - now) : 0;

				if (timeout < 0 || left < timeout)
					timeout = left;
			}
			if (i->retry_at) {
				int left = i->retry_at > now ? (int)(i->retry_at - now) : 0;

				if (timeout < 0 || left < timeout)
					timeout = left;
			}
			if (i->sock < 0 || i->req_unanswered || !polled_state(i->state))
				continue;
			if (i->state == ST_LISTEN) {
				uint64_t again;

				if (!listener_polled(i, now, &again)) {
					if (again) {
						int left = again > now ? (int)(again - now) : 0;

						if (timeout < 0 || left < timeout)
							timeout = left;
					}
					continue;
				}
			}
			pfd[n].fd = i->sock;
			pfd[n].events = i->connect_pending ? POLLOUT : POLLIN;
			pfd[n].revents = 0;
			map[n++] = i;
		}
		pthread_mutex_unlock(&g_lock);
		rc = poll(pfd, n, timeout);
		pthread_mutex_lock(&g_lock);
		g_gen++;
		pthread_cond_broadcast(&g_cond);
		if (rc < 0)
			continue;
		if (pfd[0].revents & POLLIN)
			while (read(g_wake[0], buf, sizeof(buf)) > 0)
				;
		for (int k = 1; k < n; k++) {
			struct cm_id *i = map[k];

			if (!pfd[k].revents || !id_valid(i) || i->sock != pfd[k].fd)
				continue;
			if (i->connect_pending) {
				int err = 0;
				socklen_t el = sizeof(err);

				if (getsockopt(i->sock, SOL_SOCKET, SO_ERROR, &err, &el))
					err = errno;
				connect_done(i, err);
				continue;
			}
			if (i->state == ST_LISTEN)
				accept_new(i);
			else
				read_sock(i);
		}
		now = now_ms();
		for (struct cm_id *i = g_ids, *next; i; i = next) {
			next = i->next;
			if (i->retry_at && i->retry_at <= now && i->state == ST_CONNECTING)
				start_connect(i);
			else if (i->deadline_ms && i->deadline_ms <= now)
				handle_timeout(i);
		}
	}
	return NULL;
}
