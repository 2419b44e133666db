/* responder.c: the responder, shared by the in-process path and the packet path. */
#ifndef SRD_RESPONDER_H
#define SRD_RESPONDER_H
#include "srd.h"
#include "wire.h"
#include "pd.h"

/* One request as the responder sees it: a whole message from the in-process path,
 * or one packet of a message from the packet path. */
struct srd_req {
	int op;                     /* OP_SEND, OP_WRITE, OP_READ_REQ, OP_CAS, OP_FAA */
	unsigned flags;             /* F_FIRST, F_LAST, F_IMM, F_SOLICITED */
	uint32_t sqpn, imm, rkey;
	uint32_t srqn;              /* F_XRC: the XRC SRQ named */
	uint32_t len;               /* payload bytes here (READ: bytes asked for) */
	uint32_t total;             /* the whole message's bytes */
	uint64_t va, cmp, swap;
	const struct srd_seg *src;  /* the payload */
	int nsrc;
	/* in-process READ and atomics: the requester's resolved local SGEs, where the data or
	 * the original value land (copied by the responder); NULL on the packet path */
	const struct srd_seg *ldst;
	int nldst;
};

/* What srd_resp_execute did, beyond its return value. */
struct srd_resp {
	uint64_t orig;              /* atomics: the value before the operation */
	bool pend;                  /* a receive completion to write (after any ACK) */
	struct srd_rwqe rw;
	enum ibv_wc_opcode wc_op;
	uint32_t wc_len;
};

/* srd_resp_execute's result besides SYN_ACK (done), SYN_RNR and the NAK syndromes:
 * UC with no receive posted, the message is dropped. */
#define RESP_DROP 0x100
/* ... and: not a request opcode at all; nothing done, the PSN is still expected. */
#define RESP_IGNORE 0x101
/* ... and (in-process only): the requester's own memory had a hole in an ODP region (its
 * gather list, or the segments a READ's data or an atomic's value land in), unmapped since
 * it was admitted: a local protection error for the requester. A SEND or WRITE stays in
 * progress at the responder, as a message whose sender stopped sending. */
#define RESP_LOCAL_FAULT 0x102

/* The QP takes requests from sqpn now (RTR/RTS/SQD, connected, sqpn its peer). */
bool srd_resp_accepts(struct srd_qp *qp, uint32_t sqpn);
/* Access checks and execution of one request; a failed check has put the QP in ERR
 * with its async event. qp->resp_lock and the MR read lock held. */
int srd_resp_execute(struct srd_qp *qp, const struct srd_req *r, struct srd_resp *out);
/* The packet path: one request packet for qp (QPN table read lock held). */
void srd_responder_rx(struct srd_qp *qp, const struct pkt_hdr *h, const uint8_t *payload);
/* UD: delivers one datagram to dst (either path; MR read lock held, resp_lock not). */
void srd_ud_deliver(struct srd_qp *dst, uint32_t qkey, uint32_t src_qpn, const uint8_t *sgid,
		    const struct srd_seg *src, int nsrc, uint32_t len, bool imm, uint32_t imm_data,
		    bool sol);
void srd_resp_reset(struct srd_qp *qp);
/* XRC across processes (QPN table read lock held): a relayed request for one of our XRC SRQs
 * (OP_XRC_RELAY), executed and answered; the answer to a relay of qp's (OP_XRC_RELAY_RESP). */
void srd_relay_rx(const struct pkt_hdr *h, const uint8_t *payload, const struct sockaddr_in6 *from);
void srd_relay_resp_rx(struct srd_qp *qp, const struct pkt_hdr *h, const struct sockaddr_in6 *from);
/* The agent's timer scan: resends an unanswered relay of qp, or gives up on it; true while
 * one waits. */
bool srd_relay_service(struct srd_qp *qp, uint64_t now);
void srd_relay_free(struct srd_qp *qp); /* at destruction, when no thread can find qp */
/* In a child of fork(): the atomics' lock as new. */
void srd_resp_atfork_child(void);

#endif
