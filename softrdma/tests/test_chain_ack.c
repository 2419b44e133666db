/*
 * An unsignaled RDMA WRITE chained with a SEND behind it is acknowledged once, by the SEND's
 * ACK (cumulative): the requester marks the WRITE's last packet F_NOACK. A signaled WRITE keeps
 * its own ACK (its completion waits for none but its own). Across processes of this host (the
 * same-host rings: packets, not the in-process path), counted by the responder's SOFTRDMA_STATS
 * (every packet it sends is an ACK here: shm_tx + tx), and checked byte-exact: the WRITEs land,
 * the SENDs' receives complete with their bytes, every signaled request completes.
 * The peer is this program run again ("peer" and its pipe descriptors), with SOFTRDMA_STATS set
 * and its stderr in a file, so that its counters start at zero and are printed at its exit.
 */
#include <infiniband/verbs.h>
#include "testlib.h"
#include <stdlib.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHAINS 32           /* WRITE + SEND chains of each kind */
#define WBYTES 64           /* bytes of each WRITE, at offset i * WBYTES of the peer's buffer */
#define SBYTES 8            /* bytes of each SEND */
#define SEND_AREA 2 * CHAINS * WBYTES  /* where the peer's receive buffers start */

struct info { uint32_t qpn, psn, rkey; uint64_t addr; union ibv_gid gid; };

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	unsigned char *buf;
};

static void side_open(struct side *s)
{
	s->ctx = t_open_dev();
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 4 * CHAINS, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = { .send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 8, .max_recv_wr = 2 * CHAINS, .max_send_sge = 1,
						.max_recv_sge = 1 } };
	s->qp = ibv_create_qp(s->pd, &ia);
	s->buf = calloc(1, 8192);
	s->mr = ibv_reg_mr(s->pd, s->buf, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!s->pd || !s->cq || !s->qp || !s->buf || !s->mr) {
		fprintf(stderr, "resource setup failed\n");
		exit(1);
	}
}

static int side_connect(struct side *s, const struct info *me, const struct info *peer)
{
	struct t_conn c = { .access = IBV_ACCESS_REMOTE_WRITE, .rq_psn = peer->psn, .sq_psn = me->psn,
			    .rd_atomic = 1, .min_rnr_timer = 1, .hop_limit = 1, .timeout = 18,
			    .retry_cnt = 7, .rnr_retry = 7 };
	return t_qp_init(s->qp, &c) || t_qp_rtr(s->qp, peer->qpn, &peer->gid, &c) || t_qp_rts(s->qp, &c);
}

static struct info side_info(struct side *s, uint32_t psn)
{
	struct info i = { .qpn = s->qp->qp_num, .psn = psn, .rkey = s->mr->rkey, .addr = (uintptr_t)s->buf };
	ibv_query_gid(s->ctx, 1, 1, &i.gid);
	return i;
}

/* The pattern of chain i: its WRITE's bytes, then its SEND's. */
static void pattern(unsigned char *p, int i)
{
	t_fill(p, WBYTES + SBYTES, 77 + (unsigned)i);
}

/* The responder: connects, posts a receive per chain, and after the parent's 'D' checks every
 * receive and every WRITE's bytes, answers 1 when all were right, and exits (printing its stats). */
static int peer_main(int rd, int wr)
{
	struct side s;
	side_open(&s);
	struct info me = side_info(&s, 0x300), them;
	xwrite(wr, &me, sizeof(me));
	xread(rd, &them, sizeof(them));
	unsigned char ok = side_connect(&s, &me, &them) == 0;
	for (int i = 0; i < 2 * CHAINS && ok; i++) {
		struct ibv_sge sge = { (uintptr_t)(s.buf + SEND_AREA + i * SBYTES), SBYTES, s.mr->lkey };
		struct ibv_recv_wr r = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 }, *bad;
		ok = ibv_post_recv(s.qp, &r, &bad) == 0;
	}
	xwrite(wr, &ok, 1);
	unsigned char req = 0;
	xread(rd, &req, 1);
	ok = req == 'D';
	for (int i = 0; i < 2 * CHAINS && ok; i++) {
		struct ibv_wc wc;
		unsigned char want[WBYTES + SBYTES];
		pattern(want, i);
		ok = t_wait_wc(s.cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
		     wc.wr_id == (uint64_t)i && wc.byte_len == SBYTES &&
		     !memcmp(s.buf + SEND_AREA + i * SBYTES, want + WBYTES, SBYTES) &&
		     !memcmp(s.buf + i * WBYTES, want, WBYTES);
	}
	xwrite(wr, &ok, 1);
	exit(0);
}

/* The counter name of SOFTRDMA_STATS's line in text, or -1. */
static long stat_of(const char *text, const char *name)
{
	char key[32];
	snprintf(key, sizeof(key), " %s ", name);
	const char *p = strstr(text, key);
	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "peer"))
		return peer_main(atoi(argv[2]), atoi(argv[3]));
	if (getenv("SOFTRDMA_SHM") && !strcmp(getenv("SOFTRDMA_SHM"), "0")) {
		printf("0 passed, 0 failed (the same-host carrier is off)\n");
		return 0;
	}
	char errfile[] = "/tmp/softrdma-chain-ack.XXXXXX";
	int errfd = mkstemp(errfile);
	int to_peer[2], from_peer[2];
	if (errfd < 0 || pipe(to_peer) || pipe(from_peer))
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(errfd, 2);
		setenv("SOFTRDMA_STATS", "1", 1);
		char rd[16], wr[16];
		snprintf(rd, sizeof(rd), "%d", to_peer[0]);
		snprintf(wr, sizeof(wr), "%d", from_peer[1]);
		execl("/proc/self/exe", argv[0], "peer", rd, wr, (char *)NULL);
		_exit(3);
	}
	close(to_peer[0]);
	close(from_peer[1]);
	struct side s;
	side_open(&s);
	struct info peer, me = side_info(&s, 0x400);
	xread(from_peer[0], &peer, sizeof(peer));
	xwrite(to_peer[1], &me, sizeof(me));
	CHECK_EQ(side_connect(&s, &me, &peer), 0, "connect");
	unsigned char ok = 0;
	xread(from_peer[0], &ok, 1);
	CHECK_EQ(ok, 1, "the peer connected and posted its receives");
	/* chains 0..CHAINS-1: unsignaled WRITE + signaled SEND; then CHAINS more with the WRITE signaled */
	for (int i = 0; i < 2 * CHAINS; i++) {
		bool signaled_write = i >= CHAINS;
		unsigned char *p = s.buf + i * (WBYTES + SBYTES);
		pattern(p, i);
		struct ibv_sge ws = { (uintptr_t)p, WBYTES, s.mr->lkey };
		struct ibv_sge ss = { (uintptr_t)(p + WBYTES), SBYTES, s.mr->lkey };
		struct ibv_send_wr send = { .wr_id = 2000 + (uint64_t)i, .sg_list = &ss, .num_sge = 1,
					    .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
		struct ibv_send_wr write = { .wr_id = 1000 + (uint64_t)i, .next = &send, .sg_list = &ws, .num_sge = 1,
					     .opcode = IBV_WR_RDMA_WRITE,
					     .send_flags = signaled_write ? IBV_SEND_SIGNALED : 0 }, *bad;
		write.wr.rdma.remote_addr = peer.addr + (uint64_t)i * WBYTES;
		write.wr.rdma.rkey = peer.rkey;
		CHECK_EQ(ibv_post_send(s.qp, &write, &bad), 0, "post a WRITE and its SEND");
		/* each chain alone in the send queue: its ACKs are its own */
		for (int want = signaled_write ? 2 : 1, k = 0; k < want; k++) {
			struct ibv_wc wc;
			int n = t_wait_wc(s.cq, &wc);
			CHECK_EQ(n, 1, "a completion of the chain");
			if (n != 1)
				break;
			uint64_t id = signaled_write && k == 0 ? 1000 + (uint64_t)i : 2000 + (uint64_t)i;
			CHECK(wc.status == IBV_WC_SUCCESS && wc.wr_id == id, "chain %d: status %s, wr_id %llu (want %llu)",
			      i, ibv_wc_status_str(wc.status), (unsigned long long)wc.wr_id, (unsigned long long)id);
		}
	}
	xwrite(to_peer[1], "D", 1);
	ok = 0;
	xread(from_peer[0], &ok, 1);
	CHECK_EQ(ok, 1, "every WRITE landed and every SEND was received, byte-exact");
	int st = 0;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the peer exited cleanly (status %d)", st);
	char text[1024] = { 0 };
	ssize_t got = pread(errfd, text, sizeof(text) - 1, 0);
	close(errfd);
	unlink(errfile);
	long acks = stat_of(text, "shm_tx") + stat_of(text, "tx"), dups = stat_of(text, "dup_rx");
	CHECK(got > 0 && dups >= 0 && acks >= 0, "the peer's SOFTRDMA_STATS line: %s", text);
	/* one ACK per chain with the WRITE unsignaled, two with it signaled; a duplicate (a packet
	 * resent after a timeout on a starved machine) is acknowledged again */
	CHECK_EQ(acks - dups, CHAINS * 1 + CHAINS * 2, "ACKs the responder sent, less its duplicates");
	ibv_destroy_qp(s.qp);
	ibv_dereg_mr(s.mr);
	ibv_destroy_cq(s.cq);
	ibv_dealloc_pd(s.pd);
	ibv_close_device(s.ctx);
	free(s.buf);
	return t_report();
}
