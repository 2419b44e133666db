package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_mw_bind_info;
import io.github.verbs4j.ffi.ibv_recv_wr;
import io.github.verbs4j.ffi.ibv_send_wr;
import io.github.verbs4j.ffi.ibv_sge;

/**
 * Where the fields of a work request lie: {@code struct ibv_send_wr} (with its {@code wr} union,
 * {@code qp_type.xrc} and {@code bind_mw}), {@code struct ibv_recv_wr}, {@code struct ibv_sge},
 * and the flags and operation bits a post passes ({@code IBV_SEND_*}, {@code IBV_QP_EX_WITH_*}).
 *
 * <p>These are the hot path's layout, so they are plain {@code static final} constants taken
 * once from the generated layouts: a request writes {@code segment.set(JAVA_LONG, SEND_WR_ID, id)}
 * and the JIT folds the offset into the store, exactly as if it were a literal. No method here
 * is called per post; a codec object per request would cost an allocation or a call the post
 * does not need. Offsets inside a nested member ({@code wr.rdma.remote_addr}) are already summed
 * from the start of the outer struct.
 *
 * <p>{@code WorkRequestLayoutTest} (verbs-ffi's tests) checks every constant against the
 * generated accessors and against gcc's own offsets.
 */
public final class WorkRequestLayout {

    private WorkRequestLayout() {
    }

    // ---------------------------------------------------------------- struct ibv_send_wr

    /** {@code sizeof(struct ibv_send_wr)}. */
    public static final long SEND_WR_SIZE = ibv_send_wr.layout().byteSize();
    /** {@code uint64_t wr_id}. */
    public static final long SEND_WR_ID = ibv_send_wr.wr_id$offset();
    /** {@code struct ibv_send_wr *next}. */
    public static final long SEND_NEXT = ibv_send_wr.next$offset();
    /** {@code struct ibv_sge *sg_list}. */
    public static final long SEND_SG_LIST = ibv_send_wr.sg_list$offset();
    /** {@code int num_sge}. */
    public static final long SEND_NUM_SGE = ibv_send_wr.num_sge$offset();
    /** {@code enum ibv_wr_opcode opcode} (an {@code int}). */
    public static final long SEND_OPCODE = ibv_send_wr.opcode$offset();
    /** {@code unsigned int send_flags}: the {@code IBV_SEND_*} bits below. */
    public static final long SEND_FLAGS = ibv_send_wr.send_flags$offset();
    /** {@code __be32 imm_data}: big-endian on the wire and in the struct. */
    public static final long SEND_IMM_DATA = ibv_send_wr.imm_data$offset();
    /** {@code uint32_t invalidate_rkey} (same storage as {@code imm_data}: a union). */
    public static final long SEND_INVALIDATE_RKEY = ibv_send_wr.invalidate_rkey$offset();

    private static final long WR = ibv_send_wr.wr$offset();
    private static final long RDMA = WR + ibv_send_wr.wr.rdma$offset();
    private static final long ATOMIC = WR + ibv_send_wr.wr.atomic$offset();
    private static final long UD = WR + ibv_send_wr.wr.ud$offset();

    /** {@code wr.rdma.remote_addr} (RDMA READ/WRITE). */
    public static final long SEND_RDMA_REMOTE_ADDR = RDMA + ibv_send_wr.wr.rdma.remote_addr$offset();
    /** {@code wr.rdma.rkey}. */
    public static final long SEND_RDMA_RKEY = RDMA + ibv_send_wr.wr.rdma.rkey$offset();
    /** {@code wr.atomic.remote_addr}. */
    public static final long SEND_ATOMIC_REMOTE_ADDR = ATOMIC + ibv_send_wr.wr.atomic.remote_addr$offset();
    /** {@code wr.atomic.compare_add}. */
    public static final long SEND_ATOMIC_COMPARE_ADD = ATOMIC + ibv_send_wr.wr.atomic.compare_add$offset();
    /** {@code wr.atomic.swap}. */
    public static final long SEND_ATOMIC_SWAP = ATOMIC + ibv_send_wr.wr.atomic.swap$offset();
    /** {@code wr.atomic.rkey}. */
    public static final long SEND_ATOMIC_RKEY = ATOMIC + ibv_send_wr.wr.atomic.rkey$offset();
    /** {@code wr.ud.ah} ({@code struct ibv_ah *}). */
    public static final long SEND_UD_AH = UD + ibv_send_wr.wr.ud.ah$offset();
    /** {@code wr.ud.remote_qpn}. */
    public static final long SEND_UD_REMOTE_QPN = UD + ibv_send_wr.wr.ud.remote_qpn$offset();
    /** {@code wr.ud.remote_qkey}. */
    public static final long SEND_UD_REMOTE_QKEY = UD + ibv_send_wr.wr.ud.remote_qkey$offset();
    /** {@code qp_type.xrc.remote_srqn}. */
    public static final long SEND_XRC_REMOTE_SRQN = ibv_send_wr.qp_type$offset() + ibv_send_wr.qp_type.xrc$offset()
            + ibv_send_wr.qp_type.xrc.remote_srqn$offset();

    private static final long BIND_MW = ibv_send_wr.bind_mw$offset();
    private static final long BIND_INFO = BIND_MW + ibv_send_wr.bind_mw.bind_info$offset();

    /** {@code bind_mw.mw} ({@code struct ibv_mw *}). */
    public static final long SEND_BIND_MW_MW = BIND_MW + ibv_send_wr.bind_mw.mw$offset();
    /** {@code bind_mw.rkey}: the rkey the window gets. */
    public static final long SEND_BIND_MW_RKEY = BIND_MW + ibv_send_wr.bind_mw.rkey$offset();
    /** {@code bind_mw.bind_info.mr} ({@code struct ibv_mr *}). */
    public static final long SEND_BIND_MW_MR = BIND_INFO + ibv_mw_bind_info.mr$offset();
    /** {@code bind_mw.bind_info.addr}. */
    public static final long SEND_BIND_MW_ADDR = BIND_INFO + ibv_mw_bind_info.addr$offset();
    /** {@code bind_mw.bind_info.length}. */
    public static final long SEND_BIND_MW_LENGTH = BIND_INFO + ibv_mw_bind_info.length$offset();
    /** {@code bind_mw.bind_info.mw_access_flags}. */
    public static final long SEND_BIND_MW_ACCESS = BIND_INFO + ibv_mw_bind_info.mw_access_flags$offset();

    /** {@code IBV_SEND_FENCE}. */
    public static final int SEND_FENCE = RdmaCore.IBV_SEND_FENCE();
    /** {@code IBV_SEND_SIGNALED}. */
    public static final int SEND_SIGNALED = RdmaCore.IBV_SEND_SIGNALED();
    /** {@code IBV_SEND_SOLICITED}. */
    public static final int SEND_SOLICITED = RdmaCore.IBV_SEND_SOLICITED();
    /** {@code IBV_SEND_INLINE}. */
    public static final int SEND_INLINE = RdmaCore.IBV_SEND_INLINE();

    // ---------------------------------------------------------------- struct ibv_recv_wr

    /** {@code sizeof(struct ibv_recv_wr)}. */
    public static final long RECV_WR_SIZE = ibv_recv_wr.layout().byteSize();
    /** {@code uint64_t wr_id}. */
    public static final long RECV_WR_ID = ibv_recv_wr.wr_id$offset();
    /** {@code struct ibv_recv_wr *next}. */
    public static final long RECV_NEXT = ibv_recv_wr.next$offset();
    /** {@code struct ibv_sge *sg_list}. */
    public static final long RECV_SG_LIST = ibv_recv_wr.sg_list$offset();
    /** {@code int num_sge}. */
    public static final long RECV_NUM_SGE = ibv_recv_wr.num_sge$offset();

    // ---------------------------------------------------------------- struct ibv_sge

    /** {@code sizeof(struct ibv_sge)}: the stride of a scatter/gather array. */
    public static final long SGE_SIZE = ibv_sge.layout().byteSize();
    /** {@code uint64_t addr}. */
    public static final long SGE_ADDR = ibv_sge.addr$offset();
    /** {@code uint32_t length}. */
    public static final long SGE_LENGTH = ibv_sge.length$offset();
    /** {@code uint32_t lkey}. */
    public static final long SGE_LKEY = ibv_sge.lkey$offset();

    // ---------------------------------------------------------------- ibv_qp_init_attr_ex.send_ops_flags

    /** {@code IBV_QP_EX_WITH_SEND}. */
    public static final int QP_EX_WITH_SEND = RdmaCore.IBV_QP_EX_WITH_SEND();
    /** {@code IBV_QP_EX_WITH_SEND_WITH_IMM}. */
    public static final int QP_EX_WITH_SEND_WITH_IMM = RdmaCore.IBV_QP_EX_WITH_SEND_WITH_IMM();
    /** {@code IBV_QP_EX_WITH_SEND_WITH_INV}. */
    public static final int QP_EX_WITH_SEND_WITH_INV = RdmaCore.IBV_QP_EX_WITH_SEND_WITH_INV();
    /** {@code IBV_QP_EX_WITH_RDMA_WRITE}. */
    public static final int QP_EX_WITH_RDMA_WRITE = RdmaCore.IBV_QP_EX_WITH_RDMA_WRITE();
    /** {@code IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM}. */
    public static final int QP_EX_WITH_RDMA_WRITE_WITH_IMM = RdmaCore.IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM();
    /** {@code IBV_QP_EX_WITH_RDMA_READ}. */
    public static final int QP_EX_WITH_RDMA_READ = RdmaCore.IBV_QP_EX_WITH_RDMA_READ();
    /** {@code IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP}. */
    public static final int QP_EX_WITH_ATOMIC_CMP_AND_SWP = RdmaCore.IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP();
    /** {@code IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD}. */
    public static final int QP_EX_WITH_ATOMIC_FETCH_AND_ADD = RdmaCore.IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD();
    /** {@code IBV_QP_EX_WITH_LOCAL_INV}. */
    public static final int QP_EX_WITH_LOCAL_INV = RdmaCore.IBV_QP_EX_WITH_LOCAL_INV();
    /** {@code IBV_QP_EX_WITH_BIND_MW}. */
    public static final int QP_EX_WITH_BIND_MW = RdmaCore.IBV_QP_EX_WITH_BIND_MW();
}
