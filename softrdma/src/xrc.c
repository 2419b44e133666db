/*
 * XRC: domains, XRC SRQ numbers and the TGT QPs of this process.
 *
 * A domain opened over a file (ibv_open_xrcd with an fd) is the file's: every handle of
 * this process to the same file (device and inode) shares one struct srd_xdom, and the
 * processes that have the file open know of each other through a registry, the file
 * <dir>/softrdma-xrcd2-<uid>-<dev>-<ino> of mode 0600 (<dir>: shm.c's srd_shm_dir, the
 * directory of every file softrdma shares, SOFTRDMA_SHM_DIR, default /dev/shm; locked with
 * flock while read or written), which lists the live processes that hold the domain and the
 * TGT QPs they created. It gives ibv_open_xrcd the kernel's O_CREAT/O_EXCL semantics
 * across processes: without O_CREAT a file no live process holds a domain for is EINVAL,
 * with O_EXCL a file that has one is EINVAL; a directory that cannot be used fails it with
 * srd_shm_dir's errno.
 * fd -1 opens a private domain (O_CREAT required), with no file. The last process to leave a
 * registry removes it: at ibv_close_xrcd, or at exit for the domains still open then. The
 * registries of processes killed before either are removed by the next process that opens a
 * domain over a file with the same directory (or by a live holder's next update).
 *
 * A request of an XRC_SEND QP names an XRC SRQ by number; the TGT QP it arrives at takes
 * the receive WQE from that SRQ, checks memory against the SRQ's PD and completes on the
 * SRQ's CQ. The SRQ must be in the TGT QP's domain (else a remote access error). An SRQ
 * number is (port << 8) | slot of a UDP port of the process that created the SRQ (net.c), so
 * it is unique on the host and names its process: a TGT QP relays a request for another
 * process's SRQ to that process (responder.c), which executes it on a shadow of the TGT QP
 * kept here. Each process lists the ports of its SRQ numbers in the domain's registry, so a
 * TGT QP whose relay goes unanswered can tell that no live process of the domain has the
 * SRQ. A TGT QP is opened (ibv_open_qp) by handles of its own process, and by those of other
 * processes through its process (xctl.c), which lists them here as remote openers.
 *
 * Owns: struct srd_xdom, srd_xrcd's life, the XRC SRQ table, the TGT QP list, the shadows.
 * Lock order: a QP's resp_lock < the SRQ table lock; the TGT list lock < a QP's resp_lock;
 * the shadow lock < the SRQ table lock; the remote openers' lock is a leaf.
 * Calls: shm (the directory).
 */
#include "xrc.h"
#include "shm.h"
#include "wire.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>

#define REG_PORTS 8
struct srd_xdom {
	struct srd_xdom *next;
	bool file;          /* opened over a file (else private, fd -1) */
	dev_t dev;
	ino_t ino;
	int handles;        /* srd_xrcd handles of this process */
	char reg[SRD_SHM_PATH_MAX]; /* the registry's path */
	uint16_t ports[REG_PORTS]; /* the ports of our XRC SRQ numbers listed in the registry */
	int nports;
};

/* "SXR2", in files named softrdma-xrcd2-*: the layout with the ports; earlier builds, whose
 * registries (softrdma-xrcd-*) had none, neither read nor sweep these */
#define REG_MAGIC 0x32525853u
#define REG_PIDS 64
#define REG_TGTS 1024
struct reg {
	uint32_t magic, pad;
	int32_t pid[REG_PIDS];
	struct { uint32_t qpn; int32_t pid; } tgt[REG_TGTS];
	uint16_t port[REG_PIDS][REG_PORTS]; /* the ports of each process's XRC SRQ numbers */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;       /* domains */
static struct srd_xdom *g_doms;
static pthread_rwlock_t g_srq_lock = PTHREAD_RWLOCK_INITIALIZER; /* XRC SRQ table */
static struct srd_srq *g_srqs;
static pthread_mutex_t g_shadow_lock = PTHREAD_MUTEX_INITIALIZER; /* shadows, and relays on them */
static struct srd_shadow *g_shadows;
static int g_nshadows;
#define MAX_SHADOWS 256
static pthread_mutex_t g_tgt_lock = PTHREAD_MUTEX_INITIALIZER;   /* TGT QP list */
static struct srd_qp *g_tgts;

static bool alive(int32_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* Opens and locks the registry, reads it with dead processes' entries dropped; -1 on error. */
static int reg_open(const char *path, struct reg *r)
{
	int fd;
	for (;;) {
		/* O_NOFOLLOW, O_NONBLOCK and a regular file of this user: anyone may put a link or a
		 * FIFO of that name in a shared directory such as /dev/shm */
		fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
		if (fd < 0)
			return -1;
		struct stat a, b;
		if (fstat(fd, &a) || !S_ISREG(a.st_mode) || a.st_uid != geteuid()) {
			close(fd);
			errno = EACCES;
			return -1;
		}
		while (flock(fd, LOCK_EX) && errno == EINTR)
			;
		/* the last holder may have removed the file between our open and our lock */
		if (!lstat(path, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			break;
		close(fd);
	}
	memset(r, 0, sizeof(*r));
	if (pread(fd, r, sizeof(*r), 0) != (ssize_t)sizeof(*r) || r->magic != REG_MAGIC) {
		memset(r, 0, sizeof(*r));
		r->magic = REG_MAGIC;
	}
	for (int i = 0; i < REG_PIDS; i++)
		if (r->pid[i] && !alive(r->pid[i]))
			r->pid[i] = 0;
	for (int i = 0; i < REG_PIDS; i++)
		if (!r->pid[i])
			memset(r->port[i], 0, sizeof(r->port[i]));
	for (int i = 0; i < REG_TGTS; i++)
		if (r->tgt[i].pid && !alive(r->tgt[i].pid))
			r->tgt[i].pid = 0;
	return fd;
}

/* Writes r back (or removes the registry when no process holds the domain) and unlocks. */
static void reg_close(int fd, const char *path, const struct reg *r)
{
	bool any = false;
	for (int i = 0; i < REG_PIDS; i++)
		any |= r->pid[i] != 0;
	if (any) {
		if (pwrite(fd, r, sizeof(*r), 0) != (ssize_t)sizeof(*r))
			fprintf(stderr, "softrdma: cannot write %s: %s\n", path, strerror(errno));
	} else {
		unlink(path);
	}
	flock(fd, LOCK_UN);
	close(fd);
}

/* reg_open into a buffer of its own: NULL (errno set) when it cannot. reg_give ends it. */
static struct reg *reg_take(const char *path, int *fd)
{
	struct reg *r = malloc(sizeof(*r));
	if (!r) {
		errno = ENOMEM;
		return NULL;
	}
	*fd = reg_open(path, r);
	if (*fd < 0) {
		int e = errno;
		free(r);
		errno = e;
		return NULL;
	}
	return r;
}

/* reg_close, and frees what reg_take allocated. */
static void reg_give(int fd, const char *path, struct reg *r)
{
	reg_close(fd, path, r);
	free(r);
}

/* Removes the registries of the directory that only processes now dead held (killed before
 * they closed their domains); once per process, at its first domain over a file. */
static void reg_sweep(void)
{
	char prefix[48];
	int pl = snprintf(prefix, sizeof(prefix), "softrdma-xrcd2-%u-", (unsigned)geteuid());
	const char *d = srd_shm_dir(NULL);
	DIR *dir = d ? opendir(d) : NULL;
	struct reg *r = malloc(sizeof(*r));
	struct dirent *e;
	while (dir && r && (e = readdir(dir))) {
		char path[SRD_SHM_PATH_MAX];
		if (strncmp(e->d_name, prefix, (size_t)pl) || srd_shm_path(path, "%s", e->d_name))
			continue;
		int fd = reg_open(path, r);
		if (fd >= 0)
			reg_close(fd, path, r); /* pruned: removed when no live process is left */
	}
	if (dir)
		closedir(dir);
	free(r);
}

/* At exit: this process leaves the registries of the domains it still holds (it exited
 * without ibv_close_xrcd), and the last to leave one removes it. Skipped when another thread
 * holds the domains' lock (a fork's child may have inherited it held): the next process that
 * opens a domain over a file, or a live holder's next update, removes our entries then. */
static void reg_at_exit(void)
{
	if (pthread_mutex_trylock(&g_lock))
		return;
	int32_t me = (int32_t)getpid();
	for (struct srd_xdom *d = g_doms; d; d = d->next) {
		int fd;
		struct reg *r = d->file ? reg_take(d->reg, &fd) : NULL;
		if (!r)
			continue;
		for (int i = 0; i < REG_PIDS; i++)
			if (r->pid[i] == me)
				r->pid[i] = 0;
		for (int i = 0; i < REG_TGTS; i++)
			if (r->tgt[i].pid == me)
				r->tgt[i].pid = 0;
		reg_give(fd, d->reg, r);
	}
	pthread_mutex_unlock(&g_lock);
}

struct ibv_xrcd *srd_open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *attr)
{
	const uint32_t need = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	if (!attr || (attr->comp_mask & need) != need || (attr->comp_mask & ~need) ||
	    (attr->oflags & ~(O_CREAT | O_EXCL))) {
		errno = EINVAL;
		return NULL;
	}
	struct stat st;
	if (attr->fd != -1 && fstat(attr->fd, &st)) {
		errno = EBADF;
		return NULL;
	}
	struct srd_xrcd *x = calloc(1, sizeof(*x));
	if (!x) {
		errno = ENOMEM;
		return NULL;
	}
	int err = 0;
	struct srd_xdom *d = NULL;
	pthread_mutex_lock(&g_lock);
	if (attr->fd != -1)
		for (d = g_doms; d && (d->dev != st.st_dev || d->ino != st.st_ino); d = d->next)
			;
	if (d) {
		if (attr->oflags & O_EXCL)
			err = EINVAL; /* the file has a domain already */
	} else if (attr->fd == -1) {
		if (!(attr->oflags & O_CREAT))
			err = EINVAL;
		else if (!(d = calloc(1, sizeof(*d))))
			err = ENOMEM;
	} else if (!(d = calloc(1, sizeof(*d)))) {
		err = ENOMEM;
	} else if ((err = srd_shm_path(d->reg, "softrdma-xrcd2-%u-%llx-%llx", (unsigned)geteuid(),
				       (unsigned long long)st.st_dev, (unsigned long long)st.st_ino))) {
		/* not "softrdma-<uid>-...": shm.c's sweep owns that name space (its rings) */
		free(d);
		d = NULL;
	} else {
		static bool swept;
		if (!swept) {
			swept = true;
			reg_sweep();
			atexit(reg_at_exit);
		}
		d->file = true;
		d->dev = st.st_dev;
		d->ino = st.st_ino;
		int fd;
		struct reg *r = reg_take(d->reg, &fd);
		if (!r) {
			err = errno;
		} else {
			bool held = false;
			int free_slot = -1;
			for (int i = 0; i < REG_PIDS; i++) {
				held |= r->pid[i] != 0;
				if (!r->pid[i] && free_slot < 0)
					free_slot = i;
			}
			if (!held && !(attr->oflags & O_CREAT))
				err = EINVAL; /* no domain for this file, and not asked to create one */
			else if (held && (attr->oflags & O_EXCL))
				err = EINVAL;
			else if (free_slot < 0)
				err = ENOMEM;
			else
				r->pid[free_slot] = getpid();
			reg_give(fd, d->reg, r);
		}
		if (err) {
			free(d);
			d = NULL;
		}
	}
	if (!err && !d->handles) {
		d->next = g_doms;
		g_doms = d;
	}
	if (!err)
		d->handles++;
	pthread_mutex_unlock(&g_lock);
	if (err) {
		free(x);
		errno = err;
		return NULL;
	}
	x->dom = d;
	x->ibxrcd.context = context;
	return &x->ibxrcd;
}

int srd_close_xrcd(struct ibv_xrcd *ibxrcd)
{
	struct srd_xrcd *x = container_of(ibxrcd, struct srd_xrcd, ibxrcd);
	if (__atomic_load_n(&x->refs, __ATOMIC_ACQUIRE))
		return EBUSY; /* XRC SRQs or TGT QPs created through it still exist */
	struct srd_xdom *d = x->dom;
	pthread_mutex_lock(&g_lock);
	if (--d->handles == 0) {
		for (struct srd_xdom **p = &g_doms; *p; p = &(*p)->next)
			if (*p == d) {
				*p = d->next;
				break;
			}
		int fd;
		struct reg *r = d->file ? reg_take(d->reg, &fd) : NULL;
		if (r) {
			for (int i = 0; i < REG_PIDS; i++)
				if (r->pid[i] == getpid())
					r->pid[i] = 0;
			reg_give(fd, d->reg, r);
		}
		free(d);
	}
	pthread_mutex_unlock(&g_lock);
	free(x);
	return 0;
}

/* Lists port (of an XRC SRQ number of ours) under our pid in d's registry, once. */
static void reg_port(struct srd_xdom *d, uint16_t port)
{
	pthread_mutex_lock(&g_lock);
	bool known = !d->file;
	for (int i = 0; i < d->nports; i++)
		known |= d->ports[i] == port;
	if (!known && d->nports < REG_PORTS) {
		int fd;
		struct reg *r = reg_take(d->reg, &fd);
		if (r) {
			for (int i = 0; i < REG_PIDS; i++)
				if (r->pid[i] == getpid()) {
					int k = 0;
					while (k < REG_PORTS && r->port[i][k] && r->port[i][k] != port)
						k++;
					if (k < REG_PORTS)
						r->port[i][k] = port;
				}
			reg_give(fd, d->reg, r);
			d->ports[d->nports++] = port;
		}
	}
	pthread_mutex_unlock(&g_lock);
}

bool srd_xrc_port_held(struct srd_xrcd *xrcd, uint16_t port)
{
	struct srd_xdom *d = xrcd->dom;
	int fd;
	struct reg *r = d->file ? reg_take(d->reg, &fd) : NULL;
	bool found = false;
	if (r) {
		for (int i = 0; i < REG_PIDS; i++)
			for (int k = 0; r->pid[i] && k < REG_PORTS; k++)
				found |= r->port[i][k] == port;
		reg_give(fd, d->reg, r);
	}
	return found;
}

void srd_xrc_dom_key(const struct srd_xrcd *xrcd, uint8_t key[16])
{
	memset(key, 0, 16);
	if (!xrcd->dom->file)
		return; /* a private domain: no key, matches no domain of another process */
	uint64_t dev = (uint64_t)xrcd->dom->dev, ino = (uint64_t)xrcd->dom->ino;
	memcpy(key, &dev, 8);
	memcpy(key + 8, &ino, 8);
}

static bool key_matches(const struct srd_xdom *d, const uint8_t key[16])
{
	static const uint8_t zero[16];
	uint8_t k[16];
	if (!d->file || !memcmp(key, zero, 16))
		return false;
	uint64_t dev = (uint64_t)d->dev, ino = (uint64_t)d->ino;
	memcpy(k, &dev, 8);
	memcpy(k + 8, &ino, 8);
	return !memcmp(k, key, 16);
}

void srd_xrc_srq_add(struct srd_srq *srq, struct srd_xrcd *xrcd, uint32_t srqn)
{
	REF(xrcd);
	srq->xrcd = xrcd;
	reg_port(xrcd->dom, (uint16_t)(srqn >> 8));
	pthread_rwlock_wrlock(&g_srq_lock);
	srq->srqn = srqn;
	srq->xnext = g_srqs;
	g_srqs = srq;
	pthread_rwlock_unlock(&g_srq_lock);
}

void srd_xrc_srq_remove(struct srd_srq *srq)
{
	pthread_rwlock_wrlock(&g_srq_lock);
	for (struct srd_srq **p = &g_srqs; *p; p = &(*p)->xnext)
		if (*p == srq) {
			*p = srq->xnext;
			break;
		}
	pthread_rwlock_unlock(&g_srq_lock);
	/* no new request finds it now; one being executed holds its QP's resp_lock */
	pthread_mutex_lock(&g_tgt_lock);
	for (struct srd_qp *q = g_tgts; q; q = q->xnext) {
		srd_lock(&q->resp_lock);
		if (q->srq == srq) {
			q->srq = NULL;
			q->rpd = NULL;
			q->recv_in_progress = false;
		}
		srd_unlock(&q->resp_lock);
	}
	pthread_mutex_unlock(&g_tgt_lock);
	/* the shadows: relays run under the shadow lock; with no XRC SRQ left, none can succeed */
	pthread_mutex_lock(&g_shadow_lock);
	pthread_rwlock_rdlock(&g_srq_lock);
	bool none = g_srqs == NULL;
	pthread_rwlock_unlock(&g_srq_lock);
	for (struct srd_shadow *h = g_shadows; h; h = h->next)
		if (h->qp.srq == srq) {
			h->qp.srq = NULL;
			h->qp.rpd = NULL;
			h->qp.recv_in_progress = false;
		}
	while (none && g_shadows) {
		struct srd_shadow *h = g_shadows;
		g_shadows = h->next;
		free(h);
	}
	if (none)
		g_nshadows = 0;
	pthread_mutex_unlock(&g_shadow_lock);
	UNREF(srq->xrcd);
}

void srd_xrc_shadow_lock(void)
{
	pthread_mutex_lock(&g_shadow_lock);
}

void srd_xrc_shadow_unlock(void)
{
	pthread_mutex_unlock(&g_shadow_lock);
}

static void shadow_reset(struct srd_shadow *h, uint32_t inc)
{
	memset(&h->qp, 0, sizeof(h->qp));
	h->qp.shadow = true;
	h->qp.ttype = IBV_QPT_RC;
	h->qp.ibqp.qp_type = IBV_QPT_XRC_RECV;
	h->qp.ibqp.qp_num = h->qpn;
	h->qp.state = IBV_QPS_RTS;
	srd_lock_init(&h->qp.resp_lock);
	h->inc = inc;
	h->last_valid = false;
}

struct srd_shadow *srd_xrc_shadow_get(uint16_t port, uint32_t qpn, uint32_t inc)
{
	static uint64_t tick;
	struct srd_shadow *h = g_shadows, *lru = NULL;
	for (; h && (h->port != port || h->qpn != qpn); h = h->next)
		if (!lru || h->used < lru->used)
			lru = h;
	if (!h && g_nshadows >= MAX_SHADOWS) {
		h = lru; /* the least recently used gives way (a message it was placing is lost) */
		h->inc = 0;
	} else if (!h) {
		h = calloc(1, sizeof(*h));
		if (!h)
			return NULL;
		h->next = g_shadows;
		g_shadows = h;
		g_nshadows++;
	}
	if (h->port != port || h->qpn != qpn || h->inc != inc) {
		/* a TGT QP new to us, or reset since (a new incarnation): a fresh responder */
		h->port = port;
		h->qpn = qpn;
		shadow_reset(h, inc);
	}
	h->used = ++tick;
	return h;
}

/* Adds or removes qpn in the registry of a file domain. */
static void reg_tgt(struct srd_xdom *d, uint32_t qpn, bool add)
{
	int fd;
	struct reg *r = d->file ? reg_take(d->reg, &fd) : NULL;
	if (!r)
		return;
	for (int i = 0; i < REG_TGTS; i++) {
		if (add && !r->tgt[i].pid) {
			r->tgt[i].qpn = qpn;
			r->tgt[i].pid = getpid();
			break;
		}
		if (!add && r->tgt[i].pid == getpid() && r->tgt[i].qpn == qpn) {
			r->tgt[i].pid = 0;
			break;
		}
	}
	reg_give(fd, d->reg, r);
}

void srd_xrc_tgt_add(struct srd_qp *qp)
{
	REF(qp->xrcd);
	pthread_mutex_lock(&g_tgt_lock);
	qp->xnext = g_tgts;
	g_tgts = qp;
	pthread_mutex_unlock(&g_tgt_lock);
	reg_tgt(qp->xrcd->dom, qp->ibqp.qp_num, true);
}

/* Remote openers: handles of ibv_open_qp in other processes, per TGT QP of ours */
struct ropen {
	struct ropen *next;
	const struct srd_qp *qp;
	uint16_t port;
	uint32_t id;
	int32_t pid;
	uint32_t last_req;   /* the handle's last modify request, and its answer */
	int last_rc;
};
static struct ropen *g_ropens;
static pthread_mutex_t g_ropen_lock = PTHREAD_MUTEX_INITIALIZER; /* a leaf: taken under resp_lock too */

/* g_ropen_lock held: drops the openers of dead processes, counts qp's */
static int ropen_count(const struct srd_qp *qp)
{
	int n = 0;
	for (struct ropen **p = &g_ropens; *p;) {
		struct ropen *o = *p;
		if (!alive(o->pid)) {
			*p = o->next;
			free(o);
			continue;
		}
		n += o->qp == qp;
		p = &o->next;
	}
	return n;
}

struct srd_qp *srd_xrc_tgt_open_key(uint32_t qpn, const uint8_t key[16])
{
	pthread_mutex_lock(&g_tgt_lock);
	struct srd_qp *q = g_tgts;
	while (q && (q->ibqp.qp_num != qpn || !key_matches(q->xrcd->dom, key)))
		q = q->xnext;
	if (q)
		q->opens++;
	pthread_mutex_unlock(&g_tgt_lock);
	return q;
}

static struct ropen *ropen_find(const struct srd_qp *real, uint16_t port, uint32_t id)
{
	struct ropen *o = g_ropens;
	while (o && (o->qp != real || o->port != port || o->id != id))
		o = o->next;
	return o;
}

bool srd_xrc_ropen_answered(const struct srd_qp *real, uint16_t port, uint32_t id, uint32_t req, int *rc)
{
	pthread_mutex_lock(&g_ropen_lock);
	struct ropen *o = ropen_find(real, port, id);
	bool seen = o && o->last_req == req;
	if (seen)
		*rc = o->last_rc;
	pthread_mutex_unlock(&g_ropen_lock);
	return seen;
}

void srd_xrc_ropen_record(const struct srd_qp *real, uint16_t port, uint32_t id, uint32_t req, int rc)
{
	pthread_mutex_lock(&g_ropen_lock);
	struct ropen *o = ropen_find(real, port, id);
	if (o) {
		o->last_req = req;
		o->last_rc = rc;
	}
	pthread_mutex_unlock(&g_ropen_lock);
}

int srd_xrc_ropen_add(struct srd_qp *real, uint16_t port, uint32_t id, int32_t pid)
{
	pthread_mutex_lock(&g_ropen_lock);
	bool known = ropen_find(real, port, id) != NULL;
	pthread_mutex_unlock(&g_ropen_lock);
	if (known)
		return 0; /* the request again: opened already */
	struct ropen *o = calloc(1, sizeof(*o));
	if (!o)
		return ENOMEM;
	o->qp = real;
	o->port = port;
	o->id = id;
	o->pid = pid;
	pthread_mutex_lock(&g_ropen_lock);
	o->next = g_ropens;
	g_ropens = o;
	pthread_mutex_unlock(&g_ropen_lock);
	return 0;
}

void srd_xrc_ropen_del(struct srd_qp *real, uint16_t port, uint32_t id)
{
	pthread_mutex_lock(&g_ropen_lock);
	for (struct ropen **p = &g_ropens; *p; p = &(*p)->next)
		if ((*p)->qp == real && (*p)->port == port && (*p)->id == id) {
			struct ropen *o = *p;
			*p = o->next;
			free(o);
			break;
		}
	pthread_mutex_unlock(&g_ropen_lock);
}

int srd_xrc_ropen_list(const struct srd_qp *qp, uint16_t *ports, uint32_t *ids, int max)
{
	int n = 0;
	pthread_mutex_lock(&g_ropen_lock);
	for (struct ropen *o = g_ropens; o && n < max; o = o->next)
		if (o->qp == qp) {
			ports[n] = o->port;
			ids[n++] = o->id;
		}
	pthread_mutex_unlock(&g_ropen_lock);
	return n;
}

int srd_xrc_tgt_remove(struct srd_qp *qp)
{
	pthread_mutex_lock(&g_tgt_lock);
	pthread_mutex_lock(&g_ropen_lock);
	int remote = ropen_count(qp);
	pthread_mutex_unlock(&g_ropen_lock);
	if (qp->opens || remote) {
		pthread_mutex_unlock(&g_tgt_lock);
		return EBUSY; /* ibv_open_qp handles of it are open */
	}
	for (struct srd_qp **p = &g_tgts; *p; p = &(*p)->xnext)
		if (*p == qp) {
			*p = qp->xnext;
			break;
		}
	pthread_mutex_unlock(&g_tgt_lock);
	reg_tgt(qp->xrcd->dom, qp->ibqp.qp_num, false);
	UNREF(qp->xrcd);
	return 0;
}

struct srd_qp *srd_xrc_tgt_open(struct srd_xrcd *xrcd, uint32_t qpn)
{
	pthread_mutex_lock(&g_tgt_lock);
	struct srd_qp *q = g_tgts;
	while (q && (q->ibqp.qp_num != qpn || q->xrcd->dom != xrcd->dom))
		q = q->xnext;
	if (q)
		q->opens++;
	pthread_mutex_unlock(&g_tgt_lock);
	return q;
}

void srd_xrc_tgt_close(struct srd_qp *real)
{
	pthread_mutex_lock(&g_tgt_lock);
	real->opens--;
	pthread_mutex_unlock(&g_tgt_lock);
}

bool srd_xrc_tgt_elsewhere(struct srd_xrcd *xrcd, uint32_t qpn)
{
	struct srd_xdom *d = xrcd->dom;
	int fd;
	struct reg *r = d->file ? reg_take(d->reg, &fd) : NULL;
	bool found = false;
	if (r) {
		for (int i = 0; i < REG_TGTS; i++)
			found |= r->tgt[i].pid && r->tgt[i].pid != getpid() && r->tgt[i].qpn == qpn;
		reg_give(fd, d->reg, r);
	}
	return found;
}

int srd_xrc_shadow_select(struct srd_shadow *h, uint32_t srqn, const uint8_t key[16],
			  enum ibv_event_type *ev)
{
	*ev = IBV_EVENT_QP_REQ_ERR;
	pthread_rwlock_rdlock(&g_srq_lock);
	struct srd_srq *s = g_srqs;
	while (s && s->srqn != srqn)
		s = s->xnext;
	int syn = SYN_ACK;
	if (!s) {
		syn = SYN_NAK_INV;
	} else if (!key_matches(s->xrcd->dom, key)) {
		*ev = IBV_EVENT_QP_ACCESS_ERR;
		syn = SYN_NAK_ACCESS;
	} else {
		h->qp.srq = s;
		h->qp.rpd = s->ibsrq.pd;
	}
	pthread_rwlock_unlock(&g_srq_lock);
	return syn;
}

int srd_xrc_select(struct srd_qp *qp, bool xrc, uint32_t srqn, enum ibv_event_type *ev)
{
	*ev = IBV_EVENT_QP_REQ_ERR;
	if (qp->xrc != SRD_XRC_TGT || !xrc)
		return xrc || qp->xrc == SRD_XRC_TGT ? SYN_NAK_INV : SYN_ACK;
	pthread_rwlock_rdlock(&g_srq_lock);
	struct srd_srq *s = g_srqs;
	while (s && s->srqn != srqn)
		s = s->xnext;
	int syn = SYN_ACK;
	if (!s) {
		syn = SYN_NAK_INV;
	} else if (s->xrcd->dom != qp->xrcd->dom) {
		*ev = IBV_EVENT_QP_ACCESS_ERR;
		syn = SYN_NAK_ACCESS;
	} else {
		qp->srq = s;
		qp->rpd = s->ibsrq.pd;
	}
	pthread_rwlock_unlock(&g_srq_lock);
	return syn;
}
