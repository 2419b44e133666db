/*
 * The packet path's endpoints: UDP sockets and the QPN table (a QPN is
 * (udp_port << 8) | slot), transmission (sendmmsg batching, fault injection
 * applied per datagram), the agent's wake-ups (epoll set, kick eventfd, the
 * timer hint), and the packet counters.
 * Owns: sockets, the QPN table and its rwlock, the epoll set.
 * Calls: faults, device (whether other hosts may reach us).
 */
#include "net.h"
#include "faults.h"
#include "shm.h"
#include "device.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <arpa/inet.h>

/* ---------------------------------------------------------------- statistics */

struct srd_stats srd_st;

static void print_stats(void)
{
	/* at exit, while the agent may still count: a snapshot, each counter read atomically */
	struct srd_stats v;
	unsigned long *src = (unsigned long *)&srd_st, *dst = (unsigned long *)&v;
	for (size_t i = 0; i < sizeof(v) / sizeof(unsigned long); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	struct srd_shm_stats shm;
	srd_shm_stats(&shm);
	fprintf(stderr, "softrdma[%d]: tx %lu rx %lu nak_seq %lu rnr %lu timeouts %lu dup_rx %lu eagain %lu "
		"invalid %lu read_gap %lu shm_tx %lu shm_rx %lu doorbells %lu unread_waits %lu peer_gone %lu "
		"agent_takeback %lu agent_hold %lu agent_handed_waits %lu bias_owned %lu bias_revoked %lu "
		"shm_full %lu shm_full_yields %lu shm_full_wait_us %lu shm_fill_max %lu shm_fill_drains %lu shm_fill_sum %lu\n",
		(int)getpid(), v.tx, v.rx, v.nak_seq, v.rnr, v.timeouts, v.dup_rx, v.eagain,
		v.invalid, v.read_gap, v.shm_tx, v.shm_rx, v.doorbells, v.unread_waits,
		v.peer_gone, v.agent_takeback, v.agent_hold, v.agent_handed_waits,
		__atomic_load_n(&srd_lock_bias_owned, __ATOMIC_RELAXED),
		__atomic_load_n(&srd_lock_bias_revoked, __ATOMIC_RELAXED),
		shm.full_puts, shm.full_yields, shm.full_wait_ns / 1000, shm.fill_max, shm.fill_drains, shm.fill_sum);
}

/* ---------------------------------------------------------------- sockets, QPN table, wake-ups */

/*
 * A QPN's port is served by a set of UDP sockets bound to that port on specific
 * addresses, never the wildcard: the loopback addresses (peers on this host are
 * reached over loopback) and, with SOFTRDMA_REMOTE, the addresses of the QP's
 * device (its GIDs), for other hosts. A packet leaves from the member whose
 * address is of the destination's kind, so the peer sees it come from the address
 * it knows us by.
 */
#define SOCK_ADDRS (SRD_GID_TBL_LEN + 2)
enum addr_kind { K_LO4, K_LO6, K_V4, K_LL6, K_V6 };

struct srd_sock {
	int nfd;
	int fds[SOCK_ADDRS];
	enum addr_kind kinds[SOCK_ADDRS];
	struct in6_addr addrs[SOCK_ADDRS];
	struct srd_device *dev;
	uint16_t port;
	int used;
	uint8_t next_slot; /* where the search for a free slot starts: numbers are handed out in turn */
	struct srd_qp *slots[256];
	int nsrq;                 /* XRC SRQ numbers of this port in use */
	bool srqs[256];
	uint8_t next_srq_slot;    /* the same for XRC SRQ numbers */
};

srd_brlock_t srd_qpn_table_lock = SRD_BRLOCK_INIT(SRD_BR_QPN);
static struct srd_sock *g_socks[256];
static int g_nsocks;
static int g_epfd = -1, g_kickfd = -1;
static volatile int g_timers_hint;
static int g_agent_sleeping, g_wake_pending; /* kicks write the eventfd only to a sleeping agent */
static bool g_faults; /* fault injection configured: every packet goes through faults.c */

void srd_net_init(void)
{
	g_faults = srd_faults_enabled();
	g_epfd = epoll_create1(EPOLL_CLOEXEC);
	g_kickfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (getenv("SOFTRDMA_STATS")) {
		srd_shm_count_fill();
		atexit(print_stats);
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = g_kickfd };
	epoll_ctl(g_epfd, EPOLL_CTL_ADD, g_kickfd, &ev);
	int lfd = srd_shm_leave_fd(); /* a polling thread leaving wakes the agent (agent.c) */
	if (lfd >= 0) {
		ev.data.fd = lfd;
		epoll_ctl(g_epfd, EPOLL_CTL_ADD, lfd, &ev);
	}
}

void srd_net_atfork_child(void)
{
	for (int i = 0; i < g_nsocks; i++) {
		for (int k = 0; k < g_socks[i]->nfd; k++)
			close(g_socks[i]->fds[k]);
		free(g_socks[i]);
		g_socks[i] = NULL;
	}
	g_nsocks = 0;
	if (g_epfd >= 0)
		close(g_epfd);
	if (g_kickfd >= 0)
		close(g_kickfd);
	g_epfd = g_kickfd = -1;
	srd_br_reset(&srd_qpn_table_lock);
	g_agent_sleeping = g_wake_pending = 0;
	srd_shm_atfork_child();
	srd_faults_atfork_child();
}

void srd_net_wake(void)
{
	__atomic_store_n(&g_wake_pending, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&g_agent_sleeping, __ATOMIC_SEQ_CST))
		return; /* the agent is awake and sees g_wake_pending before it sleeps */
	uint64_t one = 1;
	if (write(g_kickfd, &one, 8) != 8)
		return;
}

bool srd_net_wake_pending(void)
{
	return __atomic_load_n(&g_wake_pending, __ATOMIC_RELAXED) != 0;
}

bool srd_net_take_wake(void)
{
	return __atomic_exchange_n(&g_wake_pending, 0, __ATOMIC_ACQ_REL) != 0;
}

void srd_qp_kick(struct srd_qp *qp)
{
	__atomic_store_n(&qp->kick, true, __ATOMIC_RELEASE);
	srd_net_wake();
}

void srd_timer_hint(bool any)
{
	__atomic_store_n(&g_timers_hint, any ? 1 : 0, __ATOMIC_RELAXED);
}

bool srd_timer_hinted(void)
{
	return __atomic_load_n(&g_timers_hint, __ATOMIC_RELAXED) != 0;
}

int srd_net_wait(struct epoll_event *evs, int max, int tmo_ms)
{
	if (!tmo_ms)
		return epoll_wait(g_epfd, evs, max, 0);
	/* asleep: kicks and same-host senders must wake us; neither may be waiting already */
	__atomic_store_n(&g_agent_sleeping, 1, __ATOMIC_SEQ_CST);
	int n = 0;
	if (!__atomic_load_n(&g_wake_pending, __ATOMIC_SEQ_CST) && srd_shm_sleep_begin()) {
		n = epoll_wait(g_epfd, evs, max, tmo_ms);
		srd_shm_sleep_end();
	}
	__atomic_store_n(&g_agent_sleeping, 0, __ATOMIC_SEQ_CST);
	return n;
}

int srd_net_wait_ns(struct epoll_event *evs, int max, uint64_t ns)
{
	ST(agent_handed_waits);
	__atomic_store_n(&g_agent_sleeping, 1, __ATOMIC_SEQ_CST);
	int n = 0;
	if (!__atomic_load_n(&g_wake_pending, __ATOMIC_SEQ_CST)) {
		struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
		/* the system call, not glibc's wrapper (2.35+): the library keeps loading on an older glibc */
#ifdef SYS_epoll_pwait2
		n = (int)syscall(SYS_epoll_pwait2, g_epfd, evs, max, &ts, NULL, (size_t)0);
#else
		n = -1;
		errno = ENOSYS;
#endif
		if (n < 0 && errno == ENOSYS) { /* before Linux 5.11: no nanosecond timeout */
			n = epoll_wait(g_epfd, evs, max, 0);
			if (n == 0) {
				nanosleep(&ts, NULL);
				n = epoll_wait(g_epfd, evs, max, 0);
			}
		}
		if (n < 0)
			n = 0;
	}
	__atomic_store_n(&g_agent_sleeping, 0, __ATOMIC_SEQ_CST);
	return n;
}

int srd_net_event_fd(const struct epoll_event *ev)
{
	if (ev->data.fd == g_kickfd) {
		uint64_t v;
		if (read(g_kickfd, &v, 8) < 0) { /* already drained */ }
		return -1;
	}
	if (ev->data.fd == srd_shm_leave_fd()) {
		uint64_t v;
		if (read(ev->data.fd, &v, 8) < 0) { /* already drained */ }
		return -1;
	}
	return ev->data.fd;
}

static enum addr_kind kind_of(const struct in6_addr *a)
{
	if (IN6_IS_ADDR_V4MAPPED(a))
		return a->s6_addr[12] == 127 ? K_LO4 : K_V4;
	if (IN6_IS_ADDR_LOOPBACK(a))
		return K_LO6;
	return IN6_IS_ADDR_LINKLOCAL(a) ? K_LL6 : K_V6;
}

static int bind_member(struct srd_sock *s, const struct in6_addr *addr, int ifindex, uint16_t port)
{
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int zero = 0, big = 4 << 20;
	setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_addr = *addr, .sin6_port = htons(port) };
	if (IN6_IS_ADDR_LINKLOCAL(addr))
		sa.sin6_scope_id = (uint32_t)ifindex;
	socklen_t sl = sizeof(sa);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || getsockname(fd, (struct sockaddr *)&sa, &sl)) {
		int e = errno;
		close(fd);
		return -e;
	}
	s->port = ntohs(sa.sin6_port);
	s->kinds[s->nfd] = kind_of(addr);
	s->addrs[s->nfd] = *addr;
	s->fds[s->nfd++] = fd;
	return 0;
}

/*
 * Opens the socket set of a new port for dev: the first member takes an ephemeral
 * port on loopback, the others bind the same port on their addresses. An address
 * that cannot be bound here (an interface without IPv6, a GID derived from the MAC
 * that no interface holds) is left out; a port another socket already holds on one
 * of the addresses makes the whole set start again on a new port.
 */
static struct srd_sock *open_sock(struct srd_device *dev)
{
	struct in6_addr addrs[SOCK_ADDRS];
	int n = 0;
	struct in6_addr lo4 = { .s6_addr = { [10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1 } };
	addrs[n++] = lo4;
	addrs[n++] = in6addr_loopback;
	for (int g = 0; srd_remote_enabled() && g < dev->ngids && n < SOCK_ADDRS; g++) {
		const struct in6_addr *a = (const struct in6_addr *)dev->gids[g].raw;
		bool dup = false;
		for (int k = 0; k < n; k++)
			dup |= !memcmp(&addrs[k], a, sizeof(*a));
		if (!dup && !IN6_IS_ADDR_UNSPECIFIED(a))
			addrs[n++] = *a;
	}
	struct srd_sock *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->dev = dev;
	for (int attempt = 0; attempt < 32; attempt++) {
		s->nfd = 0;
		int e = 0;
		for (int k = 0; k < n && e != -EADDRINUSE; k++) {
			/* until one member is bound, the next address takes an ephemeral port */
			e = bind_member(s, &addrs[k], dev->ifindex, s->nfd ? s->port : 0);
		}
		if (e != -EADDRINUSE && s->nfd) {
			if (!g_faults)
				srd_shm_create(s->port);
			for (int k = 0; k < s->nfd; k++) {
				struct epoll_event ev = { .events = EPOLLIN, .data.fd = s->fds[k] };
				epoll_ctl(g_epfd, EPOLL_CTL_ADD, s->fds[k], &ev);
			}
			return s;
		}
		for (int k = 0; k < s->nfd; k++)
			close(s->fds[k]);
	}
	free(s);
	errno = EADDRINUSE;
	return NULL;
}

/* The member to send to `to` from: for a peer on this host the loopback member of the
 * destination's family, else the member bound to our GID in use (sgid), else one of the
 * destination's kind, else the first. */
static int pick_fd(const struct srd_sock *s, const struct sockaddr_in6 *to, const uint8_t *sgid)
{
	enum addr_kind k = kind_of(&to->sin6_addr);
	if (k != K_LO4 && k != K_LO6)
		for (int i = 0; i < s->nfd; i++)
			if (!memcmp(&s->addrs[i], sgid, 16))
				return s->fds[i];
	for (int i = 0; i < s->nfd; i++)
		if (s->kinds[i] == k)
			return s->fds[i];
	return s->fds[0];
}

/*
 * The index of a socket of dev with a free QP slot (srq false) or XRC SRQ slot (true), a new
 * socket opened when none has one; -errno when none can be. Holds the QPN table for writing.
 */
static int sock_with_room(struct srd_device *dev, bool srq)
{
	for (int i = 0; i < g_nsocks; i++)
		if (g_socks[i]->dev == dev && (srq ? g_socks[i]->nsrq : g_socks[i]->used) < 256)
			return i;
	if (g_nsocks == 256)
		return -ENOMEM;
	struct srd_sock *s = open_sock(dev);
	if (!s)
		return -(errno ? errno : ENOMEM);
	g_socks[g_nsocks] = s;
	return g_nsocks++;
}

int srd_net_alloc_qpn(struct srd_qp *qp)
{
	srd_br_wrlock(&srd_qpn_table_lock);
	int si = sock_with_room(qp->dev, false);
	if (si < 0) {
		srd_br_wrunlock(&srd_qpn_table_lock);
		return -si;
	}
	struct srd_sock *s = g_socks[si];
	/*
	 * Next fit, not first fit: a destroyed QP's number comes back only after the socket's other
	 * 255 numbers were handed out (rxe allocates cyclically too). With first fit the next QP
	 * took the number at once, and a packet of the destroyed QP still in a socket buffer or a
	 * ring (its peer destroyed and re-created the same way, both starting at the same PSN) was
	 * taken as the new connection's own: seen as a WRITE completing with the old request's
	 * bytes in place of its own.
	 */
	int slot = s->next_slot;
	while (s->slots[slot])
		slot = (slot + 1) & 0xff;
	s->next_slot = (uint8_t)(slot + 1);
	s->slots[slot] = qp;
	s->used++;
	qp->sock = si;
	qp->ibqp.qp_num = ((uint32_t)s->port << 8) | (uint32_t)slot;
	srd_br_wrunlock(&srd_qpn_table_lock);
	return 0;
}

void srd_net_free_qpn(struct srd_qp *qp)
{
	srd_br_wrlock(&srd_qpn_table_lock);
	struct srd_sock *s = g_socks[qp->sock];
	int slot = (int)(qp->ibqp.qp_num & 0xff);
	if (s->slots[slot] == qp) {
		s->slots[slot] = NULL;
		s->used--;
	}
	srd_br_wrunlock(&srd_qpn_table_lock);
}

/* An XRC SRQ's number is (udp_port << 8) | slot like a QPN, in a name space of its own: the
 * port tells every process of the host which process holds the SRQ. */
int srd_net_alloc_srqn(struct srd_device *dev, uint32_t *srqn)
{
	srd_br_wrlock(&srd_qpn_table_lock);
	int si = sock_with_room(dev, true);
	if (si < 0) {
		srd_br_wrunlock(&srd_qpn_table_lock);
		return -si;
	}
	struct srd_sock *s = g_socks[si];
	/* next fit, as QP numbers (srd_net_alloc_qpn): a relay of a destroyed SRQ's number still
	 * on its way must not reach an SRQ created after it */
	int slot = s->next_srq_slot;
	while (s->srqs[slot])
		slot = (slot + 1) & 0xff;
	s->next_srq_slot = (uint8_t)(slot + 1);
	s->srqs[slot] = true;
	s->nsrq++;
	*srqn = ((uint32_t)s->port << 8) | (uint32_t)slot;
	srd_br_wrunlock(&srd_qpn_table_lock);
	return 0;
}

void srd_net_free_srqn(uint32_t srqn)
{
	srd_br_wrlock(&srd_qpn_table_lock);
	for (int i = 0; i < g_nsocks; i++)
		if (g_socks[i]->port == (uint16_t)(srqn >> 8) && g_socks[i]->srqs[srqn & 0xff]) {
			g_socks[i]->srqs[srqn & 0xff] = false;
			g_socks[i]->nsrq--;
		}
	srd_br_wrunlock(&srd_qpn_table_lock);
}

/* A port of ours on dev (the first, opened if there is none yet); 0 when none can be opened. */
uint16_t srd_net_any_port(struct srd_device *dev)
{
	srd_br_wrlock(&srd_qpn_table_lock);
	uint16_t port = 0;
	for (int i = 0; i < g_nsocks && !port; i++)
		if (g_socks[i]->dev == dev)
			port = g_socks[i]->port;
	if (!port && g_nsocks < 256) {
		struct srd_sock *s = open_sock(dev);
		if (s) {
			g_socks[g_nsocks++] = s;
			port = s->port;
		}
	}
	srd_br_wrunlock(&srd_qpn_table_lock);
	return port;
}

/* caller holds the QPN table for reading */
bool srd_net_port_ours(uint16_t port)
{
	for (int i = 0; i < g_nsocks; i++)
		if (g_socks[i]->port == port)
			return true;
	return false;
}

bool srd_net_owns_qpn(uint32_t qpn)
{
	bool own = false;
	srd_net_rdlock();
	for (int i = 0; i < g_nsocks; i++)
		if (g_socks[i]->port == (uint16_t)(qpn >> 8))
			own = true;
	srd_net_unlock();
	return own;
}

/* caller holds the QPN table for reading (srd_net_rdlock) */
struct srd_qp *srd_net_lookup(uint32_t qpn)
{
	if (qpn > SRD_HDR_PSN_MASK)
		return NULL; /* QPNs are 24 bits: the top byte is reserved */
	uint16_t port = (uint16_t)(qpn >> 8);
	for (int i = 0; i < g_nsocks; i++)
		if (g_socks[i]->port == port)
			return g_socks[i]->slots[qpn & 0xff];
	return NULL;
}

static bool is_loopback(const struct in6_addr *a)
{
	return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

/* Without SOFTRDMA_REMOTE only this host talks to softrdma, and it always sends from a
 * loopback member: a datagram from any other source address is not for us. */
bool srd_net_source_allowed(const struct sockaddr_in6 *from)
{
	return from->sin6_family == AF_INET6 && (is_loopback(&from->sin6_addr) || srd_remote_enabled());
}

bool srd_net_from_peer(const struct srd_qp *qp, const struct sockaddr_in6 *from)
{
	/* modify_qp writes the peer on the way to RTR and then publishes the state (release):
	 * before RTR there is no peer to compare with, and reading it would race that write (a
	 * stale packet for a QP number just handed out again, seen by ThreadSanitizer) */
	int s = __atomic_load_n(&qp->state, __ATOMIC_ACQUIRE);
	if (s == IBV_QPS_RESET || s == IBV_QPS_INIT)
		return false;
	if (from->sin6_family != AF_INET6 || from->sin6_port != qp->peer.sin6_port)
		return false;
	/* a peer on this host is reached over loopback; which loopback address its
	 * packets come from depends on the GID it uses for us, not on the one we use */
	if (is_loopback(&qp->peer.sin6_addr))
		return is_loopback(&from->sin6_addr);
	return !memcmp(&from->sin6_addr, &qp->peer.sin6_addr, sizeof(from->sin6_addr));
}


void srd_net_for_each_qp(void (*fn)(struct srd_qp *qp, void *arg), void *arg)
{
	srd_net_rdlock();
	for (int s = 0; s < g_nsocks; s++)
		for (int i = 0; i < 256; i++)
			if (g_socks[s]->slots[i])
				fn(g_socks[s]->slots[i], arg);
	srd_net_unlock();
}

/*
 * Send batching: a burst of packets (a long message, a READ answer) leaves in
 * sendmmsg calls of up to BATCH datagrams instead of one system call each.
 */
#define BATCH 32
struct batch {
	int depth, n, fd;
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	struct sockaddr_in6 to[BATCH];
	uint8_t data[BATCH][MAX_PKT];
};
static __thread struct batch *tl_batch __attribute__((tls_model("initial-exec")));

static void batch_flush(struct batch *b)
{
	int off = 0;
	while (off < b->n) {
		int r = sendmmsg(b->fd, b->msgs + off, (unsigned)(b->n - off), MSG_DONTWAIT);
		if (r <= 0) {
			ST(eagain); /* the rest is lost; retransmission recovers */
			break;
		}
		off += r;
	}
	b->n = 0;
}

/* A thread's batch (over 100 KiB) is freed when the thread exits. */
static pthread_key_t g_batch_key;
static pthread_once_t g_batch_once = PTHREAD_ONCE_INIT;
static bool g_batch_key_ok;

static void batch_exit(void *p)
{
	if (tl_batch == p)
		tl_batch = NULL;
	free(p);
}

static void batch_key_init(void)
{
	g_batch_key_ok = pthread_key_create(&g_batch_key, batch_exit) == 0;
}

__attribute__((destructor)) static void batch_key_fini(void)
{
	if (g_batch_key_ok)
		pthread_key_delete(g_batch_key); /* no exit callback may point into an unloaded library */
	g_batch_key_ok = false;
}

void srd_batch_begin(void)
{
	if (!tl_batch) {
		tl_batch = calloc(1, sizeof(*tl_batch));
		if (!tl_batch)
			return;
		pthread_once(&g_batch_once, batch_key_init);
		if (g_batch_key_ok)
			pthread_setspecific(g_batch_key, tl_batch);
	}
	tl_batch->depth++;
}

void srd_batch_end(void)
{
	if (!tl_batch || !tl_batch->depth)
		return;
	if (--tl_batch->depth == 0 && tl_batch->n)
		batch_flush(tl_batch);
}

/* Wakes a same-host receiver asleep in epoll: a header-sized datagram with the doorbell
 * magic on its loopback socket (the receiver drops it before any QP sees it). */
static void ring_doorbell(int fd, const struct sockaddr_in6 *to)
{
	struct pkt_hdr d = { .magic = PKT_DOORBELL };
	ST(doorbells);
	if (sendto(fd, &d, sizeof(d), MSG_DONTWAIT, (const struct sockaddr *)to, sizeof(*to)) < 0)
		ST(eagain);
}

static void xmit_sock(struct srd_sock *sock, const uint8_t *sgid, const struct sockaddr_in6 *to,
		      struct pkt_hdr *h, const void *payload, size_t len, uint64_t *stamp)
{
	h->magic = PKT_MAGIC;
	if (stamp)
		*stamp = 0;
	int fd = pick_fd(sock, to, sgid);
	if (!g_faults && is_loopback(&to->sin6_addr)) {
		/* a peer on this host with a ring: no datagram, no system call */
		bool doorbell;
		uint64_t st;
		int r = srd_shm_send(ntohs(to->sin6_port), sock->port, h, sizeof(*h), payload,
				     len, &doorbell, &st);
		if (stamp)
			*stamp = st;
		if (r) {
			if (doorbell)
				ring_doorbell(fd, to);
			if (r > 0)
				ST(shm_tx);
			else
				ST(eagain); /* lost, as a datagram the kernel dropped */
			return;
		}
	}
	struct batch *b = tl_batch;
	if (!g_faults && b && b->depth) {
		if (b->n && (b->fd != fd || b->n == BATCH))
			batch_flush(b);
		int i = b->n++;
		b->fd = fd;
		memcpy(b->data[i], h, sizeof(*h));
		if (len)
			memcpy(b->data[i] + sizeof(*h), payload, len);
		b->to[i] = *to;
		b->iov[i].iov_base = b->data[i];
		b->iov[i].iov_len = sizeof(*h) + len;
		memset(&b->msgs[i], 0, sizeof(b->msgs[i]));
		b->msgs[i].msg_hdr.msg_name = &b->to[i];
		b->msgs[i].msg_hdr.msg_namelen = sizeof(b->to[i]);
		b->msgs[i].msg_hdr.msg_iov = &b->iov[i];
		b->msgs[i].msg_hdr.msg_iovlen = 1;
		ST(tx);
		return;
	}
	int copies = 1;
	if (g_faults) {
		bool held;
		copies = srd_faults_apply(fd, to, h, sizeof(*h), payload, len, &held);
		if (held)
			srd_net_wake();
	}
	struct iovec iov[2] = { { h, sizeof(*h) }, { (void *)payload, len } };
	struct msghdr m = { .msg_name = (void *)to, .msg_namelen = sizeof(*to),
			    .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	if (!g_faults)
		ST(tx);
	for (int i = 0; i < copies; i++)
		if (sendmsg(fd, &m, MSG_DONTWAIT) < 0 && !g_faults)
			ST(eagain); /* as above: loss is handled by retransmission */
}

void srd_xmit(struct srd_qp *qp, const struct sockaddr_in6 *to, struct pkt_hdr *h,
	      const void *payload, size_t len)
{
	const uint8_t *sgid = qp->ibqp.qp_type == IBV_QPT_UD ? h->sgid :
			      qp->dev->gids[qp->attr.ah_attr.grh.sgid_index].raw;
	uint64_t stamp;
	xmit_sock(g_socks[qp->sock], sgid, to, h, payload, len, &stamp);
	if (qp->ibqp.qp_type != IBV_QPT_UD)
		__atomic_store_n(&qp->shm_stamp, stamp, __ATOMIC_RELAXED);
}

int srd_net_peer_state(const struct srd_qp *qp)
{
	if (qp->peer_local)
		return SRD_PEER_UNKNOWN;
	return srd_shm_peer_state(ntohs(qp->peer.sin6_port), __atomic_load_n(&qp->shm_stamp, __ATOMIC_RELAXED));
}

void srd_xmit_port(uint16_t port, const struct sockaddr_in6 *to, struct pkt_hdr *h, const void *payload,
		   size_t len)
{
	for (int i = 0; i < g_nsocks; i++)
		if (g_socks[i]->port == port) {
			xmit_sock(g_socks[i], g_socks[i]->addrs[0].s6_addr, to, h, payload, len, NULL);
			return;
		}
}


void srd_batch_flush(void)
{
	if (tl_batch && tl_batch->n)
		batch_flush(tl_batch);
}
