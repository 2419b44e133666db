/* Helpers with no device state: strings, rates, fork control, and verbs this device lacks.
 * Calls: no other unit (a leaf). */
#include "srd.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>

SRD_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	static const char *const s[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};
	if ((unsigned)status < sizeof(s) / sizeof(s[0]) && s[status])
		return s[status];
	return "unknown";
}

SRD_EXPORT const char *ibv_node_type_str(enum ibv_node_type t)
{
	switch (t) {
	case IBV_NODE_CA: return "InfiniBand channel adapter";
	case IBV_NODE_SWITCH: return "InfiniBand switch";
	case IBV_NODE_ROUTER: return "InfiniBand router";
	case IBV_NODE_RNIC: return "iWARP NIC";
	case IBV_NODE_USNIC: return "usNIC";
	case IBV_NODE_USNIC_UDP: return "usNIC UDP";
	case IBV_NODE_UNSPECIFIED: return "unspecified";
	default: return "unknown";
	}
}

SRD_EXPORT const char *ibv_port_state_str(enum ibv_port_state s)
{
	static const char *const n[] = { "PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED",
					 "PORT_ACTIVE", "PORT_ACTIVE_DEFER" };
	return (unsigned)s < 6 ? n[s] : "unknown";
}

SRD_EXPORT const char *ibv_event_type_str(enum ibv_event_type e)
{
	static const char *const n[] = {
		[IBV_EVENT_CQ_ERR] = "CQ error",
		[IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
		[IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
		[IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
		[IBV_EVENT_COMM_EST] = "communication established",
		[IBV_EVENT_SQ_DRAINED] = "send queue drained",
		[IBV_EVENT_PATH_MIG] = "path migrated",
		[IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
		[IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
		[IBV_EVENT_PORT_ACTIVE] = "port active",
		[IBV_EVENT_PORT_ERR] = "port error",
		[IBV_EVENT_LID_CHANGE] = "LID change",
		[IBV_EVENT_PKEY_CHANGE] = "P_Key change",
		[IBV_EVENT_SM_CHANGE] = "SM change",
		[IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
		[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
		[IBV_EVENT_GID_CHANGE] = "GID table change",
		[IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};
	if ((unsigned)e < sizeof(n) / sizeof(n[0]) && n[e])
		return n[e];
	return "unknown";
}

/* rate enum <-> value tables (IBTA rate codes) */
static const struct { enum ibv_rate r; int mult; int mbps; } g_rates[] = {
	{ IBV_RATE_2_5_GBPS, 1, 2500 },     { IBV_RATE_5_GBPS, 2, 5000 },
	{ IBV_RATE_10_GBPS, 4, 10000 },     { IBV_RATE_20_GBPS, 8, 20000 },
	{ IBV_RATE_30_GBPS, 12, 30000 },    { IBV_RATE_40_GBPS, 16, 40000 },
	{ IBV_RATE_60_GBPS, 24, 60000 },    { IBV_RATE_80_GBPS, 32, 80000 },
	{ IBV_RATE_120_GBPS, 48, 120000 },  { IBV_RATE_14_GBPS, 5, 14062 },
	{ IBV_RATE_56_GBPS, 22, 56250 },    { IBV_RATE_112_GBPS, 45, 112500 },
	{ IBV_RATE_168_GBPS, 67, 168750 },  { IBV_RATE_25_GBPS, 10, 25781 },
	{ IBV_RATE_100_GBPS, 40, 103125 },  { IBV_RATE_200_GBPS, 80, 206250 },
	{ IBV_RATE_300_GBPS, 120, 309375 }, { IBV_RATE_28_GBPS, 11, 28125 },
	{ IBV_RATE_50_GBPS, 20, 53125 },    { IBV_RATE_400_GBPS, 160, 425000 },
	{ IBV_RATE_600_GBPS, 240, 637500 },
};
#define NRATES (int)(sizeof(g_rates) / sizeof(g_rates[0]))

SRD_EXPORT int ibv_rate_to_mult(enum ibv_rate rate)
{
	for (int i = 0; i < NRATES; i++)
		if (g_rates[i].r == rate)
			return g_rates[i].mult;
	return -1;
}

SRD_EXPORT enum ibv_rate mult_to_ibv_rate(int mult)
{
	for (int i = 0; i < NRATES; i++)
		if (g_rates[i].mult == mult)
			return g_rates[i].r;
	return IBV_RATE_MAX;
}

SRD_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate)
{
	for (int i = 0; i < NRATES; i++)
		if (g_rates[i].r == rate)
			return g_rates[i].mbps;
	return -1;
}

SRD_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (int i = 0; i < NRATES; i++)
		if (g_rates[i].mbps == mbps)
			return g_rates[i].r;
	return IBV_RATE_MAX;
}

/* Memory is never pinned by this device, so fork needs no special care. */
SRD_EXPORT int ibv_fork_init(void) { return 0; }
SRD_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
SRD_EXPORT int ibv_dontfork_range(void *base, size_t size) { (void)base; (void)size; return 0; }
SRD_EXPORT int ibv_dofork_range(void *base, size_t size) { (void)base; (void)size; return 0; }

/* Kernel-ABI struct converters: nothing here speaks the kernel ABI, so there is nothing to convert. */
SRD_EXPORT void ibv_copy_qp_attr_from_kern(void *dst, void *src) { (void)dst; (void)src; }
SRD_EXPORT void ibv_copy_ah_attr_from_kern(void *dst, void *src) { (void)dst; (void)src; }
SRD_EXPORT void ibv_copy_path_rec_from_kern(void *dst, void *src) { (void)dst; (void)src; }
SRD_EXPORT void ibv_copy_path_rec_to_kern(void *dst, void *src) { (void)dst; (void)src; }

SRD_EXPORT int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
					   uint8_t eth_mac[6], uint16_t *vid)
{
	/* there is no Ethernet underneath; report the device's own MAC and no VLAN */
	struct srd_context *ctx = container_of(context, struct srd_context, vctx.context);
	if (!attr->is_global)
		return EINVAL;
	memcpy(eth_mac, ctx->dev->mac, 6);
	if (vid)
		*vid = 0xffff;
	return 0;
}

SRD_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp; (void)op;
	if (flags & ~1u)
		return 0;
	/* data of one message is placed in order (packets are applied in PSN order) */
	return 1;
}

SRD_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece) { (void)qp; (void)ece; return EOPNOTSUPP; }
SRD_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece) { (void)qp; (void)ece; return EOPNOTSUPP; }

SRD_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *c, uint32_t h)
{ (void)c; (void)h; errno = EOPNOTSUPP; return NULL; }
SRD_EXPORT void ibv_unimport_dm(struct ibv_dm *dm) { (void)dm; }
SRD_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					    uint64_t iova, int fd, int access)
{ (void)pd; (void)offset; (void)length; (void)iova; (void)fd; (void)access; errno = EOPNOTSUPP; return NULL; }

/* Old-style provider registration: providers are never loaded, so this is accepted and ignored. */
SRD_EXPORT void ibv_register_driver(const char *name, void *init_func) { (void)name; (void)init_func; }

/* ---------------------------------------------------------------- IBVERBS_PRIVATE_34
 * Provider-facing symbols. Provider libraries (libmlx5, libefa) linked by
 * perftest are loaded and bound but never given a device, so their calls
 * only need to exist and fail cleanly.
 */
SRD_EXPORT void verbs_register_driver_34(const void *ops) { (void)ops; }
SRD_EXPORT bool verbs_allow_disassociate_destroy;

#define PRIV_INT(name) SRD_EXPORT int name(void) { return EOPNOTSUPP; }
#define PRIV_PTR(name) SRD_EXPORT void *name(void) { errno = EOPNOTSUPP; return NULL; }
#define PRIV_VOID(name) SRD_EXPORT void name(void) { }

PRIV_PTR(_verbs_init_and_alloc_context)
PRIV_PTR(verbs_open_device)
PRIV_VOID(verbs_uninit_context)
PRIV_VOID(verbs_set_ops)
PRIV_VOID(verbs_init_cq)
PRIV_VOID(__verbs_log)
PRIV_INT(__ioctl_final_num_attrs)
PRIV_INT(execute_ioctl)
PRIV_INT(ibv_cmd_advise_mr)
PRIV_INT(ibv_cmd_alloc_dm)
PRIV_INT(ibv_cmd_alloc_mw)
PRIV_INT(ibv_cmd_alloc_pd)
PRIV_INT(ibv_cmd_attach_mcast)
PRIV_INT(ibv_cmd_close_xrcd)
PRIV_INT(ibv_cmd_create_ah)
PRIV_INT(ibv_cmd_create_counters)
PRIV_INT(ibv_cmd_create_cq)
PRIV_INT(ibv_cmd_create_cq_ex)
PRIV_INT(ibv_cmd_create_flow)
PRIV_INT(ibv_cmd_create_flow_action_esp)
PRIV_INT(ibv_cmd_create_qp)
PRIV_INT(ibv_cmd_create_qp_ex)
PRIV_INT(ibv_cmd_create_qp_ex2)
PRIV_INT(ibv_cmd_create_rwq_ind_table)
PRIV_INT(ibv_cmd_create_srq)
PRIV_INT(ibv_cmd_create_srq_ex)
PRIV_INT(ibv_cmd_create_wq)
PRIV_INT(ibv_cmd_dealloc_mw)
PRIV_INT(ibv_cmd_dealloc_pd)
PRIV_INT(ibv_cmd_dereg_mr)
PRIV_INT(ibv_cmd_destroy_ah)
PRIV_INT(ibv_cmd_destroy_counters)
PRIV_INT(ibv_cmd_destroy_cq)
PRIV_INT(ibv_cmd_destroy_flow)
PRIV_INT(ibv_cmd_destroy_flow_action)
PRIV_INT(ibv_cmd_destroy_qp)
PRIV_INT(ibv_cmd_destroy_rwq_ind_table)
PRIV_INT(ibv_cmd_destroy_srq)
PRIV_INT(ibv_cmd_destroy_wq)
PRIV_INT(ibv_cmd_detach_mcast)
PRIV_INT(ibv_cmd_free_dm)
PRIV_INT(ibv_cmd_get_context)
PRIV_INT(ibv_cmd_modify_cq)
PRIV_INT(ibv_cmd_modify_flow_action_esp)
PRIV_INT(ibv_cmd_modify_qp)
PRIV_INT(ibv_cmd_modify_qp_ex)
PRIV_INT(ibv_cmd_modify_srq)
PRIV_INT(ibv_cmd_modify_wq)
PRIV_INT(ibv_cmd_open_qp)
PRIV_INT(ibv_cmd_open_xrcd)
PRIV_INT(ibv_cmd_poll_cq)
PRIV_INT(ibv_cmd_post_recv)
PRIV_INT(ibv_cmd_post_send)
PRIV_INT(ibv_cmd_post_srq_recv)
PRIV_INT(ibv_cmd_query_context)
PRIV_INT(ibv_cmd_query_device_any)
PRIV_INT(ibv_cmd_query_mr)
PRIV_INT(ibv_cmd_query_port)
PRIV_INT(ibv_cmd_query_qp)
PRIV_INT(ibv_cmd_query_srq)
PRIV_INT(ibv_cmd_read_counters)
PRIV_INT(ibv_cmd_reg_dm_mr)
PRIV_INT(ibv_cmd_reg_dmabuf_mr)
PRIV_INT(ibv_cmd_reg_mr)
PRIV_INT(ibv_cmd_req_notify_cq)
PRIV_INT(ibv_cmd_rereg_mr)
PRIV_INT(ibv_cmd_resize_cq)
