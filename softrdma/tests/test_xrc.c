/*
 * XRC on softrdma: domains over a file (O_CREAT/O_EXCL across processes, close EBUSY), XRC
 * SRQs and their numbers, XRC_SEND -> XRC_RECV sends landing byte-exact in the SRQ each
 * names (completion on the SRQ's CQ), the wrong-domain and unknown-SRQ errors, ibv_open_qp,
 * the modify masks and the queues each type lacks. Run in-process and, in a child, over the
 * packet path (SOFTRDMA_FAULTS set, all probabilities zero). A process that exits without
 * closing its domain leaves no registry behind; with a
 * SOFTRDMA_SHM_DIR that cannot be used, no domain over a file opens.
 */
#include <infiniband/verbs.h>
#include "testlib.h"
#include <fcntl.h>
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

static int poll1(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (long i = 0; i < 50000000; i++) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n;
		if (i > 1000) {
			struct timespec ts = { 0, 10000 };
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}

static struct ibv_xrcd *xrcd_open(const char *name, int oflags, int *err)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDONLY | O_CREAT, 0600);
	struct ibv_xrcd_init_attr a = { .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
					.fd = fd, .oflags = oflags };
	errno = 0;
	struct ibv_xrcd *x = ibv_open_xrcd(ctx, &a);
	*err = errno;
	close(fd);
	return x;
}

static struct ibv_srq *xsrq(struct ibv_xrcd *x, struct ibv_cq *cq)
{
	struct ibv_srq_init_attr_ex a = { .attr = { .max_wr = 8, .max_sge = 1 },
					  .comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
						       IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
					  .srq_type = IBV_SRQT_XRC, .pd = pd, .xrcd = x, .cq = cq };
	return ibv_create_srq_ex(ctx, &a);
}

static struct ibv_qp *tgt_qp(struct ibv_xrcd *x)
{
	struct ibv_qp_init_attr_ex a = { .qp_type = IBV_QPT_XRC_RECV, .comp_mask = IBV_QP_INIT_ATTR_XRCD, .xrcd = x };
	return ibv_create_qp_ex(ctx, &a);
}

static struct ibv_qp *ini_qp(struct ibv_cq *cq)
{
	struct ibv_qp_init_attr_ex a = { .qp_type = IBV_QPT_XRC_SEND, .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
					 .send_cq = cq, .cap = { .max_send_wr = 8, .max_send_sge = 1 } };
	return ibv_create_qp_ex(ctx, &a); /* comp_mask PD only: through the exported ibv_create_qp */
}

static const struct t_conn conn = { .access = IBV_ACCESS_REMOTE_WRITE, .rq_psn = 5, .sq_psn = 5, .rd_atomic = 1,
				    .min_rnr_timer = 1, .hop_limit = 64, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7 };

static void connect_xrc(struct ibv_qp *q, uint32_t dqpn)
{
	CHECK_EQ(t_qp_init(q, &conn), 0, "INIT");
	if (q->qp_type == IBV_QPT_XRC_SEND) { /* the kernel's table: an INI QP takes no responder resources or RNR timer */
		struct ibv_qp_attr a;
		int rtr = t_rtr_attr(q, dqpn, &gid, &conn, &a);
		CHECK_EQ(ibv_modify_qp(q, &a, rtr | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER), EINVAL,
			 "INI RTR with TGT attributes");
	}
	CHECK_EQ(t_qp_rtr(q, dqpn, &gid, &conn), 0, "RTR");
	CHECK_EQ(t_qp_rts(q, &conn), 0, "RTS");
}

/* Whether the registry of the domain over file name exists: softrdma-xrcd2-<euid>-<dev>-<ino>
 * in directory sd, as docs/softrdma.md names it. */
static bool registry_in(const char *sd, const char *name)
{
	char path[4200];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (stat(path, &st))
		return false;
	snprintf(path, sizeof(path), "%s/softrdma-xrcd2-%u-%llx-%llx", sd, (unsigned)geteuid(),
		 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	return !lstat(path, &st);
}

/* ... in SOFTRDMA_SHM_DIR (default /dev/shm) */
static bool registry_exists(const char *name)
{
	const char *sd = getenv("SOFTRDMA_SHM_DIR");
	return registry_in(sd ? sd : "/dev/shm", name);
}

/* A SOFTRDMA_SHM_DIR that cannot be used (one that does not exist): no domain over a file
 * (ENOENT, the directory's error), no registry in /dev/shm in its place, a private domain
 * still opens. Run in a child forked before this process read the directory. */
static int bad_dir(void)
{
	char bad[128];
	snprintf(bad, sizeof(bad), "%s/missing", dir);
	setenv("SOFTRDMA_SHM_DIR", bad, 1);
	ctx = t_open_dev();
	int err;
	struct ibv_xrcd *x = xrcd_open("b", O_CREAT, &err);
	CHECK(!x && err == ENOENT, "bad SOFTRDMA_SHM_DIR: no domain over a file (errno %d)", err);
	CHECK(!registry_in("/dev/shm", "b") && !registry_in(bad, "b"), "bad SOFTRDMA_SHM_DIR: no registry anywhere");
	struct ibv_xrcd_init_attr pa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, .fd = -1,
					 .oflags = O_CREAT };
	struct ibv_xrcd *p = ibv_open_xrcd(ctx, &pa);
	CHECK(p != NULL, "bad SOFTRDMA_SHM_DIR: a private domain opens");
	if (p)
		ibv_close_xrcd(p);
	return t_fail ? 1 : 0;
}

static void test_domains(void)
{
	int err;
	CHECK(!xrcd_open("d", 0, &err) && err == EINVAL, "no domain, no O_CREAT: EINVAL (errno %d)", err);
	struct ibv_xrcd *a = xrcd_open("d", O_CREAT, &err);
	CHECK(a != NULL, "O_CREAT creates (errno %d)", err);
	struct ibv_xrcd *b = xrcd_open("d", 0, &err);
	CHECK(b != NULL, "a second handle without O_CREAT (errno %d)", err);
	CHECK(!xrcd_open("d", O_CREAT | O_EXCL, &err) && err == EINVAL, "O_EXCL on a held domain: EINVAL (%d)", err);
	/* another process sees the domain this one holds */
	pid_t pid = fork();
	if (pid == 0) {
		ctx = t_open_dev();
		struct ibv_xrcd *c = xrcd_open("d", 0, &err);
		int ok = c != NULL;
		struct ibv_xrcd *e = xrcd_open("d", O_CREAT | O_EXCL, &err);
		ok &= !e && err == EINVAL;
		if (c)
			ibv_close_xrcd(c);
		_exit(ok ? 0 : 1);
	}
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "another process joins the domain, O_EXCL refused there");
	/* a process that exits (exit, not _exit: the library's exit handlers run) holding the only
	 * handle of a domain: its registry goes with it, not left for another process's sweep. It
	 * says through a pipe what it saw: its exit status is LeakSanitizer's in a sanitizer build
	 * (the handle is left open on purpose) */
	int zp[2];
	CHECK_EQ(pipe(zp), 0, "pipe");
	pid = fork();
	if (pid == 0) {
		close(zp[0]);
		ctx = t_open_dev();
		struct ibv_xrcd *z = xrcd_open("z", O_CREAT, &err);
		char seen = z && registry_exists("z") ? 'y' : 'n';
		if (write(zp[1], &seen, 1) != 1)
			_exit(1);
		exit(0);
	}
	close(zp[1]);
	char seen = 0;
	if (read(zp[0], &seen, 1) != 1)
		seen = 0;
	close(zp[0]);
	waitpid(pid, &st, 0);
	CHECK(seen == 'y' && WIFEXITED(st), "a process opens a domain (its registry there) and exits holding it (%c, status %d)",
	      seen ? seen : '-', st);
	CHECK(!registry_exists("z"), "its registry removed at its exit");
	CHECK(!xrcd_open("z", 0, &err) && err == EINVAL, "no domain left for its file (errno %d)", err);
	struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	struct ibv_srq *s = xsrq(a, cq);
	CHECK(s != NULL, "XRC SRQ (errno %d)", errno);
	uint32_t n = 0;
	CHECK_EQ(ibv_get_srq_num(s, &n), 0, "ibv_get_srq_num");
	CHECK(n != 0, "an SRQ number");
	CHECK_EQ(ibv_close_xrcd(a), EBUSY, "close with an SRQ: EBUSY");
	CHECK_EQ(ibv_destroy_cq(cq), EBUSY, "the SRQ holds its CQ");
	CHECK_EQ(ibv_destroy_srq(s), 0, "destroy SRQ");
	CHECK_EQ(ibv_close_xrcd(a), 0, "close a");
	CHECK_EQ(ibv_close_xrcd(b), 0, "close b");
	CHECK(!xrcd_open("d", 0, &err) && err == EINVAL, "every handle closed: no domain (errno %d)", err);
	struct ibv_xrcd_init_attr pa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, .fd = -1,
					 .oflags = O_CREAT };
	struct ibv_xrcd *p = ibv_open_xrcd(ctx, &pa);
	CHECK(p != NULL, "fd -1: a private domain");
	pa.fd = 999;
	CHECK(!ibv_open_xrcd(ctx, &pa) && errno == EBADF, "a closed fd: EBADF (%d)", errno);
	ibv_close_xrcd(p);
	struct ibv_srq *basic = ibv_create_srq(pd, &(struct ibv_srq_init_attr){ .attr = { .max_wr = 1, .max_sge = 1 } });
	CHECK_EQ(ibv_get_srq_num(basic, &n), EINVAL, "a basic SRQ has no XRC number");
	ibv_destroy_srq(basic);
	ibv_destroy_cq(cq);
}

static void test_traffic(void)
{
	int err;
	struct ibv_xrcd *x = xrcd_open("t", O_CREAT, &err), *y = xrcd_open("u", O_CREAT, &err);
	struct ibv_cq *scq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_cq *cq1 = ibv_create_cq(ctx, 16, NULL, NULL, 0), *cq2 = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_srq *s1 = xsrq(x, cq1), *s2 = xsrq(x, cq2), *sy = xsrq(y, cq2);
	uint32_t n1, n2, ny;
	ibv_get_srq_num(s1, &n1);
	ibv_get_srq_num(s2, &n2);
	ibv_get_srq_num(sy, &ny);
	size_t sz = 1 << 16;
	unsigned char *buf = calloc(1, sz);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sz, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_qp *t = tgt_qp(x), *i = ini_qp(scq);
	CHECK(t && i, "TGT and INI QPs (errno %d)", errno);
	CHECK_EQ(t->qp_type, IBV_QPT_XRC_RECV, "TGT type");
	CHECK_EQ(i->qp_type, IBV_QPT_XRC_SEND, "INI type");
	CHECK(t->pd == NULL && t->send_cq == NULL && t->recv_cq == NULL, "a TGT QP has no PD and no CQs");
	connect_xrc(i, t->qp_num);
	connect_xrc(t, i->qp_num);

	struct ibv_sge rs = { .addr = (uintptr_t)buf + 32768, .length = 8192, .lkey = mr->lkey };
	struct ibv_recv_wr rw = { .wr_id = 1, .sg_list = &rs, .num_sge = 1 }, *rbad;
	CHECK_EQ(ibv_post_srq_recv(s1, &rw, &rbad), 0, "recv on SRQ 1");
	rs.addr += 8192;
	rw.wr_id = 2;
	CHECK_EQ(ibv_post_srq_recv(s2, &rw, &rbad), 0, "recv on SRQ 2");
	CHECK_EQ(ibv_post_recv(i, &rw, &rbad), EINVAL, "an INI QP has no receive queue");

	t_fill(buf, 3000, 1);
	t_fill(buf + 4096, 5000, 2);
	struct ibv_sge ss = { .addr = (uintptr_t)buf + 4096, .length = 5000, .lkey = mr->lkey };
	struct ibv_send_wr sw = { .wr_id = 10, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *sbad;
	sw.qp_type.xrc.remote_srqn = n2;
	CHECK_EQ(ibv_post_send(t, &sw, &sbad), EINVAL, "a TGT QP has no send queue");
	CHECK_EQ(ibv_post_send(i, &sw, &sbad), 0, "send to SRQ 2");
	ss.addr = (uintptr_t)buf;
	ss.length = 3000;
	sw.wr_id = 11;
	sw.qp_type.xrc.remote_srqn = n1;
	CHECK_EQ(ibv_post_send(i, &sw, &sbad), 0, "send to SRQ 1");
	struct ibv_wc wc;
	CHECK(poll1(scq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 10, "send 10 (status %d)", wc.status);
	CHECK(poll1(scq, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 11, "send 11 (status %d)", wc.status);
	CHECK(poll1(cq2, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2 && wc.byte_len == 5000 &&
	      wc.qp_num == t->qp_num && wc.opcode == IBV_WC_RECV, "SRQ 2's completion on its CQ (status %d)", wc.status);
	CHECK(poll1(cq1, &wc) && wc.status == IBV_WC_SUCCESS && wc.wr_id == 1 && wc.byte_len == 3000,
	      "SRQ 1's completion on its CQ (status %d)", wc.status);
	CHECK(!memcmp(buf + 32768, buf, 3000), "SRQ 1's bytes");
	CHECK(!memcmp(buf + 32768 + 8192, buf + 4096, 5000), "SRQ 2's bytes");

	/* another process (a fresh one: exec'd) joins the domain this one holds and opens this
	 * process's target QP: a handle, queried there, closed */
	{
		char qpn[16], path[128];
		snprintf(qpn, sizeof(qpn), "%u", t->qp_num);
		snprintf(path, sizeof(path), "%s/t", dir);
		pid_t pid = fork();
		if (pid == 0) {
			execl("/proc/self/exe", "test_xrc", "peer", path, qpn, (char *)NULL);
			_exit(3);
		}
		int st;
		waitpid(pid, &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a fresh process joins the domain and opens this "
		      "process's target QP there (status %d)", st);
	}

	/* ibv_open_qp: a second handle; the QP's own destroy waits for it */
	struct ibv_qp_open_attr oa = { .comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE,
				       .qp_num = t->qp_num, .xrcd = x, .qp_type = IBV_QPT_XRC_RECV };
	struct ibv_qp *o = ibv_open_qp(ctx, &oa);
	CHECK(o != NULL && o->qp_num == t->qp_num, "ibv_open_qp (errno %d)", errno);
	oa.xrcd = y;
	CHECK(!ibv_open_qp(ctx, &oa) && errno == EINVAL, "not in that domain: EINVAL (%d)", errno);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK_EQ(ibv_query_qp(o, &qa, IBV_QP_STATE, &qi), 0, "query through the handle");
	CHECK_EQ(qa.qp_state, IBV_QPS_RTS, "the QP's state");
	CHECK_EQ(ibv_destroy_qp(t), EBUSY, "destroy with an open handle: EBUSY");

	/* an SRQ of another domain: remote access error, the target goes to ERR */
	sw.wr_id = 12;
	sw.qp_type.xrc.remote_srqn = ny;
	CHECK_EQ(ibv_post_send(i, &sw, &sbad), 0, "send to the other domain's SRQ");
	CHECK(poll1(scq, &wc) && wc.wr_id == 12 && wc.status == IBV_WC_REM_ACCESS_ERR,
	      "IBV_WC_REM_ACCESS_ERR (status %d)", wc.status);
	CHECK_EQ(ibv_query_qp(o, &qa, IBV_QP_STATE, &qi), 0, "query");
	CHECK_EQ(qa.qp_state, IBV_QPS_ERR, "the target QP is in ERR");
	CHECK_EQ(ibv_poll_cq(cq2, 1, &wc), 0, "nothing landed in the other domain's SRQ");

	/* an SRQ number nobody has: invalid request */
	struct ibv_qp *t2 = tgt_qp(x), *i2 = ini_qp(scq);
	connect_xrc(i2, t2->qp_num);
	connect_xrc(t2, i2->qp_num);
	sw.wr_id = 13;
	sw.qp_type.xrc.remote_srqn = 0xfffff;
	CHECK_EQ(ibv_post_send(i2, &sw, &sbad), 0, "send to no SRQ");
	CHECK(poll1(scq, &wc) && wc.wr_id == 13 && wc.status == IBV_WC_REM_INV_REQ_ERR,
	      "IBV_WC_REM_INV_REQ_ERR (status %d)", wc.status);

	CHECK_EQ(ibv_destroy_qp(o), 0, "close the handle");
	CHECK_EQ(ibv_destroy_qp(t), 0, "then the QP");
	CHECK_EQ(ibv_destroy_qp(t2), 0, "destroy t2");
	CHECK_EQ(ibv_destroy_qp(i2), 0, "destroy i2");
	CHECK_EQ(ibv_destroy_qp(i), 0, "destroy INI");
	CHECK_EQ(ibv_destroy_srq(s1), 0, "destroy s1");
	CHECK_EQ(ibv_destroy_srq(s2), 0, "destroy s2");
	CHECK_EQ(ibv_destroy_srq(sy), 0, "destroy sy");
	CHECK_EQ(ibv_close_xrcd(x), 0, "close x");
	CHECK_EQ(ibv_close_xrcd(y), 0, "close y");
	ibv_dereg_mr(mr);
	free(buf);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(cq1);
	ibv_destroy_cq(cq2);
}

/* The exec'd peer: opens the domain of path without O_CREAT (it exists only because the parent
 * holds it), opens the parent's target QP qpn, queries it (RTS) and closes the handle, and
 * tries a number no target QP has (EINVAL). Exit 0 when all answer as expected. */
static int peer(const char *path, unsigned qpn)
{
	ctx = t_open_dev();
	int fd = open(path, O_RDONLY);
	struct ibv_xrcd_init_attr a = { .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, .fd = fd };
	struct ibv_xrcd *x = ibv_open_xrcd(ctx, &a);
	close(fd);
	if (!x) {
		fprintf(stderr, "peer: ibv_open_xrcd without O_CREAT: errno %d\n", errno);
		return 1;
	}
	struct ibv_qp_open_attr oa = { .comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE,
				       .qp_num = qpn, .xrcd = x, .qp_type = IBV_QPT_XRC_RECV };
	errno = 0;
	struct ibv_qp *q = ibv_open_qp(ctx, &oa);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	int rc = q && q->qp_num == qpn && !ibv_query_qp(q, &qa, IBV_QP_STATE, &qi) && qa.qp_state == IBV_QPS_RTS ? 0 : 2;
	if (rc)
		fprintf(stderr, "peer: ibv_open_qp of another process's TGT QP: %p errno %d\n", (void *)q, errno);
	if (q && ibv_destroy_qp(q)) {
		fprintf(stderr, "peer: closing the handle failed\n");
		rc = 3;
	}
	oa.qp_num = qpn + 1;
	if (ibv_open_qp(ctx, &oa) || errno != EINVAL) {
		fprintf(stderr, "peer: ibv_open_qp of no QP: errno %d\n", errno);
		rc = 4;
	}
	ibv_close_xrcd(x);
	ibv_close_device(ctx);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "peer"))
		return peer(argv[2], (unsigned)strtoul(argv[3], NULL, 10));
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(dir, sizeof(dir), "/tmp/softrdma-xrc.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	pid_t pid = fork();
	if (pid == 0)
		_exit(bad_dir());
	int st, bad_st;
	waitpid(pid, &bad_st, 0); /* checked below: a failure here must not fail the next child too */
	pid = fork();
	if (pid == 0) {
		setenv("SOFTRDMA_FAULTS", "seed=9", 1);
		ctx = t_open_dev();
		pd = ibv_alloc_pd(ctx);
		ibv_query_gid(ctx, 1, 1, &gid);
		test_traffic();
		_exit(t_fail ? 1 : 0);
	}
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "XRC over the packet path (status %d)", st);
	CHECK(WIFEXITED(bad_st) && WEXITSTATUS(bad_st) == 0, "a bad SOFTRDMA_SHM_DIR (status %d)", bad_st);
	ctx = t_open_dev();
	pd = ibv_alloc_pd(ctx);
	ibv_query_gid(ctx, 1, 1, &gid);
	CHECK(ibv_query_device(ctx, &(struct ibv_device_attr){ 0 }) == 0, "query");
	struct ibv_device_attr da;
	ibv_query_device(ctx, &da);
	CHECK(da.device_cap_flags & IBV_DEVICE_XRC, "IBV_DEVICE_XRC");
	test_domains();
	test_traffic();
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd)) { /* best effort */ }
	return t_report();
}
