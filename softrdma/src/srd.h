/*
 * softrdma's object types: the private structs behind every verbs object, and
 * the limits the device reports. Types and a few inline accessors only; each
 * unit's functions are declared in that unit's own header, and the units call
 * each other one way (docs/softrdma.md, "Units"; tests/layering.sh checks it):
 *
 *   context.c qp.c   >  agent.c  >  requester.c  >  responder.c  >  sq.c  >  rq.c
 *   >  cq.c net.c  >  events.c device.c pd.c faults.c misc.c
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
#include <netinet/in.h>
#include <time.h>

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

struct srd_context {
	struct verbs_context vctx;
	struct srd_device *dev;
	pthread_mutex_t async_lock;
	struct srd_async_node *async_head, *async_tail;
};

struct srd_async_node {
	struct srd_async_node *next;
	struct ibv_async_event ev;
};

struct srd_pd {
	struct ibv_pd ibpd;
	int refs; /* MRs, QPs, SRQs, AHs using it */
};

struct srd_mr {
	struct ibv_mr ibmr;
	uint64_t iova;   /* address the remote side uses */
	int access;
};

struct srd_channel {
	struct ibv_comp_channel ibch;
	pthread_mutex_t lock;
	struct srd_cq **queue; /* CQs with an undelivered event, FIFO */
	int qhead, qlen, qcap;
};

struct srd_cq {
	struct ibv_cq ibcq;
	pthread_mutex_t lock;
	struct ibv_wc *ring;
	int cap;          /* ring slots */
	int head, count;  /* head = oldest */
	int armed;        /* 0, 1 = any completion, 2 = solicited only */
	bool overflow;
	unsigned empty_polls;
	int refs; /* QPs using it */
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
	pthread_mutex_t lock;
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
};

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
	/* UD destination */
	struct ibv_ah_attr ud_av;
	uint32_t ud_qpn, ud_qkey;
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

struct srd_qp {
	struct ibv_qp ibqp;
	struct srd_device *dev;
	/* attributes as last set */
	struct ibv_qp_attr attr;
	int sq_sig_all;
	struct ibv_qp_cap cap;
	/* send queue: ring of WQEs, [tail, head) posted; [tail, next_tx) in flight */
	pthread_mutex_t sq_lock;
	struct srd_swqe *sq;
	struct ibv_sge *sq_sges;
	uint8_t *sq_inline;
	int sq_cap;
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
	/* responder transport state */
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
	bool kick;                /* agent should run the send queue */
	pthread_mutex_t resp_lock; /* responder state */
	int state;                /* enum ibv_qp_state, read without locks */
};

#define REF(x) __atomic_add_fetch(&(x)->refs, 1, __ATOMIC_ACQ_REL)
#define PD_OF(p) container_of((p), struct srd_pd, ibpd)
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
