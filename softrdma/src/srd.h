/*
 * softrdma's object types: the private structs behind every verbs object, and
 * the limits the device reports. Types and a few inline accessors only; each
 * unit's functions are declared in that unit's own header, and the units call
 * each other one way (docs/softrdma.md, "Units"; tests/layering.sh checks it):
 *
 *   context.c  >  qpx.c  >  qp.c  >  xctl.c  >  agent.c  >  requester.c  >  responder.c
 *   >  sq.c  >  rq.c  >  cq.c net.c  >  events.c device.c pd.c faults.c misc.c
 *
 * Every verbs object is a private struct that embeds the public rdma-core
 * struct as its first member, so the pointer handed to the application is the
 * pointer to our struct and the stock inline wrappers in <infiniband/verbs.h>
 * (which dereference context->ops and the verbs_context) see the exact layout.
 */
#ifndef SRD_H
#define SRD_H

#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <netinet/in.h>
#include <time.h>
#include "lock.h"
#include "closerace.h"

#define SRD_EXPORT __attribute__((visibility("default")))
#define SRD_MAX_DEVICES 8
#define SRD_GID_TBL_LEN 16
#define SRD_MAX_QP_WR 16384
#define SRD_MAX_SGE 32
#define SRD_MAX_CQE 262143
#define SRD_MAX_INLINE 1024
#define SRD_MAX_RD_ATOM 128
#define SRD_MAX_QP 65536
#define SRD_HDR_PSN_MASK 0xffffffu

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

struct srd_device {
	struct ibv_device ibdev;
	char ifname[64];
	int ifindex;
	uint8_t mac[6];
	int ngids;
	union ibv_gid gids[SRD_GID_TBL_LEN];
	uint64_t guid; /* network byte order, as ibv_get_device_guid returns */
	int index;
};

/*
 * What the kernel calls a ucontext: the namespace of object handles behind a context's command
 * fd. ibv_open_device makes one (its cmd_fd a memfd, so a dup of it can be told apart from any
 * other fd by its inode); ibv_import_device opens another context on the same one, and
 * ibv_import_pd/ibv_import_mr find objects of it by handle (context.c owns its life, pd.c the
 * list of its PDs).
 */
struct srd_ucontext {
	int refs;              /* contexts on it; under context.c's registry lock */
	dev_t st_dev;          /* the memfd's identity */
	ino_t st_ino;
	struct srd_device *dev;
	pthread_mutex_t lock;  /* pds */
	struct srd_pd *pds;    /* the PDs allocated on it (not the imported ones) */
	struct srd_ucontext *next;
};

struct srd_context {
	struct verbs_context vctx;
	struct srd_device *dev;
	struct srd_ucontext *uctx;
	pthread_mutex_t async_lock;
	struct srd_async_node *async_head, *async_tail;
};

struct srd_async_node {
	struct srd_async_node *next;
	struct ibv_async_event ev;
};

struct srd_pd {
	struct ibv_pd ibpd;
	int refs; /* MRs, QPs, SRQs, AHs using it; for an allocated PD also its imports */
	struct srd_pd *origin; /* an imported PD: the PD it names (whose checks it shares); else NULL */
	struct srd_pd *next;   /* in its ucontext's list (allocated PDs only) */
};

/* A key-table entry: a memory region, or the key of a memory window (kind SRD_KEY_MW,
 * embedded in struct srd_mw; its ibmr.lkey is the window's current rkey). */
enum { SRD_KEY_MR = 0, SRD_KEY_MW = 1 };

struct srd_mr {
	struct ibv_mr ibmr;
	uint64_t iova;   /* address the remote side uses */
	int access;
	int kind;        /* SRD_KEY_MR, SRD_KEY_MW */
	int nmw;         /* memory windows bound to this region (the MW lock) */
	bool imported;   /* an ibv_import_mr alias: not in the key table, names a region that is */
};

enum srd_mw_state { SRD_MW_FREE = 0, SRD_MW_VALID };

struct srd_mw {
	struct ibv_mw ibmw;
	struct srd_mr slot;      /* its key-table entry */
	enum srd_mw_state state;
	struct srd_mr *mr;       /* bound region, NULL when unbound */
	uint64_t addr, length;   /* the window, in the region's iova space */
	unsigned access;         /* remote rights (and IBV_ACCESS_ZERO_BASED) */
	const void *qp;          /* type 2: the QP it was bound through */
	uint32_t qpn;
};

struct srd_channel {
	struct ibv_comp_channel ibch;
	pthread_mutex_t lock;
	struct srd_cq **queue; /* CQs with an undelivered event, FIFO */
	int qhead, qlen, qcap;
};

struct srd_cq {
	union {
		struct ibv_cq ibcq;
		struct ibv_cq_ex cqx; /* ibv_create_cq_ex: starts with the ibv_cq's layout */
	};
	bool ex;                  /* created by ibv_create_cq_ex */
	struct ibv_wc cur;        /* the completion start_poll/next_poll made current */
	srd_lock_t lock;
	struct ibv_wc *ring;
	int cap;          /* ring slots */
	int head, count;  /* head = oldest */
	int armed;        /* 0, 1 = any completion, 2 = solicited only */
	bool overflow;
	unsigned empty_polls;      /* empty polls since the last look at the clock (cq.c, empty_poll) */
	uint64_t empty_since_ns;   /* when this run of empty polls was first looked at; 0: none */
	int refs; /* QPs using it */
	struct srd_inside inside; /* the close-race check's (closerace.h) */
	bool poll_inside;         /* the check counts a start_poll..end_poll session inside it */
	pthread_mutex_t ev_lock;
	pthread_cond_t ev_cond;
	unsigned events, acked;
};

struct srd_rwqe {
	uint64_t wr_id;
	int num_sge;
	struct ibv_sge *sge; /* points into the queue's sge pool */
};

struct srd_rq {
	srd_mutex_t lock; /* not biased: in process, its QP's thread posts and the sender's takes */
	struct srd_rwqe *ring;
	struct ibv_sge *sges;
	int cap, max_sge;
	int head, count;
};

struct srd_srq {
	struct ibv_srq ibsrq;
	struct srd_rq rq;
	unsigned limit;
	int refs; /* QPs using it */
	struct srd_inside inside; /* the close-race check's (closerace.h) */
	/* XRC SRQ (xrc.c): its domain handle, the CQ its receive completions go to, its number */
	struct srd_xrcd *xrcd;
	struct ibv_cq *xcq;
	uint32_t srqn;
	struct srd_srq *xnext;   /* xrc.c's list of this process's XRC SRQs */
};

/* An XRC domain handle (ibv_open_xrcd); the domain itself is xrc.c's private struct srd_xdom,
 * shared by every handle of this process to the same file and known to the other processes
 * that have the same file open. */
struct srd_xdom;
struct srd_xrcd {
	struct ibv_xrcd ibxrcd;
	struct srd_xdom *dom;
	int refs; /* XRC SRQs and XRC_RECV QPs created through this handle */
};

/* srd_qp.xrc */
enum { SRD_XRC_NONE = 0, SRD_XRC_INI, SRD_XRC_TGT };

struct srd_ah {
	struct ibv_ah ibah;
	struct ibv_ah_attr attr;
};

enum srd_wqe_state { W_PENDING = 0, W_SENT, W_DONE };

struct srd_swqe {
	uint64_t wr_id;
	enum ibv_wr_opcode opcode;
	unsigned send_flags;
	uint32_t imm;
	int num_sge;
	uint32_t length;       /* total payload bytes */
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add, swap;
	/* IBV_WR_BIND_MW: the window (compared, never dereferenced: it may be gone by the time the
	 * WQE runs) and its rkey at post time, the new rkey, what it binds */
	const struct ibv_mw *mw;
	uint32_t mw_rkey, mw_new_rkey, mw_mr_lkey;
	uint64_t mw_addr, mw_length;
	unsigned mw_access;
	bool local_done;             /* a local operation (bind, local invalidate) was executed */
	/* UD destination */
	struct ibv_ah_attr ud_av;
	uint32_t ud_qpn, ud_qkey;
	uint32_t xrc_srqn;     /* XRC_SEND: the remote XRC SRQ */
	struct ibv_sge *sge;   /* pool slice */
	uint8_t *inline_buf;   /* pool slice when IBV_SEND_INLINE */
	/* RC transport bookkeeping */
	uint32_t first_psn, npkts;   /* PSNs first_psn .. first_psn+npkts-1 */
	uint32_t tx_pkt;             /* packets (or read responses) requested so far */
	uint32_t resp_pkt;           /* read/atomic responses received */
	uint32_t rereq_pkt;          /* 1 + resp_pkt when a gap last made us re-request, else 0 */
	bool psn_assigned;
	bool signaled;
};

/* The post-send API's batch (ibv_wr_start .. ibv_wr_complete) of an extended QP: the
 * builders fill classic send WRs here, and ibv_wr_complete posts them all or none
 * through the classic path, so both APIs produce the same send WQEs. */
struct srd_xbatch {
	uint64_t ops;               /* IBV_QP_EX_WITH_* the QP was created with */
	struct ibv_send_wr *wr;     /* sq_cap WRs */
	struct ibv_sge *sge;        /* max_send_sge per WR */
	uint8_t *inl;               /* max_inline_data per WR */
	int n;                      /* WRs built so far */
	int err;                    /* first error of this batch, returned by wr_complete */
	bool open;                  /* between wr_start and wr_complete/wr_abort */
	bool inside;                /* the close-race check counts this session inside its QP */
};

struct srd_qp {
	union {
		struct ibv_qp ibqp;
		struct ibv_qp_ex qpx; /* ibv_qp_to_qp_ex: starts with the ibv_qp */
	};
	struct srd_xbatch *xb;    /* NULL unless created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS */
	struct srd_inside inside; /* the close-race check's (closerace.h) */
	struct srd_device *dev;
	/* attributes as last set */
	struct ibv_qp_attr attr;
	int sq_sig_all;
	struct ibv_qp_cap cap;
	/* send queue: ring of WQEs, [tail, head) posted; [tail, next_tx) in flight */
	srd_lock_t sq_lock;
	struct srd_swqe *sq;
	struct ibv_sge *sq_sges;
	uint8_t *sq_inline;
	int sq_cap;           /* ring slots: a power of two >= sq_depth, so an index is a mask */
	int sq_depth;         /* WQEs the queue takes (max_send_wr) */
	unsigned sq_head, sq_tail, sq_next_tx; /* free-running counters */
	struct srd_rq rq;     /* unused when an SRQ is attached */
	struct srd_srq *srq;
	/* requester transport state */
	uint32_t snd_psn;        /* next PSN to assign */
	uint32_t una_psn;        /* oldest unacknowledged PSN */
	uint32_t sent_psn;       /* one past the newest PSN transmitted: responses must be older */
	int outstanding_rd;      /* READ/ATOMIC in flight */
	int retry_left, rnr_left;
	uint64_t timer_deadline_ns; /* 0 = no timer */
	bool rnr_wait;
	/* SOFTRDMA_DEBUG's trace: when the last response came, responses since the last timeout */
	uint64_t dbg_rx_ns, dbg_timeout_ns;
	unsigned dbg_rx_valid, dbg_rx_invalid;
	/* responder transport state, under resp_lock (cur_rwqe: the receive WQE of the SEND in
	 * progress, taken from the queue; a move to ERR flushes it first, srd_flush_rq) */
	uint32_t epsn;
	uint32_t msn;
	bool nak_sent;           /* one NAK per sequence error */
	bool recv_in_progress;   /* multi-packet SEND being placed */
	bool write_in_progress;  /* multi-packet WRITE being placed */
	struct srd_rwqe cur_rwqe;
	struct ibv_sge cur_sges[SRD_MAX_SGE];
	uint32_t recv_off;
	/* cache of recent atomic results for duplicate requests */
	struct { uint32_t psn; uint64_t val; bool valid; } atomic_cache[16];
	int atomic_cache_next;
	/* addressing */
	int sock;                 /* index of the socket owning this QPN */
	struct sockaddr_in6 peer; /* RC/UC destination */
	bool peer_local;          /* destination QP lives in this process */
	uint64_t shm_stamp;       /* the last packet sent to the peer's ring (shm.c), 0: none */
	bool kick;                /* agent should run the send queue */
	srd_lock_t resp_lock; /* responder state */
	int state;                /* enum ibv_qp_state, read without locks */
	/* transport: ibqp.qp_type, except IBV_QPT_RC for the XRC QPs (the INI side is an RC
	 * requester, the TGT side an RC responder) */
	enum ibv_qp_type ttype;
	/* XRC (xrc.c): SRD_XRC_INI (no receive queue) or SRD_XRC_TGT (no send queue, no PD:
	 * each request names its XRC SRQ, whose PD and CQ serve it; srq is the SRQ of the
	 * request being executed, under resp_lock) */
	int xrc;
	struct srd_xrcd *xrcd;    /* TGT: its domain handle */
	struct srd_qp *real;      /* ibv_open_qp handle: the QP it opens; NULL for a QP itself */
	int opens;                /* TGT: handles of ibv_open_qp open on it */
	struct ibv_pd *rpd;       /* the responder's PD: ibqp.pd, or the current XRC SRQ's */
	struct srd_qp *xnext;     /* xrc.c's list of TGT QPs */
	/* XRC across processes (responder.c): a TGT QP's request relayed to the process of the
	 * XRC SRQ it names, under resp_lock; NULL until the first relay */
	struct srd_relay *relay;
	/* a shadow (xrc.c) stands in, in the SRQ's process, for a TGT QP of another process: the
	 * responder executes relayed requests on it; its errors are recorded, not raised */
	bool shadow;
	int shadow_ev;            /* the async event of the shadow's error */
	/* an ibv_open_qp handle of a TGT QP of another process (xctl.c): that process's port (0
	 * for any other QP), the handle's number there; xctl.c's list of such handles */
	uint16_t rport;
	uint32_t rid;
	struct srd_qp *rnext;
};

#define REF(x) __atomic_add_fetch(&(x)->refs, 1, __ATOMIC_ACQ_REL)
#define PD_OF(p) container_of((p), struct srd_pd, ibpd)
/* the PD whose objects a PD shares: an imported PD's origin, else the PD itself. Every
 * "same PD" check (keys against a QP, windows against regions) compares these. */
static inline struct ibv_pd *srd_pd_canon(struct ibv_pd *p)
{
	return p && PD_OF(p)->origin ? &PD_OF(p)->origin->ibpd : p;
}
#define UNREF(x) __atomic_sub_fetch(&(x)->refs, 1, __ATOMIC_ACQ_REL)

static inline struct srd_context *srd_ctx_of(struct ibv_context *c)
{
	return container_of(c, struct srd_context, vctx.context);
}

static inline struct srd_qp *srd_qp_of(struct ibv_qp *q)
{
	return container_of(q, struct srd_qp, ibqp);
}

static inline struct srd_cq *srd_cq_of(struct ibv_cq *c)
{
	return container_of(c, struct srd_cq, ibcq);
}

static inline uint64_t srd_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
