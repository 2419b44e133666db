/*
 * Data path: posting, in-process execution, the UDP transport (RC reliability,
 * UC, UD), the per-process agent thread, and fault injection.
 *
 * Lock order (never taken in the other direction):
 *   requester qp->sq_lock  <  responder qp->resp_lock  <  rq/srq lock  <  cq lock
 * The QP table rwlock is taken (read) around any use of a QP found by number.
 */
#include "srd.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <time.h>
#include <signal.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <arpa/inet.h>

#define WINDOW 256          /* packets in flight per QP */
#define ACKREQ_EVERY 32     /* requester asks for an ACK this often */
#define READ_CHUNK 64       /* response packets per READ request */

enum { OP_SEND = 1, OP_WRITE, OP_READ_REQ, OP_READ_RESP, OP_CAS, OP_FAA, OP_ATOMIC_RESP,
       OP_ACK, OP_UD_SEND };
enum { F_FIRST = 1, F_LAST = 2, F_SOLICITED = 4, F_IMM = 8, F_ACKREQ = 16 };
enum { SYN_ACK = 0, SYN_RNR, SYN_NAK_SEQ, SYN_NAK_INV, SYN_NAK_ACCESS, SYN_NAK_OP };

struct pkt_hdr {
	uint8_t op, flags, syndrome, pad;
	uint32_t dqpn, sqpn, psn;
	uint32_t imm;      /* immediate (network order as posted); RNR timer code in NAKs */
	uint32_t rkey;     /* rkey, or q_key for UD */
	uint32_t len;      /* payload bytes, or requested bytes for READ */
	uint32_t total;    /* whole message length */
	uint64_t va;
	uint64_t cmp, swap; /* atomics; cmp carries the original value in responses */
	uint8_t sgid[16];
	uint32_t magic, pad2;
};
#define PKT_MAGIC 0x53524431u /* "SRD1" */
#define MAX_PKT (sizeof(struct pkt_hdr) + 4096)

/* ---------------------------------------------------------------- statistics */

static struct { unsigned long tx, rx, nak_seq, rnr, timeouts, dup_rx, eagain; } g_st;
#define ST(x) __atomic_fetch_add(&g_st.x, 1, __ATOMIC_RELAXED)

static void print_stats(void)
{
	fprintf(stderr, "softrdma[%d]: tx %lu rx %lu nak_seq %lu rnr %lu timeouts %lu dup_rx %lu eagain %lu\n",
		(int)getpid(), g_st.tx, g_st.rx, g_st.nak_seq, g_st.rnr, g_st.timeouts, g_st.dup_rx, g_st.eagain);
}

/* ---------------------------------------------------------------- time */

uint64_t srd_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int32_t psn_diff(uint32_t a, uint32_t b)
{
	/* signed distance a - b in 24-bit PSN space */
	int32_t d = (int32_t)((a - b) << 8);
	return d >> 8;
}

static uint32_t psn_add(uint32_t a, uint32_t n) { return (a + n) & SRD_HDR_PSN_MASK; }

static uint32_t mtu_bytes(enum ibv_mtu m) { return 128u << m; }

/* IB encoding of the RNR NAK timer (IBA table 45), in nanoseconds */
static uint64_t rnr_ns(unsigned code)
{
	static const uint32_t us100[32] = { 65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128,
					    192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096,
					    6144, 8192, 12288, 16384, 24576, 32768, 49152 };
	return (uint64_t)us100[code & 31] * 10000ull; /* table is in units of 0.01 ms */
}

static uint64_t timeout_ns(unsigned t)
{
	if (!t)
		return 0; /* infinite */
	uint64_t ns = 4096ull << t;  /* 4.096 us * 2^t */
	if (ns < 1000000ull)
		ns = 1000000ull;
	return ns;
}

/* ---------------------------------------------------------------- faults */

static struct {
	bool on;
	double drop, dup, reorder, delay;
	uint64_t delay_ns;
	uint64_t rng;
	pthread_mutex_t lock;
} g_f = { .lock = PTHREAD_MUTEX_INITIALIZER };
static pthread_once_t g_f_once = PTHREAD_ONCE_INIT;

static void faults_init(void)
{
	const char *env = getenv("SOFTRDMA_FAULTS");
	if (!env || !*env)
		return;
	g_f.rng = 0x9e3779b97f4a7c15ull;
	g_f.delay_ns = 2000000;
	char *copy = strdup(env), *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq) {
			fprintf(stderr, "softrdma: SOFTRDMA_FAULTS: ignoring '%s'\n", tok);
			continue;
		}
		*eq++ = 0;
		if (!strcmp(tok, "seed"))
			g_f.rng = strtoull(eq, NULL, 0) * 0x9e3779b97f4a7c15ull + 1;
		else if (!strcmp(tok, "drop"))
			g_f.drop = atof(eq);
		else if (!strcmp(tok, "dup"))
			g_f.dup = atof(eq);
		else if (!strcmp(tok, "reorder"))
			g_f.reorder = atof(eq);
		else if (!strcmp(tok, "delay")) {
			g_f.delay = atof(eq);
			char *c = strchr(eq, ':');
			if (c) {
				double v = atof(c + 1);
				if (strstr(c, "us"))
					g_f.delay_ns = (uint64_t)(v * 1e3);
				else if (strstr(c, "ms"))
					g_f.delay_ns = (uint64_t)(v * 1e6);
				else
					g_f.delay_ns = (uint64_t)(v * 1e9);
			}
		} else
			fprintf(stderr, "softrdma: SOFTRDMA_FAULTS: unknown knob '%s'\n", tok);
	}
	free(copy);
	g_f.on = true;
}

bool srd_faults_enabled(void)
{
	pthread_once(&g_f_once, faults_init);
	return g_f.on;
}

static double frand(void)
{
	/* xorshift64*, called with g_f.lock held */
	g_f.rng ^= g_f.rng >> 12;
	g_f.rng ^= g_f.rng << 25;
	g_f.rng ^= g_f.rng >> 27;
	return (double)((g_f.rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

struct delayed {
	struct delayed *next;
	uint64_t due;
	int fd;
	struct sockaddr_in6 to;
	size_t len;
	uint8_t data[];
};
static struct delayed *g_delayed;

/* ---------------------------------------------------------------- sockets, QPN table */

struct srd_sock {
	int fd;
	uint16_t port;
	int used;
	struct srd_qp *slots[256];
};

static pthread_rwlock_t g_qpt = PTHREAD_RWLOCK_INITIALIZER;
static struct srd_sock *g_socks[256];
static int g_nsocks;
static int g_epfd = -1, g_kickfd = -1;
static pthread_once_t g_agent_once = PTHREAD_ONCE_INIT;
static volatile int g_timers_hint;

static void *agent_main(void *arg);

static void agent_init(void)
{
	srd_faults_enabled();
	g_epfd = epoll_create1(EPOLL_CLOEXEC);
	g_kickfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (getenv("SOFTRDMA_STATS"))
		atexit(print_stats);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 0xffffffffu };
	epoll_ctl(g_epfd, EPOLL_CTL_ADD, g_kickfd, &ev);
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old); /* the agent never takes the app's signals */
	if (pthread_create(&t, &a, agent_main, NULL))
		fprintf(stderr, "softrdma: cannot start the agent thread\n");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
}

/*
 * A child of fork() has no agent thread and shares the parent's sockets; QPs do
 * not survive fork (as with rdma-core), but the child may open devices afresh:
 * forget the inherited transport so the first new QP starts everything again.
 */
static void atfork_child(void)
{
	for (int i = 0; i < g_nsocks; i++) {
		close(g_socks[i]->fd);
		free(g_socks[i]);
		g_socks[i] = NULL;
	}
	g_nsocks = 0;
	if (g_epfd >= 0)
		close(g_epfd);
	if (g_kickfd >= 0)
		close(g_kickfd);
	g_epfd = g_kickfd = -1;
	g_delayed = NULL;
	pthread_rwlock_init(&g_qpt, NULL);
	pthread_mutex_init(&g_f.lock, NULL);
	g_agent_once = (pthread_once_t)PTHREAD_ONCE_INIT;
}

static void atfork_register(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
}

static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

void srd_agent_start(void)
{
	pthread_once(&g_atfork_once, atfork_register);
	pthread_once(&g_agent_once, agent_init);
}

static void agent_wake(void)
{
	uint64_t one = 1;
	if (write(g_kickfd, &one, 8) != 8)
		return;
}

void srd_qp_kick(struct srd_qp *qp)
{
	__atomic_store_n(&qp->kick, true, __ATOMIC_RELEASE);
	agent_wake();
}

static struct srd_sock *open_sock(void)
{
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	int zero = 0, big = 4 << 20;
	setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT };
	socklen_t sl = sizeof(sa);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || getsockname(fd, (struct sockaddr *)&sa, &sl)) {
		close(fd);
		return NULL;
	}
	struct srd_sock *s = calloc(1, sizeof(*s));
	if (!s) {
		close(fd);
		return NULL;
	}
	s->fd = fd;
	s->port = ntohs(sa.sin6_port);
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)g_nsocks };
	epoll_ctl(g_epfd, EPOLL_CTL_ADD, fd, &ev);
	return s;
}

int srd_net_alloc_qpn(struct srd_qp *qp)
{
	srd_agent_start();
	pthread_mutex_init(&qp->resp_lock, NULL);
	pthread_rwlock_wrlock(&g_qpt);
	int si = -1;
	for (int i = 0; i < g_nsocks; i++)
		if (g_socks[i]->used < 256) {
			si = i;
			break;
		}
	if (si < 0) {
		if (g_nsocks == 256) {
			pthread_rwlock_unlock(&g_qpt);
			return ENOMEM;
		}
		struct srd_sock *s = open_sock();
		if (!s) {
			int e = errno ? errno : ENOMEM;
			pthread_rwlock_unlock(&g_qpt);
			return e;
		}
		si = g_nsocks;
		g_socks[g_nsocks++] = s;
	}
	struct srd_sock *s = g_socks[si];
	int slot = 0;
	while (s->slots[slot])
		slot++;
	s->slots[slot] = qp;
	s->used++;
	qp->sock = si;
	qp->ibqp.qp_num = ((uint32_t)s->port << 8) | (uint32_t)slot;
	pthread_rwlock_unlock(&g_qpt);
	return 0;
}

void srd_net_free_qpn(struct srd_qp *qp)
{
	pthread_rwlock_wrlock(&g_qpt);
	struct srd_sock *s = g_socks[qp->sock];
	int slot = (int)(qp->ibqp.qp_num & 0xff);
	if (s->slots[slot] == qp) {
		s->slots[slot] = NULL;
		s->used--;
	}
	pthread_rwlock_unlock(&g_qpt);
}

bool srd_net_owns_qpn(uint32_t qpn)
{
	bool own = false;
	pthread_rwlock_rdlock(&g_qpt);
	for (int i = 0; i < g_nsocks; i++)
		if (g_socks[i]->port == (uint16_t)(qpn >> 8))
			own = true;
	pthread_rwlock_unlock(&g_qpt);
	return own;
}

/* caller holds g_qpt for reading */
static struct srd_qp *lookup_qpn(uint32_t qpn)
{
	uint16_t port = (uint16_t)(qpn >> 8);
	for (int i = 0; i < g_nsocks; i++)
		if (g_socks[i]->port == port)
			return g_socks[i]->slots[qpn & 0xff];
	return NULL;
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
static __thread struct batch *tl_batch;

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

static void batch_begin(void)
{
	if (!tl_batch) {
		tl_batch = calloc(1, sizeof(*tl_batch));
		if (!tl_batch)
			return;
	}
	tl_batch->depth++;
}

static void batch_end(void)
{
	if (!tl_batch || !tl_batch->depth)
		return;
	if (--tl_batch->depth == 0 && tl_batch->n)
		batch_flush(tl_batch);
}

static void xmit(struct srd_qp *qp, const struct sockaddr_in6 *to, struct pkt_hdr *h,
		 const void *payload, size_t len)
{
	h->magic = PKT_MAGIC;
	int fd = g_socks[qp->sock]->fd;
	struct batch *b = tl_batch;
	if (!g_f.on && b && b->depth) {
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
	if (g_f.on) {
		pthread_mutex_lock(&g_f.lock);
		double r = frand();
		int copies = 1;
		uint64_t hold = 0;
		if (r < g_f.drop)
			copies = 0;
		else if ((r -= g_f.drop) < g_f.dup)
			copies = 2;
		else if ((r -= g_f.dup) < g_f.reorder)
			hold = 300000; /* let the next packets overtake this one */
		else if ((r -= g_f.reorder) < g_f.delay)
			hold = g_f.delay_ns;
		if (hold && copies) {
			struct delayed *d = malloc(sizeof(*d) + sizeof(*h) + len);
			if (d) {
				d->due = srd_now_ns() + hold;
				d->fd = fd;
				d->to = *to;
				d->len = sizeof(*h) + len;
				memcpy(d->data, h, sizeof(*h));
				if (len)
					memcpy(d->data + sizeof(*h), payload, len);
				d->next = g_delayed;
				g_delayed = d;
				copies = 0;
			}
		}
		pthread_mutex_unlock(&g_f.lock);
		if (hold)
			agent_wake();
		for (int i = 0; i < copies; i++) {
			struct iovec iov[2] = { { h, sizeof(*h) }, { (void *)payload, len } };
			struct msghdr m = { .msg_name = (void *)to, .msg_namelen = sizeof(*to),
					    .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
			if (sendmsg(fd, &m, MSG_DONTWAIT) < 0) { /* a lost datagram; the transport recovers */ }
		}
		return;
	}
	struct iovec iov[2] = { { h, sizeof(*h) }, { (void *)payload, len } };
	struct msghdr m = { .msg_name = (void *)to, .msg_namelen = sizeof(*to),
			    .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	ST(tx);
	if (sendmsg(fd, &m, MSG_DONTWAIT) < 0)
		ST(eagain); /* as above: loss is handled by retransmission */
}

static void flush_delayed(uint64_t now)
{
	pthread_mutex_lock(&g_f.lock);
	struct delayed **pp = &g_delayed, *due = NULL;
	while (*pp) {
		struct delayed *d = *pp;
		if (d->due <= now) {
			*pp = d->next;
			d->next = due;
			due = d;
		} else {
			pp = &d->next;
		}
	}
	pthread_mutex_unlock(&g_f.lock);
	while (due) {
		struct delayed *d = due;
		due = d->next;
		if (sendto(d->fd, d->data, d->len, MSG_DONTWAIT, (struct sockaddr *)&d->to, sizeof(d->to)) < 0) {
			/* lost */
		}
		free(d);
	}
}

/* ---------------------------------------------------------------- memory access */

struct seg { uint8_t *p; uint32_t len; };

/* Resolves an SGE list against local MRs of pd; -1 on any protection violation. */
static int resolve_sgl(struct ibv_pd *pd, const struct ibv_sge *sge, int n, int need,
		       struct seg *out, uint32_t *total)
{
	uint64_t t = 0;
	for (int i = 0; i < n; i++) {
		out[i].p = NULL;
		out[i].len = sge[i].length;
		if (!sge[i].length)
			continue;
		struct srd_mr *mr = srd_mr_get(sge[i].lkey);
		if (!mr || mr->ibmr.pd != pd || (need && !(mr->access & need)))
			return -1;
		if (sge[i].addr < mr->iova || sge[i].addr - mr->iova > mr->ibmr.length ||
		    sge[i].length > mr->ibmr.length - (sge[i].addr - mr->iova))
			return -1;
		out[i].p = (uint8_t *)mr->ibmr.addr + (sge[i].addr - mr->iova);
		t += sge[i].length;
	}
	if (total)
		*total = (uint32_t)(t > 0xffffffffu ? 0xffffffffu : t);
	return 0;
}

/* Remote access check; returns the host address or NULL. */
static uint8_t *resolve_rkey(struct ibv_pd *pd, uint32_t rkey, uint64_t va, uint64_t len, int need)
{
	struct srd_mr *mr = srd_mr_get(rkey);
	if (!mr || mr->ibmr.pd != pd || !(mr->access & need))
		return NULL;
	if (va < mr->iova || va - mr->iova > mr->ibmr.length || len > mr->ibmr.length - (va - mr->iova))
		return NULL;
	return (uint8_t *)mr->ibmr.addr + (va - mr->iova);
}

static void seg_copy_out(const struct seg *s, int n, uint32_t off, uint8_t *dst, uint32_t len)
{
	for (int i = 0; i < n && len; i++) {
		if (off >= s[i].len) {
			off -= s[i].len;
			continue;
		}
		uint32_t k = s[i].len - off < len ? s[i].len - off : len;
		memcpy(dst, s[i].p + off, k);
		dst += k;
		len -= k;
		off = 0;
	}
}

static void seg_copy_in(const struct seg *s, int n, uint32_t off, const uint8_t *src, uint32_t len)
{
	for (int i = 0; i < n && len; i++) {
		if (off >= s[i].len) {
			off -= s[i].len;
			continue;
		}
		uint32_t k = s[i].len - off < len ? s[i].len - off : len;
		memcpy(s[i].p + off, src, k);
		src += k;
		len -= k;
		off = 0;
	}
}

/* ---------------------------------------------------------------- completions */

static enum ibv_wc_opcode wc_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
	default: return IBV_WC_SEND;
	}
}

static bool is_rd(const struct srd_swqe *w)
{
	return w->opcode == IBV_WR_RDMA_READ || w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* Completes the oldest WQE of the send queue; sq_lock held. */
static void sq_complete_tail(struct srd_qp *qp, enum ibv_wc_status st)
{
	struct srd_swqe *w = &qp->sq[qp->sq_tail % (unsigned)qp->sq_cap];
	if (w->psn_assigned && is_rd(w) && qp->outstanding_rd > 0)
		qp->outstanding_rd--;
	if (w->signaled || st != IBV_WC_SUCCESS) {
		struct ibv_wc wc = { .wr_id = w->wr_id, .status = st, .opcode = wc_opcode(w->opcode),
				     .qp_num = qp->ibqp.qp_num };
		if (st == IBV_WC_SUCCESS) {
			if (w->opcode == IBV_WR_RDMA_READ)
				wc.byte_len = w->length;
			else if (is_rd(w))
				wc.byte_len = 8;
		}
		srd_cq_push(container_of(qp->ibqp.send_cq, struct srd_cq, ibcq), &wc, false);
	}
	qp->sq_tail++;
	if ((int)(qp->sq_next_tx - qp->sq_tail) < 0)
		qp->sq_next_tx = qp->sq_tail;
}

void srd_flush_sq_locked(struct srd_qp *qp)
{
	while (qp->sq_tail != qp->sq_head)
		sq_complete_tail(qp, IBV_WC_WR_FLUSH_ERR);
	qp->sq_next_tx = qp->sq_tail;
	qp->outstanding_rd = 0;
	qp->timer_deadline_ns = 0;
	qp->rnr_wait = false;
}

/* The send side failed: complete the oldest WQE with st, then error the QP. */
static void requester_fail(struct srd_qp *qp, enum ibv_wc_status st)
{
	if (qp->sq_tail != qp->sq_head)
		sq_complete_tail(qp, st);
	srd_qp_to_error(qp, true);
}

void srd_qp_reset_transport(struct srd_qp *qp)
{
	qp->snd_psn = qp->una_psn = 0;
	qp->outstanding_rd = 0;
	qp->timer_deadline_ns = 0;
	qp->rnr_wait = false;
	pthread_mutex_lock(&qp->resp_lock);
	qp->epsn = 0;
	qp->recv_in_progress = false;
	qp->nak_sent = false;
	memset(qp->atomic_cache, 0, sizeof(qp->atomic_cache));
	pthread_mutex_unlock(&qp->resp_lock);
}

static struct srd_rq *recv_queue(struct srd_qp *qp)
{
	return qp->srq ? &qp->srq->rq : &qp->rq;
}

/* Takes one receive WQE (own RQ or SRQ); false when none is posted. resp_lock held. */
static bool take_rwqe(struct srd_qp *qp, struct srd_rwqe *out, struct ibv_sge *sges)
{
	struct srd_rq *rq = recv_queue(qp);
	pthread_mutex_lock(&rq->lock);
	int r = srd_rq_pop(rq, out, sges);
	if (!r && qp->srq)
		srd_srq_check_limit(qp->srq);
	pthread_mutex_unlock(&rq->lock);
	return r == 0;
}

static void recv_complete(struct srd_qp *qp, const struct srd_rwqe *rw, enum ibv_wc_status st,
			  enum ibv_wc_opcode op, uint32_t len, bool imm, uint32_t imm_data,
			  uint32_t src_qp, bool grh, bool solicited)
{
	struct ibv_wc wc = { .wr_id = rw->wr_id, .status = st, .opcode = op, .byte_len = len,
			     .qp_num = qp->ibqp.qp_num, .src_qp = src_qp };
	if (imm) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = imm_data;
	}
	if (grh)
		wc.wc_flags |= IBV_WC_GRH;
	srd_cq_push(container_of(qp->ibqp.recv_cq, struct srd_cq, ibcq), &wc, solicited);
}

static void responder_error(struct srd_qp *qp, enum ibv_event_type ev_type)
{
	struct ibv_async_event ev = { .element.qp = &qp->ibqp, .event_type = ev_type };
	srd_async_post(container_of(qp->ibqp.context, struct srd_context, vctx.context), &ev);
	srd_qp_to_error(qp, false);
}

static bool responder_ready(struct srd_qp *qp)
{
	int s = __atomic_load_n(&qp->state, __ATOMIC_ACQUIRE);
	return s == IBV_QPS_RTR || s == IBV_QPS_RTS || s == IBV_QPS_SQD;
}

/* ---------------------------------------------------------------- in-process execution */

enum { X_DONE = 0, X_RNR = -1, X_LOST = -2 };

/* Executes one WQE directly on a QP of this process. Returns X_* or an ibv_wc_status
 * (>0) for the requester. sq_lock of qp held, MR read lock held. */
static int exec_local(struct srd_qp *qp, struct srd_swqe *w, struct srd_qp *dst, uint64_t *rnr_delay)
{
	struct seg lseg[SRD_MAX_SGE];
	struct seg inl = { w->inline_buf, w->length };
	const struct seg *src = &inl;
	int nsrc = 1;
	bool is_inline = (w->send_flags & IBV_SEND_INLINE) && w->inline_buf;
	uint32_t total = w->length;
	int need_local = (w->opcode == IBV_WR_RDMA_READ || is_rd(w)) ? IBV_ACCESS_LOCAL_WRITE : 0;
	if (!is_inline) {
		if (resolve_sgl(qp->ibqp.pd, w->sge, w->num_sge, need_local, lseg, &total))
			return IBV_WC_LOC_PROT_ERR;
		src = lseg;
		nsrc = w->num_sge;
	}
	if (qp->ibqp.qp_type == IBV_QPT_UD) {
		/* handled by the caller */
		return X_DONE;
	}
	pthread_mutex_lock(&dst->resp_lock);
	if (!responder_ready(dst) || dst->ibqp.qp_type != qp->ibqp.qp_type ||
	    dst->attr.dest_qp_num != qp->ibqp.qp_num) {
		pthread_mutex_unlock(&dst->resp_lock);
		return X_LOST; /* like a packet to a QP that is not listening */
	}
	int qacc = dst->attr.qp_access_flags;
	int ret = X_DONE;
	uint32_t npk = w->npkts;
	switch (w->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE_WITH_IMM: {
		uint8_t *target = NULL;
		if (w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
			if (!(qacc & IBV_ACCESS_REMOTE_WRITE)) {
				ret = IBV_WC_REM_INV_REQ_ERR;
				responder_error(dst, IBV_EVENT_QP_REQ_ERR);
				break;
			}
			target = total ? resolve_rkey(dst->ibqp.pd, w->rkey, w->remote_addr, total,
						      IBV_ACCESS_REMOTE_WRITE) : (uint8_t *)1;
			if (!target) {
				ret = IBV_WC_REM_ACCESS_ERR;
				responder_error(dst, IBV_EVENT_QP_ACCESS_ERR);
				break;
			}
		}
		struct srd_rwqe rw;
		struct ibv_sge rs[SRD_MAX_SGE];
		if (!take_rwqe(dst, &rw, rs)) {
			if (qp->ibqp.qp_type == IBV_QPT_UC) {
				ret = X_DONE; /* UC: the message is silently dropped */
				break;
			}
			*rnr_delay = rnr_ns(dst->attr.min_rnr_timer);
			ret = X_RNR;
			break;
		}
		bool imm = w->opcode != IBV_WR_SEND;
		bool sol = (w->send_flags & IBV_SEND_SOLICITED) != 0;
		if (w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
			if (total)
				seg_copy_out(src, nsrc, 0, target, total);
			recv_complete(dst, &rw, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, total, true,
				      w->imm, qp->ibqp.qp_num, false, sol);
			break;
		}
		struct seg rseg[SRD_MAX_SGE];
		uint32_t room;
		if (resolve_sgl(dst->ibqp.pd, rw.sge, rw.num_sge, IBV_ACCESS_LOCAL_WRITE, rseg, &room)) {
			recv_complete(dst, &rw, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, false, 0, 0, false, true);
			ret = IBV_WC_REM_OP_ERR;
			responder_error(dst, IBV_EVENT_QP_FATAL);
			break;
		}
		if (room < total) {
			recv_complete(dst, &rw, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, false, 0, 0, false, true);
			ret = IBV_WC_REM_INV_REQ_ERR;
			responder_error(dst, IBV_EVENT_QP_REQ_ERR);
			break;
		}
		/* copy piecewise from source segments into the receive segments */
		uint32_t off = 0;
		for (int i = 0; i < nsrc; i++) {
			if (src[i].len)
				seg_copy_in(rseg, rw.num_sge, off, src[i].p, src[i].len);
			off += src[i].len;
		}
		recv_complete(dst, &rw, IBV_WC_SUCCESS, IBV_WC_RECV, total, imm, w->imm,
			      qp->ibqp.qp_num, false, sol);
		break;
	}
	case IBV_WR_RDMA_WRITE: {
		if (!(qacc & IBV_ACCESS_REMOTE_WRITE)) {
			ret = IBV_WC_REM_INV_REQ_ERR;
			responder_error(dst, IBV_EVENT_QP_REQ_ERR);
			break;
		}
		uint8_t *t = total ? resolve_rkey(dst->ibqp.pd, w->rkey, w->remote_addr, total,
						  IBV_ACCESS_REMOTE_WRITE) : (uint8_t *)1;
		if (!t) {
			ret = IBV_WC_REM_ACCESS_ERR;
			responder_error(dst, IBV_EVENT_QP_ACCESS_ERR);
			break;
		}
		if (total)
			seg_copy_out(src, nsrc, 0, t, total);
		break;
	}
	case IBV_WR_RDMA_READ: {
		if (!(qacc & IBV_ACCESS_REMOTE_READ)) {
			ret = IBV_WC_REM_INV_REQ_ERR;
			responder_error(dst, IBV_EVENT_QP_REQ_ERR);
			break;
		}
		uint8_t *s = total ? resolve_rkey(dst->ibqp.pd, w->rkey, w->remote_addr, total,
						  IBV_ACCESS_REMOTE_READ) : (uint8_t *)1;
		if (!s) {
			ret = IBV_WC_REM_ACCESS_ERR;
			responder_error(dst, IBV_EVENT_QP_ACCESS_ERR);
			break;
		}
		if (total)
			seg_copy_in(lseg, w->num_sge, 0, s, total);
		break;
	}
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD: {
		if (!(qacc & IBV_ACCESS_REMOTE_ATOMIC)) {
			ret = IBV_WC_REM_INV_REQ_ERR;
			responder_error(dst, IBV_EVENT_QP_REQ_ERR);
			break;
		}
		if (w->remote_addr & 7) {
			ret = IBV_WC_REM_INV_REQ_ERR;
			responder_error(dst, IBV_EVENT_QP_REQ_ERR);
			break;
		}
		uint64_t *p = (uint64_t *)resolve_rkey(dst->ibqp.pd, w->rkey, w->remote_addr, 8,
						       IBV_ACCESS_REMOTE_ATOMIC);
		if (!p) {
			ret = IBV_WC_REM_ACCESS_ERR;
			responder_error(dst, IBV_EVENT_QP_ACCESS_ERR);
			break;
		}
		uint64_t orig;
		if (w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			orig = __atomic_fetch_add(p, w->compare_add, __ATOMIC_SEQ_CST);
		} else {
			orig = w->compare_add;
			__atomic_compare_exchange_n(p, &orig, w->swap, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
		}
		seg_copy_in(lseg, w->num_sge, 0, (uint8_t *)&orig, 8);
		break;
	}
	default:
		ret = IBV_WC_REM_INV_REQ_ERR;
		break;
	}
	if (ret == X_DONE)
		dst->epsn = psn_add(dst->epsn, npk);
	pthread_mutex_unlock(&dst->resp_lock);
	return ret;
}

/* ---------------------------------------------------------------- UD */

static void write_grh(uint8_t *grh, const uint8_t *sgid, const uint8_t *dgid, uint32_t paylen)
{
	memset(grh, 0, 40);
	const struct in6_addr *s = (const struct in6_addr *)sgid;
	if (IN6_IS_ADDR_V4MAPPED(s)) {
		/* RoCE v2 over IPv4: the IPv4 header occupies the last 20 bytes */
		uint8_t *ip = grh + 20;
		uint16_t tot = htons((uint16_t)(paylen + 20 + 8 + 12 + 4));
		ip[0] = 0x45;
		memcpy(ip + 2, &tot, 2);
		ip[8] = 64;
		ip[9] = 17;
		memcpy(ip + 12, sgid + 12, 4);
		memcpy(ip + 16, dgid + 12, 4);
	} else {
		uint32_t vtf = htonl(6u << 28);
		uint16_t pl = htons((uint16_t)paylen);
		memcpy(grh, &vtf, 4);
		memcpy(grh + 4, &pl, 2);
		grh[6] = 0x1b;
		grh[7] = 64;
		memcpy(grh + 8, sgid, 16);
		memcpy(grh + 24, dgid, 16);
	}
}

/* Delivers one UD datagram to dst; resp_lock not held. */
static void ud_deliver(struct srd_qp *dst, uint32_t qkey, uint32_t src_qpn, const uint8_t *sgid,
		       const struct seg *src, int nsrc, uint32_t len, bool imm, uint32_t imm_data, bool sol)
{
	pthread_mutex_lock(&dst->resp_lock);
	if (!responder_ready(dst) || dst->ibqp.qp_type != IBV_QPT_UD || dst->attr.qkey != qkey) {
		pthread_mutex_unlock(&dst->resp_lock);
		return;
	}
	struct srd_rwqe rw;
	struct ibv_sge rs[SRD_MAX_SGE];
	if (!take_rwqe(dst, &rw, rs)) {
		pthread_mutex_unlock(&dst->resp_lock);
		return; /* UD: no receive posted, datagram dropped */
	}
	struct seg rseg[SRD_MAX_SGE];
	uint32_t room;
	if (resolve_sgl(dst->ibqp.pd, rw.sge, rw.num_sge, IBV_ACCESS_LOCAL_WRITE, rseg, &room)) {
		recv_complete(dst, &rw, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, false, 0, 0, false, true);
		pthread_mutex_unlock(&dst->resp_lock);
		return;
	}
	if (room < len + 40) {
		recv_complete(dst, &rw, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, false, 0, 0, false, true);
		pthread_mutex_unlock(&dst->resp_lock);
		return;
	}
	uint8_t grh[40];
	union ibv_gid dgid = dst->dev->gids[IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)sgid) && dst->dev->ngids > 1 ? 1 : 0];
	write_grh(grh, sgid, dgid.raw, len);
	seg_copy_in(rseg, rw.num_sge, 0, grh, 40);
	uint32_t off = 40;
	for (int i = 0; i < nsrc; i++) {
		if (src[i].len)
			seg_copy_in(rseg, rw.num_sge, off, src[i].p, src[i].len);
		off += src[i].len;
	}
	recv_complete(dst, &rw, IBV_WC_SUCCESS, IBV_WC_RECV, len + 40, imm, imm_data, src_qpn, true, sol);
	pthread_mutex_unlock(&dst->resp_lock);
}

/* ---------------------------------------------------------------- requester */

static uint32_t wqe_pkts(struct srd_qp *qp, const struct srd_swqe *w)
{
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
		return 1;
	uint32_t mtu = mtu_bytes(qp->attr.path_mtu);
	return w->length ? (w->length + mtu - 1) / mtu : 1;
}

static void arm_timer(struct srd_qp *qp)
{
	uint64_t t = timeout_ns(qp->attr.timeout);
	if (!t) {
		qp->timer_deadline_ns = 0;
		return;
	}
	qp->timer_deadline_ns = srd_now_ns() + t;
	__atomic_store_n(&g_timers_hint, 1, __ATOMIC_RELAXED);
}

/* Sends packet k of w (for READ: a request starting at response k). */
static void send_pkt(struct srd_qp *qp, struct srd_swqe *w, uint32_t k, const struct seg *src,
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
		h.flags = F_FIRST | F_LAST;
		*sent = n;
		xmit(qp, &qp->peer, &h, NULL, 0);
		return;
	}
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		h.op = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? OP_CAS : OP_FAA;
		h.va = w->remote_addr;
		h.cmp = w->compare_add;
		h.swap = w->swap;
		h.flags = F_FIRST | F_LAST;
		xmit(qp, &qp->peer, &h, NULL, 0);
		return;
	default:
		break;
	}
	h.op = (w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) ? OP_WRITE : OP_SEND;
	uint32_t off = k * mtu;
	len = w->length - off < mtu ? w->length - off : mtu;
	if (w->length == 0)
		len = 0;
	if (len)
		seg_copy_out(src, nsrc, off, buf, len);
	h.len = len;
	h.va = w->remote_addr + off;
	if (k == 0)
		h.flags |= F_FIRST;
	if (k + 1 == w->npkts) {
		h.flags |= F_LAST;
		if (w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
			h.flags |= F_IMM;
			h.imm = w->imm;
		}
		if (w->send_flags & IBV_SEND_SOLICITED)
			h.flags |= F_SOLICITED;
	}
	if ((k + 1) % ACKREQ_EVERY == 0)
		h.flags |= F_ACKREQ;
	xmit(qp, &qp->peer, &h, buf, len);
}

static void ud_send(struct srd_qp *qp, struct srd_swqe *w, const struct seg *src, int nsrc)
{
	const union ibv_gid *sgid = &qp->dev->gids[w->ud_av.grh.sgid_index < qp->dev->ngids ? w->ud_av.grh.sgid_index : 0];
	bool imm = w->opcode == IBV_WR_SEND_WITH_IMM;
	bool sol = (w->send_flags & IBV_SEND_SOLICITED) != 0;
	if (!g_f.on && srd_gid_is_local(&w->ud_av.grh.dgid)) {
		pthread_rwlock_rdlock(&g_qpt);
		struct srd_qp *dst = lookup_qpn(w->ud_qpn);
		if (dst) {
			ud_deliver(dst, w->ud_qkey, qp->ibqp.qp_num, sgid->raw, src, nsrc, w->length, imm, w->imm, sol);
			pthread_rwlock_unlock(&g_qpt);
			return;
		}
		pthread_rwlock_unlock(&g_qpt);
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
	uint8_t buf[4096];
	seg_copy_out(src, nsrc, 0, buf, w->length);
	struct sockaddr_in6 to;
	srd_gid_to_sockaddr(&w->ud_av.grh.dgid, (uint16_t)(w->ud_qpn >> 8), qp->dev->ifindex, &to);
	xmit(qp, &to, &h, buf, w->length);
}

/* Runs the send queue as far as it can go; sq_lock held. */
static void sq_progress(struct srd_qp *qp)
{
	int st = __atomic_load_n(&qp->state, __ATOMIC_ACQUIRE);
	if (st == IBV_QPS_ERR) {
		srd_flush_sq_locked(qp);
		return;
	}
	if (st != IBV_QPS_RTS || qp->rnr_wait)
		return;
	enum ibv_qp_type type = qp->ibqp.qp_type;
	bool local = type != IBV_QPT_UD && qp->peer_local && !g_f.on;
	while (qp->sq_next_tx != qp->sq_head) {
		struct srd_swqe *w = &qp->sq[qp->sq_next_tx % (unsigned)qp->sq_cap];
		if (type == IBV_QPT_RC && !w->psn_assigned) {
			int max_rd = qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1;
			if (is_rd(w) && qp->outstanding_rd >= max_rd)
				break;
			if ((w->send_flags & IBV_SEND_FENCE) && qp->outstanding_rd > 0)
				break;
		}
		if (!w->psn_assigned) {
			w->npkts = wqe_pkts(qp, w);
			w->first_psn = qp->snd_psn;
			qp->snd_psn = psn_add(qp->snd_psn, w->npkts);
			w->psn_assigned = true;
			w->tx_pkt = 0;
			w->resp_pkt = 0;
			if (type == IBV_QPT_RC && is_rd(w))
				qp->outstanding_rd++;
		}
		struct seg lseg[SRD_MAX_SGE];
		struct seg inl = { w->inline_buf, w->length };
		const struct seg *src = &inl;
		int nsrc = 1;
		srd_mr_rdlock();
		if (!((w->send_flags & IBV_SEND_INLINE) && w->inline_buf)) {
			int need = is_rd(w) ? IBV_ACCESS_LOCAL_WRITE : 0;
			if (resolve_sgl(qp->ibqp.pd, w->sge, w->num_sge, need, lseg, NULL)) {
				srd_mr_unlock();
				/* everything before this WQE must complete first */
				if (qp->sq_next_tx == qp->sq_tail || type != IBV_QPT_RC) {
					while (qp->sq_tail != qp->sq_next_tx)
						sq_complete_tail(qp, IBV_WC_SUCCESS);
					requester_fail(qp, IBV_WC_LOC_PROT_ERR);
				}
				return;
			}
			src = lseg;
			nsrc = w->num_sge;
		}
		if (type == IBV_QPT_UD) {
			ud_send(qp, w, src, nsrc);
			srd_mr_unlock();
			qp->sq_next_tx++;
			sq_complete_tail(qp, IBV_WC_SUCCESS);
			continue;
		}
		if (local) {
			uint64_t rnr_delay = 0;
			pthread_rwlock_rdlock(&g_qpt);
			struct srd_qp *dst = lookup_qpn(qp->attr.dest_qp_num);
			int r = dst ? exec_local(qp, w, dst, &rnr_delay) : X_LOST;
			pthread_rwlock_unlock(&g_qpt);
			srd_mr_unlock();
			if (r == X_DONE) {
				qp->una_psn = psn_add(w->first_psn, w->npkts);
				qp->sq_next_tx++;
				sq_complete_tail(qp, IBV_WC_SUCCESS);
				if (type == IBV_QPT_RC) {
					qp->retry_left = qp->attr.retry_cnt;
					qp->rnr_left = qp->attr.rnr_retry;
				}
				continue;
			}
			if (type == IBV_QPT_UC) {
				/* unreliable: a message nobody took is simply gone */
				qp->sq_next_tx++;
				sq_complete_tail(qp, IBV_WC_SUCCESS);
				continue;
			}
			if (r == X_RNR) {
				if (qp->rnr_left == 0) {
					requester_fail(qp, IBV_WC_RNR_RETRY_EXC_ERR);
					return;
				}
				if (qp->rnr_left != 7)
					qp->rnr_left--;
				qp->rnr_wait = true;
				qp->timer_deadline_ns = srd_now_ns() + rnr_delay;
				__atomic_store_n(&g_timers_hint, 1, __ATOMIC_RELAXED);
				return;
			}
			if (r == X_LOST) {
				if (!qp->timer_deadline_ns)
					arm_timer(qp);
				return;
			}
			requester_fail(qp, (enum ibv_wc_status)r);
			return;
		}
		/* remote: stream packets while the window allows */
		bool blocked = false;
		batch_begin();
		while (w->tx_pkt < w->npkts) {
			if (type == IBV_QPT_RC &&
			    psn_diff(psn_add(w->first_psn, w->tx_pkt), qp->una_psn) >= WINDOW) {
				blocked = true;
				break;
			}
			uint32_t sent;
			send_pkt(qp, w, w->tx_pkt, src, nsrc, &sent);
			w->tx_pkt += sent;
		}
		batch_end();
		srd_mr_unlock();
		if (type == IBV_QPT_RC && !qp->timer_deadline_ns)
			arm_timer(qp);
		if (blocked)
			return;
		qp->sq_next_tx++;
		if (type == IBV_QPT_UC)
			sq_complete_tail(qp, IBV_WC_SUCCESS);
	}
}

/* Go-back-N: resend from the packet with PSN psn (or the oldest outstanding). */
static void go_back(struct srd_qp *qp, uint32_t psn)
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
				k = w->resp_pkt - w->resp_pkt % READ_CHUNK;
			if (is_rd(w) && w->opcode != IBV_WR_RDMA_READ)
				k = 0;
			w->tx_pkt = k;
			qp->sq_next_tx = i;
			/* later WQEs start over from their first packet */
			for (unsigned j = i + 1; j != qp->sq_head; j++) {
				struct srd_swqe *x = &qp->sq[j % (unsigned)qp->sq_cap];
				if (!x->psn_assigned)
					break;
				x->tx_pkt = 0;
				if (x->opcode == IBV_WR_RDMA_READ)
					x->tx_pkt = x->resp_pkt - x->resp_pkt % READ_CHUNK;
			}
			return;
		}
	}
}

/* Cumulative acknowledgment up to and including psn; sq_lock held. */
static void ack_upto(struct srd_qp *qp, uint32_t psn)
{
	bool progress = false;
	while (qp->sq_tail != qp->sq_head) {
		struct srd_swqe *w = &qp->sq[qp->sq_tail % (unsigned)qp->sq_cap];
		if (!w->psn_assigned || qp->sq_tail == qp->sq_next_tx)
			break;
		uint32_t last = psn_add(w->first_psn, w->npkts - 1);
		if (is_rd(w) || psn_diff(psn, last) < 0)
			break;
		sq_complete_tail(qp, IBV_WC_SUCCESS);
		progress = true;
	}
	/* never move past responses of a READ/atomic that have not arrived */
	uint32_t lim = psn_add(psn, 1);
	for (unsigned i = qp->sq_tail; i != qp->sq_head; i++) {
		struct srd_swqe *w = &qp->sq[i % (unsigned)qp->sq_cap];
		if (!w->psn_assigned)
			break;
		if (is_rd(w) && w->resp_pkt < w->npkts) {
			uint32_t got = psn_add(w->first_psn, w->resp_pkt);
			if (psn_diff(lim, got) > 0)
				lim = got;
			break;
		}
	}
	if (psn_diff(lim, qp->una_psn) > 0) {
		qp->una_psn = lim;
		progress = true;
	}
	if (progress) {
		qp->retry_left = qp->attr.retry_cnt;
		qp->rnr_left = qp->attr.rnr_retry;
		if (qp->una_psn == qp->snd_psn && qp->sq_tail == qp->sq_next_tx)
			qp->timer_deadline_ns = 0;
		else
			arm_timer(qp);
	}
}

static void requester_rx(struct srd_qp *qp, const struct pkt_hdr *h, const uint8_t *payload)
{
	pthread_mutex_lock(&qp->sq_lock);
	if (__atomic_load_n(&qp->state, __ATOMIC_ACQUIRE) == IBV_QPS_ERR ||
	    qp->ibqp.qp_type != IBV_QPT_RC) {
		pthread_mutex_unlock(&qp->sq_lock);
		return;
	}
	if (h->op == OP_ACK) {
		switch (h->syndrome) {
		case SYN_ACK:
			ack_upto(qp, h->psn);
			break;
		case SYN_NAK_SEQ:
			ack_upto(qp, psn_add(h->psn, SRD_HDR_PSN_MASK)); /* psn - 1 */
			go_back(qp, h->psn);
			break;
		case SYN_RNR:
			ST(rnr);
			ack_upto(qp, psn_add(h->psn, SRD_HDR_PSN_MASK));
			if (qp->rnr_left == 0) {
				requester_fail(qp, IBV_WC_RNR_RETRY_EXC_ERR);
				break;
			}
			if (qp->rnr_left != 7)
				qp->rnr_left--;
			go_back(qp, h->psn);
			qp->rnr_wait = true;
			qp->timer_deadline_ns = srd_now_ns() + rnr_ns(h->imm);
			__atomic_store_n(&g_timers_hint, 1, __ATOMIC_RELAXED);
			break;
		default: {
			ack_upto(qp, psn_add(h->psn, SRD_HDR_PSN_MASK));
			enum ibv_wc_status st = h->syndrome == SYN_NAK_ACCESS ? IBV_WC_REM_ACCESS_ERR :
						h->syndrome == SYN_NAK_INV ? IBV_WC_REM_INV_REQ_ERR :
									     IBV_WC_REM_OP_ERR;
			requester_fail(qp, st);
			break;
		}
		}
		sq_progress(qp);
		pthread_mutex_unlock(&qp->sq_lock);
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
		if (!is_rd(w))
			break;
		if ((uint32_t)d != w->resp_pkt)
			break; /* out of order: wait for the gap to be re-requested */
		/* everything before this WQE is implicitly acknowledged */
		ack_upto(qp, psn_add(w->first_psn, SRD_HDR_PSN_MASK));
		struct seg lseg[SRD_MAX_SGE];
		srd_mr_rdlock();
		int bad = resolve_sgl(qp->ibqp.pd, w->sge, w->num_sge, IBV_ACCESS_LOCAL_WRITE, lseg, NULL);
		if (!bad) {
			if (h->op == OP_READ_RESP && h->len)
				seg_copy_in(lseg, w->num_sge, (uint32_t)d * mtu_bytes(qp->attr.path_mtu),
					    payload, h->len);
			else if (h->op == OP_ATOMIC_RESP)
				seg_copy_in(lseg, w->num_sge, 0, (const uint8_t *)&h->cmp, 8);
		}
		srd_mr_unlock();
		if (bad) {
			if (qp->sq_tail == i)
				requester_fail(qp, IBV_WC_LOC_PROT_ERR);
			break;
		}
		w->resp_pkt++;
		qp->retry_left = qp->attr.retry_cnt; /* forward progress */
		if (psn_diff(psn_add(h->psn, 1), qp->una_psn) > 0)
			qp->una_psn = psn_add(h->psn, 1);
		if (w->resp_pkt == w->npkts && qp->sq_tail == i) {
			qp->una_psn = psn_add(w->first_psn, w->npkts);
			sq_complete_tail(qp, IBV_WC_SUCCESS);
			qp->retry_left = qp->attr.retry_cnt;
			/* later WQEs already acknowledged may complete now */
			while (qp->sq_tail != qp->sq_next_tx) {
				struct srd_swqe *x = &qp->sq[qp->sq_tail % (unsigned)qp->sq_cap];
				if (is_rd(x) && x->resp_pkt == x->npkts)
					sq_complete_tail(qp, IBV_WC_SUCCESS);
				else
					break;
			}
			if (qp->una_psn == qp->snd_psn && qp->sq_tail == qp->sq_next_tx)
				qp->timer_deadline_ns = 0;
			else
				arm_timer(qp);
		} else {
			arm_timer(qp);
		}
		break;
	}
	sq_progress(qp);
	pthread_mutex_unlock(&qp->sq_lock);
}

/* ---------------------------------------------------------------- responder (packets) */

static void send_ack(struct srd_qp *qp, const struct sockaddr_in6 *to, uint32_t dqpn, uint32_t psn,
		     int syn, uint32_t extra)
{
	struct pkt_hdr h;
	memset(&h, 0, sizeof(h));
	h.op = OP_ACK;
	h.syndrome = (uint8_t)syn;
	h.dqpn = dqpn;
	h.sqpn = qp->ibqp.qp_num;
	h.psn = psn & SRD_HDR_PSN_MASK;
	h.imm = extra;
	xmit(qp, to, &h, NULL, 0);
}

static void answer_read(struct srd_qp *qp, const struct pkt_hdr *r)
{
	uint32_t mtu = mtu_bytes(qp->attr.path_mtu);
	uint32_t n = r->len ? (r->len + mtu - 1) / mtu : 1;
	srd_mr_rdlock();
	uint8_t *src = r->len ? resolve_rkey(qp->ibqp.pd, r->rkey, r->va, r->len, IBV_ACCESS_REMOTE_READ)
			      : (uint8_t *)1;
	if (!src) {
		srd_mr_unlock();
		send_ack(qp, &qp->peer, r->sqpn, r->psn, SYN_NAK_ACCESS, 0);
		return;
	}
	batch_begin();
	for (uint32_t i = 0; i < n; i++) {
		struct pkt_hdr h;
		memset(&h, 0, sizeof(h));
		h.op = OP_READ_RESP;
		h.dqpn = r->sqpn;
		h.sqpn = qp->ibqp.qp_num;
		h.psn = psn_add(r->psn, i);
		uint32_t off = i * mtu;
		h.len = r->len - off < mtu ? r->len - off : mtu;
		if (!r->len)
			h.len = 0;
		h.flags = (i == 0 ? F_FIRST : 0) | (i + 1 == n ? F_LAST : 0);
		xmit(qp, &qp->peer, &h, h.len ? src + off : NULL, h.len);
	}
	batch_end();
	srd_mr_unlock();
}

static void responder_rx(struct srd_qp *qp, const struct pkt_hdr *h, const uint8_t *payload)
{
	pthread_mutex_lock(&qp->resp_lock);
	if (!responder_ready(qp) || qp->ibqp.qp_type == IBV_QPT_UD || h->sqpn != qp->attr.dest_qp_num) {
		pthread_mutex_unlock(&qp->resp_lock);
		return;
	}
	bool rc = qp->ibqp.qp_type == IBV_QPT_RC;
	int32_t d = psn_diff(h->psn, qp->epsn);
	uint32_t mtu = mtu_bytes(qp->attr.path_mtu);
	if (!rc) {
		/* UC: a gap loses the message in progress; resynchronise on a first packet */
		if (d != 0) {
			if (!(h->flags & F_FIRST)) {
				qp->epsn = psn_add(h->psn, 1);
				qp->recv_in_progress = false;
				pthread_mutex_unlock(&qp->resp_lock);
				return;
			}
			qp->recv_in_progress = false;
			qp->epsn = h->psn;
		}
	} else if (d > 0) {
		if (!qp->nak_sent) {
			ST(nak_seq);
			qp->nak_sent = true;
			send_ack(qp, &qp->peer, h->sqpn, qp->epsn, SYN_NAK_SEQ, 0);
		}
		pthread_mutex_unlock(&qp->resp_lock);
		return;
	} else if (d < 0) {
		/* duplicate */
		ST(dup_rx);
		if (h->op == OP_READ_REQ) {
			answer_read(qp, h);
		} else if (h->op == OP_CAS || h->op == OP_FAA) {
			for (int i = 0; i < 16; i++)
				if (qp->atomic_cache[i].valid && qp->atomic_cache[i].psn == h->psn) {
					struct pkt_hdr a;
					memset(&a, 0, sizeof(a));
					a.op = OP_ATOMIC_RESP;
					a.dqpn = h->sqpn;
					a.sqpn = qp->ibqp.qp_num;
					a.psn = h->psn;
					a.cmp = qp->atomic_cache[i].val;
					xmit(qp, &qp->peer, &a, NULL, 0);
				}
		} else if (h->flags & (F_LAST | F_ACKREQ)) {
			send_ack(qp, &qp->peer, h->sqpn, psn_add(qp->epsn, SRD_HDR_PSN_MASK), SYN_ACK, 0);
		}
		pthread_mutex_unlock(&qp->resp_lock);
		return;
	}
	int qacc = qp->attr.qp_access_flags;
	uint32_t advance = 1;
	/* a receive completion is written only after the ACK is on the wire, as hardware
	 * acknowledges on placement: the application can never answer before the ACK */
	bool pend = false;
	struct srd_rwqe pend_rw = { 0 };
	enum ibv_wc_opcode pend_op = IBV_WC_RECV;
	uint32_t pend_len = 0;
	srd_mr_rdlock();
	switch (h->op) {
	case OP_SEND: {
		if (h->flags & F_FIRST) {
			if (qp->recv_in_progress && !rc) {
				/* UC: reuse the WQE of the aborted message */
			} else if (!take_rwqe(qp, &qp->cur_rwqe, qp->cur_sges)) {
				srd_mr_unlock();
				if (rc)
					send_ack(qp, &qp->peer, h->sqpn, qp->epsn, SYN_RNR, qp->attr.min_rnr_timer);
				else
					qp->epsn = psn_add(h->psn, 1); /* UC drops it */
				pthread_mutex_unlock(&qp->resp_lock);
				return;
			}
			qp->recv_in_progress = true;
			qp->recv_off = 0;
		} else if (!qp->recv_in_progress) {
			break; /* stray middle packet (UC after loss) */
		}
		struct seg rseg[SRD_MAX_SGE];
		uint32_t room;
		if (resolve_sgl(qp->ibqp.pd, qp->cur_rwqe.sge, qp->cur_rwqe.num_sge, IBV_ACCESS_LOCAL_WRITE,
				rseg, &room)) {
			recv_complete(qp, &qp->cur_rwqe, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, false, 0, 0, false, true);
			qp->recv_in_progress = false;
			srd_mr_unlock();
			if (rc)
				send_ack(qp, &qp->peer, h->sqpn, h->psn, SYN_NAK_OP, 0);
			responder_error(qp, IBV_EVENT_QP_FATAL);
			pthread_mutex_unlock(&qp->resp_lock);
			return;
		}
		if (qp->recv_off + h->len > room) {
			recv_complete(qp, &qp->cur_rwqe, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, false, 0, 0, false, true);
			qp->recv_in_progress = false;
			srd_mr_unlock();
			if (rc)
				send_ack(qp, &qp->peer, h->sqpn, h->psn, SYN_NAK_INV, 0);
			responder_error(qp, IBV_EVENT_QP_REQ_ERR);
			pthread_mutex_unlock(&qp->resp_lock);
			return;
		}
		if (h->len)
			seg_copy_in(rseg, qp->cur_rwqe.num_sge, qp->recv_off, payload, h->len);
		qp->recv_off += h->len;
		if (h->flags & F_LAST) {
			pend = true;
			pend_rw = qp->cur_rwqe;
			pend_op = IBV_WC_RECV;
			pend_len = qp->recv_off;
			qp->recv_in_progress = false;
		}
		break;
	}
	case OP_WRITE: {
		if (!(qacc & IBV_ACCESS_REMOTE_WRITE)) {
			srd_mr_unlock();
			if (rc)
				send_ack(qp, &qp->peer, h->sqpn, h->psn, SYN_NAK_INV, 0);
			responder_error(qp, IBV_EVENT_QP_REQ_ERR);
			pthread_mutex_unlock(&qp->resp_lock);
			return;
		}
		uint8_t *t = NULL;
		if (h->flags & F_FIRST) {
			/* the whole message range is checked on its first packet */
			if (h->total && !resolve_rkey(qp->ibqp.pd, h->rkey, h->va, h->total, IBV_ACCESS_REMOTE_WRITE))
				goto access_err;
		}
		if (h->len) {
			t = resolve_rkey(qp->ibqp.pd, h->rkey, h->va, h->len, IBV_ACCESS_REMOTE_WRITE);
			if (!t)
				goto access_err;
		}
		if ((h->flags & F_LAST) && (h->flags & F_IMM)) {
			struct srd_rwqe rw;
			struct ibv_sge rs[SRD_MAX_SGE];
			if (!take_rwqe(qp, &rw, rs)) {
				srd_mr_unlock();
				if (rc)
					send_ack(qp, &qp->peer, h->sqpn, qp->epsn, SYN_RNR, qp->attr.min_rnr_timer);
				else
					qp->epsn = psn_add(h->psn, 1);
				pthread_mutex_unlock(&qp->resp_lock);
				return;
			}
			if (h->len)
				memcpy(t, payload, h->len);
			pend = true;
			pend_rw = rw;
			pend_op = IBV_WC_RECV_RDMA_WITH_IMM;
			pend_len = h->total;
			break;
		}
		if (h->len)
			memcpy(t, payload, h->len);
		break;
	}
	case OP_READ_REQ:
		if (!rc || !(qacc & IBV_ACCESS_REMOTE_READ)) {
			srd_mr_unlock();
			send_ack(qp, &qp->peer, h->sqpn, h->psn, SYN_NAK_INV, 0);
			responder_error(qp, IBV_EVENT_QP_REQ_ERR);
			pthread_mutex_unlock(&qp->resp_lock);
			return;
		}
		if (h->len && !resolve_rkey(qp->ibqp.pd, h->rkey, h->va, h->len, IBV_ACCESS_REMOTE_READ))
			goto access_err;
		srd_mr_unlock();
		answer_read(qp, h);
		srd_mr_rdlock();
		advance = h->len ? (h->len + mtu - 1) / mtu : 1;
		break;
	case OP_CAS:
	case OP_FAA: {
		if (!rc || !(qacc & IBV_ACCESS_REMOTE_ATOMIC) || (h->va & 7)) {
			srd_mr_unlock();
			send_ack(qp, &qp->peer, h->sqpn, h->psn, SYN_NAK_INV, 0);
			responder_error(qp, IBV_EVENT_QP_REQ_ERR);
			pthread_mutex_unlock(&qp->resp_lock);
			return;
		}
		uint64_t *p = (uint64_t *)resolve_rkey(qp->ibqp.pd, h->rkey, h->va, 8, IBV_ACCESS_REMOTE_ATOMIC);
		if (!p)
			goto access_err;
		uint64_t orig;
		if (h->op == OP_FAA) {
			orig = __atomic_fetch_add(p, h->cmp, __ATOMIC_SEQ_CST);
		} else {
			orig = h->cmp;
			__atomic_compare_exchange_n(p, &orig, h->swap, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
		}
		int slot = qp->atomic_cache_next++ & 15;
		qp->atomic_cache[slot].psn = h->psn;
		qp->atomic_cache[slot].val = orig;
		qp->atomic_cache[slot].valid = true;
		struct pkt_hdr a;
		memset(&a, 0, sizeof(a));
		a.op = OP_ATOMIC_RESP;
		a.dqpn = h->sqpn;
		a.sqpn = qp->ibqp.qp_num;
		a.psn = h->psn;
		a.cmp = orig;
		xmit(qp, &qp->peer, &a, NULL, 0);
		break;
	}
	default:
		break;
	}
	srd_mr_unlock();
	qp->epsn = psn_add(h->psn, advance);
	qp->nak_sent = false;
	if (rc && (h->op == OP_SEND || h->op == OP_WRITE) && (h->flags & (F_LAST | F_ACKREQ)))
		send_ack(qp, &qp->peer, h->sqpn, h->psn, SYN_ACK, 0);
	if (pend && tl_batch && tl_batch->n)
		batch_flush(tl_batch); /* the ACK leaves before the completion is visible */
	if (pend)
		recv_complete(qp, &pend_rw, IBV_WC_SUCCESS, pend_op, pend_len, (h->flags & F_IMM) != 0,
			      h->imm, h->sqpn, false, (h->flags & F_SOLICITED) != 0);
	pthread_mutex_unlock(&qp->resp_lock);
	return;
access_err:
	srd_mr_unlock();
	if (rc)
		send_ack(qp, &qp->peer, h->sqpn, h->psn, SYN_NAK_ACCESS, 0);
	responder_error(qp, IBV_EVENT_QP_ACCESS_ERR);
	pthread_mutex_unlock(&qp->resp_lock);
}

/* ---------------------------------------------------------------- agent */

static void handle_packet(const uint8_t *buf, size_t n)
{
	if (n < sizeof(struct pkt_hdr))
		return;
	struct pkt_hdr h;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != PKT_MAGIC)
		return;
	ST(rx);
	if (h.op != OP_READ_REQ && h.len != n - sizeof(h))
		return;
	const uint8_t *payload = buf + sizeof(h);
	pthread_rwlock_rdlock(&g_qpt);
	struct srd_qp *qp = lookup_qpn(h.dqpn);
	if (qp) {
		if (h.op == OP_UD_SEND) {
			struct seg s = { (uint8_t *)payload, h.len };
			srd_mr_rdlock();
			ud_deliver(qp, h.rkey, h.sqpn, h.sgid, &s, 1, h.len, (h.flags & F_IMM) != 0, h.imm,
				   (h.flags & F_SOLICITED) != 0);
			srd_mr_unlock();
		} else if (h.op == OP_ACK || h.op == OP_READ_RESP || h.op == OP_ATOMIC_RESP) {
			if (h.sqpn == qp->attr.dest_qp_num)
				requester_rx(qp, &h, payload);
		} else {
			responder_rx(qp, &h, payload);
		}
	}
	pthread_rwlock_unlock(&g_qpt);
}

static void run_timers_and_kicks(uint64_t now)
{
	bool any = false;
	pthread_rwlock_rdlock(&g_qpt);
	for (int s = 0; s < g_nsocks; s++) {
		for (int i = 0; i < 256; i++) {
			struct srd_qp *qp = g_socks[s]->slots[i];
			if (!qp)
				continue;
			bool kick = __atomic_exchange_n(&qp->kick, false, __ATOMIC_ACQ_REL);
			if (!kick && !qp->timer_deadline_ns)
				continue;
			pthread_mutex_lock(&qp->sq_lock);
			if (qp->timer_deadline_ns && now >= qp->timer_deadline_ns) {
				qp->timer_deadline_ns = 0;
				if (qp->rnr_wait) {
					qp->rnr_wait = false;
				} else if (qp->sq_tail != qp->sq_next_tx || qp->una_psn != qp->snd_psn ||
					   (qp->peer_local && qp->sq_tail != qp->sq_head)) {
					ST(timeouts);
					if (getenv("SOFTRDMA_DEBUG")) {
						struct srd_swqe *w = &qp->sq[qp->sq_tail % (unsigned)qp->sq_cap];
						fprintf(stderr, "softrdma: timeout qp %06x una %06x snd %06x tail %u next %u head %u "
							"op %d first %06x npk %u tx %u resp %u retry %d\n", qp->ibqp.qp_num,
							qp->una_psn, qp->snd_psn, qp->sq_tail, qp->sq_next_tx, qp->sq_head,
							w->opcode, w->first_psn, w->npkts, w->tx_pkt, w->resp_pkt, qp->retry_left);
					}
					if (qp->retry_left == 0) {
						requester_fail(qp, IBV_WC_RETRY_EXC_ERR);
					} else {
						qp->retry_left--;
						go_back(qp, qp->una_psn);
					}
				}
				kick = true;
			}
			if (kick)
				sq_progress(qp);
			if (qp->timer_deadline_ns)
				any = true;
			pthread_mutex_unlock(&qp->sq_lock);
		}
	}
	pthread_rwlock_unlock(&g_qpt);
	__atomic_store_n(&g_timers_hint, any ? 1 : 0, __ATOMIC_RELAXED);
}

static void *agent_main(void *arg)
{
	(void)arg;

	enum { RBATCH = 32 };
	uint8_t *buf = malloc((size_t)RBATCH * MAX_PKT);
	struct mmsghdr rmsgs[RBATCH];
	struct iovec riov[RBATCH];
	for (int j = 0; j < RBATCH; j++) {
		riov[j].iov_base = buf + (size_t)j * MAX_PKT;
		riov[j].iov_len = MAX_PKT;
		memset(&rmsgs[j], 0, sizeof(rmsgs[j]));
		rmsgs[j].msg_hdr.msg_iov = &riov[j];
		rmsgs[j].msg_hdr.msg_iovlen = 1;
	}
	struct epoll_event evs[16];
	uint64_t last_scan = 0;
	for (;;) {
		int tmo = (__atomic_load_n(&g_timers_hint, __ATOMIC_RELAXED) || g_delayed) ? 1 : 50;
		int n = epoll_wait(g_epfd, evs, 16, tmo);
		bool kicked = false;
		for (int i = 0; i < n; i++) {
			if (evs[i].data.u32 == 0xffffffffu) {
				uint64_t v;
				if (read(g_kickfd, &v, 8) < 0) { /* already drained */ }
				kicked = true;
				continue;
			}
			int fd = g_socks[evs[i].data.u32]->fd;
			batch_begin();
			for (int k = 0; k < 16; k++) {
				int r = recvmmsg(fd, rmsgs, RBATCH, MSG_DONTWAIT, NULL);
				if (r <= 0)
					break;
				for (int j = 0; j < r; j++)
					handle_packet(buf + (size_t)j * MAX_PKT, rmsgs[j].msg_len);
				if (r < RBATCH)
					break;
			}
			batch_end();
		}
		uint64_t now = srd_now_ns();
		if (g_delayed)
			flush_delayed(now);
		if (kicked || now - last_scan >= 1000000ull) {
			last_scan = now;
			batch_begin();
			run_timers_and_kicks(now);
			batch_end();
		}
	}
	return NULL;
}

/* ---------------------------------------------------------------- post */

static struct srd_qp *qp_of(struct ibv_qp *q)
{
	return container_of(q, struct srd_qp, ibqp);
}

int srd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct srd_qp *qp = qp_of(ibqp);
	int rc = 0;
	pthread_mutex_lock(&qp->sq_lock);
	int st = qp->state;
	if (st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_RTR) {
		pthread_mutex_unlock(&qp->sq_lock);
		*bad = wr;
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		enum ibv_qp_type t = ibqp->qp_type;
		bool ok;
		switch (wr->opcode) {
		case IBV_WR_SEND:
		case IBV_WR_SEND_WITH_IMM:
			ok = true;
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
		if (!ok || wr->num_sge < 0 || wr->num_sge > (int)qp->cap.max_send_sge) {
			rc = EINVAL;
			break;
		}
		if (qp->sq_head - qp->sq_tail >= (unsigned)qp->sq_cap) {
			rc = ENOMEM;
			break;
		}
		uint64_t len = 0;
		for (int i = 0; i < wr->num_sge; i++)
			len += wr->sg_list[i].length;
		bool inl = (wr->send_flags & IBV_SEND_INLINE) &&
			   (wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_SEND_WITH_IMM ||
			    wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM);
		if (inl && len > qp->cap.max_inline_data) {
			rc = EINVAL;
			break;
		}
		if (len > 0x80000000ull || (t == IBV_QPT_UD && len > 4096)) {
			rc = EINVAL;
			break;
		}
		if (t == IBV_QPT_UD && !wr->wr.ud.ah) {
			rc = EINVAL;
			break;
		}
		if (is_rd(&(struct srd_swqe){ .opcode = wr->opcode }) && wr->opcode != IBV_WR_RDMA_READ &&
		    (wr->num_sge < 1 || len != 8)) {
			rc = EINVAL;
			break;
		}
		struct srd_swqe *w = &qp->sq[qp->sq_head % (unsigned)qp->sq_cap];
		w->wr_id = wr->wr_id;
		w->opcode = wr->opcode;
		w->send_flags = wr->send_flags & ~(inl ? 0u : (unsigned)IBV_SEND_INLINE);
		w->imm = wr->imm_data;
		w->num_sge = wr->num_sge;
		w->length = (uint32_t)len;
		w->signaled = qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
		w->psn_assigned = false;
		w->tx_pkt = w->resp_pkt = 0;
		if (inl) {
			uint32_t off = 0;
			for (int i = 0; i < wr->num_sge; i++) {
				memcpy(w->inline_buf + off, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
				off += wr->sg_list[i].length;
			}
			w->num_sge = 0;
		} else {
			memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
		}
		if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			w->remote_addr = wr->wr.atomic.remote_addr;
			w->rkey = wr->wr.atomic.rkey;
			w->compare_add = wr->wr.atomic.compare_add;
			w->swap = wr->wr.atomic.swap;
		} else if (t == IBV_QPT_UD) {
			w->ud_av = container_of(wr->wr.ud.ah, struct srd_ah, ibah)->attr;
			w->ud_qpn = wr->wr.ud.remote_qpn;
			/* a q_key with the high bit set means "use the QP's own" */
			w->ud_qkey = (wr->wr.ud.remote_qkey & 0x80000000u) ? qp->attr.qkey : wr->wr.ud.remote_qkey;
		} else {
			w->remote_addr = wr->wr.rdma.remote_addr;
			w->rkey = wr->wr.rdma.rkey;
		}
		qp->sq_head++;
	}
	if (rc)
		*bad = wr;
	batch_begin();
	sq_progress(qp);
	batch_end();
	pthread_mutex_unlock(&qp->sq_lock);
	return rc;
}

int srd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct srd_qp *qp = qp_of(ibqp);
	if (qp->srq || qp->state == IBV_QPS_RESET) {
		*bad = wr;
		return EINVAL;
	}
	int rc = 0;
	pthread_mutex_lock(&qp->rq.lock);
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || wr->num_sge > qp->rq.max_sge || (int)qp->cap.max_recv_sge < wr->num_sge) {
			rc = EINVAL;
			break;
		}
		if (qp->rq.count == qp->rq.cap || qp->rq.count >= (int)qp->cap.max_recv_wr) {
			rc = ENOMEM;
			break;
		}
		struct srd_rwqe *w = &qp->rq.ring[(qp->rq.head + qp->rq.count) % qp->rq.cap];
		w->wr_id = wr->wr_id;
		w->num_sge = wr->num_sge;
		memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
		qp->rq.count++;
	}
	pthread_mutex_unlock(&qp->rq.lock);
	if (rc)
		*bad = wr;
	if (__atomic_load_n(&qp->state, __ATOMIC_ACQUIRE) == IBV_QPS_ERR)
		srd_flush_rq(qp);
	return rc;
}
