/*
 * The C baselines of the verbs4j JMH benchmarks.
 *
 * Each bl_* loop runs the same verb sequence as its Java twin (io.github.verbs4j.jmh.JavaRig)
 * `iterations` times, through the same provider (the libibverbs.so.1 the JVM loaded: softrdma),
 * with the objects set up the same way: one PD, two CQs of 64 entries, two RC QPs (32 send and
 * receive requests, 4 SGEs, 64 inline bytes) connected to each other, two 64 KiB regions with
 * every right. The work requests are built once before the loop and only their wr_id changes,
 * as a C program would do it (and as the Java side's reusable requests do).
 *
 * Every loop returns a checksum (sum of wr_ids and byte lengths) so the work cannot be skipped,
 * or a negative code on failure: -errno of a post, or BL_BAD_COMPLETION - status of a failed
 * completion, or BL_POLL_ERROR when poll_cq itself fails. bl_strerror explains a code.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BL_EXPORT __attribute__((visibility("default")))

#define BL_SIZE (64 * 1024)
#define BL_MSG 64
#define BL_CHAIN 16
#define BL_CQE 64
#define BL_POLL_BATCH 16

#define BL_POLL_ERROR (-100000)
#define BL_BAD_COMPLETION (-200000)

struct bl_rig {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq_a, *cq_b;
	struct ibv_qp *a, *b;
	void *buf_a, *buf_b;
	struct ibv_mr *mr_a, *mr_b;
};

/* Releases whatever was created, in reverse order; safe on a partly built rig. */
BL_EXPORT void bl_close(struct bl_rig *r)
{
	if (!r)
		return;
	if (r->mr_b)
		ibv_dereg_mr(r->mr_b);
	if (r->mr_a)
		ibv_dereg_mr(r->mr_a);
	if (r->b)
		ibv_destroy_qp(r->b);
	if (r->a)
		ibv_destroy_qp(r->a);
	if (r->cq_b)
		ibv_destroy_cq(r->cq_b);
	if (r->cq_a)
		ibv_destroy_cq(r->cq_a);
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	if (r->ctx)
		ibv_close_device(r->ctx);
	free(r->buf_b);
	free(r->buf_a);
	free(r);
}

static struct ibv_qp *create_qp(struct bl_rig *r, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr init = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 32, .max_recv_wr = 32, .max_send_sge = 4, .max_recv_sge = 4,
			 .max_inline_data = 64 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
	};
	return ibv_create_qp(r->pd, &init);
}

/* INIT, RTR, RTS towards `peer`, with the attribute values of verbs4j's ConnectOptions defaults. */
static int connect_qp(struct ibv_qp *qp, struct ibv_qp *peer, const union ibv_gid *gid, int gid_index)
{
	struct ibv_qp_attr init = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	};
	int rc = ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		return rc;
	struct ibv_qp_attr rtr = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.dest_qp_num = peer->qp_num,
		.rq_psn = 0,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = *gid, .sgid_index = (uint8_t)gid_index, .hop_limit = 64 } },
	};
	rc = ibv_modify_qp(qp, &rtr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return rc;
	struct ibv_qp_attr rts = {
		.qp_state = IBV_QPS_RTS,
		.sq_psn = 0,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
		.max_rd_atomic = 1,
	};
	return ibv_modify_qp(qp, &rts, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

#define FAIL(...)                                              \
	do {                                                   \
		snprintf(err, (size_t)errlen, __VA_ARGS__);    \
		bl_close(r);                                   \
		return NULL;                                   \
	} while (0)

/*
 * Opens the first device and builds the rig. On failure returns NULL and writes a one-line
 * reason (with errno) into err.
 */
BL_EXPORT struct bl_rig *bl_open(char *err, int errlen)
{
	struct bl_rig *r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, (size_t)errlen, "calloc: %s", strerror(errno));
		return NULL;
	}
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list)
		FAIL("ibv_get_device_list: %s", strerror(errno));
	if (n == 0) {
		ibv_free_device_list(list);
		FAIL("ibv_get_device_list: no devices");
	}
	r->ctx = ibv_open_device(list[0]);
	int open_errno = errno;
	ibv_free_device_list(list);
	if (!r->ctx)
		FAIL("ibv_open_device: %s", strerror(open_errno));
	/* GID 1 is the IPv4-mapped RoCE v2 GID on softrdma and rxe; fall back to 0 elsewhere. */
	union ibv_gid gid;
	int gid_index = 1;
	if (ibv_query_gid(r->ctx, 1, gid_index, &gid) || (gid.global.subnet_prefix == 0 && gid.global.interface_id == 0)) {
		gid_index = 0;
		if (ibv_query_gid(r->ctx, 1, gid_index, &gid))
			FAIL("ibv_query_gid: %s", strerror(errno));
	}
	if (!(r->pd = ibv_alloc_pd(r->ctx)))
		FAIL("ibv_alloc_pd: %s", strerror(errno));
	if (!(r->cq_a = ibv_create_cq(r->ctx, BL_CQE, NULL, NULL, 0)) ||
	    !(r->cq_b = ibv_create_cq(r->ctx, BL_CQE, NULL, NULL, 0)))
		FAIL("ibv_create_cq: %s", strerror(errno));
	if (!(r->a = create_qp(r, r->cq_a)) || !(r->b = create_qp(r, r->cq_b)))
		FAIL("ibv_create_qp: %s", strerror(errno));
	if (posix_memalign(&r->buf_a, 4096, BL_SIZE) || posix_memalign(&r->buf_b, 4096, BL_SIZE))
		FAIL("posix_memalign: out of memory");
	memset(r->buf_a, 0, BL_SIZE);
	memset(r->buf_b, 0, BL_SIZE);
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	if (!(r->mr_a = ibv_reg_mr(r->pd, r->buf_a, BL_SIZE, access)) ||
	    !(r->mr_b = ibv_reg_mr(r->pd, r->buf_b, BL_SIZE, access)))
		FAIL("ibv_reg_mr: %s", strerror(errno));
	int rc;
	if ((rc = connect_qp(r->a, r->b, &gid, gid_index)) || (rc = connect_qp(r->b, r->a, &gid, gid_index)))
		FAIL("ibv_modify_qp: %s", strerror(rc));
	return r;
}

/* Explains a negative code returned by a loop. */
BL_EXPORT void bl_strerror(int64_t code, char *out, int outlen)
{
	if (code <= BL_BAD_COMPLETION)
		snprintf(out, (size_t)outlen, "completion status %s", ibv_wc_status_str((enum ibv_wc_status)(BL_BAD_COMPLETION - code)));
	else if (code == BL_POLL_ERROR)
		snprintf(out, (size_t)outlen, "ibv_poll_cq failed");
	else if (code < 0)
		snprintf(out, (size_t)outlen, "post failed: %s", strerror((int)-code));
	else
		snprintf(out, (size_t)outlen, "no error");
}

/*
 * Spins until one completion arrives on cq and returns wr_id + byte_len, or a negative code.
 * softrdma completes in-process operations inside post_send, so this normally returns on the
 * first poll; the loop is what a real program would write regardless.
 */
static inline int64_t await_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	int n;
	while ((n = ibv_poll_cq(cq, 1, wc)) == 0)
		;
	if (n < 0)
		return BL_POLL_ERROR;
	if (wc->status != IBV_WC_SUCCESS)
		return BL_BAD_COMPLETION - wc->status;
	return (int64_t)(wc->wr_id + wc->byte_len);
}

#define CHECK(expr)                             \
	do {                                    \
		int64_t v_ = (expr);            \
		if (v_ < 0)                     \
			return v_;              \
		sum += v_;                      \
	} while (0)

#define POST(expr)                              \
	do {                                    \
		int rc_ = (expr);               \
		if (rc_)                        \
			return -(int64_t)abs(rc_); \
	} while (0)

static void sge_of(struct ibv_sge *sge, struct ibv_mr *mr, size_t offset, uint32_t length)
{
	sge->addr = (uintptr_t)mr->addr + offset;
	sge->length = length;
	sge->lkey = mr->lkey;
}

/* SEND + RECV ping: post_recv on B, post_send (signaled) on A, poll A's CQ, poll B's CQ. */
BL_EXPORT int64_t bl_send_recv(struct bl_rig *r, int64_t iterations)
{
	struct ibv_sge ssge, rsge;
	sge_of(&ssge, r->mr_a, 0, BL_MSG);
	sge_of(&rsge, r->mr_b, 1024, BL_MSG);
	struct ibv_send_wr swr = { .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_recv_wr rwr = { .sg_list = &rsge, .num_sge = 1 };
	struct ibv_send_wr *sbad;
	struct ibv_recv_wr *rbad;
	struct ibv_wc wc;
	int64_t sum = 0;
	for (int64_t i = 0; i < iterations; i++) {
		rwr.wr_id = (uint64_t)i;
		POST(ibv_post_recv(r->b, &rwr, &rbad));
		swr.wr_id = (uint64_t)i;
		POST(ibv_post_send(r->a, &swr, &sbad));
		CHECK(await_one(r->cq_a, &wc));
		CHECK(await_one(r->cq_b, &wc));
	}
	return sum;
}

static int64_t rdma_loop(struct bl_rig *r, int64_t iterations, enum ibv_wr_opcode opcode)
{
	struct ibv_sge sge;
	sge_of(&sge, r->mr_a, 0, BL_MSG);
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = opcode, .send_flags = IBV_SEND_SIGNALED };
	wr.wr.rdma.remote_addr = (uintptr_t)r->mr_b->addr + 4096;
	wr.wr.rdma.rkey = r->mr_b->rkey;
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	int64_t sum = 0;
	for (int64_t i = 0; i < iterations; i++) {
		wr.wr_id = (uint64_t)i;
		POST(ibv_post_send(r->a, &wr, &bad));
		CHECK(await_one(r->cq_a, &wc));
	}
	return sum;
}

/* RDMA WRITE of 64 bytes, signaled, then poll. */
BL_EXPORT int64_t bl_write(struct bl_rig *r, int64_t iterations)
{
	return rdma_loop(r, iterations, IBV_WR_RDMA_WRITE);
}

/* RDMA READ of 64 bytes, signaled, then poll. */
BL_EXPORT int64_t bl_read(struct bl_rig *r, int64_t iterations)
{
	return rdma_loop(r, iterations, IBV_WR_RDMA_READ);
}

/* 64-bit FETCH_AND_ADD of 1 on B's region, old value into A's region, then poll. */
BL_EXPORT int64_t bl_fetch_add(struct bl_rig *r, int64_t iterations)
{
	struct ibv_sge sge;
	sge_of(&sge, r->mr_a, 8192, 8);
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
				  .send_flags = IBV_SEND_SIGNALED };
	wr.wr.atomic.remote_addr = (uintptr_t)r->mr_b->addr + 8192;
	wr.wr.atomic.rkey = r->mr_b->rkey;
	wr.wr.atomic.compare_add = 1;
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	int64_t sum = 0;
	for (int64_t i = 0; i < iterations; i++) {
		wr.wr_id = (uint64_t)i;
		POST(ibv_post_send(r->a, &wr, &bad));
		CHECK(await_one(r->cq_a, &wc));
	}
	return sum;
}

/*
 * A chain of 16 RDMA WRITEs (64 bytes each, consecutive remote slots) posted with one
 * post_send; only the last is signaled, so one completion is polled per chain.
 * `iterations` counts chains.
 */
BL_EXPORT int64_t bl_write_chain16(struct bl_rig *r, int64_t iterations)
{
	struct ibv_sge sge[BL_CHAIN];
	struct ibv_send_wr wr[BL_CHAIN];
	memset(wr, 0, sizeof(wr));
	for (int k = 0; k < BL_CHAIN; k++) {
		sge_of(&sge[k], r->mr_a, (size_t)k * BL_MSG, BL_MSG);
		wr[k].sg_list = &sge[k];
		wr[k].num_sge = 1;
		wr[k].opcode = IBV_WR_RDMA_WRITE;
		wr[k].send_flags = k == BL_CHAIN - 1 ? IBV_SEND_SIGNALED : 0;
		wr[k].wr.rdma.remote_addr = (uintptr_t)r->mr_b->addr + 4096 + (uint64_t)k * BL_MSG;
		wr[k].wr.rdma.rkey = r->mr_b->rkey;
		wr[k].next = k == BL_CHAIN - 1 ? NULL : &wr[k + 1];
	}
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	int64_t sum = 0;
	for (int64_t i = 0; i < iterations; i++) {
		wr[BL_CHAIN - 1].wr_id = (uint64_t)i;
		POST(ibv_post_send(r->a, &wr[0], &bad));
		CHECK(await_one(r->cq_a, &wc));
	}
	return sum;
}

/* poll_cq of up to 16 completions on an empty CQ; returns how many polls found nothing. */
BL_EXPORT int64_t bl_poll_empty(struct bl_rig *r, int64_t iterations)
{
	struct ibv_wc wc[BL_POLL_BATCH];
	int64_t empty = 0;
	for (int64_t i = 0; i < iterations; i++) {
		int n = ibv_poll_cq(r->cq_a, BL_POLL_BATCH, wc);
		if (n < 0)
			return BL_POLL_ERROR;
		empty += n == 0;
	}
	return empty;
}

/*
 * The smallest native call: the shape of ops.post_send, doing nothing. Java calls it through a
 * downcall handle to measure the FFM floor; bl_nop_loop calls it from C through a function
 * pointer the compiler cannot inline (the C floor).
 */
BL_EXPORT __attribute__((noinline)) int bl_nop(void *qp, void *wr, void **bad)
{
	(void)qp;
	(void)wr;
	(void)bad;
	return 0;
}

BL_EXPORT int64_t bl_nop_loop(void *arg, int64_t iterations)
{
	int (*volatile fn)(void *, void *, void **) = bl_nop;
	int64_t sum = 0;
	for (int64_t i = 0; i < iterations; i++)
		sum += fn(arg, arg, NULL) + 1;
	return sum;
}

/*
 * For the raw-FFM benchmarks: the rig's objects and provider entry points, so Java can call
 * ops.post_send/ops.poll_cq itself with no verbs4j code in between.
 */
BL_EXPORT struct ibv_qp *bl_qp_a(struct bl_rig *r)
{
	return r->a;
}

BL_EXPORT struct ibv_cq *bl_cq_a(struct bl_rig *r)
{
	return r->cq_a;
}

BL_EXPORT void *bl_post_send_fn(struct bl_rig *r)
{
	return (void *)r->a->context->ops.post_send;
}

BL_EXPORT void *bl_poll_cq_fn(struct bl_rig *r)
{
	return (void *)r->cq_a->context->ops.poll_cq;
}

/*
 * Every request of the loops above, built once in one block of the caller's memory: what the
 * raw-FFM rig (Java through critical downcalls) and the JNI twin (Java through JNI natives, as
 * DiSNI drives libibverbs: requests serialized into native memory once, re-posted by address)
 * post, so both post exactly the requests the C loops post. Pointers inside the block point
 * into the block: it must not move (native memory).
 */
struct bl_requests {
	struct ibv_send_wr write, read, send, chain[BL_CHAIN];
	struct ibv_recv_wr recv;
	struct ibv_sge write_sge, read_sge, send_sge, chain_sge[BL_CHAIN], recv_sge;
	struct ibv_send_wr *bad_send;
	struct ibv_recv_wr *bad_recv;
	struct ibv_wc wc[BL_POLL_BATCH];
};

static void rdma_wr(struct bl_rig *r, struct ibv_send_wr *wr, struct ibv_sge *sge, enum ibv_wr_opcode opcode,
		    size_t local, uint64_t remote)
{
	sge_of(sge, r->mr_a, local, BL_MSG);
	memset(wr, 0, sizeof(*wr));
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = opcode;
	wr->send_flags = IBV_SEND_SIGNALED;
	wr->wr.rdma.remote_addr = (uintptr_t)r->mr_b->addr + remote;
	wr->wr.rdma.rkey = r->mr_b->rkey;
}

/* Fills q (bl_layout(16) bytes of the caller's memory, 8-byte aligned) with every request. */
BL_EXPORT void bl_prepare_all(struct bl_rig *r, struct bl_requests *q)
{
	memset(q, 0, sizeof(*q));
	rdma_wr(r, &q->write, &q->write_sge, IBV_WR_RDMA_WRITE, 0, 4096);
	rdma_wr(r, &q->read, &q->read_sge, IBV_WR_RDMA_READ, 0, 4096);
	sge_of(&q->send_sge, r->mr_a, 0, BL_MSG);
	q->send.sg_list = &q->send_sge;
	q->send.num_sge = 1;
	q->send.opcode = IBV_WR_SEND;
	q->send.send_flags = IBV_SEND_SIGNALED;
	sge_of(&q->recv_sge, r->mr_b, 1024, BL_MSG);
	q->recv.sg_list = &q->recv_sge;
	q->recv.num_sge = 1;
	for (int k = 0; k < BL_CHAIN; k++) {
		rdma_wr(r, &q->chain[k], &q->chain_sge[k], IBV_WR_RDMA_WRITE, (size_t)k * BL_MSG,
			4096 + (uint64_t)k * BL_MSG);
		q->chain[k].send_flags = k == BL_CHAIN - 1 ? IBV_SEND_SIGNALED : 0;
		q->chain[k].next = k == BL_CHAIN - 1 ? NULL : &q->chain[k + 1];
	}
}

BL_EXPORT struct ibv_qp *bl_qp_b(struct bl_rig *r)
{
	return r->b;
}

BL_EXPORT struct ibv_cq *bl_cq_b(struct bl_rig *r)
{
	return r->cq_b;
}

BL_EXPORT void *bl_post_recv_fn(struct bl_rig *r)
{
	return (void *)r->b->context->ops.post_recv;
}

/*
 * The sizes and offsets the raw-FFM benchmarks need, from the compiler rather than written
 * twice: 0 sizeof(ibv_send_wr), 1 sizeof(ibv_sge), 2 sizeof(ibv_wc), 3 offsetof(ibv_send_wr,
 * wr_id), 4 offsetof(ibv_wc, wr_id), 5 offsetof(ibv_wc, status), 6 offsetof(ibv_wc, byte_len).
 */
BL_EXPORT int bl_layout(int which)
{
	switch (which) {
	case 0:
		return (int)sizeof(struct ibv_send_wr);
	case 1:
		return (int)sizeof(struct ibv_sge);
	case 2:
		return (int)sizeof(struct ibv_wc);
	case 3:
		return (int)offsetof(struct ibv_send_wr, wr_id);
	case 4:
		return (int)offsetof(struct ibv_wc, wr_id);
	case 5:
		return (int)offsetof(struct ibv_wc, status);
	case 6:
		return (int)offsetof(struct ibv_wc, byte_len);
	/* bl_prepare_all's block: 7 write, 8 read, 9 send, 10 chain[0], 11 recv, 12 bad_send,
	 * 13 bad_recv, 14 wc[0], 15 chain[15].wr_id, 16 its size, 17 offsetof(ibv_recv_wr, wr_id) */
	case 7:
		return (int)offsetof(struct bl_requests, write);
	case 8:
		return (int)offsetof(struct bl_requests, read);
	case 9:
		return (int)offsetof(struct bl_requests, send);
	case 10:
		return (int)offsetof(struct bl_requests, chain);
	case 11:
		return (int)offsetof(struct bl_requests, recv);
	case 12:
		return (int)offsetof(struct bl_requests, bad_send);
	case 13:
		return (int)offsetof(struct bl_requests, bad_recv);
	case 14:
		return (int)offsetof(struct bl_requests, wc);
	case 15:
		return (int)(offsetof(struct bl_requests, chain) + (BL_CHAIN - 1) * sizeof(struct ibv_send_wr) +
			     offsetof(struct ibv_send_wr, wr_id));
	case 16:
		return (int)sizeof(struct bl_requests);
	case 17:
		return (int)offsetof(struct ibv_recv_wr, wr_id);
	default:
		return -1;
	}
}
