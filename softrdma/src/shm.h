/* shm.c: the same-host carrier: packets between processes of this host through rings in
 * shared memory instead of UDP datagrams (one ring per UDP port, found by the port). */
#ifndef SRD_SHM_H
#define SRD_SHM_H
#include "srd.h"
#include <limits.h>

/* The directory of every file softrdma shares between processes: SOFTRDMA_SHM_DIR (an
 * absolute path of an existing, writable directory), default /dev/shm, resolved once per
 * process at its first use. It holds the rings (softrdma-<uid>-<port>, this unit) and the XRC
 * domains' registries (softrdma-xrcd2-<uid>-<dev>-<ino>, xrc.c); <uid>: the effective uid.
 * A directory that cannot be used is said once on stderr, and then srd_shm_dir returns NULL
 * (*err, when err is not NULL: why, an errno): no file of softrdma goes anywhere else. */
const char *srd_shm_dir(int *err);
/* The longest name of such a file, with its '/' and NUL (the directory's length is checked
 * against it), and the size of a buffer for a path there. */
#define SRD_SHM_NAME_MAX sizeof("/softrdma-xrcd2-4294967295-ffffffffffffffff-ffffffffffffffff")
#define SRD_SHM_PATH_MAX (PATH_MAX + SRD_SHM_NAME_MAX)
/* Writes "<dir>/<name>" into buf (SRD_SHM_PATH_MAX bytes), the name formatted from fmt;
 * returns 0, or srd_shm_dir's errno when the directory cannot be used. */
int srd_shm_path(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Whether the carrier is on (SOFTRDMA_SHM unset or not "0", and srd_shm_dir usable); read once. */
bool srd_shm_enabled(void);
/* Creates the ring that receives for our port (a file of this user, mode 0600, in
 * srd_shm_dir); false when it cannot (the port is then reached over UDP only). */
bool srd_shm_create(uint16_t port);
/* Carries one packet to the ring of dport. Returns 1 when carried (*doorbell: the
 * receiver sleeps and must be woken; *stamp: where it went, for srd_shm_peer_state),
 * 0 when dport has no ring of a live process (send it over UDP), -1 when the ring
 * stayed full (the packet is lost). *stamp: 0 unless 1 is returned or the port's ring
 * was forgotten because its owner is gone (then the packet went over UDP to whoever holds
 * the port now, and the stamp says the peer is gone). */
int srd_shm_send(uint16_t dport, uint16_t sport, const void *hdr, size_t hlen, const void *payload,
		 size_t len, bool *doorbell, uint64_t *stamp);
/* The fate of the packet srd_shm_send stamped (stamp 0: none was carried): */
enum { SRD_PEER_UNKNOWN, /* no ring packet to judge by */
       SRD_PEER_GONE,    /* the ring's owner is dead or has closed it */
       SRD_PEER_UNREAD,  /* its owner lives and has not taken the packet yet */
       SRD_PEER_READ };  /* its owner lives and took it */
int srd_shm_peer_state(uint16_t dport, uint64_t stamp);
/* Hands up to max packets waiting in our rings to fn (buf is valid during the call);
 * returns how many, 0 when another thread is draining. */
int srd_shm_drain(void (*fn)(const uint8_t *buf, size_t n, uint16_t sport, void *arg), void *arg,
		  int max);
bool srd_shm_pending(void); /* a packet waits in one of our rings */
/* SOFTRDMA_STATS's counters of the rings: packets whose put found the peer's ring full
 * (full_puts), the yields while they waited for room (full_yields) and the time they waited
 * (full_wait_ns), as the sender; the most packets a drain found waiting in one of our rings
 * (fill_max, of NSLOTS), and the drains that found packets waiting with the sum of what they
 * found (fill_drains, fill_sum: how far the consumer runs behind), as the receiver. */
struct srd_shm_stats { unsigned long full_puts, full_yields, full_wait_ns, fill_max, fill_drains, fill_sum; };
void srd_shm_stats(struct srd_shm_stats *out);
void srd_shm_count_fill(void); /* from now on drains record fill_max, fill_drains and fill_sum (SOFTRDMA_STATS is set) */
bool srd_shm_owned(void);   /* this process has a ring */
/* Around the receiver's sleep: begin marks our rings sleeping (senders then ring the
 * doorbell) and returns false, unmarking them, when a packet already waits. */
bool srd_shm_sleep_begin(void);
void srd_shm_sleep_end(void);
/* The hand-over of the rings to polling threads (agent.c). A thread that arms a CQ's
 * notification (ibv_req_notify_cq) is about to block for a completion event: it calls
 * srd_shm_poller_leaves(), which counts the leave and, when the agent sleeps having handed
 * the rings over (srd_shm_handed_sleep(true)), wakes it through srd_shm_leave_fd(), an
 * eventfd in the agent's epoll set (net.c). */
void srd_shm_poller_leaves(void);
unsigned long srd_shm_leaves(void); /* leaves counted so far */
void srd_shm_handed_sleep(bool asleep);
int srd_shm_leave_fd(void);         /* created on the first call; -1 when it cannot be */
void srd_shm_atfork_child(void);

#endif
