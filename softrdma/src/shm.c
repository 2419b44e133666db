/*
 * The same-host carrier. Every UDP port softrdma opens also gets a ring in shared
 * memory, a file <dir>/softrdma-<uid>-<port> of mode 0600 (<dir>: srd_shm_dir, resolved here
 * from SOFTRDMA_SHM_DIR, default /dev/shm: the directory of every file softrdma shares), so a
 * process of the same user and the same directory that sends to that port on a loopback
 * address finds the ring by the port and writes the packet into it instead of a datagram.
 * The packets, and so the RC protocol on top (PSNs, ACKs, go-back-N, RNR), are the same
 * as over UDP: only the carrier changes.
 *
 * A ring is a bounded multi-producer queue of fixed slots, each big enough for one
 * packet of the largest path MTU, with a sequence number per slot: a producer reserves
 * a slot with a compare-and-swap on the tail, copies the packet in and publishes it by
 * advancing the slot's sequence; the receiving process's agent (the only consumer)
 * takes slots in order. The agent busy-polls for a short time after traffic, then marks
 * the ring sleeping and waits in epoll; a producer that finds the ring sleeping clears
 * the mark and rings the doorbell, a small datagram to the receiver's loopback socket.
 *
 * Life cycle: the owner unlinks its files at exit; files left by a process that died
 * are removed by the next process that sweeps the directory (at its first ring) or by a
 * sender that finds the owner gone. A sender checks the owner (closed mark, then kill(pid, 0))
 * every RECHECK_NS and when the ring stays full, and forgets a ring whose owner is gone,
 * so a new process on the same port is found afresh.
 * Owns: the rings this process receives on, the mappings of its peers' rings.
 * Calls: nothing of softrdma.
 */
#include "shm.h"
#include "lock.h"
#include "wire.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define RING_MAGIC 0x52445253u /* "SRDR" */
#define RING_VERSION 1u
#define NSLOTS 512u
#define RECHECK_NS 100000000ull   /* a sender re-checks a peer's ring every 100 ms */
#define FULL_WAIT_NS 5000000ull   /* and waits at most 5 ms for room in a full one */
/* A stamp: the peer's ring generation (16 bits) over the slot position + 1 (48 bits). */
#define STAMP_POS_BITS 48
#define STAMP_POS_MASK ((1ull << STAMP_POS_BITS) - 1)
#define STAMP_GEN_MASK 0xffffu

struct slot {
	uint64_t seq;      /* == position + 1: published; == position: free for position */
	uint32_t len;
	uint16_t sport;    /* the sender's UDP port: its QPNs' upper bits */
	uint16_t pad;
	uint8_t data[MAX_PKT];
} __attribute__((aligned(64)));

struct ring {
	uint32_t magic, version, nslots, slot_size;
	int32_t owner;     /* pid of the receiving process */
	uint32_t closed;   /* the owner is gone (set at its exit) */
	uint64_t tail __attribute__((aligned(64)));      /* producers' next position */
	uint32_t sleeping __attribute__((aligned(64)));  /* the consumer waits for a doorbell */
	struct slot slots[NSLOTS] __attribute__((aligned(64)));
};

struct own {
	struct ring *r;
	uint64_t head;     /* consumer position, private to the agent */
	uint16_t port;
};

struct peer {
	pthread_mutex_t lock;
	struct ring *r;    /* NULL: no ring (UDP) */
	uint32_t gen;      /* rings mapped for this port so far: a stamp names the one it used */
	int users;         /* senders inside r */
	uint64_t checked_ns;
	dev_t dev;
	ino_t ino;
};

static struct own g_own[256];
static int g_nown;
static pthread_mutex_t g_own_lock = PTHREAD_MUTEX_INITIALIZER;
static struct peer *g_peers[65536];
static int g_enabled = -1;
static pthread_once_t g_conf_once = PTHREAD_ONCE_INIT;
/* The directory of softrdma's shared files (SOFTRDMA_SHM_DIR, srd_shm_dir), resolved once:
 * g_dir when usable, else g_dir_err. */
static char g_dir[PATH_MAX];
static int g_dir_err;
static pthread_once_t g_dir_once = PTHREAD_ONCE_INIT;
static pthread_once_t g_sweep_once = PTHREAD_ONCE_INIT;
/* SOFTRDMA_STATS's ring counters (srd_shm_stats): relaxed, as net.c's. The fill is read
 * only when asked for (srd_shm_count_fill): it reads the producers' tail, a line they write
 * with every packet, which a drain would otherwise not touch. */
static struct srd_shm_stats g_st;
static bool g_count_fill;

/* SOFTRDMA_SHM_DIR, once per process, at the first use of a shared file. A directory that
 * cannot hold the files (not an absolute path, too long for the longest name under PATH_MAX,
 * missing, not a directory, not writable) is said once on stderr; the process then has no
 * rings (its peers reach it over UDP, as they reach a process of another directory) and no
 * XRC domain over a file. Never /dev/shm in its place. */
static void dir_read(void)
{
	const char *d = getenv("SOFTRDMA_SHM_DIR");
	if (!d) {
		snprintf(g_dir, sizeof(g_dir), "/dev/shm");
		return;
	}
	char why[96] = "";
	int err = 0;
	struct stat st;
	if (d[0] != '/') {
		err = EINVAL;
		snprintf(why, sizeof(why), " is not an absolute path");
	} else if (strlen(d) + SRD_SHM_NAME_MAX > sizeof(g_dir)) {
		err = ENAMETOOLONG;
		snprintf(why, sizeof(why), " is longer than %zu bytes", sizeof(g_dir) - SRD_SHM_NAME_MAX);
	} else if (stat(d, &st)) {
		err = errno;
		snprintf(why, sizeof(why), ": %s", strerror(err));
	} else if (!S_ISDIR(st.st_mode)) {
		err = ENOTDIR;
		snprintf(why, sizeof(why), " is not a directory");
	} else if (access(d, W_OK | X_OK)) {
		err = errno;
		snprintf(why, sizeof(why), " is not writable: %s", strerror(err));
	}
	if (err) {
		fprintf(stderr, "softrdma: SOFTRDMA_SHM_DIR=%s%s; no same-host rings, packets between "
			"processes go as UDP datagrams, and no XRC domain over a file\n", d, why);
		g_dir_err = err;
	} else {
		snprintf(g_dir, sizeof(g_dir), "%s", d);
	}
}

const char *srd_shm_dir(int *err)
{
	pthread_once(&g_dir_once, dir_read);
	if (g_dir_err) {
		if (err)
			*err = g_dir_err;
		return NULL;
	}
	return g_dir;
}

int srd_shm_path(char *buf, const char *fmt, ...)
{
	int err = 0;
	const char *dir = srd_shm_dir(&err);
	if (!dir)
		return err;
	char name[SRD_SHM_NAME_MAX];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(name))
		return ENAMETOOLONG; /* a name longer than SRD_SHM_NAME_MAX says: a bug */
	snprintf(buf, SRD_SHM_PATH_MAX, "%s/%s", dir, name);
	return 0;
}

/* SOFTRDMA_SHM, and the directory, once per process. */
static void conf_read(void)
{
	const char *v = getenv("SOFTRDMA_SHM");
	int e = !(v && !strcmp(v, "0")) && srd_shm_dir(NULL);
	__atomic_store_n(&g_enabled, e, __ATOMIC_RELEASE);
}

bool srd_shm_enabled(void)
{
	int e = __atomic_load_n(&g_enabled, __ATOMIC_ACQUIRE);
	if (e < 0) {
		pthread_once(&g_conf_once, conf_read);
		e = __atomic_load_n(&g_enabled, __ATOMIC_ACQUIRE);
	}
	return e;
}

/* (the directory is usable: callers have found the carrier on) */
static void ring_path(char *buf, uint16_t port)
{
	srd_shm_path(buf, "softrdma-%u-%u", (unsigned)geteuid(), (unsigned)port);
}

static bool pid_alive(pid_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* Removes the rings of this user in the directory whose owner died without removing them
 * (only names softrdma-<uid>-*, regular files of this user). */
static void sweep(void)
{
	char prefix[32];
	int pl = snprintf(prefix, sizeof(prefix), "softrdma-%u-", (unsigned)geteuid());
	DIR *d = opendir(g_dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, prefix, (size_t)pl))
			continue;
		/* O_NONBLOCK: a FIFO of that name (anyone may make one in /dev/shm) does not hold
		 * the open; it is skipped as not a regular file */
		int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct stat st;
		int32_t owner = 0;
		struct stat now;
		if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
		    pread(fd, &owner, sizeof(owner), offsetof(struct ring, owner)) == sizeof(owner) &&
		    !pid_alive(owner) &&
		    /* still the file read: a new owner of the port unlinks a dead one's and creates its own */
		    !fstatat(dirfd(d), e->d_name, &now, AT_SYMLINK_NOFOLLOW) && now.st_ino == st.st_ino &&
		    now.st_dev == st.st_dev)
			unlinkat(dirfd(d), e->d_name, 0);
		close(fd);
	}
	closedir(d);
}

static void at_exit(void)
{
	int n = __atomic_load_n(&g_nown, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n; i++) {
		char path[SRD_SHM_PATH_MAX];
		ring_path(path, g_own[i].port);
		__atomic_store_n(&g_own[i].r->closed, 1, __ATOMIC_RELEASE);
		unlink(path);
	}
}

bool srd_shm_create(uint16_t port)
{
	if (!srd_shm_enabled())
		return false;
	pthread_once(&g_sweep_once, sweep);
	char path[SRD_SHM_PATH_MAX];
	ring_path(path, port);
	pthread_mutex_lock(&g_own_lock);
	if (g_nown == 256) {
		pthread_mutex_unlock(&g_own_lock);
		return false;
	}
	/* we hold the port on loopback, so a file of that name is a dead process's */
	unlink(path);
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	struct ring *r = MAP_FAILED;
	/* the owner first, while the file is shorter than a ring: another process's sweep reads a
	 * file too short for an owner (skipped) or this process as its owner (alive), never the
	 * zero owner of a sized file, which it took for a dead process's and removed, leaving this
	 * process a ring nobody could find: its peers sent datagrams for its whole life */
	int32_t me = (int32_t)getpid();
	if (fd >= 0) {
		if (!fchmod(fd, 0600) &&
		    pwrite(fd, &me, sizeof(me), offsetof(struct ring, owner)) == (ssize_t)sizeof(me) &&
		    !posix_fallocate(fd, 0, sizeof(struct ring)))
			r = mmap(NULL, sizeof(struct ring), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
	}
	if (r == MAP_FAILED) {
		if (fd >= 0)
			unlink(path);
		pthread_mutex_unlock(&g_own_lock);
		return false;
	}
	r->version = RING_VERSION;
	r->nslots = NSLOTS;
	r->slot_size = sizeof(struct slot);
	r->owner = me;
	for (uint32_t i = 0; i < NSLOTS; i++)
		r->slots[i].seq = i;
	__atomic_store_n(&r->magic, RING_MAGIC, __ATOMIC_RELEASE);
	int i = g_nown;
	g_own[i].r = r;
	g_own[i].head = 0;
	g_own[i].port = port;
	if (i == 0)
		atexit(at_exit);
	__atomic_store_n(&g_nown, i + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&g_own_lock);
	return true;
}

bool srd_shm_owned(void)
{
	return __atomic_load_n(&g_nown, __ATOMIC_ACQUIRE) > 0;
}

static struct peer *peer_get(uint16_t port)
{
	struct peer *p = __atomic_load_n(&g_peers[port], __ATOMIC_ACQUIRE);
	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	pthread_mutex_init(&p->lock, NULL);
	struct peer *none = NULL;
	if (!__atomic_compare_exchange_n(&g_peers[port], &none, p, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		pthread_mutex_destroy(&p->lock);
		free(p);
		return none;
	}
	return p;
}

/* Maps port's ring when it is a ring of this user whose owner lives; NULL otherwise
 * (a file left by a dead owner is removed). */
static struct ring *open_ring(uint16_t port, dev_t *dev, ino_t *ino)
{
	char path[SRD_SHM_PATH_MAX];
	ring_path(path, port);
	int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	struct ring *r = MAP_FAILED;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & 077) &&
	    st.st_size == (off_t)sizeof(struct ring))
		r = mmap(NULL, sizeof(struct ring), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (r == MAP_FAILED)
		return NULL;
	if (__atomic_load_n(&r->magic, __ATOMIC_ACQUIRE) != RING_MAGIC || r->version != RING_VERSION ||
	    r->nslots != NSLOTS || r->slot_size != sizeof(struct slot) ||
	    __atomic_load_n(&r->closed, __ATOMIC_ACQUIRE) || !pid_alive(r->owner)) {
		if (__atomic_load_n(&r->magic, __ATOMIC_ACQUIRE) == RING_MAGIC && !pid_alive(r->owner)) {
			struct stat now;
			if (!stat(path, &now) && now.st_ino == st.st_ino && now.st_dev == st.st_dev)
				unlink(path);
		}
		munmap(r, sizeof(struct ring));
		return NULL;
	}
	*dev = st.st_dev;
	*ino = st.st_ino;
	return r;
}

/* Forgets p's ring when its owner is gone, maps the port's ring when there is none. */
static void recheck(struct peer *p, uint16_t port, uint64_t now)
{
	if (pthread_mutex_trylock(&p->lock))
		return; /* another sender is at it */
	struct ring *r = p->r;
	if (r && (__atomic_load_n(&r->closed, __ATOMIC_ACQUIRE) || !pid_alive(r->owner))) {
		__atomic_store_n(&p->r, NULL, __ATOMIC_SEQ_CST);
		while (__atomic_load_n(&p->users, __ATOMIC_SEQ_CST))
			srd_cpu_relax();
		munmap(r, sizeof(struct ring));
		r = NULL;
	}
	if (!r) {
		r = open_ring(port, &p->dev, &p->ino);
		if (r) {
			/* before the ring is published: a sender that sees r reads this generation */
			__atomic_store_n(&p->gen, (p->gen + 1) & STAMP_GEN_MASK ? (p->gen + 1) & STAMP_GEN_MASK : 1,
					 __ATOMIC_SEQ_CST);
			__atomic_store_n(&p->r, r, __ATOMIC_SEQ_CST);
		}
	}
	__atomic_store_n(&p->checked_ns, now, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&p->lock);
}

static int ring_put(struct ring *r, uint16_t sport, const void *hdr, size_t hlen, const void *payload,
		    size_t len, bool *doorbell, uint64_t *put_pos)
{
	uint64_t pos = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
	uint64_t full_since = 0;
	struct slot *s;
	for (;;) {
		s = &r->slots[pos % NSLOTS];
		uint64_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
		int64_t dif = (int64_t)(seq - pos);
		if (dif == 0) {
			if (__atomic_compare_exchange_n(&r->tail, &pos, pos + 1, true, __ATOMIC_RELAXED,
							__ATOMIC_RELAXED))
				break;
			continue;
		}
		if (dif < 0) {
			/* full: the receiver is behind; give it the CPU for a while */
			uint64_t now = srd_now_ns();
			if (!full_since) {
				full_since = now;
				__atomic_fetch_add(&g_st.full_puts, 1, __ATOMIC_RELAXED);
			}
			if (now - full_since > FULL_WAIT_NS || __atomic_load_n(&r->closed, __ATOMIC_ACQUIRE)) {
				__atomic_fetch_add(&g_st.full_wait_ns, now - full_since, __ATOMIC_RELAXED);
				return -1;
			}
			if (__atomic_load_n(&r->sleeping, __ATOMIC_SEQ_CST) &&
			    __atomic_exchange_n(&r->sleeping, 0, __ATOMIC_SEQ_CST))
				*doorbell = true;
			__atomic_fetch_add(&g_st.full_yields, 1, __ATOMIC_RELAXED);
			sched_yield();
		}
		pos = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
	}
	if (full_since)
		__atomic_fetch_add(&g_st.full_wait_ns, srd_now_ns() - full_since, __ATOMIC_RELAXED);
	memcpy(s->data, hdr, hlen);
	if (len)
		memcpy(s->data + hlen, payload, len);
	s->len = (uint32_t)(hlen + len);
	s->sport = sport;
	*put_pos = pos;
	__atomic_store_n(&s->seq, pos + 1, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&r->sleeping, __ATOMIC_RELAXED) &&
	    __atomic_exchange_n(&r->sleeping, 0, __ATOMIC_SEQ_CST))
		*doorbell = true;
	return 1;
}

int srd_shm_send(uint16_t dport, uint16_t sport, const void *hdr, size_t hlen, const void *payload,
		 size_t len, bool *doorbell, uint64_t *stamp)
{
	*doorbell = false;
	*stamp = 0;
	if (!srd_shm_enabled() || hlen + len > MAX_PKT)
		return 0;
	struct peer *p = peer_get(dport);
	if (!p)
		return 0;
	uint64_t now = srd_now_ns();
	struct ring *cur = __atomic_load_n(&p->r, __ATOMIC_ACQUIRE);
	if (now - __atomic_load_n(&p->checked_ns, __ATOMIC_ACQUIRE) > RECHECK_NS ||
	    (cur && __atomic_load_n(&cur->closed, __ATOMIC_RELAXED)))
		recheck(p, dport, now);
	__atomic_add_fetch(&p->users, 1, __ATOMIC_SEQ_CST);
	struct ring *r = __atomic_load_n(&p->r, __ATOMIC_SEQ_CST);
	uint64_t gen = __atomic_load_n(&p->gen, __ATOMIC_SEQ_CST), pos = 0;
	int ret = r ? ring_put(r, sport, hdr, hlen, payload, len, doorbell, &pos) : 0;
	__atomic_sub_fetch(&p->users, 1, __ATOMIC_RELEASE);
	if (ret > 0)
		*stamp = gen << STAMP_POS_BITS | ((pos + 1) & STAMP_POS_MASK);
	else if (!r && gen)
		*stamp = gen << STAMP_POS_BITS; /* the port had a ring whose owner is gone: so is the peer */
	if (ret < 0)
		__atomic_store_n(&p->checked_ns, 0, __ATOMIC_RELEASE); /* full: is its owner alive? */
	return ret;
}

/*
 * Whether the packet of stamp still waits in the peer's ring: a slot's sequence stays
 * position + 1 from its publication until the consumer takes it (then it becomes position +
 * NSLOTS, free for the next lap). A ring this process no longer maps for the port (forgotten
 * because its owner died or closed it), or one of another generation, is gone too.
 */
int srd_shm_peer_state(uint16_t dport, uint64_t stamp)
{
	if (!stamp)
		return SRD_PEER_UNKNOWN;
	struct peer *p = __atomic_load_n(&g_peers[dport], __ATOMIC_ACQUIRE);
	if (!p)
		return SRD_PEER_UNKNOWN;
	__atomic_add_fetch(&p->users, 1, __ATOMIC_SEQ_CST);
	struct ring *r = __atomic_load_n(&p->r, __ATOMIC_SEQ_CST);
	uint64_t gen = __atomic_load_n(&p->gen, __ATOMIC_SEQ_CST);
	int st;
	if (!r || gen != stamp >> STAMP_POS_BITS || __atomic_load_n(&r->closed, __ATOMIC_ACQUIRE) ||
	    !pid_alive(r->owner)) {
		st = SRD_PEER_GONE;
	} else {
		uint64_t pos = (stamp & STAMP_POS_MASK) - 1;
		uint64_t seq = __atomic_load_n(&r->slots[pos % NSLOTS].seq, __ATOMIC_ACQUIRE);
		st = ((seq - 1) & STAMP_POS_MASK) == pos ? SRD_PEER_UNREAD : SRD_PEER_READ;
	}
	__atomic_sub_fetch(&p->users, 1, __ATOMIC_RELEASE);
	return st;
}

/* head is written by the draining thread only, and read by any (atomically: a polling
 * thread peeks while the agent drains) */
static bool own_pending(const struct own *o)
{
	uint64_t head = __atomic_load_n(&o->head, __ATOMIC_RELAXED);
	return __atomic_load_n(&o->r->slots[head % NSLOTS].seq, __ATOMIC_ACQUIRE) == head + 1;
}

bool srd_shm_pending(void)
{
	int n = __atomic_load_n(&g_nown, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n; i++)
		if (own_pending(&g_own[i]))
			return true;
	return false;
}

static int g_draining; /* one consumer at a time: the agent or a polling thread */

int srd_shm_drain(void (*fn)(const uint8_t *buf, size_t n, uint16_t sport, void *arg), void *arg,
		  int max)
{
	if (__atomic_load_n(&g_draining, __ATOMIC_RELAXED) ||
	    __atomic_exchange_n(&g_draining, 1, __ATOMIC_ACQUIRE))
		return 0;
	int got = 0;
	int n = __atomic_load_n(&g_nown, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n; i++) {
		struct own *o = &g_own[i];
		if (__atomic_load_n(&g_count_fill, __ATOMIC_RELAXED)) {
			/* the fill a drain finds: reserved slots not taken yet (published or being written) */
			uint64_t fill = __atomic_load_n(&o->r->tail, __ATOMIC_RELAXED) - o->head;
			if (fill <= NSLOTS && fill > __atomic_load_n(&g_st.fill_max, __ATOMIC_RELAXED))
				__atomic_store_n(&g_st.fill_max, fill, __ATOMIC_RELAXED);
			if (fill && fill <= NSLOTS) { /* one consumer at a time (g_draining): plain sums */
				__atomic_store_n(&g_st.fill_drains, g_st.fill_drains + 1, __ATOMIC_RELAXED);
				__atomic_store_n(&g_st.fill_sum, g_st.fill_sum + fill, __ATOMIC_RELAXED);
			}
		}
		while (got < max && own_pending(o)) {
			uint64_t head = o->head;
			struct slot *s = &o->r->slots[head % NSLOTS];
			uint32_t len = s->len;
			fn(s->data, len <= MAX_PKT ? len : 0, s->sport, arg);
			__atomic_store_n(&s->seq, head + NSLOTS, __ATOMIC_RELEASE);
			__atomic_store_n(&o->head, head + 1, __ATOMIC_RELAXED);
			got++;
		}
	}
	__atomic_store_n(&g_draining, 0, __ATOMIC_RELEASE);
	return got;
}

void srd_shm_count_fill(void)
{
	__atomic_store_n(&g_count_fill, true, __ATOMIC_RELAXED);
}

void srd_shm_stats(struct srd_shm_stats *out)
{
	out->full_puts = __atomic_load_n(&g_st.full_puts, __ATOMIC_RELAXED);
	out->full_yields = __atomic_load_n(&g_st.full_yields, __ATOMIC_RELAXED);
	out->full_wait_ns = __atomic_load_n(&g_st.full_wait_ns, __ATOMIC_RELAXED);
	out->fill_max = __atomic_load_n(&g_st.fill_max, __ATOMIC_RELAXED);
	out->fill_drains = __atomic_load_n(&g_st.fill_drains, __ATOMIC_RELAXED);
	out->fill_sum = __atomic_load_n(&g_st.fill_sum, __ATOMIC_RELAXED);
}

bool srd_shm_sleep_begin(void)
{
	int n = __atomic_load_n(&g_nown, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n; i++)
		__atomic_store_n(&g_own[i].r->sleeping, 1, __ATOMIC_SEQ_CST);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (srd_shm_pending()) {
		srd_shm_sleep_end();
		return false;
	}
	return true;
}

void srd_shm_sleep_end(void)
{
	int n = __atomic_load_n(&g_nown, __ATOMIC_ACQUIRE);
	for (int i = 0; i < n; i++)
		__atomic_store_n(&g_own[i].r->sleeping, 0, __ATOMIC_RELAXED);
}

/*
 * A poller leaving the rings (see shm.h). The agent sets g_handed_sleep, then reads g_leaves
 * again before it sleeps; a leaver adds to g_leaves, then reads g_handed_sleep (both sequentially
 * consistent): either the agent sees the leave and does not sleep, or the leaver sees the agent
 * asleep and writes the eventfd, whose count stays until the agent reads it (epoll returns at
 * once even when the write came just before the wait). So no leave goes unseen.
 */
static unsigned long g_leaves;
static int g_handed_sleep;
static int g_leave_fd = -1;

void srd_shm_poller_leaves(void)
{
	__atomic_add_fetch(&g_leaves, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&g_handed_sleep, __ATOMIC_SEQ_CST))
		return;
	uint64_t one = 1;
	int fd = __atomic_load_n(&g_leave_fd, __ATOMIC_ACQUIRE);
	if (fd >= 0 && write(fd, &one, 8) != 8) { /* the count is already non-zero: it wakes */ }
}

unsigned long srd_shm_leaves(void)
{
	return __atomic_load_n(&g_leaves, __ATOMIC_SEQ_CST);
}

void srd_shm_handed_sleep(bool asleep)
{
	__atomic_store_n(&g_handed_sleep, asleep ? 1 : 0, __ATOMIC_SEQ_CST);
}

int srd_shm_leave_fd(void)
{
	if (g_leave_fd < 0)
		__atomic_store_n(&g_leave_fd, eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), __ATOMIC_RELEASE);
	return g_leave_fd;
}

/* The child of fork() receives on none of the parent's rings (the parent still does). */
void srd_shm_atfork_child(void)
{
	int n = g_nown;
	g_nown = 0;
	for (int i = 0; i < n; i++)
		munmap(g_own[i].r, sizeof(struct ring));
	pthread_mutex_init(&g_own_lock, NULL);
	g_draining = 0;
	g_handed_sleep = 0;
	if (g_leave_fd >= 0)
		close(g_leave_fd);
	g_leave_fd = -1; /* the child's agent makes its own */
	g_sweep_once = (pthread_once_t)PTHREAD_ONCE_INIT; /* its first ring sweeps again */
}
