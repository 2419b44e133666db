package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;

/**
 * The ABI values of {@code <infiniband/verbs.h>} that verbs-core's enums and owners use, each
 * named once, under its C name, and read from the generated bindings (so the header is their
 * one source). verbs-core's public enums ({@code QpType}, {@code WcStatus}, {@code Access}, ...)
 * take their values from here; the struct codecs of this package use the generated constants
 * themselves.
 */
public final class VerbsConstants {

    private VerbsConstants() {
    }

    // enum ibv_transport_type
    public static final int IBV_TRANSPORT_UNKNOWN = RdmaCore.IBV_TRANSPORT_UNKNOWN();
    public static final int IBV_TRANSPORT_IB = RdmaCore.IBV_TRANSPORT_IB();
    public static final int IBV_TRANSPORT_IWARP = RdmaCore.IBV_TRANSPORT_IWARP();
    public static final int IBV_TRANSPORT_USNIC = RdmaCore.IBV_TRANSPORT_USNIC();
    public static final int IBV_TRANSPORT_USNIC_UDP = RdmaCore.IBV_TRANSPORT_USNIC_UDP();
    public static final int IBV_TRANSPORT_UNSPECIFIED = RdmaCore.IBV_TRANSPORT_UNSPECIFIED();

    // enum ibv_qp_type
    public static final int IBV_QPT_RC = RdmaCore.IBV_QPT_RC();
    public static final int IBV_QPT_UC = RdmaCore.IBV_QPT_UC();
    public static final int IBV_QPT_UD = RdmaCore.IBV_QPT_UD();
    public static final int IBV_QPT_XRC_SEND = RdmaCore.IBV_QPT_XRC_SEND();

    // enum ibv_qp_state
    public static final int IBV_QPS_RESET = RdmaCore.IBV_QPS_RESET();
    public static final int IBV_QPS_INIT = RdmaCore.IBV_QPS_INIT();
    public static final int IBV_QPS_RTR = RdmaCore.IBV_QPS_RTR();
    public static final int IBV_QPS_RTS = RdmaCore.IBV_QPS_RTS();
    public static final int IBV_QPS_SQD = RdmaCore.IBV_QPS_SQD();
    public static final int IBV_QPS_SQE = RdmaCore.IBV_QPS_SQE();
    public static final int IBV_QPS_ERR = RdmaCore.IBV_QPS_ERR();
    public static final int IBV_QPS_UNKNOWN = RdmaCore.IBV_QPS_UNKNOWN();

    // enum ibv_mtu
    public static final int IBV_MTU_256 = RdmaCore.IBV_MTU_256();
    public static final int IBV_MTU_512 = RdmaCore.IBV_MTU_512();
    public static final int IBV_MTU_1024 = RdmaCore.IBV_MTU_1024();
    public static final int IBV_MTU_2048 = RdmaCore.IBV_MTU_2048();
    public static final int IBV_MTU_4096 = RdmaCore.IBV_MTU_4096();

    // enum ibv_port_state
    public static final int IBV_PORT_NOP = RdmaCore.IBV_PORT_NOP();
    public static final int IBV_PORT_DOWN = RdmaCore.IBV_PORT_DOWN();
    public static final int IBV_PORT_INIT = RdmaCore.IBV_PORT_INIT();
    public static final int IBV_PORT_ARMED = RdmaCore.IBV_PORT_ARMED();
    public static final int IBV_PORT_ACTIVE = RdmaCore.IBV_PORT_ACTIVE();
    public static final int IBV_PORT_ACTIVE_DEFER = RdmaCore.IBV_PORT_ACTIVE_DEFER();

    // the link layers of struct ibv_port_attr
    public static final int IBV_LINK_LAYER_UNSPECIFIED = RdmaCore.IBV_LINK_LAYER_UNSPECIFIED();
    public static final int IBV_LINK_LAYER_INFINIBAND = RdmaCore.IBV_LINK_LAYER_INFINIBAND();
    public static final int IBV_LINK_LAYER_ETHERNET = RdmaCore.IBV_LINK_LAYER_ETHERNET();

    // enum ibv_gid_type
    public static final int IBV_GID_TYPE_IB = RdmaCore.IBV_GID_TYPE_IB();
    public static final int IBV_GID_TYPE_ROCE_V1 = RdmaCore.IBV_GID_TYPE_ROCE_V1();
    public static final int IBV_GID_TYPE_ROCE_V2 = RdmaCore.IBV_GID_TYPE_ROCE_V2();

    // enum ibv_access_flags
    public static final int IBV_ACCESS_LOCAL_WRITE = RdmaCore.IBV_ACCESS_LOCAL_WRITE();
    public static final int IBV_ACCESS_REMOTE_WRITE = RdmaCore.IBV_ACCESS_REMOTE_WRITE();
    public static final int IBV_ACCESS_REMOTE_READ = RdmaCore.IBV_ACCESS_REMOTE_READ();
    public static final int IBV_ACCESS_REMOTE_ATOMIC = RdmaCore.IBV_ACCESS_REMOTE_ATOMIC();
    public static final int IBV_ACCESS_MW_BIND = RdmaCore.IBV_ACCESS_MW_BIND();
    public static final int IBV_ACCESS_ZERO_BASED = RdmaCore.IBV_ACCESS_ZERO_BASED();
    public static final int IBV_ACCESS_ON_DEMAND = RdmaCore.IBV_ACCESS_ON_DEMAND();
    public static final int IBV_ACCESS_RELAXED_ORDERING = RdmaCore.IBV_ACCESS_RELAXED_ORDERING();

    // enum ibv_event_type
    public static final int IBV_EVENT_CQ_ERR = RdmaCore.IBV_EVENT_CQ_ERR();
    public static final int IBV_EVENT_QP_FATAL = RdmaCore.IBV_EVENT_QP_FATAL();
    public static final int IBV_EVENT_QP_REQ_ERR = RdmaCore.IBV_EVENT_QP_REQ_ERR();
    public static final int IBV_EVENT_QP_ACCESS_ERR = RdmaCore.IBV_EVENT_QP_ACCESS_ERR();
    public static final int IBV_EVENT_COMM_EST = RdmaCore.IBV_EVENT_COMM_EST();
    public static final int IBV_EVENT_SQ_DRAINED = RdmaCore.IBV_EVENT_SQ_DRAINED();
    public static final int IBV_EVENT_PATH_MIG = RdmaCore.IBV_EVENT_PATH_MIG();
    public static final int IBV_EVENT_PATH_MIG_ERR = RdmaCore.IBV_EVENT_PATH_MIG_ERR();
    public static final int IBV_EVENT_DEVICE_FATAL = RdmaCore.IBV_EVENT_DEVICE_FATAL();
    public static final int IBV_EVENT_PORT_ACTIVE = RdmaCore.IBV_EVENT_PORT_ACTIVE();
    public static final int IBV_EVENT_PORT_ERR = RdmaCore.IBV_EVENT_PORT_ERR();
    public static final int IBV_EVENT_LID_CHANGE = RdmaCore.IBV_EVENT_LID_CHANGE();
    public static final int IBV_EVENT_PKEY_CHANGE = RdmaCore.IBV_EVENT_PKEY_CHANGE();
    public static final int IBV_EVENT_SM_CHANGE = RdmaCore.IBV_EVENT_SM_CHANGE();
    public static final int IBV_EVENT_SRQ_ERR = RdmaCore.IBV_EVENT_SRQ_ERR();
    public static final int IBV_EVENT_SRQ_LIMIT_REACHED = RdmaCore.IBV_EVENT_SRQ_LIMIT_REACHED();
    public static final int IBV_EVENT_QP_LAST_WQE_REACHED = RdmaCore.IBV_EVENT_QP_LAST_WQE_REACHED();
    public static final int IBV_EVENT_CLIENT_REREGISTER = RdmaCore.IBV_EVENT_CLIENT_REREGISTER();
    public static final int IBV_EVENT_GID_CHANGE = RdmaCore.IBV_EVENT_GID_CHANGE();
    public static final int IBV_EVENT_WQ_FATAL = RdmaCore.IBV_EVENT_WQ_FATAL();

    // enum ibv_wr_opcode
    public static final int IBV_WR_SEND = RdmaCore.IBV_WR_SEND();
    public static final int IBV_WR_SEND_WITH_IMM = RdmaCore.IBV_WR_SEND_WITH_IMM();
    public static final int IBV_WR_RDMA_WRITE = RdmaCore.IBV_WR_RDMA_WRITE();
    public static final int IBV_WR_RDMA_WRITE_WITH_IMM = RdmaCore.IBV_WR_RDMA_WRITE_WITH_IMM();
    public static final int IBV_WR_RDMA_READ = RdmaCore.IBV_WR_RDMA_READ();
    public static final int IBV_WR_ATOMIC_CMP_AND_SWP = RdmaCore.IBV_WR_ATOMIC_CMP_AND_SWP();
    public static final int IBV_WR_ATOMIC_FETCH_AND_ADD = RdmaCore.IBV_WR_ATOMIC_FETCH_AND_ADD();
    public static final int IBV_WR_SEND_WITH_INV = RdmaCore.IBV_WR_SEND_WITH_INV();
    public static final int IBV_WR_BIND_MW = RdmaCore.IBV_WR_BIND_MW();
    public static final int IBV_WR_LOCAL_INV = RdmaCore.IBV_WR_LOCAL_INV();

    // enum ibv_send_flags
    public static final int IBV_SEND_SIGNALED = RdmaCore.IBV_SEND_SIGNALED();
    public static final int IBV_SEND_INLINE = RdmaCore.IBV_SEND_INLINE();

    // enum ibv_wc_opcode
    public static final int IBV_WC_SEND = RdmaCore.IBV_WC_SEND();
    public static final int IBV_WC_RDMA_WRITE = RdmaCore.IBV_WC_RDMA_WRITE();
    public static final int IBV_WC_RDMA_READ = RdmaCore.IBV_WC_RDMA_READ();
    public static final int IBV_WC_COMP_SWAP = RdmaCore.IBV_WC_COMP_SWAP();
    public static final int IBV_WC_FETCH_ADD = RdmaCore.IBV_WC_FETCH_ADD();
    public static final int IBV_WC_BIND_MW = RdmaCore.IBV_WC_BIND_MW();
    public static final int IBV_WC_LOCAL_INV = RdmaCore.IBV_WC_LOCAL_INV();
    public static final int IBV_WC_TSO = RdmaCore.IBV_WC_TSO();
    public static final int IBV_WC_RECV = RdmaCore.IBV_WC_RECV();
    public static final int IBV_WC_RECV_RDMA_WITH_IMM = RdmaCore.IBV_WC_RECV_RDMA_WITH_IMM();

    // enum ibv_wc_flags (the ones named outside the poll path)
    public static final int IBV_WC_IP_CSUM_OK = RdmaCore.IBV_WC_IP_CSUM_OK();
    public static final int IBV_WC_WITH_INV = RdmaCore.IBV_WC_WITH_INV();

    // enum ibv_wc_status
    public static final int IBV_WC_SUCCESS = RdmaCore.IBV_WC_SUCCESS();
    public static final int IBV_WC_LOC_LEN_ERR = RdmaCore.IBV_WC_LOC_LEN_ERR();
    public static final int IBV_WC_LOC_QP_OP_ERR = RdmaCore.IBV_WC_LOC_QP_OP_ERR();
    public static final int IBV_WC_LOC_EEC_OP_ERR = RdmaCore.IBV_WC_LOC_EEC_OP_ERR();
    public static final int IBV_WC_LOC_PROT_ERR = RdmaCore.IBV_WC_LOC_PROT_ERR();
    public static final int IBV_WC_WR_FLUSH_ERR = RdmaCore.IBV_WC_WR_FLUSH_ERR();
    public static final int IBV_WC_MW_BIND_ERR = RdmaCore.IBV_WC_MW_BIND_ERR();
    public static final int IBV_WC_BAD_RESP_ERR = RdmaCore.IBV_WC_BAD_RESP_ERR();
    public static final int IBV_WC_LOC_ACCESS_ERR = RdmaCore.IBV_WC_LOC_ACCESS_ERR();
    public static final int IBV_WC_REM_INV_REQ_ERR = RdmaCore.IBV_WC_REM_INV_REQ_ERR();
    public static final int IBV_WC_REM_ACCESS_ERR = RdmaCore.IBV_WC_REM_ACCESS_ERR();
    public static final int IBV_WC_REM_OP_ERR = RdmaCore.IBV_WC_REM_OP_ERR();
    public static final int IBV_WC_RETRY_EXC_ERR = RdmaCore.IBV_WC_RETRY_EXC_ERR();
    public static final int IBV_WC_RNR_RETRY_EXC_ERR = RdmaCore.IBV_WC_RNR_RETRY_EXC_ERR();
    public static final int IBV_WC_LOC_RDD_VIOL_ERR = RdmaCore.IBV_WC_LOC_RDD_VIOL_ERR();
    public static final int IBV_WC_REM_INV_RD_REQ_ERR = RdmaCore.IBV_WC_REM_INV_RD_REQ_ERR();
    public static final int IBV_WC_REM_ABORT_ERR = RdmaCore.IBV_WC_REM_ABORT_ERR();
    public static final int IBV_WC_INV_EECN_ERR = RdmaCore.IBV_WC_INV_EECN_ERR();
    public static final int IBV_WC_INV_EEC_STATE_ERR = RdmaCore.IBV_WC_INV_EEC_STATE_ERR();
    public static final int IBV_WC_FATAL_ERR = RdmaCore.IBV_WC_FATAL_ERR();
    public static final int IBV_WC_RESP_TIMEOUT_ERR = RdmaCore.IBV_WC_RESP_TIMEOUT_ERR();
    public static final int IBV_WC_GENERAL_ERR = RdmaCore.IBV_WC_GENERAL_ERR();
    public static final int IBV_WC_TM_ERR = RdmaCore.IBV_WC_TM_ERR();
    public static final int IBV_WC_TM_RNDV_INCOMPLETE = RdmaCore.IBV_WC_TM_RNDV_INCOMPLETE();

    // enum ibv_srq_attr_mask: which fields ibv_modify_srq changes
    public static final int IBV_SRQ_MAX_WR = RdmaCore.IBV_SRQ_MAX_WR();
    public static final int IBV_SRQ_LIMIT = RdmaCore.IBV_SRQ_LIMIT();

    // enum ibv_mw_type
    public static final int IBV_MW_TYPE_1 = RdmaCore.IBV_MW_TYPE_1();
    public static final int IBV_MW_TYPE_2 = RdmaCore.IBV_MW_TYPE_2();

    // enum ibv_advise_mr_advice and its flag
    public static final int IBV_ADVISE_MR_ADVICE_PREFETCH = RdmaCore.IBV_ADVISE_MR_ADVICE_PREFETCH();
    public static final int IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE = RdmaCore.IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE();
    public static final int IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT = RdmaCore.IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT();
    public static final int IBV_ADVISE_MR_FLAG_FLUSH = RdmaCore.IBV_ADVISE_MR_FLAG_FLUSH();

    // enum ibv_rereg_mr_flags: what ibv_rereg_mr changes
    public static final int IBV_REREG_MR_CHANGE_TRANSLATION = RdmaCore.IBV_REREG_MR_CHANGE_TRANSLATION();
    public static final int IBV_REREG_MR_CHANGE_PD = RdmaCore.IBV_REREG_MR_CHANGE_PD();
    public static final int IBV_REREG_MR_CHANGE_ACCESS = RdmaCore.IBV_REREG_MR_CHANGE_ACCESS();

    // enum ibv_rereg_mr_err_code: the negative results of ibv_rereg_mr
    public static final int IBV_REREG_MR_ERR_INPUT = RdmaCore.IBV_REREG_MR_ERR_INPUT();
    public static final int IBV_REREG_MR_ERR_DONT_FORK_NEW = RdmaCore.IBV_REREG_MR_ERR_DONT_FORK_NEW();
    public static final int IBV_REREG_MR_ERR_DO_FORK_OLD = RdmaCore.IBV_REREG_MR_ERR_DO_FORK_OLD();
    public static final int IBV_REREG_MR_ERR_CMD = RdmaCore.IBV_REREG_MR_ERR_CMD();
    public static final int IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW = RdmaCore.IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW();
}
