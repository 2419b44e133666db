/* net.c: sockets, the QPN table, transmission, the agent's wake-ups, counters. */
#ifndef SRD_NET_H
#define SRD_NET_H
#include "srd.h"
#include "wire.h"
#include "lock.h"
#include <sys/epoll.h>

struct srd_stats { unsigned long tx, rx, nak_seq, rnr, timeouts, dup_rx, eagain, invalid, read_gap, shm_tx,
		   shm_rx, doorbells, unread_waits, peer_gone, agent_takeback, agent_hold, agent_handed_waits; };
extern struct srd_stats srd_st;
#define ST(x) __atomic_fetch_add(&srd_st.x, 1, __ATOMIC_RELAXED)

void srd_net_init(void);
void srd_net_atfork_child(void);

/* QPN table: a QP found by number is used only under the table's read lock. */
int srd_net_alloc_qpn(struct srd_qp *qp);
void srd_net_free_qpn(struct srd_qp *qp);
bool srd_net_owns_qpn(uint32_t qpn); /* the QPN's socket is one of this process's */
/* XRC SRQ numbers: (port << 8) | slot of one of this process's ports (opened if need be), so
 * the number names its process to the whole host. */
int srd_net_alloc_srqn(struct srd_device *dev, uint32_t *srqn);
void srd_net_free_srqn(uint32_t srqn);
bool srd_net_port_ours(uint16_t port); /* QPN table read lock held */
uint16_t srd_net_any_port(struct srd_device *dev); /* one of our ports on dev, opened if need be */
/* The QPN table: read-locked around every lookup and the use of its result (lock.h) */
extern srd_brlock_t srd_qpn_table_lock;
static inline void srd_net_rdlock(void) { srd_br_rdlock(&srd_qpn_table_lock); }
static inline void srd_net_unlock(void) { srd_br_rdunlock(&srd_qpn_table_lock); }
struct srd_qp *srd_net_lookup(uint32_t qpn); /* read lock held */
/* A packet from `from` comes from qp's connected peer (for a peer on this host: any
 * loopback address, the peer's port). */
bool srd_net_from_peer(const struct srd_qp *qp, const struct sockaddr_in6 *from);
bool srd_net_source_allowed(const struct sockaddr_in6 *from);
void srd_net_for_each_qp(void (*fn)(struct srd_qp *qp, void *arg), void *arg);

/* Transmission: srd_xmit sends one packet from qp's socket; between srd_batch_begin and
 * srd_batch_end (nestable) packets of this thread leave together in sendmmsg calls. */
void srd_xmit(struct srd_qp *qp, const struct sockaddr_in6 *to, struct pkt_hdr *h,
	      const void *payload, size_t len);
/* srd_xmit_port: a packet from our socket of port (QPN table read lock held). */
void srd_xmit_port(uint16_t port, const struct sockaddr_in6 *to, struct pkt_hdr *h, const void *payload,
		   size_t len);
/* What became of the last packet qp sent through a same-host ring (shm.h's SRD_PEER_*):
 * SRD_PEER_UNKNOWN when it went over UDP, to this process, or was lost in a full ring. */
int srd_net_peer_state(const struct srd_qp *qp);
void srd_batch_begin(void);
void srd_batch_end(void);
void srd_batch_flush(void); /* send what this thread's batch holds now */

/* Wake-ups of the agent: a kicked QP has its send queue run by the agent; the timer
 * hint makes the agent scan timers every millisecond. */
void srd_net_wake(void);
bool srd_net_wake_pending(void);
bool srd_net_take_wake(void); /* a wake-up came since the last call (the agent runs kicks) */
void srd_qp_kick(struct srd_qp *qp);
void srd_timer_hint(bool any);
bool srd_timer_hinted(void);
/* Waits for packets or a wake-up: tmo_ms 0 only looks; otherwise the agent sleeps (kicks and
 * same-host senders then wake it) unless a wake-up or a same-host packet already waits. */
int srd_net_wait(struct epoll_event *evs, int max, int tmo_ms);
/* Waits at most ns for datagrams and kicks while a polling thread drains the same-host rings
 * (they stay marked awake: senders ring no doorbell). */
int srd_net_wait_ns(struct epoll_event *evs, int max, uint64_t ns);
int srd_net_event_fd(const struct epoll_event *ev); /* the socket's fd; -1 for a kick (drained) */

#endif
