/*
 * The C twins of the extended-QP/CQ benchmarks (io.github.verbs4j.jmh.ExtendedJavaVsC): the
 * same rig as baseline.c's (one PD, two CQs of 64 entries, two connected RC QPs with 32 send and
 * receive requests, 4 SGEs, 64 inline bytes, two 64 KiB regions with every right), but the CQs
 * come from ibv_create_cq_ex and the QPs from ibv_create_qp_ex, and the loops post through the
 * post-send API (ibv_wr_*) and poll through ibv_start_poll/ibv_next_poll/ibv_end_poll.
 * Return codes as in baseline.c: a checksum, or a negative code (-errno of wr_complete,
 * BLX_BAD_COMPLETION - status).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLX_EXPORT __attribute__((visibility("default")))
#define BLX_SIZE (64 * 1024)
#define BLX_MSG 64
#define BLX_BAD_COMPLETION (-200000)

struct blx_rig {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq_ex *cq_a, *cq_b;
	struct ibv_qp *a, *b;
	struct ibv_qp_ex *xa;
	void *buf_a, *buf_b;
	struct ibv_mr *mr_a, *mr_b;
};

BLX_EXPORT void blx_close(struct blx_rig *r)
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
		ibv_destroy_cq(ibv_cq_ex_to_cq(r->cq_b));
	if (r->cq_a)
		ibv_destroy_cq(ibv_cq_ex_to_cq(r->cq_a));
	if (r->pd)
		ibv_dealloc_pd(r->pd);
	if (r->ctx)
		ibv_close_device(r->ctx);
	free(r->buf_b);
	free(r->buf_a);
	free(r);
}

static struct ibv_cq_ex *mkcq(struct ibv_context *ctx)
{
	struct ibv_cq_init_attr_ex a = { .cqe = 64, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN };
	return ibv_create_cq_ex(ctx, &a);
}

static struct ibv_qp *mkqp(struct blx_rig *r, struct ibv_cq_ex *cq)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = ibv_cq_ex_to_cq(cq), .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 32, .max_recv_wr = 32, .max_send_sge = 4, .max_recv_sge = 4,
			 .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = r->pd,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ,
	};
	return ibv_create_qp_ex(r->ctx, &a);
}

static int connect_qp(struct ibv_qp *qp, struct ibv_qp *peer, const union ibv_gid *gid, int gid_index)
{
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				    .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						       IBV_ACCESS_REMOTE_ATOMIC };
	int rc = ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		return rc;
	struct ibv_qp_attr rtr = { .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = peer->qp_num,
				   .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
				   .ah_attr = { .is_global = 1, .port_num = 1,
						.grh = { .dgid = *gid, .sgid_index = (uint8_t)gid_index, .hop_limit = 64 } } };
	rc = ibv_modify_qp(qp, &rtr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		return rc;
	struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
				   .max_rd_atomic = 1 };
	return ibv_modify_qp(qp, &rts, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

#define FAIL(...)                                           \
	do {                                                \
		snprintf(err, (size_t)errlen, __VA_ARGS__); \
		blx_close(r);                               \
		return NULL;                                \
	} while (0)

BLX_EXPORT struct blx_rig *blx_open(char *err, int errlen)
{
	struct blx_rig *r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(err, (size_t)errlen, "calloc: %s", strerror(errno));
		return NULL;
	}
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		if (list)
			ibv_free_device_list(list);
		FAIL("ibv_get_device_list: no devices");
	}
	r->ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!r->ctx)
		FAIL("ibv_open_device: %s", strerror(errno));
	union ibv_gid gid;
	int gid_index = 1;
	if (ibv_query_gid(r->ctx, 1, gid_index, &gid) || (gid.global.subnet_prefix == 0 && gid.global.interface_id == 0)) {
		gid_index = 0;
		if (ibv_query_gid(r->ctx, 1, gid_index, &gid))
			FAIL("ibv_query_gid: %s", strerror(errno));
	}
	if (!(r->pd = ibv_alloc_pd(r->ctx)))
		FAIL("ibv_alloc_pd: %s", strerror(errno));
	if (!(r->cq_a = mkcq(r->ctx)) || !(r->cq_b = mkcq(r->ctx)))
		FAIL("ibv_create_cq_ex: %s", strerror(errno));
	if (!(r->a = mkqp(r, r->cq_a)) || !(r->b = mkqp(r, r->cq_b)))
		FAIL("ibv_create_qp_ex: %s", strerror(errno));
	if (!(r->xa = ibv_qp_to_qp_ex(r->a)))
		FAIL("ibv_qp_to_qp_ex: NULL");
	if (posix_memalign(&r->buf_a, 4096, BLX_SIZE) || posix_memalign(&r->buf_b, 4096, BLX_SIZE))
		FAIL("posix_memalign: out of memory");
	memset(r->buf_a, 0, BLX_SIZE);
	memset(r->buf_b, 0, BLX_SIZE);
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	if (!(r->mr_a = ibv_reg_mr(r->pd, r->buf_a, BLX_SIZE, access)) ||
	    !(r->mr_b = ibv_reg_mr(r->pd, r->buf_b, BLX_SIZE, access)))
		FAIL("ibv_reg_mr: %s", strerror(errno));
	int rc;
	if ((rc = connect_qp(r->a, r->b, &gid, gid_index)) || (rc = connect_qp(r->b, r->a, &gid, gid_index)))
		FAIL("ibv_modify_qp: %s", strerror(rc));
	return r;
}

/* Spins until one completion arrives through start_poll/end_poll; wr_id + byte_len or a code. */
static inline int64_t await_one_ex(struct ibv_cq_ex *cq)
{
	struct ibv_poll_cq_attr attr = { 0 };
	while (ibv_start_poll(cq, &attr) == ENOENT)
		;
	int64_t v = cq->status == IBV_WC_SUCCESS ? (int64_t)(cq->wr_id + ibv_wc_read_byte_len(cq))
						 : BLX_BAD_COMPLETION - cq->status;
	ibv_end_poll(cq);
	return v;
}

/* RDMA WRITE of 64 bytes through ibv_wr_start/rdma_write/set_sge/complete, polled through start_poll. */
BLX_EXPORT int64_t blx_write(struct blx_rig *r, int64_t iterations)
{
	struct ibv_qp_ex *x = r->xa;
	uint64_t remote = (uintptr_t)r->mr_b->addr + 4096;
	int64_t sum = 0;
	for (int64_t i = 0; i < iterations; i++) {
		ibv_wr_start(x);
		x->wr_id = (uint64_t)i;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(x, r->mr_b->rkey, remote);
		ibv_wr_set_sge(x, r->mr_a->lkey, (uintptr_t)r->mr_a->addr, BLX_MSG);
		int rc = ibv_wr_complete(x);
		if (rc)
			return -(int64_t)abs(rc);
		int64_t v = await_one_ex(r->cq_a);
		if (v < 0)
			return v;
		sum += v;
	}
	return sum;
}

/* An empty extended CQ: start_poll answering ENOENT. */
BLX_EXPORT int64_t blx_poll_empty(struct blx_rig *r, int64_t iterations)
{
	struct ibv_poll_cq_attr attr = { 0 };
	int64_t sum = 0;
	for (int64_t i = 0; i < iterations; i++) {
		int rc = ibv_start_poll(r->cq_a, &attr);
		if (rc == 0)
			ibv_end_poll(r->cq_a);
		sum += rc;
	}
	return sum;
}
