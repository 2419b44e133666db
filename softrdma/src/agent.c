/*
 * The agent: one thread per process (started with the first device open)
 * that plays the NIC. It receives packets and hands each to the requester
 * (ACK/NAK, READ/atomic responses) or the responder (requests, UD), so a
 * target that only spins on its memory sees data without calling a verb; it
 * runs kicked send queues and the retransmission/RNR timers, and sends the
 * packets fault injection held back. Also fork(): the child starts afresh.
 * Owns: the thread and its receive buffers.
 * Calls: requester, responder, net, faults, pd (MR lock for UD delivery).
 */
#include "agent.h"
#include "requester.h"
#include "responder.h"
#include "net.h"
#include "faults.h"
#include "shm.h"
#include "lock.h"
#include "pd.h"
#include "cq.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/prctl.h>

void (*srd_xrc_ctrl_hook)(const struct pkt_hdr *h, const uint8_t *payload, const struct sockaddr_in6 *from);

static pthread_once_t g_agent_once = PTHREAD_ONCE_INIT;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

/*
 * One received datagram. Dropped before any QP sees it: one from an address other
 * than loopback unless SOFTRDMA_REMOTE lets other hosts in, a truncated one (larger
 * than any packet softrdma sends), one shorter than a header or of another
 * protocol, one whose QPNs or PSN use the reserved top byte, one whose length is
 * not what its header says (a READ request carries no payload).
 */
static void handle_packet(const uint8_t *buf, size_t n, const struct sockaddr_in6 *from,
			  int msg_flags)
{
	if ((msg_flags & MSG_TRUNC) || n < sizeof(struct pkt_hdr) || !srd_net_source_allowed(from)) {
		ST(invalid);
		return;
	}
	struct pkt_hdr h;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != PKT_MAGIC)
		return;
	ST(rx);
	if (((h.dqpn | h.sqpn | h.psn) & ~SRD_HDR_PSN_MASK) ||
	    (h.op == OP_READ_REQ ? n != sizeof(h) : h.len != n - sizeof(h))) {
		ST(invalid);
		return;
	}
	const uint8_t *payload = buf + sizeof(h);
	if (h.op == OP_XRC_CTRL || h.op == OP_XRC_CTRL_RESP) {
		/* ibv_open_qp across processes (xctl.c), handled outside the QPN table's lock */
		void (*hook)(const struct pkt_hdr *, const uint8_t *, const struct sockaddr_in6 *) =
			__atomic_load_n(&srd_xrc_ctrl_hook, __ATOMIC_ACQUIRE);
		if (hook)
			hook(&h, payload, from);
		return;
	}
	srd_net_rdlock();
	if (h.op == OP_XRC_RELAY) {
		/* a request of another process's TGT QP for one of our XRC SRQs */
		srd_relay_rx(&h, payload, from);
		srd_net_unlock();
		return;
	}
	struct srd_qp *qp = srd_net_lookup(h.dqpn);
	if (qp) {
		if (h.op == OP_XRC_RELAY_RESP) {
			srd_relay_resp_rx(qp, &h, from); /* from the SRQ's process, not the QP's peer */
		} else if (h.op == OP_UD_SEND) {
			struct srd_seg s = { (uint8_t *)payload, h.len, false };
			srd_mr_rdlock();
			srd_ud_deliver(qp, h.rkey, h.sqpn, h.sgid, &s, 1, h.len, (h.flags & F_IMM) != 0, h.imm,
				       (h.flags & F_SOLICITED) != 0);
			srd_mr_unlock();
		} else if (!srd_net_from_peer(qp, from)) {
			ST(invalid); /* connected QPs take packets from their peer only */
		} else if (h.op == OP_ACK || h.op == OP_READ_RESP || h.op == OP_ATOMIC_RESP) {
			if (h.sqpn == qp->attr.dest_qp_num)
				srd_requester_rx(qp, &h, payload);
		} else {
			srd_responder_rx(qp, &h, payload);
		}
	}
	srd_net_unlock();
}

/* A packet from a same-host sender's ring: as from a datagram of its loopback socket. */
static void handle_shm_packet(const uint8_t *buf, size_t n, uint16_t sport, void *arg)
{
	(void)arg;
	static const struct in6_addr lo4 = { .s6_addr = { [10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1 } };
	struct sockaddr_in6 from = { .sin6_family = AF_INET6, .sin6_port = htons(sport), .sin6_addr = lo4 };
	ST(shm_rx);
	handle_packet(buf, n, &from, 0);
}

/*
 * Progress by the polling thread. A thread polling an empty CQ takes up to 16 packets from
 * the rings itself (one consumer at a time: srd_shm_drain), so it runs the requester and the
 * responder for them and a reply is placed without waiting for the agent to be scheduled.
 * Each such poll moves g_polls. While it moved within HANDOVER_NS the agent leaves the rings
 * to the poller: it neither spins nor drains them, and waits HANDOVER_WAIT_NS at a time in
 * epoll (woken at once by datagrams and kicks; the rings stay marked awake, so senders ring
 * no doorbell and the poller's fast path signals nothing). So a ping-pong keeps one busy
 * thread per process, the application's poller.
 *
 * A poller may stop polling at any moment: it blocks for a completion event, or (as
 * ib_write_lat) spins on memory and waits for an RDMA WRITE that no CQ reports. So at each
 * wake-up the agent looks at the rings: a packet that stays there for CONFIRM_NS while the
 * agent watches is one no poller takes, and the agent takes it. Three such takes in a row
 * (each within TAKE_STREAK_NS of the last) and the agent keeps the rings for a hold (1 ms,
 * doubled while holds keep failing at once after their end, up to 8 ms) in which it runs as
 * without pollers (spin after traffic, then sleep with the doorbell armed). A packet thus waits at
 * most one bounded wait plus CONFIRM_NS; once the polls stop for HANDOVER_NS the agent runs
 * as without pollers too, and a packet that came in meanwhile waits in its ring, none is lost.
 */
#define HANDOVER_NS 50000ull       /* a poll this recent: the poller drives the rings */
#define HANDOVER_WAIT_NS 50000ull  /* the agent's bounded wait meanwhile */
#define CONFIRM_NS 5000ull         /* how long a waiting packet may stay before the agent takes it */
#define TAKE_STREAK_NS 200000ull  /* takes this close together make a streak */
#define HOLD_MIN_NS 1000000ull
#define HOLD_MAX_NS 8000000ull
static unsigned long g_polls;

static bool poll_hook(void)
{
	/* a plain store, no locked instruction: racing pollers may lose a count, the agent
	 * only asks whether it moved */
	__atomic_store_n(&g_polls, __atomic_load_n(&g_polls, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
	if (!srd_shm_pending())
		return false;
	srd_batch_begin();
	int got = srd_shm_drain(handle_shm_packet, NULL, 16);
	srd_batch_end();
	return got > 0;
}

/* While handed over: whether a poller takes the packets waiting in the rings (within
 * CONFIRM_NS), or whether they stay there. */
static bool poller_takes(uint64_t t0)
{
	uint64_t taken = srd_shm_taken();
	for (unsigned i = 0;; i++) {
		if (!srd_shm_pending() || srd_shm_taken() != taken)
			return true;
		if ((i & 15) == 15 && srd_now_ns() - t0 > CONFIRM_NS)
			return false;
		srd_cpu_relax();
	}
}

/* Whether the agent hands the rings to polling threads (SOFTRDMA_HANDOVER, default 1; 0 keeps
 * the rings with the agent as before the handover existed, for A/B runs: softrdma/bench/handover-ab.sh) */
static bool handover_enabled(void)
{
	const char *v = getenv("SOFTRDMA_HANDOVER");
	return !v || strcmp(v, "0") != 0;
}

/* How long the agent busy-polls its rings after the last packet or kick before it sleeps
 * (SOFTRDMA_SPIN_US, default 50; 0 = never spin). */
static uint64_t spin_ns(void)
{
	const char *v = getenv("SOFTRDMA_SPIN_US");
	return (v ? strtoull(v, NULL, 10) : 50ull) * 1000ull;
}

struct scan { uint64_t now; bool any; };

static void service(struct srd_qp *qp, void *arg)
{
	struct scan *s = arg;
	bool kick = __atomic_exchange_n(&qp->kick, false, __ATOMIC_ACQ_REL);
	if (srd_requester_service(qp, kick, s->now))
		s->any = true;
	if (qp->xrc == SRD_XRC_TGT && srd_relay_service(qp, s->now))
		s->any = true;
}

static void run_timers_and_kicks(uint64_t now)
{
	struct scan s = { now, false };
	srd_net_for_each_qp(service, &s);
	srd_timer_hint(s.any);
}

static void *agent_main(void *arg)
{
	(void)arg;

	enum { RBATCH = 32 };
	uint8_t *buf = malloc((size_t)RBATCH * MAX_PKT);
	struct mmsghdr rmsgs[RBATCH];
	struct iovec riov[RBATCH];
	struct sockaddr_in6 from[RBATCH];
	for (int j = 0; j < RBATCH; j++) {
		riov[j].iov_base = buf + (size_t)j * MAX_PKT;
		riov[j].iov_len = MAX_PKT;
		memset(&rmsgs[j], 0, sizeof(rmsgs[j]));
		rmsgs[j].msg_hdr.msg_iov = &riov[j];
		rmsgs[j].msg_hdr.msg_iovlen = 1;
		rmsgs[j].msg_hdr.msg_name = &from[j];
	}
	struct epoll_event evs[16];
	uint64_t last_scan = 0, last_work = 0, last_epoll = 0;
	uint64_t polled_at = 0, hold_until = 0, hold = HOLD_MIN_NS, last_take = 0;
	unsigned streak = 0;
	unsigned long polls_seen = __atomic_load_n(&g_polls, __ATOMIC_RELAXED);
	const uint64_t spin = spin_ns();
	const bool handover = handover_enabled();
	/* the bounded waits below are tens of microseconds: the default 50 us timer slack
	 * would double them */
	if (handover)
		prctl(PR_SET_TIMERSLACK, 5000UL, 0, 0, 0);
	for (;;) {
		int tmo = (srd_timer_hinted() || srd_faults_pending()) ? 1 : 50;
		uint64_t t0 = srd_now_ns();
		unsigned long polls = __atomic_load_n(&g_polls, __ATOMIC_RELAXED);
		if (polls != polls_seen) {
			polls_seen = polls;
			polled_at = t0;
		}
		bool handed = handover && t0 >= hold_until && t0 - polled_at < HANDOVER_NS && srd_shm_owned();
		bool take = false;
		if (handed && srd_shm_pending() && !poller_takes(t0)) {
			/* the poller leaves packets in the rings: it lost its CPU for a moment, or it
			 * spins on memory or blocks: the agent takes them now */
			ST(agent_takeback);
			take = true;
			handed = false;
			streak = t0 - last_take < TAKE_STREAK_NS ? streak + 1 : 1;
			last_take = t0;
			if (streak >= 3) {
				/* again and again: keep the rings for a while. A hold that fails at once
				 * again (a memory spinner that polls its send CQ between messages) makes
				 * the next longer; one after a handover that lasted starts over */
				hold = t0 - hold_until < HOLD_MIN_NS ? (hold * 2 < HOLD_MAX_NS ? hold * 2 : HOLD_MAX_NS)
								     : HOLD_MIN_NS;
				hold_until = t0 + hold;
				last_work = t0; /* and it spins now, as after any traffic */
				streak = 0;
				ST(agent_hold);
			}
		}
		int n;
		if (handed) {
			n = srd_net_wait_ns(evs, 16, HANDOVER_WAIT_NS);
			last_epoll = srd_now_ns();
		} else if (take && t0 >= hold_until) {
			n = srd_net_wait(evs, 16, 0);
			last_epoll = t0;
		} else if (spin && srd_shm_owned() && t0 - last_work < spin) {
			/* busy: poll the rings (no system call) for up to 10 us; sockets now and then */
			for (unsigned i = 0; !srd_shm_pending() && !srd_net_wake_pending();
			     i++) {
				srd_cpu_relax();
				if ((i & 63) == 63) {
					if (srd_now_ns() - t0 > 10000)
						break;
					sched_yield(); /* other threads of a busy machine run too */
				}
			}
			uint64_t t1 = srd_now_ns();
			n = 0;
			if (t1 - last_epoll > 10000 || !srd_shm_pending()) {
				n = srd_net_wait(evs, 16, 0);
				last_epoll = t1;
			}
		} else {
			n = srd_net_wait(evs, 16, tmo);
			last_epoll = srd_now_ns();
		}
		bool kicked = srd_net_take_wake();
		bool work = kicked;
		for (int i = 0; i < n; i++) {
			int fd = srd_net_event_fd(&evs[i]);
			if (fd < 0) {
				kicked = true;
				continue;
			}
			work = true;
			srd_batch_begin();
			for (int k = 0; k < 16; k++) {
				for (int j = 0; j < RBATCH; j++)
					rmsgs[j].msg_hdr.msg_namelen = sizeof(from[j]);
				int r = recvmmsg(fd, rmsgs, RBATCH, MSG_DONTWAIT, NULL);
				if (r <= 0)
					break;
				for (int j = 0; j < r; j++)
					handle_packet(buf + (size_t)j * MAX_PKT, rmsgs[j].msg_len, &from[j],
						      rmsgs[j].msg_hdr.msg_flags);
				if (r < RBATCH)
					break;
			}
			srd_batch_end();
		}
		if (!handed) {
			srd_batch_begin();
			if (srd_shm_drain(handle_shm_packet, NULL, 256))
				work = true;
			srd_batch_end();
		}
		kicked |= srd_net_take_wake();
		uint64_t now = srd_now_ns();
		/* a single take does not start the agent spinning: the poller is expected back */
		if ((work || kicked) && !(take && now >= hold_until))
			last_work = now;
		if (srd_faults_pending())
			srd_faults_flush(now);
		if (kicked || now - last_scan >= 1000000ull) {
			last_scan = now;
			srd_batch_begin();
			run_timers_and_kicks(now);
			srd_batch_end();
		}
	}
	return NULL;
}

static void agent_init(void)
{
	srd_net_init();
	if (!srd_faults_enabled())
		__atomic_store_n(&srd_cq_idle_hook, poll_hook, __ATOMIC_RELEASE);
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
	srd_net_atfork_child();
	srd_resp_atfork_child();
	g_agent_once = (pthread_once_t)PTHREAD_ONCE_INIT;
}

static void atfork_register(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
}

void srd_agent_start(void)
{
	pthread_once(&g_atfork_once, atfork_register);
	pthread_once(&g_agent_once, agent_init);
}
