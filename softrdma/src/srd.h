/*
 * softrdma internal definitions.
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
	int outstanding_rd;      /* READ/ATOMIC in flight */
	int retry_left, rnr_left;
	uint64_t timer_deadline_ns; /* 0 = no timer */
	bool rnr_wait;
	/* responder transport state */
	uint32_t epsn;
	uint32_t msn;
	bool nak_sent;           /* one NAK per sequence error */
	bool recv_in_progress;   /* multi-packet SEND being placed */
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

/* device.c */
struct srd_device *srd_devices(int *n);
bool srd_gid_is_local(const union ibv_gid *gid);
void srd_gid_to_sockaddr(const union ibv_gid *gid, uint16_t port, int ifindex,
			 struct sockaddr_in6 *sa);
void srd_fill_device_attr(struct srd_device *dev, struct ibv_device_attr *a);
void srd_async_post(struct srd_context *ctx, struct ibv_async_event *ev);

/* verbs.c */
struct srd_mr *srd_mr_get(uint32_t key); /* called with the MR table read lock */
void srd_mr_rdlock(void);
void srd_mr_unlock(void);
void srd_cq_push(struct srd_cq *cq, const struct ibv_wc *wc, bool solicited);
int srd_rq_pop(struct srd_rq *rq, struct srd_rwqe *out, struct ibv_sge *sges);
void srd_qp_to_error(struct srd_qp *qp, bool flush_sq_now);
void srd_flush_sq_locked(struct srd_qp *qp);
void srd_flush_rq(struct srd_qp *qp);
void srd_srq_check_limit(struct srd_srq *srq);

/* net.c */
int srd_net_alloc_qpn(struct srd_qp *qp);
void srd_net_free_qpn(struct srd_qp *qp);
struct srd_qp *srd_net_lookup_local(uint32_t qpn);
bool srd_net_owns_qpn(uint32_t qpn); /* the QPN's socket is one of this process's */
int srd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int srd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int srd_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int srd_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc);
int srd_req_notify_cq(struct ibv_cq *ibcq, int solicited_only);
void srd_qp_reset_transport(struct srd_qp *qp);
void srd_qp_kick(struct srd_qp *qp); /* ask the agent to look at a QP */
bool srd_faults_enabled(void);
void srd_agent_start(void);
uint64_t srd_now_ns(void);

#endif
