/*
 * softrdma: the memory-window and ODP flows of rdma-core's own tests (tests/test_mr.py MWTest,
 * tests/test_qpex.py test_qp_ex_rc_bind_mw, tests/test_odp.py OdpRdmaRC), step by step as they
 * do them, with the statuses rxe gives: two players (client and server), each with its own
 * context, PD, CQ, region and RC QP, connected to each other.
 *  - windows: a bind's access carries LOCAL_WRITE beside REMOTE_WRITE (type 1 through
 *    ibv_bind_mw, type 2 through a BIND_MW work request and through ibv_wr_bind_mw); the RDMA
 *    WRITE through the window lands, and after a zero-length rebind (type 1), a LOCAL_INV, a
 *    peer's SEND_WITH_INV or ibv_dealloc_mw (type 2) it ends in REM_ACCESS_ERR;
 *  - ODP: the QPs' access flags are the regions' own (ON_DEMAND included), RDMA WRITE, READ,
 *    FETCH_AND_ADD and CMP_AND_SWP on on-demand regions.
 *  - shared PD (tests/test_shared_pd.py): a second context imported from a dup of the first's
 *    command fd, the first's PD and region imported into it by handle, an extended RC QP of the
 *    second context on the imported PD writing with the new post-send API through the imported
 *    region's keys, both ways.
 */
#define _GNU_SOURCE
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include "testlib.h"
#include <fcntl.h>
#include <unistd.h>

#define MSG 1024

struct player {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_mw *mw;
	unsigned char *buf;
	union ibv_gid gid;
	uint32_t peer_rkey; /* the peer's window (or region) key this player writes through */
	uint64_t peer_addr;
};

static const struct t_conn conn_base = {
	.rq_psn = 0, .sq_psn = 0, .rd_atomic = 4, .min_rnr_timer = 1, .hop_limit = 64, .timeout = 14,
	.retry_cnt = 7, .rnr_retry = 7 };

/* a player: its context, PD, CQ and region (mr_access); the QP extended when ex_ops is set */
static void player_up(struct player *p, int mr_access, uint64_t ex_ops)
{
	memset(p, 0, sizeof(*p));
	p->ctx = t_open_dev();
	p->pd = ibv_alloc_pd(p->ctx);
	p->cq = ibv_create_cq(p->ctx, 64, NULL, NULL, 0);
	p->buf = aligned_alloc(4096, 4096); /* the size a multiple of the alignment */
	if (!p->pd || !p->cq || !p->buf || ibv_query_gid(p->ctx, 1, 1, &p->gid)) {
		fprintf(stderr, "setup failed: %s\n", strerror(errno));
		exit(2);
	}
	memset(p->buf, 0, MSG);
	p->mr = ibv_reg_mr(p->pd, p->buf, MSG, mr_access);
	if (ex_ops) {
		struct ibv_qp_init_attr_ex ia = { .send_cq = p->cq, .recv_cq = p->cq, .qp_type = IBV_QPT_RC,
						  .cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
							   .max_recv_sge = 1 },
						  .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
						  .pd = p->pd, .send_ops_flags = ex_ops };
		p->qp = ibv_create_qp_ex(p->ctx, &ia);
	} else {
		struct ibv_qp_init_attr ia = { .send_cq = p->cq, .recv_cq = p->cq, .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
							.max_recv_sge = 1 } };
		p->qp = ibv_create_qp(p->pd, &ia);
	}
	if (!p->mr || !p->qp) {
		fprintf(stderr, "setup failed: %s\n", strerror(errno));
		exit(2);
	}
}

/* both QPs to RTS facing each other, with qp_access as their access flags */
static void players_connect(struct player *c, struct player *s, int qp_access)
{
	struct t_conn conn = conn_base;
	conn.access = qp_access;
	const char *step = "";
	int rc = t_qp_up(c->qp, IBV_QPS_RTS, s->qp->qp_num, &s->gid, &conn, &step);
	CHECK_EQ(rc, 0, "client QP up");
	if (rc)
		fprintf(stderr, "  client %s failed\n", step);
	rc = t_qp_up(s->qp, IBV_QPS_RTS, c->qp->qp_num, &c->gid, &conn, &step);
	CHECK_EQ(rc, 0, "server QP up");
	if (rc)
		fprintf(stderr, "  server %s failed\n", step);
}

static void player_down(struct player *p)
{
	if (p->mw)
		ibv_dealloc_mw(p->mw);
	ibv_destroy_qp(p->qp);
	ibv_dereg_mr(p->mr);
	ibv_destroy_cq(p->cq);
	ibv_dealloc_pd(p->pd);
	ibv_close_device(p->ctx);
	free(p->buf);
}

/* one completion of p's CQ: its status, or -1 when none came */
static int wc_status(struct player *p, uint64_t *wr_id)
{
	struct ibv_wc wc;
	if (t_wait_wc(p->cq, &wc) != 1)
		return -1;
	if (wr_id)
		*wr_id = wc.wr_id;
	return wc.status;
}

/* p posts one signaled op (WRITE, READ or an atomic) of len bytes from its own region to
 * the peer's key and address; the completion's status */
static int rdma_op(struct player *p, enum ibv_wr_opcode op, uint32_t len, uint64_t cmp_add, uint64_t swap)
{
	struct ibv_sge sge = { (uintptr_t)p->buf, len, p->mr->lkey };
	struct ibv_send_wr w = { .wr_id = 0x51, .sg_list = &sge, .num_sge = 1, .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED }, *bad;
	t_wr_remote(&w, p->peer_addr, p->peer_rkey, cmp_add, swap);
	if (ibv_post_send(p->qp, &w, &bad))
		return -2;
	return wc_status(p, NULL);
}

/*
 * rdma-core's rdma_traffic with RDMA WRITE: the client writes its message into the server,
 * then the server into the client; each lands exactly. Returns the first non-success status
 * (0 when both went through).
 */
static int write_traffic(struct player *c, struct player *s, unsigned seed)
{
	struct player *from[2] = { c, s }, *to[2] = { s, c };
	for (int i = 0; i < 2; i++) {
		t_fill(from[i]->buf, MSG, seed + (unsigned)i);
		int st = rdma_op(from[i], IBV_WR_RDMA_WRITE, MSG, 0, 0);
		if (st)
			return st;
		CHECK(!memcmp(to[i]->buf, from[i]->buf, MSG), "written bytes arrive (seed %u, side %d)", seed, i);
	}
	return 0;
}

#define MW_QP_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
/* what MWRC binds: REMOTE_WRITE with LOCAL_WRITE beside it */
#define MW_BIND_ACCESS (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE)

static void mw_players(struct player *c, struct player *s, enum ibv_mw_type type)
{
	struct player *ps[2] = { c, s };
	for (int i = 0; i < 2; i++) {
		player_up(ps[i], IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND, 0);
		ps[i]->mw = ibv_alloc_mw(ps[i]->pd, type);
		CHECK(ps[i]->mw != NULL, "alloc mw type %d: errno %d", type, errno);
	}
	players_connect(c, s, MW_QP_ACCESS);
}

/* MWTest.bind_mw_type_1: each binds its window over its whole region with ibv_bind_mw */
static void bind_type1(struct player *c, struct player *s)
{
	struct player *ps[2] = { s, c };
	for (int i = 0; i < 2; i++) {
		struct ibv_mw_bind b = { .wr_id = 0, .send_flags = IBV_SEND_SIGNALED,
					 .bind_info = { ps[i]->mr, (uintptr_t)ps[i]->buf, MSG, MW_BIND_ACCESS } };
		CHECK_EQ(ibv_bind_mw(ps[i]->qp, ps[i]->mw, &b), 0, "ibv_bind_mw");
	}
	CHECK_EQ(wc_status(s, NULL), IBV_WC_SUCCESS, "server's type 1 bind");
	CHECK_EQ(wc_status(c, NULL), IBV_WC_SUCCESS, "client's type 1 bind");
	s->peer_rkey = c->mw->rkey, s->peer_addr = (uintptr_t)c->buf;
	c->peer_rkey = s->mw->rkey, c->peer_addr = (uintptr_t)s->buf;
}

/* MWTest.bind_mw_type_2: each posts a BIND_MW work request with the next key byte */
static void bind_type2(struct player *c, struct player *s)
{
	struct player *ps[2] = { s, c };
	uint32_t key[2];
	for (int i = 0; i < 2; i++) {
		struct ibv_send_wr w = { .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED }, *bad;
		w.bind_mw.mw = ps[i]->mw;
		w.bind_mw.rkey = key[i] = ibv_inc_rkey(ps[i]->mw->rkey);
		w.bind_mw.bind_info = (struct ibv_mw_bind_info){ ps[i]->mr, (uintptr_t)ps[i]->buf, MSG, MW_BIND_ACCESS };
		CHECK_EQ(ibv_post_send(ps[i]->qp, &w, &bad), 0, "post BIND_MW");
	}
	CHECK_EQ(wc_status(s, NULL), IBV_WC_SUCCESS, "server's type 2 bind");
	CHECK_EQ(wc_status(c, NULL), IBV_WC_SUCCESS, "client's type 2 bind");
	s->peer_rkey = key[1], s->peer_addr = (uintptr_t)c->buf;
	c->peer_rkey = key[0], c->peer_addr = (uintptr_t)s->buf;
}

static void test_mw_type1(void)
{
	struct player c, s;
	mw_players(&c, &s, IBV_MW_TYPE_1);
	bind_type1(&c, &s);
	CHECK_EQ(write_traffic(&c, &s, 1), IBV_WC_SUCCESS, "type 1: WRITE through the windows");

	/* invalidate_mw_type1: a rebind of zero length and no rights */
	struct player *ps[2] = { &s, &c };
	for (int i = 0; i < 2; i++) {
		struct ibv_mw_bind b = { .send_flags = IBV_SEND_SIGNALED,
					 .bind_info = { ps[i]->mr, (uintptr_t)ps[i]->buf, 0, 0 } };
		CHECK_EQ(ibv_bind_mw(ps[i]->qp, ps[i]->mw, &b), 0, "zero-length ibv_bind_mw");
		CHECK_EQ(wc_status(ps[i], NULL), IBV_WC_SUCCESS, "zero-length type 1 bind");
	}
	c.peer_rkey = s.mw->rkey; /* the window's key moved on at the rebind */
	CHECK_EQ(rdma_op(&c, IBV_WR_RDMA_WRITE, MSG, 0, 0), IBV_WC_REM_ACCESS_ERR,
		 "type 1: WRITE after the zero-length rebind");
	player_down(&c);
	player_down(&s);
}

enum inval { INVAL_NONE, INVAL_LOCAL, INVAL_REMOTE, INVAL_DEALLOC };

static void test_mw_type2(enum inval how)
{
	struct player c, s;
	mw_players(&c, &s, IBV_MW_TYPE_2);
	bind_type2(&c, &s);
	CHECK_EQ(write_traffic(&c, &s, 10 + how), IBV_WC_SUCCESS, "type 2: WRITE through the windows");
	if (how == INVAL_NONE)
		goto out;
	if (how == INVAL_LOCAL) {
		/* invalidate_mw_type2_local: each invalidates its own window (the key its peer holds) */
		struct player *ps[2] = { &c, &s };
		for (int i = 0; i < 2; i++) {
			struct ibv_send_wr w = { .opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED }, *bad;
			w.invalidate_rkey = ps[1 - i]->peer_rkey;
			CHECK_EQ(ibv_post_send(ps[i]->qp, &w, &bad), 0, "post LOCAL_INV");
		}
		CHECK_EQ(wc_status(&s, NULL), IBV_WC_SUCCESS, "server's LOCAL_INV");
		CHECK_EQ(wc_status(&c, NULL), IBV_WC_SUCCESS, "client's LOCAL_INV");
	} else if (how == INVAL_REMOTE) {
		/* invalidate_mw_type2_remote: each sends its peer a SEND_WITH_INV of the peer's window */
		struct player *ps[2] = { &s, &c };
		for (int i = 0; i < 2; i++) {
			struct ibv_sge sge = { (uintptr_t)ps[i]->buf, MSG, ps[i]->mr->lkey };
			struct ibv_recv_wr r = { .wr_id = 0x77, .sg_list = &sge, .num_sge = 1 }, *rbad;
			CHECK_EQ(ibv_post_recv(ps[i]->qp, &r, &rbad), 0, "post recv");
		}
		struct player *snd[2] = { &c, &s };
		for (int i = 0; i < 2; i++) {
			struct ibv_send_wr w = { .opcode = IBV_WR_SEND_WITH_INV, .send_flags = IBV_SEND_SIGNALED }, *bad;
			w.invalidate_rkey = snd[i]->peer_rkey;
			CHECK_EQ(ibv_post_send(snd[i]->qp, &w, &bad), 0, "post SEND_WITH_INV");
		}
		for (int i = 0; i < 2; i++) {
			/* a send and a receive on each CQ, in either order */
			for (int k = 0; k < 2; k++) {
				struct ibv_wc wc;
				CHECK(t_wait_wc(snd[i]->cq, &wc) == 1 && wc.status == IBV_WC_SUCCESS,
				      "SEND_WITH_INV flow completion %d/%d: status %d", i, k, wc.status);
				if (wc.opcode == IBV_WC_RECV)
					CHECK(wc.wc_flags & IBV_WC_WITH_INV, "receive says invalidated");
			}
		}
	} else {
		/* invalidate_dealloc */
		CHECK_EQ(ibv_dealloc_mw(s.mw), 0, "dealloc server mw");
		CHECK_EQ(ibv_dealloc_mw(c.mw), 0, "dealloc client mw");
		s.mw = c.mw = NULL;
	}
	CHECK_EQ(rdma_op(&c, IBV_WR_RDMA_WRITE, MSG, 0, 0), IBV_WC_REM_ACCESS_ERR,
		 "type 2: WRITE through an invalidated window");
out:
	player_down(&c);
	player_down(&s);
}

/*
 * test_qp_ex_rc_bind_mw: the server binds a type 2 window without remote rights over a region
 * with REMOTE_WRITE through ibv_wr_bind_mw; the client's WRITE through it is REM_ACCESS_ERR.
 */
static void test_wr_bind_mw(void)
{
	struct player c, s;
	uint64_t ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_BIND_MW;
	player_up(&c, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND, ops);
	player_up(&s, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND, ops);
	/* RCResources' QP rights */
	players_connect(&c, &s, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC);
	s.mw = ibv_alloc_mw(s.pd, IBV_MW_TYPE_2);
	CHECK(s.mw != NULL, "alloc type 2");
	struct ibv_qp_ex *sx = ibv_qp_to_qp_ex(s.qp), *cx = ibv_qp_to_qp_ex(c.qp);
	uint32_t key = ibv_inc_rkey(s.mw->rkey);
	struct ibv_mw_bind_info bi = { s.mr, (uintptr_t)s.buf, MSG, IBV_ACCESS_LOCAL_WRITE };
	ibv_wr_start(sx);
	sx->wr_id = 0x123;
	sx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(sx, s.mw, key, &bi);
	CHECK_EQ(ibv_wr_complete(sx), 0, "wr_complete of the bind");
	uint64_t id = 0;
	CHECK_EQ(wc_status(&s, &id), IBV_WC_SUCCESS, "ibv_wr_bind_mw completion");
	CHECK_EQ(id, 0x123, "bind's wr_id");

	ibv_wr_start(cx);
	cx->wr_id = 0x124;
	cx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(cx, key, (uintptr_t)s.buf);
	ibv_wr_set_sge(cx, c.mr->lkey, (uintptr_t)c.buf, MSG);
	CHECK_EQ(ibv_wr_complete(cx), 0, "wr_complete of the write");
	CHECK_EQ(wc_status(&c, &id), IBV_WC_REM_ACCESS_ERR, "WRITE through a window without REMOTE_WRITE");
	CHECK_EQ(id, 0x124, "write's wr_id");
	player_down(&c);
	player_down(&s);
}

/* OdpRdmaRC: regions and QPs with LOCAL_WRITE | ON_DEMAND | all remote rights */
#define ODP_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND | IBV_ACCESS_REMOTE_ATOMIC | \
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE)

static void odp_players(struct player *c, struct player *s)
{
	player_up(c, ODP_ACCESS, 0);
	player_up(s, ODP_ACCESS, 0);
	players_connect(c, s, ODP_ACCESS);
	c->peer_rkey = s->mr->rkey, c->peer_addr = (uintptr_t)s->buf;
	s->peer_rkey = c->mr->rkey, s->peer_addr = (uintptr_t)c->buf;
}

static void test_odp(void)
{
	struct ibv_context *ctx = t_open_dev();
	struct ibv_device_attr_ex dx;
	memset(&dx, 0, sizeof(dx));
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &dx), 0, "query_device_ex");
	uint32_t rc_caps = dx.odp_caps.per_transport_caps.rc_odp_caps;
	CHECK((rc_caps & (IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_ATOMIC)) ==
		      (IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_ATOMIC),
	      "RC ODP caps 0x%x", rc_caps);
	ibv_close_device(ctx);

	struct player c, s;
	/* test_odp_rc_rdma_write */
	odp_players(&c, &s);
	for (unsigned i = 0; i < 3; i++)
		CHECK_EQ(write_traffic(&c, &s, 100 + i), IBV_WC_SUCCESS, "ODP RDMA WRITE");
	player_down(&c);
	player_down(&s);

	/* test_odp_rc_rdma_read: the client reads the server's message, then the other way */
	odp_players(&c, &s);
	t_fill(s.buf, MSG, 200);
	t_fill(c.buf, MSG, 201);
	unsigned long server_sum = t_checksum(s.buf, MSG);
	CHECK_EQ(rdma_op(&c, IBV_WR_RDMA_READ, MSG, 0, 0), IBV_WC_SUCCESS, "ODP RDMA READ (client)");
	CHECK(t_checksum(c.buf, MSG) == server_sum, "client read the server's bytes");
	t_fill(c.buf, MSG, 202);
	unsigned long client_sum = t_checksum(c.buf, MSG);
	CHECK_EQ(rdma_op(&s, IBV_WR_RDMA_READ, MSG, 0, 0), IBV_WC_SUCCESS, "ODP RDMA READ (server)");
	CHECK(t_checksum(s.buf, MSG) == client_sum, "server read the client's bytes");
	player_down(&c);
	player_down(&s);

	/* test_odp_rc_atomic_fetch_and_add / cmp_and_swp on 8-byte on-demand regions */
	odp_players(&c, &s);
	uint64_t *rv = (uint64_t *)s.buf, *cv = (uint64_t *)c.buf;
	*rv = 1;
	CHECK_EQ(rdma_op(&c, IBV_WR_ATOMIC_FETCH_AND_ADD, 8, 2, 0), IBV_WC_SUCCESS, "ODP FETCH_AND_ADD");
	CHECK(*cv == 1 && *rv == 3, "fetch-and-add: fetched %llu, now %llu", (unsigned long long)*cv,
	      (unsigned long long)*rv);
	CHECK_EQ(rdma_op(&c, IBV_WR_ATOMIC_CMP_AND_SWP, 8, 3, 9), IBV_WC_SUCCESS, "ODP CMP_AND_SWP (equal)");
	CHECK(*cv == 3 && *rv == 9, "cmp-and-swap equal: fetched %llu, now %llu", (unsigned long long)*cv,
	      (unsigned long long)*rv);
	CHECK_EQ(rdma_op(&c, IBV_WR_ATOMIC_CMP_AND_SWP, 8, 1, 5), IBV_WC_SUCCESS, "ODP CMP_AND_SWP (not equal)");
	CHECK(*cv == 9 && *rv == 9, "cmp-and-swap unequal: fetched %llu, now %llu", (unsigned long long)*cv,
	      (unsigned long long)*rv);
	player_down(&c);
	player_down(&s);
}

/* one signaled RDMA WRITE of MSG bytes through the extended QP's new post-send API */
static int wr_write(struct player *p, uint32_t lkey)
{
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(p->qp);
	ibv_wr_start(qx);
	qx->wr_id = 0x52;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qx, p->peer_rkey, p->peer_addr);
	ibv_wr_set_sge(qx, lkey, (uintptr_t)p->buf, MSG);
	if (ibv_wr_complete(qx))
		return -2;
	return wc_status(p, NULL);
}

static void test_imported_pd(void)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct player orig, c, imp;
	player_up(&orig, access, IBV_QP_EX_WITH_RDMA_WRITE); /* the resources the import names */
	player_up(&c, access, IBV_QP_EX_WITH_RDMA_WRITE);

	/* what cannot be imported */
	errno = 0;
	CHECK(!ibv_import_device(-1) && errno == EBADF, "import of a closed fd: EBADF (errno %d)", errno);
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	errno = 0;
	CHECK(!ibv_import_device(devnull) && errno == EINVAL, "import of a fd that is no context's: EINVAL (errno %d)",
	      errno);
	close(devnull);
	errno = 0;
	CHECK(!ibv_import_pd(c.ctx, orig.pd->handle) && errno == EINVAL,
	      "a PD of another context's ucontext is not imported: EINVAL (errno %d)", errno);

	int fd = dup(orig.ctx->cmd_fd);
	CHECK(orig.ctx->cmd_fd >= 0 && fd >= 0, "the context has a command fd (%d)", orig.ctx->cmd_fd);
	memset(&imp, 0, sizeof(imp));
	imp.ctx = ibv_import_device(fd);
	CHECK(imp.ctx != NULL, "ibv_import_device: %s", strerror(errno));
	if (!imp.ctx)
		exit(t_report());
	CHECK(imp.ctx != orig.ctx && imp.ctx->device == orig.ctx->device && imp.ctx->cmd_fd == fd,
	      "the imported context: another context of the same device, on the fd given");
	errno = 0;
	CHECK(!ibv_import_pd(imp.ctx, orig.pd->handle ^ 0x5a5a5a5au) && errno == EINVAL,
	      "an unknown PD handle: EINVAL (errno %d)", errno);
	imp.pd = ibv_import_pd(imp.ctx, orig.pd->handle);
	CHECK(imp.pd && imp.pd->context == imp.ctx && imp.pd->handle == orig.pd->handle, "ibv_import_pd: %s",
	      strerror(errno));
	imp.mr = imp.pd ? ibv_import_mr(imp.pd, orig.mr->handle) : NULL;
	CHECK(imp.mr && imp.mr->lkey == orig.mr->lkey && imp.mr->rkey == orig.mr->rkey &&
	      imp.mr->length == orig.mr->length && imp.mr->pd == imp.pd && !imp.mr->addr,
	      "ibv_import_mr: the region's keys and length, no address (%s)", strerror(errno));
	errno = 0;
	CHECK(!ibv_import_mr(c.pd, orig.mr->handle) && errno == EINVAL,
	      "a region of another PD is not imported: EINVAL (errno %d)", errno);
	if (!imp.pd || !imp.mr)
		exit(t_report());
	CHECK_EQ(ibv_dealloc_pd(orig.pd), EBUSY, "the original PD stays while it has users and imports");

	/* the server's resources of the imported context, on the imported PD and region */
	imp.cq = ibv_create_cq(imp.ctx, 64, NULL, NULL, 0);
	struct ibv_qp_init_attr_ex ia = { .send_cq = imp.cq, .recv_cq = imp.cq, .qp_type = IBV_QPT_RC,
					  .cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
						   .max_recv_sge = 1 },
					  .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
					  .pd = imp.pd, .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE };
	imp.qp = imp.cq ? ibv_create_qp_ex(imp.ctx, &ia) : NULL;
	CHECK(imp.qp && !ibv_query_gid(imp.ctx, 1, 1, &imp.gid), "a QP on the imported PD: %s", strerror(errno));
	if (!imp.qp)
		exit(t_report());
	imp.buf = orig.buf; /* the imported region's memory: the original's */
	players_connect(&c, &imp, access);
	c.peer_rkey = imp.mr->rkey;
	c.peer_addr = (uintptr_t)orig.buf;
	imp.peer_rkey = c.mr->rkey;
	imp.peer_addr = (uintptr_t)c.buf;
	for (unsigned i = 0; i < 10; i++) { /* rdma_traffic's iterations */
		t_fill(c.buf, MSG, 40 + i);
		CHECK(wr_write(&c, c.mr->lkey) == IBV_WC_SUCCESS, "client writes into the imported region (%u)", i);
		CHECK(!memcmp(orig.buf, c.buf, MSG), "the client's bytes arrive in the imported region (%u)", i);
		t_fill(orig.buf, MSG, 80 + i);
		CHECK(wr_write(&imp, imp.mr->lkey) == IBV_WC_SUCCESS, "the imported QP writes from the imported region (%u)",
		      i);
		CHECK(!memcmp(c.buf, orig.buf, MSG), "the imported side's bytes arrive at the client (%u)", i);
	}

	/* unimport as the test's tearDown does; then the original goes as usual */
	CHECK_EQ(ibv_destroy_qp(imp.qp), 0, "destroy the imported side's QP");
	CHECK_EQ(ibv_destroy_cq(imp.cq), 0, "destroy the imported side's CQ");
	ibv_unimport_mr(imp.mr);
	ibv_unimport_pd(imp.pd);
	CHECK_EQ(ibv_close_device(imp.ctx), 0, "close the imported context");
	CHECK(fcntl(fd, F_GETFD) == -1 && errno == EBADF, "the imported context closed the fd it owned");
	player_down(&c);
	player_down(&orig);
}

int main(void)
{
	test_mw_type1();
	test_mw_type2(INVAL_NONE);
	test_mw_type2(INVAL_LOCAL);
	test_mw_type2(INVAL_REMOTE);
	test_mw_type2(INVAL_DEALLOC);
	test_wr_bind_mw();
	test_odp();
	test_imported_pd();
	return t_report();
}
