/*
 * XRC across processes: a target (XRC_RECV) QP of process A delivers into an XRC SRQ that
 * process B (same XRC domain, the same file) created. B's SRQ takes the WQE, B's PD checks the
 * keys, B's CQ gets the completion (the TGT QP's number, opcode, immediate, byte count) and B's
 * context the SRQ limit event; the requester in A sees its completions only once B placed the
 * data. A multi-packet SEND, SEND with immediate, WRITE with immediate and fetch-and-add, all
 * byte-exact. The bad flows, each through a fresh INI/TGT pair: B's SRQ empty (RNR, then
 * IBV_WC_RNR_RETRY_EXC_ERR with rnr_retry 0), an SRQ of B in another domain
 * (IBV_WC_REM_ACCESS_ERR, A's TGT QP to ERR with IBV_EVENT_QP_ACCESS_ERR), an SRQ number of B's
 * that names no SRQ, an SRQ B destroys while a send to it is RNR-retried and after, and B
 * exiting likewise (IBV_WC_REM_INV_REQ_ERR, bounded in time).
 * Then both ways at once: B's TGT QP relays into A's SRQ while A's relays into B's. Last,
 * ibv_open_qp in B of A's TGT QP: query, the QP's async event on B's handle, modify through it,
 * A's destroy EBUSY until B closes the handle.
 * The processes are forked before either touches the device and talk through pipes.
 * While both hold the domain, the files they share (the domain's registry, B's ring) are in
 * SOFTRDMA_SHM_DIR (default /dev/shm), and none of them in /dev/shm when that is another
 * directory (tests/shm.sh runs this with one of its own and checks it is empty after).
 */
#include <infiniband/verbs.h>
#include "testlib.h"
#include <fcntl.h>
#include <poll.h>
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;
static char dir[64];
static int to_b[2], to_a[2]; /* pipes: A -> B, B -> A */

struct binfo {
	uint32_t srqn, srqn_other, srqn_gone, tgt_qpn, srqn_b2;
	uint64_t addr, word;
	uint32_t rkey;
};

static void put(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		_exit(5);
}

static int get(int fd, void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		if (poll(&pf, 1, 30000) <= 0)
			return -1;
		ssize_t r = read(fd, (char *)p + got, n - got);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static struct ibv_xrcd *xrcd_open(const char *name)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDONLY | O_CREAT, 0600);
	struct ibv_xrcd_init_attr a = { .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
					.fd = fd, .oflags = O_CREAT };
	struct ibv_xrcd *x = ibv_open_xrcd(ctx, &a);
	close(fd);
	return x;
}

static struct ibv_srq *xsrq(struct ibv_xrcd *x, struct ibv_cq *cq, uint32_t *n)
{
	struct ibv_srq_init_attr_ex a = { .attr = { .max_wr = 8, .max_sge = 2 },
					  .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
						       IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
					  .srq_type = IBV_SRQT_XRC, .pd = pd, .xrcd = x, .cq = cq };
	struct ibv_srq *s = ibv_create_srq_ex(ctx, &a);
	if (s)
		ibv_get_srq_num(s, n);
	return s;
}

static const struct t_conn conn = { .access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC, .rq_psn = 7,
				    .sq_psn = 7, .rd_atomic = 4, .min_rnr_timer = 1, .hop_limit = 64,
				    .timeout = 14, .retry_cnt = 7, .rnr_retry = 7 };

/* A connected INI/TGT pair of this process in domain x; rnr_retry for the INI. */
static void pair(struct ibv_xrcd *x, struct ibv_cq *scq, int rnr_retry, struct ibv_qp **t, struct ibv_qp **i)
{
	struct ibv_qp_init_attr_ex ta = { .qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = x };
	struct ibv_qp_init_attr_ex ia = { .qp_type = IBV_QPT_XRC_SEND, .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
					  .send_cq = scq, .cap = { .max_send_wr = 16, .max_send_sge = 1 } };
	*t = ibv_create_qp_ex(ctx, &ta);
	*i = ibv_create_qp_ex(ctx, &ia);
	CHECK(*t && *i, "TGT and INI QPs (errno %d)", errno);
	struct t_conn c = conn;
	c.rnr_retry = (uint8_t)rnr_retry;
	CHECK_EQ(t_qp_up(*i, IBV_QPS_RTS, (*t)->qp_num, &gid, &c, NULL), 0, "INI to RTS");
	CHECK_EQ(t_qp_up(*t, IBV_QPS_RTS, (*i)->qp_num, &gid, &c, NULL), 0, "TGT to RTS");
}

static int post(struct ibv_qp *i, uint64_t wr_id, enum ibv_wr_opcode op, void *buf, uint32_t len, uint32_t lkey,
		uint32_t srqn, uint32_t imm, uint64_t raddr, uint32_t rkey, uint64_t add)
{
	struct ibv_sge s = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
	struct ibv_send_wr w = { .wr_id = wr_id, .sg_list = &s, .num_sge = 1, .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(imm) }, *bad;
	w.qp_type.xrc.remote_srqn = srqn;
	t_wr_remote(&w, raddr, rkey, add, 0);
	return ibv_post_send(i, &w, &bad);
}

/* Waits up to ~10 s for an async event of type on fd's context; true with *ev when it came. */
static bool async_wait(enum ibv_event_type type, struct ibv_async_event *ev)
{
	for (int k = 0; k < 100; k++) {
		struct pollfd pf = { .fd = ctx->async_fd, .events = POLLIN };
		if (poll(&pf, 1, 100) > 0 && ibv_get_async_event(ctx, ev) == 0) {
			ibv_ack_async_event(ev);
			if (ev->event_type == type)
				return true;
		}
	}
	return false;
}

static struct ibv_cq *g_cq;
static unsigned char *g_buf;
static struct ibv_mr *g_mr;

/* Posts n receives of 8 KiB (two SGEs of 4 KiB) on s, wr_id base + k, at g_buf + off + k * 8 KiB. */
static void post_recvs(struct ibv_srq *s, int n, uint64_t base, size_t off)
{
	for (int k = 0; k < n; k++) {
		unsigned char *p = g_buf + off + (size_t)k * 8192;
		struct ibv_sge sg[2] = { { .addr = (uintptr_t)p, .length = 4096, .lkey = g_mr->lkey },
					 { .addr = (uintptr_t)p + 4096, .length = 4096, .lkey = g_mr->lkey } };
		struct ibv_recv_wr w = { .wr_id = base + (uint64_t)k, .sg_list = sg, .num_sge = 2 }, *bad;
		CHECK_EQ(ibv_post_srq_recv(s, &w, &bad), 0, "post_srq_recv");
	}
}

/* The files of this run that softrdma shares between processes, named as docs/softrdma.md
 * says: domain "d"'s registry, softrdma-xrcd2-<euid>-<dev>-<ino> of the domain's file, and B's
 * ring, softrdma-<euid>-<port> (the port: the upper bits of an SRQ number of B's; none with
 * SOFTRDMA_SHM=0). Each is a file of mode 0600 in SOFTRDMA_SHM_DIR (default /dev/shm), and
 * none of them is in /dev/shm when that is another directory. */
static void shared_files(uint32_t b_srqn)
{
	const char *sd = getenv("SOFTRDMA_SHM_DIR"), *shm = getenv("SOFTRDMA_SHM");
	if (!sd)
		sd = "/dev/shm";
	char path[4200], names[2][96];
	struct stat st;
	snprintf(path, sizeof(path), "%s/d", dir);
	CHECK(!stat(path, &st), "the domain's file %s", path);
	snprintf(names[0], sizeof(names[0]), "softrdma-xrcd2-%u-%llx-%llx", (unsigned)geteuid(),
		 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	snprintf(names[1], sizeof(names[1]), "softrdma-%u-%u", (unsigned)geteuid(), b_srqn >> 8);
	int n = shm && !strcmp(shm, "0") ? 1 : 2;
	for (int k = 0; k < n; k++) {
		snprintf(path, sizeof(path), "%s/%s", sd, names[k]);
		CHECK(!lstat(path, &st) && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600 &&
		      st.st_uid == geteuid(), "shared file %s: in SOFTRDMA_SHM_DIR, mode 0600 (errno %d)", path, errno);
		if (strcmp(sd, "/dev/shm")) {
			snprintf(path, sizeof(path), "/dev/shm/%s", names[k]);
			CHECK(lstat(path, &st) && errno == ENOENT, "shared file %s: none in /dev/shm", path);
		}
		printf("shared file %s/%s\n", sd, names[k]);
	}
}

/* ------------------------------------------------------------------ process B */

static int proc_b(void)
{
	ctx = t_open_dev();
	pd = ibv_alloc_pd(ctx);
	ibv_query_gid(ctx, 1, 1, &gid);
	struct ibv_xrcd *x = xrcd_open("d"), *y = xrcd_open("other");
	CHECK(x && y, "B: domains (errno %d)", errno);
	g_cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	size_t sz = 1 << 20;
	g_buf = calloc(1, sz);
	g_mr = ibv_reg_mr(pd, g_buf, sz, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	uint64_t *word = (uint64_t *)(g_buf + 200000);
	*word = 1000;
	struct binfo bi = { .addr = (uintptr_t)g_buf, .rkey = g_mr->rkey, .word = (uintptr_t)word };
	struct ibv_srq *s = xsrq(x, g_cq, &bi.srqn), *so = xsrq(y, g_cq, &bi.srqn_other),
		       *sg = xsrq(x, g_cq, &bi.srqn_gone);
	CHECK(s && so && sg, "B: XRC SRQs (errno %d)", errno);
	post_recvs(s, 3, 100, 0);
	struct ibv_srq_attr la = { .srq_limit = 3 };
	CHECK_EQ(ibv_modify_srq(s, &la, IBV_SRQ_LIMIT), 0, "B: arm the SRQ limit");
	/* for the last part: B's own TGT QP and INI QP, sending into A's SRQ through B's TGT */
	struct ibv_cq *scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_qp *bt, *bi_qp;
	pair(x, scq, 7, &bt, &bi_qp);
	bi.tgt_qpn = bt->qp_num;
	put(to_a[1], &bi, sizeof(bi));

	/* A's traffic is complete (A saw its send completions) */
	char cmd;
	CHECK(get(to_b[0], &cmd, 1) == 0 && cmd == 'c', "B: A's traffic done");
	struct ibv_wc wc;
	unsigned char want[8192];
	CHECK(t_wait_wc(g_cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 100 &&
	      wc.opcode == IBV_WC_RECV && wc.byte_len == 5000 && wc.wc_flags == 0 && wc.src_qp == 0,
	      "B: the 5000-byte SEND on B's CQ (status %d wr_id %llu op %d len %u flags %u)", wc.status,
	      (unsigned long long)wc.wr_id, wc.opcode, wc.byte_len, wc.wc_flags);
	uint32_t a_tgt = wc.qp_num;
	t_fill(want, 5000, 1);
	CHECK(!memcmp(g_buf, want, 5000), "B: the SEND's bytes, across both SGEs");
	CHECK(t_wait_wc(g_cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 101 &&
	      wc.opcode == IBV_WC_RECV && wc.byte_len == 100 && (wc.wc_flags & IBV_WC_WITH_IMM) &&
	      ntohl(wc.imm_data) == 0x12345678 && wc.qp_num == a_tgt,
	      "B: SEND with immediate (status %d len %u imm %x)", wc.status, wc.byte_len, ntohl(wc.imm_data));
	t_fill(want, 100, 2);
	CHECK(!memcmp(g_buf + 8192, want, 100), "B: its bytes");
	CHECK(t_wait_wc(g_cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 102 &&
	      wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.byte_len == 3000 && (wc.wc_flags & IBV_WC_WITH_IMM) &&
	      ntohl(wc.imm_data) == 0xabcdef && wc.qp_num == a_tgt,
	      "B: WRITE with immediate (status %d op %d len %u)", wc.status, wc.opcode, wc.byte_len);
	t_fill(want, 3000, 3);
	CHECK(!memcmp(g_buf + 65536, want, 3000), "B: the WRITE's bytes");
	CHECK_EQ(__atomic_load_n(word, __ATOMIC_ACQUIRE), 1005, "B: fetch-and-add applied once");
	CHECK_EQ(ibv_poll_cq(g_cq, 1, &wc), 0, "B: nothing else on B's CQ");
	struct ibv_async_event ev;
	CHECK(async_wait(IBV_EVENT_SRQ_LIMIT_REACHED, &ev) && ev.element.srq == s, "B: the SRQ limit event in B");
	char ok = t_fail ? 'F' : 'k';
	put(to_a[1], &ok, 1);

	/* destroy an SRQ, then check nothing landed anywhere */
	CHECK(get(to_b[0], &cmd, 1) == 0 && cmd == 'd', "B: destroy command");
	CHECK_EQ(ibv_destroy_srq(sg), 0, "B: destroy the SRQ");
	put(to_a[1], &cmd, 1);

	/* both ways at once: A's TGT relays into B's SRQ, B's TGT into A's SRQ */
	CHECK(get(to_b[0], &cmd, 1) == 0 && cmd == 'x', "B: cross command");
	uint32_t a_srqn;
	CHECK(get(to_b[0], &a_srqn, 4) == 0, "B: A's SRQ number");
	post_recvs(s, 8, 200, 16384);
	put(to_a[1], &cmd, 1);
	unsigned char *src = g_buf + 131072;
	t_fill(src, 2000, 9);
	for (int k = 0; k < 8; k++)
		CHECK_EQ(post(bi_qp, 300 + (uint64_t)k, IBV_WR_SEND, src, 2000, g_mr->lkey, a_srqn, 0, 0, 0, 0), 0,
			 "B: send to A's SRQ");
	for (int k = 0; k < 8; k++)
		CHECK(t_wait_wc(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 300 + (uint64_t)k,
		      "B: send %d to A's SRQ completes (status %d)", k, wc.status);
	t_fill(want, 3000, 8);
	for (int k = 0; k < 8; k++) {
		CHECK(t_wait_wc(g_cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 200 + (uint64_t)k &&
		      wc.byte_len == 3000 && wc.qp_num == a_tgt, "B: A's send %d in B's SRQ (status %d)", k, wc.status);
		CHECK(!memcmp(g_buf + 16384 + (size_t)k * 8192, want, 3000), "B: its bytes");
	}
	ok = t_fail ? 'F' : 'k';
	put(to_a[1], &ok, 1);

	/* a message of 98 packets (path MTU 1024): more than a relay holds behind itself */
	CHECK(get(to_b[0], &cmd, 1) == 0 && cmd == 'b', "B: big command");
	{
		struct ibv_sge sg = { .addr = (uintptr_t)g_buf + 524288, .length = 131072, .lkey = g_mr->lkey };
		struct ibv_recv_wr w = { .wr_id = 700, .sg_list = &sg, .num_sge = 1 }, *bad;
		CHECK_EQ(ibv_post_srq_recv(s, &w, &bad), 0, "B: a 128 KiB receive");
	}
	put(to_a[1], &cmd, 1);
	CHECK(get(to_b[0], &cmd, 1) == 0 && cmd == 'B', "B: big sent");
	{
		static unsigned char big[100000];
		t_fill(big, sizeof(big), 11);
		CHECK(t_wait_wc(g_cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 700 &&
		      wc.byte_len == sizeof(big) && wc.qp_num == a_tgt, "B: the 100000-byte SEND (status %d len %u)",
		      wc.status, wc.byte_len);
		CHECK(!memcmp(g_buf + 524288, big, sizeof(big)), "B: its bytes");
	}
	ok = t_fail ? 'F' : 'k';
	put(to_a[1], &ok, 1);

	/* ibv_open_qp of A's TGT QP: query, its async event here too, modify through the handle */
	uint32_t tqpn;
	CHECK(get(to_b[0], &cmd, 1) == 0 && cmd == 'o' && get(to_b[0], &tqpn, 4) == 0, "B: open command");
	struct ibv_qp_open_attr oa = { .comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE |
							IBV_QP_OPEN_ATTR_CONTEXT,
				       .qp_num = tqpn, .xrcd = x, .qp_type = IBV_QPT_XRC_RECV, .qp_context = &oa };
	struct ibv_qp *oq = ibv_open_qp(ctx, &oa);
	CHECK(oq != NULL, "B: ibv_open_qp of A's TGT QP (errno %d)", errno);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(oq && oq->qp_num == tqpn && oq->qp_type == IBV_QPT_XRC_RECV && oq->qp_context == &oa, "B: the handle");
	CHECK(oq && ibv_query_qp(oq, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_RTS &&
	      qa.dest_qp_num != 0 && qi.qp_type == IBV_QPT_XRC_RECV && qi.qp_context == &oa,
	      "B: query through the handle: RTS (state %d)", qa.qp_state);
	oa.qp_num = tqpn ^ 0x40;
	CHECK(!ibv_open_qp(ctx, &oa) && errno == EINVAL, "B: a number with no TGT QP: EINVAL (%d)", errno);
	oa.qp_num = tqpn;
	oa.xrcd = y;
	CHECK(!ibv_open_qp(ctx, &oa) && errno == EINVAL, "B: in another domain: EINVAL (%d)", errno);
	put(to_a[1], &cmd, 1);
	CHECK(get(to_b[0], &cmd, 1) == 0 && cmd == 'e', "B: event command");
	CHECK(async_wait(IBV_EVENT_QP_ACCESS_ERR, &ev) && ev.element.qp == oq, "B: the TGT QP's event on B's handle");
	CHECK(oq && ibv_query_qp(oq, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_ERR, "B: query: ERR");
	CHECK(oq && ibv_modify_qp(oq, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS }, IBV_QP_STATE) == EINVAL,
	      "B: ERR to RTS through the handle: EINVAL");
	CHECK(oq && ibv_modify_qp(oq, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RESET }, IBV_QP_STATE) == 0,
	      "B: modify to RESET through the handle");
	CHECK(oq && oq->state == IBV_QPS_RESET, "B: the handle's state");
	CHECK(oq && ibv_destroy_qp(oq) == 0, "B: close the handle");
	ok = t_fail ? 'F' : 'k';
	put(to_a[1], &ok, 1);
	CHECK(get(to_b[0], &cmd, 1) == 0 && cmd == 'q', "B: quit command");
	/* B exits without cleaning up: the domain's registry must forget it as its process dies */
	_exit(t_fail ? 1 : 0);
}

/* ------------------------------------------------------------------ process A */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A send on a fresh pair to srqn must fail with status; the TGT QP then holds the event.
 * during, when given, runs once the send is posted (and RNR-retried, with rnr_retry 7, while
 * the SRQ is empty). */
static void bad_flow(struct ibv_xrcd *x, struct ibv_cq *scq, uint32_t srqn, int rnr_retry,
		     enum ibv_wc_status status, enum ibv_event_type event, const char *what, void (*during)(void))
{
	struct ibv_qp *t, *i;
	pair(x, scq, rnr_retry, &t, &i);
	double t0 = now_s();
	CHECK_EQ(post(i, 77, IBV_WR_SEND, g_buf, 64, g_mr->lkey, srqn, 0, 0, 0, 0), 0, what);
	if (during) {
		struct timespec ts = { 0, 50000000 };
		nanosleep(&ts, NULL); /* the send is in RNR retries now */
		struct ibv_wc none;
		CHECK_EQ(ibv_poll_cq(scq, 1, &none), 0, "no completion while the SRQ is empty");
		during();
	}
	struct ibv_wc wc;
	CHECK(t_wait_wc(scq, &wc) == 1 && wc.wr_id == 77 && wc.status == status, "%s: status %d (want %d)", what,
	      wc.status, status);
	CHECK(now_s() - t0 < 5.0, "%s: answered in %.3f s", what, now_s() - t0);
	if ((int)event >= 0) {
		struct ibv_async_event ev;
		CHECK(async_wait(event, &ev) && ev.element.qp == t, "%s: event %d on A's TGT QP", what, event);
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qi;
		CHECK(ibv_query_qp(t, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_ERR,
		      "%s: A's TGT QP in ERR", what);
	}
	CHECK_EQ(ibv_destroy_qp(i), 0, "destroy INI");
	CHECK_EQ(ibv_destroy_qp(t), 0, "destroy TGT");
}

static pid_t g_b;

/* B destroys an SRQ (while A's send to it waits for a WQE) */
static void b_destroys(void)
{
	char cmd = 'd';
	put(to_b[1], &cmd, 1);
	CHECK(get(to_a[0], &cmd, 1) == 0 && cmd == 'd', "A: B destroyed its SRQ");
}

/* B exits, without cleaning up (while A's send to its SRQ waits for a WQE) */
static void b_exits(void)
{
	char cmd = 'q';
	put(to_b[1], &cmd, 1);
	int st;
	waitpid(g_b, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "B's checks (status %d)", st);
}

static void proc_a(pid_t b)
{
	g_b = b;
	ctx = t_open_dev();
	pd = ibv_alloc_pd(ctx);
	ibv_query_gid(ctx, 1, 1, &gid);
	struct ibv_xrcd *x = xrcd_open("d");
	CHECK(x != NULL, "A: domain (errno %d)", errno);
	struct ibv_cq *scq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	g_cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	size_t sz = 1 << 20;
	g_buf = calloc(1, sz);
	g_mr = ibv_reg_mr(pd, g_buf, sz, IBV_ACCESS_LOCAL_WRITE);
	struct binfo bi;
	CHECK(get(to_a[0], &bi, sizeof(bi)) == 0, "A: B's numbers");
	shared_files(bi.srqn);
	struct ibv_qp *t, *i;
	pair(x, scq, 7, &t, &i);

	/* the good flow: everything lands in B's SRQ through A's TGT QP */
	unsigned char *src = g_buf;
	t_fill(src, 5000, 1);
	t_fill(src + 8192, 100, 2);
	t_fill(src + 16384, 3000, 3);
	CHECK_EQ(post(i, 1, IBV_WR_SEND, src, 5000, g_mr->lkey, bi.srqn, 0, 0, 0, 0), 0, "SEND 5000");
	CHECK_EQ(post(i, 2, IBV_WR_SEND_WITH_IMM, src + 8192, 100, g_mr->lkey, bi.srqn, 0x12345678, 0, 0, 0), 0,
		 "SEND with immediate");
	CHECK_EQ(post(i, 3, IBV_WR_RDMA_WRITE_WITH_IMM, src + 16384, 3000, g_mr->lkey, bi.srqn, 0xabcdef,
		      bi.addr + 65536, bi.rkey, 0), 0, "WRITE with immediate");
	CHECK_EQ(post(i, 4, IBV_WR_ATOMIC_FETCH_AND_ADD, src + 32768, 8, g_mr->lkey, bi.srqn, 0, bi.word, bi.rkey, 5),
		 0, "fetch-and-add");
	struct ibv_wc wc;
	for (uint64_t k = 1; k <= 4; k++)
		CHECK(t_wait_wc(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == k,
		      "A: send completion %llu (status %d wr_id %llu)", (unsigned long long)k, wc.status,
		      (unsigned long long)wc.wr_id);
	uint64_t orig;
	memcpy(&orig, src + 32768, 8);
	CHECK_EQ(orig, 1000, "A: fetch-and-add's original value from B's memory");
	char cmd = 'c', ok = 0;
	put(to_b[1], &cmd, 1);
	CHECK(get(to_a[0], &ok, 1) == 0 && ok == 'k', "A: B's checks of its CQ, memory and limit event");

	/* B's SRQ is empty now: RNR NAKs, and with rnr_retry 0 the requester gives up */
	bad_flow(x, scq, bi.srqn, 0, IBV_WC_RNR_RETRY_EXC_ERR, (enum ibv_event_type)-1, "empty SRQ of B", NULL);
	bad_flow(x, scq, bi.srqn_other, 7, IBV_WC_REM_ACCESS_ERR, IBV_EVENT_QP_ACCESS_ERR, "B's SRQ of another domain",
		 NULL);
	bad_flow(x, scq, bi.srqn ^ 0x80, 7, IBV_WC_REM_INV_REQ_ERR, IBV_EVENT_QP_REQ_ERR, "a number of B's with no SRQ",
		 NULL);
	/* B destroys an SRQ while a send to it is RNR-retried, then one more send to it */
	bad_flow(x, scq, bi.srqn_gone, 7, IBV_WC_REM_INV_REQ_ERR, IBV_EVENT_QP_REQ_ERR, "an SRQ B destroys meanwhile",
		 b_destroys);
	bad_flow(x, scq, bi.srqn_gone, 7, IBV_WC_REM_INV_REQ_ERR, IBV_EVENT_QP_REQ_ERR, "an SRQ B destroyed", NULL);

	/* both ways at once, pipelined: 8 sends from each side, each relayed by the other's TGT */
	uint32_t a_srqn;
	struct ibv_srq *as = xsrq(x, g_cq, &a_srqn);
	CHECK(as != NULL, "A: an XRC SRQ (errno %d)", errno);
	post_recvs(as, 8, 400, 65536);
	cmd = 'x';
	put(to_b[1], &cmd, 1);
	put(to_b[1], &a_srqn, 4);
	CHECK(get(to_a[0], &cmd, 1) == 0 && cmd == 'x', "A: B ready");
	/* A's INI into B's SRQ through A's TGT, meanwhile B's INI into A's SRQ through B's TGT */
	t_fill(src + 40960, 3000, 8);
	for (int k = 0; k < 8; k++)
		CHECK_EQ(post(i, 500 + (uint64_t)k, IBV_WR_SEND, src + 40960, 3000, g_mr->lkey, bi.srqn, 0, 0, 0, 0), 0,
			 "A: send to B's SRQ");
	for (int k = 0; k < 8; k++)
		CHECK(t_wait_wc(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 500 + (uint64_t)k,
		      "A: send %d to B's SRQ completes (status %d)", k, wc.status);
	unsigned char want[2000];
	t_fill(want, 2000, 9);
	for (int k = 0; k < 8; k++) {
		CHECK(t_wait_wc(g_cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 400 + (uint64_t)k &&
		      wc.byte_len == 2000 && wc.qp_num == bi.tgt_qpn && wc.opcode == IBV_WC_RECV,
		      "A: B's send %d in A's SRQ (status %d)", k, wc.status);
		CHECK(!memcmp(g_buf + 65536 + (size_t)k * 8192, want, 2000), "A: its bytes");
	}
	CHECK(get(to_a[0], &ok, 1) == 0 && ok == 'k', "A: B's checks of the crossed traffic");

	/* 98 packets into B's SRQ: the relay holds 64 behind itself, the requester sends the rest
	 * again */
	cmd = 'b';
	put(to_b[1], &cmd, 1);
	CHECK(get(to_a[0], &cmd, 1) == 0 && cmd == 'b', "A: B posted the big receive");
	t_fill(g_buf + 262144, 100000, 11);
	CHECK_EQ(post(i, 650, IBV_WR_SEND, g_buf + 262144, 100000, g_mr->lkey, bi.srqn, 0, 0, 0, 0), 0, "A: big send");
	CHECK(t_wait_wc(scq, &wc) == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 650,
	      "A: the big send completes (status %d)", wc.status);
	cmd = 'B';
	put(to_b[1], &cmd, 1);
	CHECK(get(to_a[0], &ok, 1) == 0 && ok == 'k', "A: B's checks of the big message");

	/* B opens A's TGT QP: the QP stays while B's handle is open, its event reaches B, B resets it */
	cmd = 'o';
	put(to_b[1], &cmd, 1);
	put(to_b[1], &t->qp_num, 4);
	CHECK(get(to_a[0], &cmd, 1) == 0 && cmd == 'o', "A: B opened the TGT QP");
	int busy = ibv_destroy_qp(t);
	CHECK_EQ(busy, EBUSY, "A: destroy with B's handle open: EBUSY");
	if (!busy)
		t = NULL; /* (destroyed after all: not used again) */
	CHECK_EQ(post(i, 600, IBV_WR_SEND, src, 64, g_mr->lkey, bi.srqn_other, 0, 0, 0, 0), 0, "A: to another domain");
	CHECK(t_wait_wc(scq, &wc) == 1 && wc.wr_id == 600 && wc.status == IBV_WC_REM_ACCESS_ERR,
	      "A: IBV_WC_REM_ACCESS_ERR (status %d)", wc.status);
	struct ibv_async_event aev;
	CHECK(async_wait(IBV_EVENT_QP_ACCESS_ERR, &aev) && aev.element.qp == t, "A: the event on A's TGT QP");
	cmd = 'e';
	put(to_b[1], &cmd, 1);
	CHECK(get(to_a[0], &ok, 1) == 0 && ok == 'k', "A: B's checks through its handle");
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK(t && ibv_query_qp(t, &qa, IBV_QP_STATE, &qi) == 0 && qa.qp_state == IBV_QPS_RESET,
	      "A: B's modify reset A's TGT QP (state %d)", qa.qp_state);
	CHECK(t && ibv_destroy_qp(t) == 0, "A: destroy once B closed its handle");

	/* B exits (no cleanup) while a send to its (empty) SRQ is RNR-retried: an invalid request,
	 * soon; then once more to the SRQ of the process gone */
	bad_flow(x, scq, bi.srqn, 7, IBV_WC_REM_INV_REQ_ERR, IBV_EVENT_QP_REQ_ERR, "B exits meanwhile", b_exits);
	bad_flow(x, scq, bi.srqn, 7, IBV_WC_REM_INV_REQ_ERR, IBV_EVENT_QP_REQ_ERR, "the SRQ of a process gone", NULL);

	CHECK_EQ(ibv_destroy_qp(i), 0, "destroy INI");
	CHECK_EQ(ibv_destroy_srq(as), 0, "destroy A's SRQ");
	CHECK_EQ(ibv_close_xrcd(x), 0, "close the domain");
	ibv_dereg_mr(g_mr);
	free(g_buf);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(g_cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(dir, sizeof(dir), "/tmp/softrdma-xrcp.XXXXXX");
	if (!mkdtemp(dir) || pipe(to_b) || pipe(to_a)) {
		perror("setup");
		return 1;
	}
	/* B is forked before this process touches the device: each opens its own */
	pid_t b = fork();
	if (b == 0) {
		close(to_b[1]);
		close(to_a[0]);
		alarm(120);
		return proc_b();
	}
	close(to_b[0]);
	close(to_a[1]);
	alarm(120);
	proc_a(b);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd)) { /* best effort */ }
	return t_report();
}
