/*
 * softrdma's wire format and the protocol arithmetic both sides of the packet
 * path share (header only: no unit owns it). The format is private: a
 * little-endian header, not BTH/RETH, so softrdma talks only to softrdma.
 */
#ifndef SRD_WIRE_H
#define SRD_WIRE_H

#include "srd.h"

#define WINDOW 256          /* packets in flight per QP */
#define ACKREQ_EVERY 32     /* requester asks for an ACK this often */
#define READ_CHUNK 64       /* response packets per READ request */

enum { OP_SEND = 1, OP_WRITE, OP_READ_REQ, OP_READ_RESP, OP_CAS, OP_FAA, OP_ATOMIC_RESP,
       OP_ACK, OP_UD_SEND, OP_XRC_RELAY, OP_XRC_RELAY_RESP, OP_XRC_CTRL, OP_XRC_CTRL_RESP };
/*
 * OP_XRC_CTRL: ibv_open_qp of a TGT QP of another process (xctl.c): the request (kind in
 * syndrome: XCTL_*) to the TGT QP's process, dqpn the TGT QP, sqpn the handle's number, psn
 * the request's number, imm the opener's pid (OPEN) or the attribute mask (MODIFY), sgid the
 * domain's key, the payload a struct ibv_qp_attr (MODIFY); or (XCTL_EVENT) an async event of
 * the TGT QP (sqpn) for the handle dqpn, the event in imm. OP_XRC_CTRL_RESP: the answer to
 * request psn, the errno in rkey, the QP's state in imm, a struct ibv_qp_attr (QUERY).
 */
enum { XCTL_OPEN = 1, XCTL_QUERY, XCTL_MODIFY, XCTL_CLOSE, XCTL_EVENT };
/*
 * OP_XRC_RELAY: a TGT QP's process hands one request packet for an XRC SRQ of another process
 * of this host to that process (responder.c): the request's header with op in syndrome, the
 * TGT QP's remote access rights in pad, its QPN in sqpn, its incarnation in dqpn, its domain's
 * key (device, inode) in sgid, the SRQ in xsrqn, the payload unchanged.
 * OP_XRC_RELAY_RESP: the SRQ's process answers: the outcome in syndrome (SYN_ACK, SYN_RNR or a
 * NAK), the async event of a NAK in imm, an atomic's original value in cmp; dqpn, psn, xsrqn
 * and (in rkey) the incarnation of the relay it answers.
 */
/* F_INV: SEND with Invalidate, the rkey to invalidate in imm (last packet) */
/* F_XRC: a request of an XRC_SEND QP to an XRC_RECV QP, for the XRC SRQ in xsrqn */
/* F_NOACK: on a message's last packet, no ACK wanted for it: a request follows right behind,
 * whose ACK (cumulative) covers this one too (requester.c, ack_left_to_next) */
enum { F_FIRST = 1, F_LAST = 2, F_SOLICITED = 4, F_IMM = 8, F_ACKREQ = 16, F_INV = 32, F_XRC = 64, F_NOACK = 128 };
enum { SYN_ACK = 0, SYN_RNR, SYN_NAK_SEQ, SYN_NAK_INV, SYN_NAK_ACCESS, SYN_NAK_OP };

struct pkt_hdr {
	uint8_t op, flags, syndrome, pad;
	uint32_t dqpn, sqpn, psn;
	uint32_t imm;      /* immediate (network order as posted); RNR timer code in NAKs */
	uint32_t rkey;     /* rkey, or q_key for UD */
	uint32_t len;      /* payload bytes, or requested bytes for READ */
	uint32_t total;    /* whole message length */
	uint64_t va;
	uint64_t cmp, swap; /* atomics; cmp carries the original value in responses */
	uint8_t sgid[16];
	uint32_t magic, xsrqn;
};
/* Whether the responder acknowledges a new SEND or WRITE packet (a duplicate's last packet is
 * acknowledged whatever it says: the requester resends it because an ACK went missing). */
static inline bool wants_ack(const struct pkt_hdr *h)
{
	return (h->flags & F_ACKREQ) || ((h->flags & F_LAST) && !(h->flags & F_NOACK));
}
#define PKT_MAGIC 0x53524431u /* "SRD1" */
#define PKT_DOORBELL 0x53524442u /* "SRDB": wakes a same-host receiver (shm.c), carries nothing */
#define MAX_PKT (sizeof(struct pkt_hdr) + 4096)

static inline int32_t psn_diff(uint32_t a, uint32_t b)
{
	/* signed distance a - b in 24-bit PSN space */
	int32_t d = (int32_t)((a - b) << 8);
	return d >> 8;
}

static inline uint32_t psn_add(uint32_t a, uint32_t n) { return (a + n) & SRD_HDR_PSN_MASK; }

static inline uint32_t mtu_bytes(enum ibv_mtu m) { return 128u << m; }

/* IB encoding of the RNR NAK timer (IBA table 45), in nanoseconds */
static inline uint64_t rnr_ns(unsigned code)
{
	static const uint32_t us100[32] = { 65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128,
					    192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096,
					    6144, 8192, 12288, 16384, 24576, 32768, 49152 };
	return (uint64_t)us100[code & 31] * 10000ull; /* table is in units of 0.01 ms */
}

static inline uint64_t timeout_ns(unsigned t)
{
	if (!t)
		return 0; /* infinite */
	uint64_t ns = 4096ull << t;  /* 4.096 us * 2^t */
	if (ns < 1000000ull)
		ns = 1000000ull;
	return ns;
}

/* Maps a NAK syndrome to the requester's completion status. */
static inline enum ibv_wc_status syn_status(int syn)
{
	return syn == SYN_NAK_ACCESS ? IBV_WC_REM_ACCESS_ERR :
	       syn == SYN_NAK_INV ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_REM_OP_ERR;
}

#endif
