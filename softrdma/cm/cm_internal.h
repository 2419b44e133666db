/*
 * softrdma librdmacm: internal declarations shared by the CM sources.
 *
 * The connection manager protocol runs over TCP between the peers' real IP
 * addresses; see docs/softrdma-cm.md for the wire format and the deliberate
 * differences from the kernel's rdma_cm.
 */
#ifndef SOFTRDMA_CM_INTERNAL_H
#define SOFTRDMA_CM_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <infiniband/verbs.h>

#define CM_EXPORT __attribute__((visibility("default")))

/* IB CM private data sizes, minus the rdma_cm header where the kernel uses one. */
#define PDATA_REQ 56
#define PDATA_REP 196
#define PDATA_REJ 148
#define PDATA_SIDR_REQ 180
#define PDATA_SIDR_REP 136
#define PDATA_MAX 196

/* IB CM reject reasons reported as the status of RDMA_CM_EVENT_REJECTED. */
#define REJ_TIMEOUT 1
#define REJ_INVALID_SERVICE_ID 8
#define REJ_CONSUMER_DEFINED 28
/* SIDR REP status for a rejected UD request. */
#define SIDR_REJECT 2

enum wire_type {
	MSG_REQ = 1,
	MSG_REP,
	MSG_RTU,
	MSG_REJ,
	MSG_DREQ,
	MSG_DREP,
	MSG_SIDR_REQ,
	MSG_SIDR_REP,
};

#define WIRE_MAGIC 0x53524d43u /* "SRMC" */
#define WIRE_VERSION 1

/* One fixed-size message; multi-byte fields in network byte order. */
struct wire_msg {
	uint32_t magic;
	uint8_t type;
	uint8_t version;
	uint8_t qp_type;
	uint8_t status;		/* REJ reason or SIDR status */
	uint32_t qpn;
	uint32_t psn;
	uint32_t qkey;
	uint8_t gid[16];
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint8_t flow_control;
	uint8_t srq;
	uint8_t mtu;
	uint8_t pdata_len;
	uint8_t pdata[PDATA_MAX];
} __attribute__((packed));

enum id_state {
	ST_IDLE,
	ST_BOUND,
	ST_ADDR_RESOLVED,
	ST_ROUTE_RESOLVED,
	ST_CONNECTING,		/* active: REQ queued or sent, awaiting REP */
	ST_RESP_WAIT,		/* active without QP: REP seen, awaiting rdma_establish */
	ST_LISTEN,
	ST_PENDING,		/* internal: accepted TCP socket, awaiting REQ */
	ST_REQ_RCVD,		/* passive: CONNECT_REQUEST reported, awaiting accept/reject */
	ST_ACCEPTED,		/* passive: REP sent, awaiting RTU */
	ST_ESTABLISHED,
	ST_UD_DONE,		/* UD: SIDR exchange finished */
	ST_DISC_SENT,		/* DREQ sent, awaiting DREP */
	ST_DISCONNECTED,
	ST_ERROR,
};

struct cm_dev {
	struct ibv_context *verbs;
	struct ibv_device_attr attr;
	struct ibv_pd *default_pd;
};

struct cm_channel;

struct cm_id {
	struct rdma_cm_id id;	/* first: the public handle */
	struct cm_id *next;	/* in g_ids */
	struct cm_channel *chan;
	int sync;		/* created without a channel: calls block */
	int internal;		/* not yet visible to the application */
	enum id_state state;
	struct cm_dev *dev;
	int gid_index;
	union ibv_gid sgid;
	enum ibv_mtu mtu;
	int sock;
	int connect_pending;	/* non-blocking TCP connect in progress */
	int req_unanswered;	/* REQ to where no device answers: only the CM timeout ends it */
	int peer_gone;
	struct cm_id *listener;	/* for ST_PENDING ids */
	int backlog;		/* listener: most ST_PENDING ids at a time */
	int npending;		/* listener: ST_PENDING ids now (counted each CM thread pass) */
	uint64_t accept_paused_until;	/* listener: out of descriptors, retry accept then */
	uint64_t deadline_ms;	/* 0: none */
	uint64_t refused_until;	/* retry refused TCP connects until then */
	uint64_t retry_at;	/* 0: no reconnect scheduled */
	int reported, acked;	/* events handed out / acknowledged */
	int events_queued;	/* events still in a channel queue */

	/* connection parameters */
	uint32_t psn;
	uint32_t remote_qpn, remote_psn, remote_qkey;
	union ibv_gid dgid;
	enum ibv_mtu remote_mtu;
	uint8_t responder_resources;	/* local max_dest_rd_atomic */
	uint8_t initiator_depth;	/* local max_rd_atomic */
	uint8_t retry_count, rnr_retry_count;
	uint8_t remote_known;
	uint8_t ack_timeout;
	uint8_t tos;
	int reuseaddr, afonly;
	uint32_t qkey;

	struct wire_msg out;	/* REQ waiting for the TCP connect */
	int out_pending;
	uint8_t rbuf[sizeof(struct wire_msg)];
	size_t rlen;

	struct ibv_sa_path_rec path;
	struct ibv_qp_init_attr *ep_qp_attr;	/* rdma_create_ep on a passive id */
	struct ibv_pd *ep_pd;
	int qp_from_ep;
};

struct cm_event {
	struct rdma_cm_event ev;	/* first: the public event */
	struct cm_event *next;
	struct cm_id *owner;		/* counted against this id */
	uint8_t pdata[PDATA_MAX];
};

struct cm_channel {
	struct rdma_event_channel ch;	/* first: the public channel */
	int wfd;			/* write end of the readiness pipe */
	struct cm_event *head, *tail;
	int queued;
	int private_to_id;		/* sync id's own channel */
	int waiters;			/* threads blocked in rdma_get_cm_event */
	int closed;			/* destroyed while a thread still waited */
};

#endif
