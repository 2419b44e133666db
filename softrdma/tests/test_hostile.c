/*
 * Hostile input on softrdma's packet path: the test plays a QP's connected peer
 * itself (a UDP socket whose port makes up the peer QPN) and forges datagrams in
 * softrdma's wire format: responses and ACK/NAK/RNR outside the outstanding PSN
 * window or from an address other than the peer's, requests with unknown or
 * out-of-sequence opcodes, truncated datagrams, a reserved QPN byte, and a
 * fixed-seed stream of random datagrams. Every QP must ignore what it should
 * ignore, NAK what the IB spec NAKs, and keep working. Bounded by alarm().
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <poll.h>
#include <sched.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdint.h>
#include "testlib.h"
#include "../src/wire.h"

#define SQ_PSN 0x200
#define RQ_PSN 0x300
#define BUFSZ (1 << 20)
/* How long a step waits for what must come (a packet, an ACK, a completion): it returns as soon as
 * that comes, so only a failure waits this long. A loaded machine can hold the agent or this
 * thread off a CPU for much of a second; a short deadline there fails a QP that is working.
 * The windows in which nothing may come stay short (20-30 ms): they cannot fail by waiting. */
#define WAIT_MS 10000

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_mr *mr;
static unsigned char *buf;
static union ibv_gid gid;

/* ---------------------------------------------------------------- sockets */

struct sock { int fd; uint16_t port; };

static struct sock udp_sock(void)
{
	struct sock s = { socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), 0 };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	if (s.fd < 0 || bind(s.fd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(s.fd, (struct sockaddr *)&a, &l)) {
		perror("udp socket");
		exit(2);
	}
	s.port = ntohs(a.sin_port);
	return s;
}

static uint32_t qpn_of(struct sock s) { return ((uint32_t)s.port << 8) | 1; }

/* Sends header + payload from s to the QP numbered qpn (its UDP port is qpn >> 8). */
static void tx_raw(struct sock s, uint32_t qpn, const void *data, size_t len)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons((uint16_t)((qpn & 0xffffff) >> 8)),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (sendto(s.fd, data, len, 0, (struct sockaddr *)&to, sizeof(to)) != (ssize_t)len)
		perror("sendto");
}

static void tx(struct sock s, uint32_t qpn, struct pkt_hdr *h, const void *payload, uint32_t len)
{
	unsigned char b[sizeof(*h) + 4096];
	h->magic = PKT_MAGIC;
	memcpy(b, h, sizeof(*h));
	if (len)
		memcpy(b + sizeof(*h), payload, len);
	tx_raw(s, qpn, b, sizeof(*h) + len);
}

/* Receives one packet within ms; its payload length, or -1. */
static int rx(struct sock s, struct pkt_hdr *h, unsigned char *payload, int ms)
{
	struct pollfd p = { s.fd, POLLIN, 0 };
	if (poll(&p, 1, ms) != 1)
		return -1;
	unsigned char b[sizeof(*h) + 4096];
	ssize_t n = recv(s.fd, b, sizeof(b), 0);
	if (n < (ssize_t)sizeof(*h))
		return -1;
	memcpy(h, b, sizeof(*h));
	if (payload)
		memcpy(payload, b + sizeof(*h), (size_t)n - sizeof(*h));
	return (int)(n - (ssize_t)sizeof(*h));
}

static void drain(struct sock s)
{
	struct pkt_hdr h;
	while (rx(s, &h, NULL, 0) >= 0)
		;
}

static struct pkt_hdr hdr(int op, unsigned flags, uint32_t dqpn, uint32_t sqpn, uint32_t psn)
{
	struct pkt_hdr h;
	memset(&h, 0, sizeof(h));
	h.op = (uint8_t)op;
	h.flags = (uint8_t)flags;
	h.dqpn = dqpn;
	h.sqpn = sqpn;
	h.psn = psn;
	return h;
}

static struct pkt_hdr ack(int syn, uint32_t dqpn, uint32_t sqpn, uint32_t psn, uint32_t extra)
{
	struct pkt_hdr h = hdr(OP_ACK, 0, dqpn, sqpn, psn);
	h.syndrome = (uint8_t)syn;
	h.imm = extra;
	return h;
}

/* ---------------------------------------------------------------- verbs */

static struct ibv_qp *rc_qp(uint32_t dqpn, enum ibv_qp_state upto, uint8_t rnr_retry)
{
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
						.max_recv_sge = 1 } };
	struct ibv_qp *q = ibv_create_qp(pd, &ia);
	/* timeout 14 (~67 ms): 7 retries outlast a busy machine's scheduling gaps */
	struct t_conn c = { .access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
			    .rq_psn = RQ_PSN, .sq_psn = SQ_PSN, .rd_atomic = 4, .min_rnr_timer = 12,
			    .timeout = 14, .retry_cnt = 7, .rnr_retry = rnr_retry };
	const char *step = "qp setup";
	if (!q || t_qp_up(q, upto, dqpn, &gid, &c, &step)) {
		fprintf(stderr, "%s failed\n", step);
		exit(2);
	}
	return q;
}

static enum ibv_qp_state qp_state(struct ibv_qp *q)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	if (ibv_query_qp(q, &a, IBV_QP_STATE, &ia))
		return (enum ibv_qp_state)-1;
	return a.qp_state;
}

static int post(struct ibv_qp *q, enum ibv_wr_opcode op, uint32_t off, uint32_t len, uint64_t id)
{
	struct ibv_sge s = { (uintptr_t)buf + off, len, mr->lkey };
	struct ibv_send_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	w.wr.rdma.remote_addr = 0x10000;
	w.wr.rdma.rkey = 0x1234;
	return ibv_post_send(q, &w, &bad);
}

static int post_recv(struct ibv_qp *q, uint32_t off, uint32_t len, uint64_t id)
{
	struct ibv_sge s = { (uintptr_t)buf + off, len, mr->lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bad;
	return ibv_post_recv(q, &w, &bad);
}

/* Polls for up to ms of the clock (not a count of sleeps: on a loaded machine each 100 us sleep
 * can last milliseconds, and a 30 ms window that became seconds held the SEND the test's peer had
 * not acknowledged past the QP's retry budget, ~0.5 s, so the QP failed); the number of
 * completions read into wc. */
static int poll_for(struct ibv_wc *wc, int max, int ms)
{
	int n = 0;
	int64_t end = now_ms() + ms;
	for (;;) {
		n += ibv_poll_cq(cq, max - n, wc + n);
		if (n >= max || now_ms() >= end)
			return n;
		usleep(100);
	}
}

static void drain_cq(void)
{
	struct ibv_wc wc[16];
	while (ibv_poll_cq(cq, 16, wc) > 0)
		;
}

/* The next request packet from the QP under test (ACKs the test does not want are skipped). */
static int rx_req(struct sock peer, struct pkt_hdr *h, unsigned char *payload, int ms)
{
	for (int i = 0; i < 8; i++) {
		int n = rx(peer, h, payload, ms);
		if (n < 0 || h->op != OP_ACK)
			return n;
	}
	return -1;
}

/* The peer ACKs psn: the SEND wr_id completes with SUCCESS. */
static void peer_acks(struct sock peer, struct ibv_qp *q, uint32_t psn, uint64_t wr_id, const char *what)
{
	struct pkt_hdr h = ack(SYN_ACK, q->qp_num, qpn_of(peer), psn, 0);
	tx(peer, q->qp_num, &h, NULL, 0);
	struct ibv_wc wc = { 0 };
	CHECK(poll_for(&wc, 1, WAIT_MS) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == wr_id,
	      "%s (status %d, wr_id %llu)", what, wc.status, (unsigned long long)wc.wr_id);
}

/* ---------------------------------------------------------------- requester: responses */

/* A NAK from an address other than the peer's is ignored, whatever its PSN. */
static void t_nak_wrong_source(void)
{
	drain_cq();
	struct sock peer = udp_sock(), evil = udp_sock();
	struct ibv_qp *q = rc_qp(qpn_of(peer), IBV_QPS_RTS, 7);
	struct pkt_hdr h = ack(SYN_NAK_INV, q->qp_num, qpn_of(peer), SQ_PSN, 0);
	tx(evil, q->qp_num, &h, NULL, 0);
	usleep(20000);
	CHECK_EQ(qp_state(q), IBV_QPS_RTS, "idle QP after a NAK from a stranger");
	CHECK_EQ(post(q, IBV_WR_SEND, 0, 64, 1), 0, "post send");
	struct pkt_hdr r;
	CHECK(rx_req(peer, &r, NULL, WAIT_MS) == 64 && r.op == OP_SEND && r.psn == SQ_PSN, "peer gets the SEND");
	tx(evil, q->qp_num, &h, NULL, 0);
	struct ibv_wc wc;
	CHECK_EQ(poll_for(&wc, 1, 30), 0, "no completion from a stranger's NAK");
	CHECK_EQ(qp_state(q), IBV_QPS_RTS, "busy QP after a NAK from a stranger");
	peer_acks(peer, q, SQ_PSN, 1, "the peer's ACK completes the SEND");
	ibv_destroy_qp(q);
	close(peer.fd);
	close(evil.fd);
}

/* A NAK to a QP whose requester is not running (INIT, RTR) is ignored. */
static void t_nak_not_rts(void)
{
	drain_cq();
	struct sock peer = udp_sock();
	struct ibv_qp *qi = rc_qp(qpn_of(peer), IBV_QPS_INIT, 7);
	struct ibv_qp *qr = rc_qp(qpn_of(peer), IBV_QPS_RTR, 7);
	for (int syn = SYN_RNR; syn <= SYN_NAK_OP; syn++) {
		struct pkt_hdr h = ack(syn, qi->qp_num, qpn_of(peer), 0, 0);
		tx(peer, qi->qp_num, &h, NULL, 0);
		h = ack(syn, qr->qp_num, qpn_of(peer), SQ_PSN, 0);
		tx(peer, qr->qp_num, &h, NULL, 0);
	}
	usleep(20000);
	CHECK_EQ(qp_state(qi), IBV_QPS_INIT, "INIT QP after NAKs");
	CHECK_EQ(qp_state(qr), IBV_QPS_RTR, "RTR QP after NAKs from its peer");
	ibv_destroy_qp(qi);
	ibv_destroy_qp(qr);
	close(peer.fd);
}

/*
 * The peer's own ACK/NAK with a PSN never sent is invalid: it neither completes
 * the outstanding SEND nor moves the unacknowledged PSN, so the lost SEND is
 * retransmitted and completes once really acknowledged.
 */
static void t_ack_beyond_sent(void)
{
	drain_cq();
	struct sock peer = udp_sock();
	struct ibv_qp *q = rc_qp(qpn_of(peer), IBV_QPS_RTS, 7);
	CHECK_EQ(post(q, IBV_WR_SEND, 0, 64, 7), 0, "post send");
	struct pkt_hdr r, h;
	CHECK(rx_req(peer, &r, NULL, WAIT_MS) == 64 && r.psn == SQ_PSN, "first transmission");
	h = ack(SYN_ACK, q->qp_num, qpn_of(peer), SQ_PSN + 5, 0);
	tx(peer, q->qp_num, &h, NULL, 0);
	h = ack(SYN_NAK_SEQ, q->qp_num, qpn_of(peer), SQ_PSN + 3, 0);
	tx(peer, q->qp_num, &h, NULL, 0);
	h = ack(SYN_NAK_INV, q->qp_num, qpn_of(peer), SQ_PSN + 1, 0);
	tx(peer, q->qp_num, &h, NULL, 0);
	struct ibv_wc wc;
	CHECK_EQ(poll_for(&wc, 1, 30), 0, "no completion from ACK/NAKs beyond the sent PSNs");
	CHECK_EQ(qp_state(q), IBV_QPS_RTS, "QP after NAKs beyond the sent PSNs");
	/* the "lost" SEND comes again at its own PSN after the timeout */
	CHECK(rx_req(peer, &r, NULL, WAIT_MS) == 64 && r.psn == SQ_PSN, "retransmission at psn %#x", r.psn);
	peer_acks(peer, q, SQ_PSN, 7, "SEND completes on the real ACK");
	/* the next SEND gets the next PSN and is acknowledged normally */
	drain(peer); /* retransmissions of the first that were on their way */
	CHECK_EQ(post(q, IBV_WR_SEND, 0, 16, 8), 0, "post second send");
	CHECK(rx_req(peer, &r, NULL, WAIT_MS) == 16 && r.psn == SQ_PSN + 1, "second SEND at psn %#x", r.psn);
	peer_acks(peer, q, SQ_PSN + 1, 8, "second SEND done");
	ibv_destroy_qp(q);
	close(peer.fd);
}

/* An RC QP in RTS connected to the peer socket, with a 64-byte SEND (wr_id id) posted
 * and received by the peer. */
static struct ibv_qp *sending_qp(struct sock peer, uint8_t rnr_retry, uint64_t id)
{
	struct ibv_qp *q = rc_qp(qpn_of(peer), IBV_QPS_RTS, rnr_retry);
	struct pkt_hdr r;
	CHECK_EQ(post(q, IBV_WR_SEND, 0, 64, id), 0, "post send");
	CHECK(rx_req(peer, &r, NULL, WAIT_MS) == 64, "peer gets the SEND");
	return q;
}

/* A blind ACK naming the right QPNs and PSN, from another address, completes nothing. */
static void t_blind_ack(void)
{
	drain_cq();
	struct sock peer = udp_sock(), evil = udp_sock();
	struct ibv_qp *q = sending_qp(peer, 7, 3);
	struct pkt_hdr h = ack(SYN_ACK, q->qp_num, qpn_of(peer), SQ_PSN, 0);
	tx(evil, q->qp_num, &h, NULL, 0);
	struct ibv_wc wc;
	CHECK_EQ(poll_for(&wc, 1, 30), 0, "no completion from a blind ACK");
	peer_acks(peer, q, SQ_PSN, 3, "real ACK completes");
	ibv_destroy_qp(q);
	close(peer.fd);
	close(evil.fd);
}

/* RNR NAKs: a stranger's is ignored (rnr_retry 0 would fail the SEND at once); the
 * peer's repeated RNR for the PSN already waited on counts once. */
static void t_rnr(void)
{
	drain_cq();
	struct sock peer = udp_sock(), evil = udp_sock();
	struct ibv_qp *q = sending_qp(peer, 0, 4);
	struct pkt_hdr r, h = ack(SYN_RNR, q->qp_num, qpn_of(peer), SQ_PSN, 20);
	tx(evil, q->qp_num, &h, NULL, 0);
	usleep(10000);
	h = ack(SYN_ACK, q->qp_num, qpn_of(peer), SQ_PSN, 0);
	tx(peer, q->qp_num, &h, NULL, 0);
	struct ibv_wc wc;
	CHECK(poll_for(&wc, 1, WAIT_MS) == 1 && wc.status == IBV_WC_SUCCESS,
	      "a stranger's RNR NAK is ignored (status %d)", wc.status);
	ibv_destroy_qp(q);

	drain(peer);
	q = sending_qp(peer, 1, 5);
	h = ack(SYN_RNR, q->qp_num, qpn_of(peer), SQ_PSN, 20); /* ~10 ms */
	tx(peer, q->qp_num, &h, NULL, 0);
	tx(peer, q->qp_num, &h, NULL, 0);
	CHECK(rx_req(peer, &r, NULL, WAIT_MS) == 64 && r.psn == SQ_PSN, "resent after the RNR wait");
	peer_acks(peer, q, SQ_PSN, 5, "a repeated RNR NAK for the PSN waited on counts once");
	ibv_destroy_qp(q);
	close(peer.fd);
	close(evil.fd);
}

/*
 * An RNR NAK and then an ACK for the PSN it named (the peer took another copy of the request
 * once a receive was posted, e.g. a duplicate): the ACK completes the SEND at once, although
 * the requester had rewound its queue to resend it after the RNR wait, and the queue goes on
 * (softrdma once kept the SEND, counted the PSN as acknowledged and stopped its timer: the
 * SEND never completed and nothing posted later was sent).
 */
static void t_rnr_then_ack(void)
{
	drain_cq();
	struct sock peer = udp_sock();
	struct ibv_qp *q = sending_qp(peer, 7, 6);
	struct pkt_hdr r, h = ack(SYN_RNR, q->qp_num, qpn_of(peer), SQ_PSN, 31); /* ~491 ms */
	tx(peer, q->qp_num, &h, NULL, 0);
	usleep(10000);
	h = ack(SYN_ACK, q->qp_num, qpn_of(peer), SQ_PSN, 0);
	tx(peer, q->qp_num, &h, NULL, 0);
	struct ibv_wc wc = { 0 };
	CHECK(poll_for(&wc, 1, 300) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 6,
	      "the ACK after an RNR NAK completes the SEND before the RNR wait ends (status %d)", wc.status);
	CHECK_EQ(post(q, IBV_WR_SEND, 0, 32, 7), 0, "post a second send");
	int n = rx_req(peer, &r, NULL, 300);
	CHECK(n == 32 && r.psn == SQ_PSN + 1, "the next SEND goes out at once (length %d, psn %#x)", n, r.psn);
	peer_acks(peer, q, SQ_PSN + 1, 7, "the next SEND completes");
	CHECK_EQ(rx_req(peer, &r, NULL, 600), -1, "the first SEND is not resent after the RNR wait");
	CHECK_EQ(qp_state(q), IBV_QPS_RTS, "QP after the RNR NAK and the ACK");
	ibv_destroy_qp(q);
	drain(peer);
	close(peer.fd);
}

/* READ responses: a stranger's, one of the wrong kind and one outside the window are
 * ignored; the peer's right one fills the buffer. */
static void t_read_resp(void)
{
	drain_cq();
	struct sock peer = udp_sock(), evil = udp_sock();
	struct ibv_qp *q = rc_qp(qpn_of(peer), IBV_QPS_RTS, 7);
	memset(buf, 0, 64);
	CHECK_EQ(post(q, IBV_WR_RDMA_READ, 0, 64, 9), 0, "post read");
	struct pkt_hdr r;
	CHECK(rx_req(peer, &r, NULL, WAIT_MS) == 0 && r.op == OP_READ_REQ && r.len == 64, "peer gets the READ");
	unsigned char bad[64], good[64];
	memset(bad, 0xee, sizeof(bad));
	memset(good, 0x5a, sizeof(good));
	struct pkt_hdr h = hdr(OP_READ_RESP, F_FIRST | F_LAST, q->qp_num, qpn_of(peer), SQ_PSN);
	h.len = 64;
	tx(evil, q->qp_num, &h, bad, 64);
	struct pkt_hdr a = hdr(OP_ATOMIC_RESP, F_FIRST | F_LAST, q->qp_num, qpn_of(peer), SQ_PSN);
	a.cmp = 0xeeeeeeeeeeeeeeeeull;
	tx(peer, q->qp_num, &a, NULL, 0);
	struct pkt_hdr o = h;
	o.psn = SQ_PSN + 1;
	tx(peer, q->qp_num, &o, bad, 64);
	struct ibv_wc wc;
	CHECK_EQ(poll_for(&wc, 1, 30), 0, "no completion from forged READ responses");
	tx(peer, q->qp_num, &h, good, 64);
	CHECK(poll_for(&wc, 1, WAIT_MS) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 9, "READ completes");
	CHECK(!memcmp(buf, good, 64), "READ data is the peer's");
	ibv_destroy_qp(q);
	close(peer.fd);
	close(evil.fd);
}

/*
 * A READ answer with a gap (response 1 of 4 lost): the requester re-requests from
 * the first missing response at once, not only after its timeout, which would
 * re-request the whole chunk from its first PSN; a second response past the gap
 * does not re-request again. The re-answer completes the READ with the peer's data.
 */
static void t_read_gap(void)
{
	drain_cq();
	struct sock peer = udp_sock();
	struct ibv_qp *q = rc_qp(qpn_of(peer), IBV_QPS_RTS, 7);
	unsigned char data[4096];
	for (int i = 0; i < 4096; i++)
		data[i] = (unsigned char)(i * 7 + 3);
	memset(buf, 0, 4096);
	CHECK_EQ(post(q, IBV_WR_RDMA_READ, 0, 4096, 11), 0, "post read");
	struct pkt_hdr r;
	CHECK(rx_req(peer, &r, NULL, WAIT_MS) == 0 && r.op == OP_READ_REQ && r.psn == SQ_PSN && r.len == 4096,
	      "peer gets the READ");
	for (uint32_t k = 0; k < 4; k++) {
		if (k == 1)
			continue; /* lost */
		struct pkt_hdr h = hdr(OP_READ_RESP, k == 0 ? F_FIRST : k == 3 ? F_LAST : 0, q->qp_num,
				       qpn_of(peer), SQ_PSN + k);
		h.len = 1024;
		tx(peer, q->qp_num, &h, data + k * 1024, 1024);
	}
	/* the first request after the gap names the missing response, whatever the timing */
	CHECK(rx_req(peer, &r, NULL, WAIT_MS) == 0 && r.op == OP_READ_REQ && r.psn == SQ_PSN + 1 &&
	      r.va == 0x10000 + 1024 && r.len == 3072,
	      "re-request from the missing response (psn %#x, va %#llx, len %u)", r.psn,
	      (unsigned long long)r.va, r.len);
	struct pkt_hdr again = hdr(OP_READ_RESP, F_LAST, q->qp_num, qpn_of(peer), SQ_PSN + 3);
	again.len = 1024;
	tx(peer, q->qp_num, &again, data + 3072, 1024); /* still past the gap */
	usleep(5000);
	for (uint32_t k = 1; k < 4; k++) {
		struct pkt_hdr h = hdr(OP_READ_RESP, k == 1 ? F_FIRST : k == 3 ? F_LAST : 0, q->qp_num,
				       qpn_of(peer), SQ_PSN + k);
		h.len = 1024;
		tx(peer, q->qp_num, &h, data + k * 1024, 1024);
	}
	struct ibv_wc wc;
	CHECK(poll_for(&wc, 1, WAIT_MS) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 11,
	      "READ with a gap completes (status %d)", wc.status);
	CHECK(!memcmp(buf, data, 4096), "READ data after the re-request");
	/* what else the requester sent: retransmissions on its timeout (from the chunk's
	 * first PSN) may come on a slow machine; a second re-request for the gap may not */
	int extra = 0;
	while (rx(peer, &r, NULL, 0) >= 0)
		if (r.op == OP_READ_REQ && r.psn != SQ_PSN)
			extra++;
	CHECK_EQ(extra, 0, "re-requests beyond the one per gap");
	ibv_destroy_qp(q);
	close(peer.fd);
}

/*
 * Go-back-N after a sequence NAK rewinds where the requester resends from, not what
 * it has sent: an ACK for a packet sent before the rewind (past the NAK's PSN) is
 * still inside the window and completes the WRITE without waiting for a timeout.
 */
static void t_ack_after_go_back(void)
{
	drain_cq();
	struct sock peer = udp_sock();
	struct ibv_qp *q = rc_qp(qpn_of(peer), IBV_QPS_RTS, 7);
	CHECK_EQ(post(q, IBV_WR_RDMA_WRITE, 0, 4096, 12), 0, "post write");
	struct pkt_hdr r;
	int got = 0;
	for (int k = 0; k < 4; k++)
		got += rx_req(peer, &r, NULL, WAIT_MS) == 1024 && r.op == OP_WRITE && r.psn == SQ_PSN + (uint32_t)k;
	CHECK_EQ(got, 4, "four WRITE packets");
	struct pkt_hdr h = ack(SYN_NAK_SEQ, q->qp_num, qpn_of(peer), SQ_PSN + 2, 0);
	tx(peer, q->qp_num, &h, NULL, 0);
	CHECK(rx_req(peer, &r, NULL, WAIT_MS) == 1024 && r.op == OP_WRITE && r.psn == SQ_PSN + 2,
	      "resent from the NAK's PSN (psn %#x)", r.psn);
	/* the ACK the peer had already queued for the first transmission's last packet */
	h = ack(SYN_ACK, q->qp_num, qpn_of(peer), SQ_PSN + 3, 0);
	tx(peer, q->qp_num, &h, NULL, 0);
	struct ibv_wc wc;
	CHECK(poll_for(&wc, 1, WAIT_MS) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 12,
	      "an ACK past the rewind point completes the WRITE (status %d)", wc.status);
	CHECK_EQ(qp_state(q), IBV_QPS_RTS, "QP after go-back and ACK");
	ibv_destroy_qp(q);
	drain(peer);
	close(peer.fd);
}

/* ---------------------------------------------------------------- responder: requests */

/* A responder QP connected to the test's peer socket, with two 4 KiB receives posted. */
static struct ibv_qp *responder(struct sock peer)
{
	drain_cq();
	drain(peer);
	struct ibv_qp *q = rc_qp(qpn_of(peer), IBV_QPS_RTS, 7);
	if (post_recv(q, 65536, 4096, 1) || post_recv(q, 65536 + 4096, 4096, 2)) {
		fprintf(stderr, "post_recv failed\n");
		exit(2);
	}
	return q;
}

/* The next ACK/NAK the responder sends to the peer within ms; -1 for none. */
static int rx_ack(struct sock peer, uint32_t *psn, int ms)
{
	struct pkt_hdr h;
	for (int i = 0; i < 8; i++) {
		if (rx(peer, &h, NULL, ms) < 0)
			return -1;
		if (h.op == OP_ACK) {
			*psn = h.psn;
			return h.syndrome;
		}
	}
	return -1;
}

static void send_req(struct sock from, struct ibv_qp *q, struct sock peer, int op, unsigned flags,
		     uint32_t psn, const void *payload, uint32_t len)
{
	struct pkt_hdr h = hdr(op, flags, q->qp_num, qpn_of(peer), psn);
	h.len = len;
	h.total = len;
	tx(from, q->qp_num, &h, payload, len);
}

/* After an invalid request: the peer got NAK invalid-request for psn, the QP is in ERR,
 * and both receive WQEs came back (flushed), none with SUCCESS. */
static void expect_invalid_request(struct sock peer, struct ibv_qp *q, uint32_t psn, const char *what)
{
	uint32_t got = 0;
	int syn = rx_ack(peer, &got, WAIT_MS);
	CHECK(syn == SYN_NAK_INV && got == psn, "%s: NAK invalid request for %#x (syndrome %d psn %#x)",
	      what, psn, syn, got);
	CHECK_EQ(qp_state(q), IBV_QPS_ERR, what);
	struct ibv_wc wc[4];
	int n = poll_for(wc, 2, WAIT_MS);
	CHECK(n == 2 && wc[0].wr_id == 1 && wc[1].wr_id == 2 && wc[0].status != IBV_WC_SUCCESS &&
	      wc[1].status != IBV_WC_SUCCESS, "%s: both receive WQEs complete in error (%d)", what, n);
}

/* Every thread of this process onto one CPU (set != NULL), or back to the mask saved (NULL). */
static void pin_threads(const cpu_set_t *set)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return;
	for (struct dirent *e; (e = readdir(d));) {
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid > 0)
			sched_setaffinity(tid, sizeof(*set), set);
	}
	closedir(d);
}

/*
 * A QP moved to ERR while its responder is between the ACK of a SEND and the SEND's receive
 * completion (softrdma writes the completion after the ACK, as hardware acknowledges on
 * placement): the SEND's completion still comes before the flushes of the receives posted
 * after it, since a receive queue completes in order. An application that got the ACK and
 * disconnected must not make the peer see a flush before the message (a channel's FIN).
 * The race is made likely, not certain: every thread shares one CPU, so the test's thread,
 * woken by the ACK, tends to run before the agent that sent it writes the completion.
 */
static void t_flush_after_ack_keeps_order(void)
{
	cpu_set_t saved, one;
	CPU_ZERO(&saved);
	if (sched_getaffinity(0, sizeof(saved), &saved))
		return;
	CPU_ZERO(&one);
	CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
	struct sock peer = udp_sock();
	unsigned char msg[16];
	t_fill(msg, sizeof(msg), 17);
	int tries = 200, overtaken = 0, done = 0;
	for (int i = 0; i < tries; i++) {
		struct ibv_qp *q = responder(peer);
		pin_threads(&one);
		send_req(peer, q, peer, OP_SEND, F_FIRST | F_LAST, RQ_PSN, msg, sizeof(msg));
		uint32_t psn = 0;
		int syn = rx_ack(peer, &psn, WAIT_MS);
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
		int mrc = ibv_modify_qp(q, &a, IBV_QP_STATE);
		struct ibv_wc wc[2];
		int n = poll_for(wc, 2, WAIT_MS);
		if (syn != SYN_ACK || mrc || n != 2) {
			CHECK(0, "try %d: ACK (syndrome %d), modify to ERR (%d), two completions (%d)", i, syn, mrc, n);
			ibv_destroy_qp(q);
			break;
		}
		if (wc[0].wr_id != 1 || wc[0].status != IBV_WC_SUCCESS)
			overtaken++;
		done++;
		ibv_destroy_qp(q);
	}
	pin_threads(&saved);
	CHECK(overtaken == 0, "the SEND's completion came after a flush of a later receive in %d of %d tries",
	      overtaken, done);
	close(peer.fd);
}

/*
 * A multi-packet SEND in progress (its first packet placed into receive 1) when the QP moves
 * to ERR: the receive the responder holds for it completes with WR_FLUSH_ERR, before receive 2,
 * each once. No packet of that SEND is accepted in ERR, so a flush that looked only at the
 * posted receives would never complete receive 1. Both ways into ERR: ibv_modify_qp, and the
 * QP's own requester failing (its SEND NAKed with a remote access error).
 */
static void t_err_flushes_send_in_progress(void)
{
	struct sock peer = udp_sock();
	unsigned char msg[1024];
	t_fill(msg, sizeof(msg), 23);
	for (int how = 0; how < 2; how++) {
		const char *what = how ? "requester failure" : "ibv_modify_qp to ERR";
		struct ibv_qp *q = responder(peer);
		send_req(peer, q, peer, OP_SEND, F_FIRST | F_ACKREQ, RQ_PSN, msg, sizeof(msg));
		uint32_t psn = 0;
		int syn = rx_ack(peer, &psn, WAIT_MS);
		CHECK(syn == SYN_ACK && psn == RQ_PSN, "%s: first packet of the SEND placed (syndrome %d psn %#x)",
		      what, syn, psn);
		int want = 2;
		if (!how) {
			struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
			CHECK_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), 0, "modify to ERR");
		} else {
			CHECK_EQ(post(q, IBV_WR_SEND, 0, 64, 7), 0, "post SEND");
			struct pkt_hdr h;
			CHECK(rx_req(peer, &h, NULL, WAIT_MS) >= 0 && h.op == OP_SEND && h.psn == SQ_PSN,
			      "%s: the QP's SEND arrives", what);
			struct pkt_hdr nak = ack(SYN_NAK_ACCESS, q->qp_num, qpn_of(peer), SQ_PSN, 0);
			tx(peer, q->qp_num, &nak, NULL, 0);
			want = 3;
		}
		struct ibv_wc wc[4];
		int n = poll_for(wc, want, WAIT_MS);
		n += poll_for(wc + n, 4 - n, 50); /* nothing more */
		int r = 0;
		uint64_t rid[4];
		enum ibv_wc_status rst[4];
		bool send_ok = !how;
		for (int i = 0; i < n; i++) {
			if (wc[i].wr_id == 7)
				send_ok = wc[i].status == IBV_WC_REM_ACCESS_ERR;
			else {
				rid[r] = wc[i].wr_id;
				rst[r++] = wc[i].status;
			}
		}
		CHECK(n == want && r == 2 && rid[0] == 1 && rid[1] == 2 && rst[0] == IBV_WC_WR_FLUSH_ERR &&
		      rst[1] == IBV_WC_WR_FLUSH_ERR && send_ok,
		      "%s: %d completions; receives 1 and 2 flushed in order, once each (%d receive completions, "
		      "first %llu), the SEND with REM_ACCESS_ERR", what, n, r, r ? (unsigned long long)rid[0] : 0ull);
		CHECK_EQ(qp_state(q), IBV_QPS_ERR, what);
		ibv_destroy_qp(q);
	}
	close(peer.fd);
}

/* An unknown opcode is dropped and does not take the PSN: the SEND at that PSN arrives. */
static void t_unknown_opcode(void)
{
	struct sock peer = udp_sock();
	struct ibv_qp *q = responder(peer);
	unsigned char msg[16];
	t_fill(msg, sizeof(msg), 11);
	send_req(peer, q, peer, 0x2a, F_FIRST | F_LAST, RQ_PSN, NULL, 0);
	send_req(peer, q, peer, 0, F_FIRST | F_LAST, RQ_PSN, NULL, 0);
	send_req(peer, q, peer, OP_SEND, F_FIRST | F_LAST, RQ_PSN, msg, sizeof(msg));
	uint32_t psn = 0;
	int syn = rx_ack(peer, &psn, WAIT_MS);
	CHECK(syn == SYN_ACK && psn == RQ_PSN, "SEND after unknown opcodes ACKed (syndrome %d psn %#x)", syn, psn);
	struct ibv_wc wc;
	CHECK(poll_for(&wc, 1, WAIT_MS) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1 &&
	      wc.byte_len == sizeof(msg), "SEND after unknown opcodes delivered (status %d)", wc.status);
	CHECK(!memcmp(buf + 65536, msg, sizeof(msg)), "SEND data");
	CHECK_EQ(qp_state(q), IBV_QPS_RTS, "QP after unknown opcodes");
	ibv_destroy_qp(q);
	close(peer.fd);
}

/* RC opcode sequence errors are invalid requests, and the PSN is not consumed. */
static void t_sequence(void)
{
	struct sock peer = udp_sock();
	unsigned char msg[1024];
	t_fill(msg, sizeof(msg), 12);

	struct ibv_qp *q = responder(peer);
	send_req(peer, q, peer, OP_SEND, 0, RQ_PSN, msg, 64); /* a middle packet, no first */
	expect_invalid_request(peer, q, RQ_PSN, "stray SEND middle");
	ibv_destroy_qp(q);

	q = responder(peer);
	send_req(peer, q, peer, OP_SEND, F_LAST, RQ_PSN, msg, 64); /* a last packet, no first */
	expect_invalid_request(peer, q, RQ_PSN, "stray SEND last");
	ibv_destroy_qp(q);

	q = responder(peer);
	send_req(peer, q, peer, OP_SEND, F_FIRST, RQ_PSN, msg, sizeof(msg));
	send_req(peer, q, peer, OP_SEND, F_FIRST, RQ_PSN + 1, msg, sizeof(msg));
	expect_invalid_request(peer, q, RQ_PSN + 1, "second SEND first");
	ibv_destroy_qp(q);

	q = responder(peer);
	send_req(peer, q, peer, OP_SEND, F_FIRST, RQ_PSN, msg, sizeof(msg));
	struct pkt_hdr h = hdr(OP_READ_REQ, F_FIRST | F_LAST, q->qp_num, qpn_of(peer), RQ_PSN + 1);
	h.rkey = mr->rkey;
	h.va = (uintptr_t)buf;
	h.len = 64;
	tx(peer, q->qp_num, &h, NULL, 0);
	expect_invalid_request(peer, q, RQ_PSN + 1, "READ inside a SEND");
	ibv_destroy_qp(q);

	q = responder(peer);
	memset(buf + 4096, 0, 64);
	h = hdr(OP_WRITE, 0, q->qp_num, qpn_of(peer), RQ_PSN);
	h.rkey = mr->rkey;
	h.va = (uintptr_t)buf + 4096;
	h.len = h.total = 64;
	tx(peer, q->qp_num, &h, msg, 64);
	expect_invalid_request(peer, q, RQ_PSN, "stray WRITE middle");
	static const unsigned char zero[64];
	CHECK(!memcmp(buf + 4096, zero, 64), "a stray WRITE middle writes nothing");
	ibv_destroy_qp(q);

	/* a multi-packet SEND whose packets come in order is still fine */
	q = responder(peer);
	send_req(peer, q, peer, OP_SEND, F_FIRST, RQ_PSN, msg, sizeof(msg));
	send_req(peer, q, peer, OP_SEND, 0, RQ_PSN + 1, msg, sizeof(msg));
	send_req(peer, q, peer, OP_SEND, F_LAST, RQ_PSN + 2, msg, 100);
	uint32_t psn = 0;
	CHECK(rx_ack(peer, &psn, WAIT_MS) == SYN_ACK && psn == RQ_PSN + 2, "3-packet SEND ACKed (psn %#x)", psn);
	struct ibv_wc wc;
	CHECK(poll_for(&wc, 1, WAIT_MS) == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 2148,
	      "3-packet SEND delivered (status %d, %u bytes)", wc.status, wc.byte_len);
	ibv_destroy_qp(q);
	close(peer.fd);
}

/* ---------------------------------------------------------------- malformed datagrams */

/* Truncated datagrams, reserved QPN/PSN bytes and lengths that disagree with the header
 * are dropped: the real SEND at the same PSN after them is the one delivered. */
static void t_malformed(void)
{
	drain_cq();
	struct sock peer = udp_sock();
	struct ibv_qp *q = responder(peer);
	unsigned char msg[16];
	t_fill(msg, sizeof(msg), 13);
	struct ibv_wc wc;
	uint32_t psn = 0;

	/* a datagram larger than any packet, cut to the receive buffer */
	static unsigned char big[sizeof(struct pkt_hdr) + 4096 + 64];
	struct pkt_hdr h = hdr(OP_SEND, F_FIRST | F_LAST, q->qp_num, qpn_of(peer), RQ_PSN);
	h.len = h.total = 4096; /* what survives a truncation to the largest packet */
	h.magic = PKT_MAGIC;
	memcpy(big, &h, sizeof(h));
	tx_raw(peer, q->qp_num, big, sizeof(big));
	send_req(peer, q, peer, OP_SEND, F_FIRST | F_LAST, RQ_PSN, msg, sizeof(msg));
	CHECK(poll_for(&wc, 1, WAIT_MS) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1 &&
	      wc.byte_len == sizeof(msg), "a truncated datagram is dropped (delivered %u bytes)", wc.byte_len);
	CHECK(!memcmp(buf + 65536, msg, sizeof(msg)), "the real SEND's data");
	CHECK(rx_ack(peer, &psn, WAIT_MS) == SYN_ACK && psn == RQ_PSN, "and ACKed (psn %#x)", psn);

	/* reserved top bytes of the QPNs and the PSN, a length the payload does not have */
	unsigned char junk[32];
	memset(junk, 0xee, sizeof(junk));
	struct pkt_hdr r = hdr(OP_SEND, F_FIRST | F_LAST, q->qp_num | 0x5a000000u, qpn_of(peer), RQ_PSN + 1);
	r.len = r.total = sizeof(junk);
	tx(peer, q->qp_num, &r, junk, sizeof(junk));
	r = hdr(OP_SEND, F_FIRST | F_LAST, q->qp_num, qpn_of(peer) | 0x01000000u, RQ_PSN + 1);
	r.len = r.total = sizeof(junk);
	tx(peer, q->qp_num, &r, junk, sizeof(junk));
	r = hdr(OP_SEND, F_FIRST | F_LAST, q->qp_num, qpn_of(peer), (RQ_PSN + 1) | 0x7f000000u);
	r.len = r.total = sizeof(junk);
	tx(peer, q->qp_num, &r, junk, sizeof(junk));
	r = hdr(OP_SEND, F_FIRST | F_LAST, q->qp_num, qpn_of(peer), RQ_PSN + 1);
	r.len = r.total = sizeof(junk) + 1; /* says more than it carries */
	tx(peer, q->qp_num, &r, junk, sizeof(junk));
	t_fill(msg, sizeof(msg), 14);
	send_req(peer, q, peer, OP_SEND, F_FIRST | F_LAST, RQ_PSN + 1, msg, sizeof(msg));
	CHECK(poll_for(&wc, 1, WAIT_MS) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2 &&
	      wc.byte_len == sizeof(msg), "reserved bytes set: dropped (delivered %u bytes)", wc.byte_len);
	CHECK(!memcmp(buf + 65536 + 4096, msg, sizeof(msg)), "the second real SEND's data");
	CHECK(rx_ack(peer, &psn, WAIT_MS) == SYN_ACK && psn == RQ_PSN + 1, "and ACKed (psn %#x)", psn);
	CHECK_EQ(qp_state(q), IBV_QPS_RTS, "QP after malformed datagrams");
	ibv_destroy_qp(q);
	close(peer.fd);
}

/* ---------------------------------------------------------------- memory keys */

/* The first MR of a fresh process: its rkey, or 0 when registration fails. */
static uint32_t first_rkey_in_child(void)
{
	int fd[2];
	if (pipe(fd))
		return 0;
	pid_t pid = fork();
	if (pid == 0) {
		uint32_t k = 0;
		struct ibv_device **l = ibv_get_device_list(NULL);
		struct ibv_context *c = l && l[0] ? ibv_open_device(l[0]) : NULL;
		struct ibv_pd *p = c ? ibv_alloc_pd(c) : NULL;
		static char area[4096];
		struct ibv_mr *m = p ? ibv_reg_mr(p, area, sizeof(area), IBV_ACCESS_LOCAL_WRITE |
						  IBV_ACCESS_REMOTE_WRITE) : NULL;
		if (m)
			k = m->rkey;
		_exit(write(fd[1], &k, 4) == 4 ? 0 : 1);
	}
	uint32_t k = 0;
	if (read(fd[0], &k, 4) != 4)
		k = 0;
	waitpid(pid, NULL, 0);
	close(fd[0]);
	close(fd[1]);
	return k;
}

/* rkeys are not predictable: the first MR of two fresh processes gets different keys
 * (not the 0x100 every process used to start with). */
static void t_rkeys(void)
{
	uint32_t a = first_rkey_in_child(), b = first_rkey_in_child();
	CHECK(a && b, "MR registration in fresh processes (%#x, %#x)", a, b);
	CHECK(a != b, "first rkeys of two processes differ (%#x, %#x)", a, b);
	CHECK(a != 0x100 && b != 0x100, "first rkey is not 0x100 (%#x, %#x)", a, b);
}

/* ---------------------------------------------------------------- random datagrams */

static uint64_t rng = 0x5eed5eed5eedull; /* fixed seed: every run forges the same stream */

static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* One random datagram for qp: random opcode, flags, keys, lengths, sometimes a reserved
 * byte, a short or long datagram or another protocol; psn as given. */
static void forge(struct sock from, uint32_t qpn, uint32_t peer_qpn, uint32_t psn)
{
	struct pkt_hdr h = hdr((int)(rnd() % 12), rnd() & 0xff, qpn, peer_qpn, psn);
	h.syndrome = (uint8_t)(rnd() % 8);
	h.imm = rnd();
	h.rkey = rnd() % 4 ? rnd() : mr->rkey;
	h.va = rnd() % 2 ? (uintptr_t)buf + rnd() % BUFSZ : ((uint64_t)rnd() << 32 | rnd());
	h.cmp = rnd();
	h.swap = rnd();
	uint32_t len = rnd() % 3 ? rnd() % 1100 : 0;
	h.len = rnd() % 8 ? len : rnd();
	h.total = rnd() % 2 ? len : rnd();
	if (rnd() % 16 == 0)
		h.dqpn |= rnd() << 24;
	unsigned char b[sizeof(h) + 1100];
	h.magic = rnd() % 32 ? PKT_MAGIC : rnd();
	memcpy(b, &h, sizeof(h));
	for (uint32_t i = 0; i < len; i++)
		b[sizeof(h) + i] = (unsigned char)rnd();
	size_t n = sizeof(h) + len;
	if (rnd() % 16 == 0)
		n = rnd() % sizeof(h); /* shorter than a header */
	tx_raw(from, qpn, b, n);
}

/*
 * A responder and a requester with a SEND outstanding take a fixed-seed stream of
 * random datagrams: from a stranger at any PSN, and from the peer at PSNs no request
 * or response may have now. Neither QP changes state or completes anything; after
 * the stream both still work.
 */
static void t_fuzz(void)
{
	struct sock peer = udp_sock(), evil = udp_sock();
	struct ibv_qp *q = responder(peer);
	for (int i = 0; i < 3000; i++) {
		if (i % 2) {
			forge(evil, q->qp_num, qpn_of(peer), (RQ_PSN + rnd() % 9 - 4) & SRD_HDR_PSN_MASK);
		} else {
			uint32_t off = 1 + rnd() % 300;
			forge(peer, q->qp_num, qpn_of(peer), (rnd() % 2 ? RQ_PSN + off : RQ_PSN - off) & SRD_HDR_PSN_MASK);
		}
		if (i % 64 == 0)
			drain(peer); /* NAKs and duplicate ACKs for the forged requests */
	}
	usleep(50000);
	struct ibv_wc wc;
	CHECK_EQ(poll_for(&wc, 1, 20), 0, "no completion from random datagrams");
	CHECK_EQ(qp_state(q), IBV_QPS_RTS, "responder after random datagrams");
	drain(peer);
	unsigned char msg[100];
	t_fill(msg, sizeof(msg), 15);
	send_req(peer, q, peer, OP_SEND, F_FIRST | F_LAST, RQ_PSN, msg, sizeof(msg));
	CHECK(poll_for(&wc, 1, WAIT_MS) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1 &&
	      wc.byte_len == sizeof(msg), "a real SEND after random datagrams (status %d)", wc.status);
	CHECK(!memcmp(buf + 65536, msg, sizeof(msg)), "its data");
	ibv_destroy_qp(q);

	drain_cq();
	q = rc_qp(qpn_of(peer), IBV_QPS_RTS, 7);
	drain(peer);
	CHECK_EQ(post(q, IBV_WR_SEND, 0, 64, 6), 0, "post send");
	struct pkt_hdr r;
	CHECK(rx_req(peer, &r, NULL, WAIT_MS) == 64, "peer gets the SEND");
	for (int i = 0; i < 500; i++) {
		if (i % 2)
			forge(evil, q->qp_num, qpn_of(peer), (SQ_PSN + rnd() % 9 - 4) & SRD_HDR_PSN_MASK);
		else
			forge(peer, q->qp_num, qpn_of(peer), (SQ_PSN + 1 + rnd() % 300) & SRD_HDR_PSN_MASK);
	}
	CHECK_EQ(poll_for(&wc, 1, 20), 0, "requester: no completion from random datagrams");
	CHECK_EQ(qp_state(q), IBV_QPS_RTS, "requester after random datagrams");
	peer_acks(peer, q, SQ_PSN, 6, "requester: the real ACK completes the SEND");
	ibv_destroy_qp(q);
	close(peer.fd);
	close(evil.fd);
}

/* ---------------------------------------------------------------- socket binding */

/* Counts the UDP sockets of this host bound to port (all, and those on a wildcard address). */
static void bound_sockets(uint16_t port, int *all, int *wild)
{
	*all = *wild = 0;
	const char *files[] = { "/proc/net/udp", "/proc/net/udp6" };
	for (int f = 0; f < 2; f++) {
		FILE *fp = fopen(files[f], "r");
		if (!fp)
			continue;
		char line[512], addr[64];
		unsigned p;
		while (fgets(line, sizeof(line), fp)) {
			if (sscanf(line, " %*d: %63[0-9A-Fa-f]:%x", addr, &p) != 2 || p != port)
				continue;
			(*all)++;
			if (strspn(addr, "0") == strlen(addr))
				(*wild)++;
		}
		fclose(fp);
	}
}

/* A QP's UDP sockets listen on the loopback addresses (and, with SOFTRDMA_REMOTE, the
 * device's), never on every interface's (a wildcard bind). */
static void t_bound(void)
{
	struct sock peer = udp_sock();
	struct ibv_qp *q = rc_qp(qpn_of(peer), IBV_QPS_INIT, 7);
	int all, wild;
	bound_sockets((uint16_t)(q->qp_num >> 8), &all, &wild);
	CHECK(all > 0, "the QP's port %u has sockets (%d)", q->qp_num >> 8, all);
	CHECK_EQ(wild, 0, "sockets of the QP's port bound to a wildcard address");
	ibv_destroy_qp(q);
	close(peer.fd);
}

/* ---------------------------------------------------------------- remote access opt-in */

/* A non-loopback IPv4 address of this host (network order), or 0 when there is none. */
static in_addr_t host_v4(void)
{
	struct ifaddrs *ifs = NULL, *i;
	in_addr_t a = 0;
	if (getifaddrs(&ifs))
		return 0;
	for (i = ifs; i && !a; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
		    !(i->ifa_flags & IFF_LOOPBACK))
			a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
	freeifaddrs(ifs);
	return a;
}

/* Sockets of this host bound to port on an address that is neither loopback nor the wildcard. */
static int sockets_off_loopback(uint16_t port)
{
	int n = 0;
	const char *files[] = { "/proc/net/udp", "/proc/net/udp6" };
	for (int f = 0; f < 2; f++) {
		FILE *fp = fopen(files[f], "r");
		if (!fp)
			continue;
		char line[512], addr[64];
		unsigned p;
		while (fgets(line, sizeof(line), fp)) {
			if (sscanf(line, " %*d: %63[0-9A-Fa-f]:%x", addr, &p) != 2 || p != port)
				continue;
			size_t l = strlen(addr);
			bool lo = (l >= 8 && !strcasecmp(addr + l - 8, "0100007F")) ||
				  !strcmp(addr, "00000000000000000000000001000000");
			if (!lo && strspn(addr, "0") != l)
				n++;
		}
		fclose(fp);
	}
	return n;
}

/*
 * In a fresh process (softrdma reads SOFTRDMA_REMOTE once): a UD QP, which takes
 * datagrams from anyone its q_key admits. Without the opt-in its sockets are on
 * loopback only and a datagram from this host's non-loopback address ext is dropped
 * (one from loopback arrives); with SOFTRDMA_REMOTE=1 its port is bound on the
 * device's addresses too and ext's datagram arrives. Exit status: failed checks.
 */
static int remote_child(bool remote, in_addr_t ext)
{
	if (remote)
		setenv("SOFTRDMA_REMOTE", "1", 1);
	else
		unsetenv("SOFTRDMA_REMOTE");
	t_pass = t_fail = 0;
	const char *mode = remote ? "SOFTRDMA_REMOTE=1" : "default";
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *c = l && l[0] ? ibv_open_device(l[0]) : NULL;
	struct ibv_pd *p = c ? ibv_alloc_pd(c) : NULL;
	struct ibv_cq *q = c ? ibv_create_cq(c, 16, NULL, NULL, 0) : NULL;
	static unsigned char area[4096];
	struct ibv_mr *m = p ? ibv_reg_mr(p, area, sizeof(area), IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_qp_init_attr ia = { .send_cq = q, .recv_cq = q, .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
						.max_recv_sge = 1 } };
	struct ibv_qp *ud = m && q ? ibv_create_qp(p, &ia) : NULL;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 0x11111111 };
	if (!ud || ibv_modify_qp(ud, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		return 100;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(ud, &a, IBV_QP_STATE))
		return 100;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(ud, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return 100;
	uint16_t port = (uint16_t)(ud->qp_num >> 8);
	int off = sockets_off_loopback(port);
	if (remote)
		CHECK(off > 0, "%s: the QP's port %u is bound on the device's addresses (%d)", mode, port, off);
	else
		CHECK_EQ(off, 0, "default: sockets of the QP's port off loopback");
	for (int r = 0; r < 2; r++) {
		struct ibv_sge sg = { (uintptr_t)area + r * 1024, 1024, m->lkey };
		struct ibv_recv_wr w = { .wr_id = (uint64_t)r, .sg_list = &sg, .num_sge = 1 }, *bad;
		if (ibv_post_recv(ud, &w, &bad))
			return 100;
	}
	struct sock from_ext = { socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), 0 };
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = ext };
	if (from_ext.fd < 0 || bind(from_ext.fd, (struct sockaddr *)&sa, sizeof(sa)))
		return 100;
	struct sock from_lo = udp_sock();
	unsigned char msg[32];
	memset(msg, 0x42, sizeof(msg));
	struct pkt_hdr h = hdr(OP_UD_SEND, F_FIRST | F_LAST, ud->qp_num, 0x4201, 0);
	h.rkey = 0x11111111;
	h.len = sizeof(msg);
	tx(from_ext, ud->qp_num, &h, msg, sizeof(msg));
	struct ibv_wc wc;
	int n = 0;
	for (int i = 0; i < 1000 && !n; i++) {
		n = ibv_poll_cq(q, 1, &wc);
		if (!n)
			usleep(100);
	}
	if (remote)
		CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 40 + sizeof(msg),
		      "%s: a datagram from this host's non-loopback address arrives (%d, status %d)", mode, n,
		      n ? (int)wc.status : -1);
	else
		CHECK_EQ(n, 0, "default: completions from a datagram of a non-loopback address");
	tx(from_lo, ud->qp_num, &h, msg, sizeof(msg));
	n = 0;
	for (int i = 0; i < 10000 && !n; i++) {
		n = ibv_poll_cq(q, 1, &wc);
		if (!n)
			usleep(100);
	}
	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 40 + sizeof(msg),
	      "%s: a datagram from loopback arrives (%d)", mode, n);
	close(from_ext.fd);
	close(from_lo.fd);
	return t_fail;
}

/* Remote access is opt-in: SOFTRDMA_REMOTE=1 or loopback only. */
static void t_remote(void)
{
	in_addr_t ext = host_v4();
	if (!ext) {
		printf("remote access: this host has no non-loopback IPv4 address, not checked\n");
		return;
	}
	for (int remote = 0; remote < 2; remote++) {
		pid_t pid = fork();
		if (pid == 0)
			_exit(remote_child(remote != 0, ext));
		int st = 0;
		waitpid(pid, &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "remote access %s: child status %#x",
		      remote ? "SOFTRDMA_REMOTE=1" : "default", st);
	}
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(120); /* bounded: a hang is a failure */
	t_rkeys(); /* first: its children must be the first MR users of their process */
	t_remote(); /* so are these: softrdma reads SOFTRDMA_REMOTE once per process */
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l || n < 1 || !(ctx = ibv_open_device(l[0]))) {
		fprintf(stderr, "no RDMA device\n");
		return 2;
	}
	ibv_free_device_list(l);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	buf = aligned_alloc(4096, BUFSZ);
	mr = ibv_reg_mr(pd, buf, BUFSZ, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!pd || !cq || !mr || ibv_query_gid(ctx, 1, 1, &gid)) {
		fprintf(stderr, "setup failed\n");
		return 2;
	}
	t_nak_wrong_source();
	t_nak_not_rts();
	t_ack_beyond_sent();
	t_blind_ack();
	t_rnr();
	t_rnr_then_ack();
	t_read_resp();
	t_read_gap();
	t_ack_after_go_back();
	t_flush_after_ack_keeps_order();
	t_err_flushes_send_in_progress();
	t_unknown_opcode();
	t_sequence();
	t_malformed();
	t_fuzz();
	t_bound();
	return t_report();
}
