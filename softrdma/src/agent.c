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
#include <fcntl.h>
#include <unistd.h>
#include <sys/syscall.h>

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
 * Each such poll moves g_polls and names its thread in g_poller_tid. Once HAND_POLLS polls
 * came since the last leave (below), and they came densely (at least one per DENSE_POLL_NS on
 * average over the agent's last window of DENSE_WINDOW_NS: a thread that polls, sleeps and
 * polls again would leave packets waiting in the rings meanwhile, 16 taken per poll), the
 * agent hands the rings to the pollers: it neither spins on them nor drains them, the rings
 * stay marked awake (senders ring no doorbell, the poller's path signals nothing), and the
 * agent sleeps in one wait that only a datagram, a kick, a leave, a due timer or the end of
 * the lease ends. So a ping-pong keeps one busy thread per process, the application's poller,
 * and the agent wakes a few hundred times a second at most (the lease and the 1 ms timer scan
 * while timers run), not per packet.
 *
 * The agent takes the rings back when the poller stops:
 * - it leaves for good: a thread that arms a CQ's notification (ibv_req_notify_cq) is about to
 *   block for a completion event; the arm counts a leave and wakes the handed-over agent at
 *   once (srd_shm_poller_leaves), and the polls needed to hand over again start from zero (a
 *   thread that arms, polls once and blocks, as completion-channel users do, never gets the
 *   rings);
 * - it stops without a word (it spins on memory for an RDMA WRITE as ib_write_lat does, it
 *   sleeps, it exited): no poll for LEASE_NS. The agent then looks at the last poller's
 *   scheduler statistics for LOOK_NS (/proc/self/task/TID/schedstat): a thread that ran in
 *   that time without polling works elsewhere, one that neither ran nor waited for a CPU is
 *   blocked, one that is gone is gone: the agent takes the rings. One that waited for a CPU
 *   and hardly ran was only descheduled (on two CPUs a runnable poller often loses a
 *   scheduler slice of 1-4 ms): the agent leaves it the rings, up to PATIENCE_NS since its
 *   last poll. Where the statistics cannot be read, the agent takes the rings.
 * A take while packets wait from a poller that works elsewhere (a memory spinner that polls
 * its send CQ between messages) starts a hold: the agent keeps the rings for HOLD_MIN_NS
 * (doubled while holds keep failing at once after their end, up to HOLD_MAX_NS) and runs as
 * without pollers.
 *
 * No lost wake-up. A packet a sender put into a ring is taken by a poller's drain or by the
 * agent: while the rings are handed over the agent's wait ends (a) at once when a poller
 * arms a notification (the leave's Dekker pair in shm.c: the agent marks itself asleep, then
 * reads the leave count; the leaver counts, then reads the mark and writes the eventfd, whose
 * count epoll keeps), and (b) at the latest LEASE_NS + LOOK_NS after the agent last saw a
 * poll otherwise (PATIENCE_NS for a descheduled poller). Having taken the rings back, the
 * agent drains them before it sleeps, and srd_net_wait marks them sleeping and looks again
 * before its epoll, so a packet put in after that rings the doorbell. A packet that arrives
 * while the poller is leaving thus waits at most until the leave's wake-up, or the lease's end.
 */
#define HAND_POLLS 64              /* polls since the last leave before the agent hands over */
#define DENSE_WINDOW_NS 1000000ull /* over each such window of the agent's, */
#define DENSE_POLL_NS 50000ull     /* a poller that polled less than once per this on average is
				    * no busy poller (poll, sleep, poll): the agent keeps the rings */
#define LEASE_NS 2000000ull        /* no poll for this long: look at the poller */
#define LOOK_NS 1000000ull         /* how long the agent watches its scheduler statistics */
#define PATIENCE_NS 20000000ull    /* the longest a descheduled poller keeps the rings */
#define HOLD_MIN_NS 4000000ull
#define HOLD_MAX_NS 64000000ull
static unsigned long g_polls;
static int g_poller_tid;
static __thread int tl_tid;

static bool poll_hook(void)
{
	/* plain stores, no locked instruction: racing pollers may lose a count, the agent
	 * only asks whether it moved */
	__atomic_store_n(&g_polls, __atomic_load_n(&g_polls, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
	int tid = tl_tid;
	if (!tid)
		tid = tl_tid = (int)syscall(SYS_gettid);
	if (__atomic_load_n(&g_poller_tid, __ATOMIC_RELAXED) != tid)
		__atomic_store_n(&g_poller_tid, tid, __ATOMIC_RELAXED);
	if (!srd_shm_pending())
		return false;
	srd_batch_begin();
	int got = srd_shm_drain(handle_shm_packet, NULL, 16);
	srd_batch_end();
	return got > 0;
}

/* A thread's time on a CPU and waiting for one so far, in ns (/proc/self/task/TID/schedstat);
 * false when the thread is gone or the kernel keeps no such statistics. */
static bool thread_sched(int tid, uint64_t *ran, uint64_t *waited)
{
	char path[64], buf[96];
	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	unsigned long long r, w;
	if (sscanf(buf, "%llu %llu", &r, &w) != 2)
		return false;
	*ran = r;
	*waited = w;
	return true;
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
	uint64_t polled_at = 0, hold_until = 0, hold = HOLD_MIN_NS;
	uint64_t look_at = 0, look_ran = 0, look_waited = 0; /* look_at 0: not looking at the poller */
	int look_tid = 0;
	unsigned long polls_seen = __atomic_load_n(&g_polls, __ATOMIC_RELAXED);
	unsigned long polls_base = polls_seen; /* the count at the last leave or take */
	unsigned long leaves_seen = srd_shm_leaves();
	unsigned long window_polls = polls_seen;
	uint64_t window_at = 0;
	bool dense = false; /* the last window's verdict */
	const uint64_t spin = spin_ns();
	const bool handover = handover_enabled();
	for (;;) {
		int tmo = (srd_timer_hinted() || srd_faults_pending()) ? 1 : 50;
		uint64_t t0 = srd_now_ns();
		unsigned long polls = __atomic_load_n(&g_polls, __ATOMIC_RELAXED);
		if (polls != polls_seen) {
			polls_seen = polls;
			polled_at = t0;
			look_at = 0;
		}
		if (t0 - window_at >= DENSE_WINDOW_NS) {
			/* a window without a poll at all changes nothing: the lease below judges that */
			if (polls != window_polls)
				dense = (polls - window_polls) * DENSE_POLL_NS >= t0 - window_at;
			window_at = t0;
			window_polls = polls;
		}
		unsigned long leaves = srd_shm_leaves();
		if (leaves != leaves_seen) {
			/* a poller armed a notification: it blocks now; later polls hand over anew */
			leaves_seen = leaves;
			polls_base = polls;
			look_at = 0;
		}
		bool handed = handover && t0 >= hold_until && polls - polls_base >= HAND_POLLS && dense &&
			      srd_shm_owned();
		uint64_t wait_ns = 0;
		if (handed && t0 - polled_at < LEASE_NS) {
			wait_ns = polled_at + LEASE_NS - t0;
		} else if (handed) {
			/* no poll for LEASE_NS: descheduled, blocked, busy elsewhere, or gone? */
			int tid = __atomic_load_n(&g_poller_tid, __ATOMIC_RELAXED);
			uint64_t ran, waited;
			bool busy = false;
			if (!thread_sched(tid, &ran, &waited)) {
				handed = false; /* gone, or no statistics to tell */
			} else if (!look_at || look_tid != tid) {
				look_at = t0, look_tid = tid, look_ran = ran, look_waited = waited;
				wait_ns = LOOK_NS;
			} else if (t0 - look_at >= LOOK_NS) {
				uint64_t span = t0 - look_at;
				if ((ran - look_ran) * 4 < span && (waited - look_waited) * 2 >= span &&
				    t0 - polled_at < PATIENCE_NS) {
					/* it waited for a CPU and hardly ran: descheduled, not gone */
					look_at = t0, look_ran = ran, look_waited = waited;
					wait_ns = LOOK_NS;
				} else {
					busy = (ran - look_ran) * 4 >= span;
					handed = false;
				}
			} else {
				wait_ns = look_at + LOOK_NS - t0;
			}
			if (!handed) {
				polls_base = polls;
				look_at = 0;
				if (srd_shm_pending()) {
					ST(agent_takeback);
					if (busy) {
						/* it works elsewhere between polls: keep the rings for a while; a
						 * hold that fails at once again makes the next longer */
						hold = t0 - hold_until < HOLD_MIN_NS
							       ? (hold * 2 < HOLD_MAX_NS ? hold * 2 : HOLD_MAX_NS)
							       : HOLD_MIN_NS;
						hold_until = t0 + hold;
						ST(agent_hold);
					}
				}
			}
		}
		int n;
		if (handed) {
			if (tmo == 1 && wait_ns > 1000000ull)
				wait_ns = 1000000ull; /* timers are due within the 1 ms scan */
			n = 0;
			srd_shm_handed_sleep(true);
			if (srd_shm_leaves() == leaves_seen)
				n = srd_net_wait_ns(evs, 16, wait_ns);
			srd_shm_handed_sleep(false);
			last_epoll = srd_now_ns();
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
		if (work || kicked)
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
	else
		pthread_setname_np(t, "softrdma-agent"); /* so tools (top -H, bench scripts) tell it apart */
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
	tl_tid = 0; /* this thread is the child's, with a tid of its own */
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
