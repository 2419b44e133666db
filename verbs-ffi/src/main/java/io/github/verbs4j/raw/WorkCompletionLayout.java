package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_cq;
import io.github.verbs4j.ffi.ibv_poll_cq_attr;
import io.github.verbs4j.ffi.ibv_wc;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * Where the fields of a work completion lie: {@code struct ibv_wc} (the array
 * {@code ibv_poll_cq} fills), its {@code IBV_WC_*} flags, the {@code IBV_WC_EX_WITH_*} bits an
 * extended completion queue is created with, {@code struct ibv_poll_cq_attr}, and the one field
 * of {@code struct ibv_cq} verbs-core reads.
 *
 * <p>As {@link WorkRequestLayout}: plain {@code static final} constants taken once from the
 * generated layouts, so a completion read {@code array.get(JAVA_INT, base + WC_STATUS)} folds to
 * a load at a constant offset; nothing here is called per poll. The fields of
 * {@code struct ibv_cq_ex} the polling session reads are in {@link ExtendedOps}.
 *
 * <p>{@code WorkCompletionLayoutTest} (verbs-ffi's tests) checks every constant against the
 * generated accessors and against gcc's own offsets.
 */
public final class WorkCompletionLayout {

    private WorkCompletionLayout() {
    }

    // ---------------------------------------------------------------- struct ibv_wc

    /** {@code sizeof(struct ibv_wc)}: the stride of the array {@code ibv_poll_cq} fills. */
    public static final long WC_SIZE = ibv_wc.layout().byteSize();
    /** {@code _Alignof(struct ibv_wc)}. */
    public static final long WC_ALIGNMENT = ibv_wc.layout().byteAlignment();
    /** {@code uint64_t wr_id}. */
    public static final long WC_WR_ID = ibv_wc.wr_id$offset();
    /** {@code enum ibv_wc_status status} (an {@code int}). */
    public static final long WC_STATUS = ibv_wc.status$offset();
    /** {@code enum ibv_wc_opcode opcode} (an {@code int}). */
    public static final long WC_OPCODE = ibv_wc.opcode$offset();
    /** {@code uint32_t vendor_err}. */
    public static final long WC_VENDOR_ERR = ibv_wc.vendor_err$offset();
    /** {@code uint32_t byte_len}. */
    public static final long WC_BYTE_LEN = ibv_wc.byte_len$offset();
    /**
     * {@code __be32 imm_data}, big-endian; the same storage holds {@code uint32_t
     * invalidated_rkey} (a union) when {@link #WC_WITH_INV} is set.
     */
    public static final long WC_IMM_DATA = ibv_wc.imm_data$offset();
    /** {@code uint32_t qp_num}. */
    public static final long WC_QP_NUM = ibv_wc.qp_num$offset();
    /** {@code uint32_t src_qp}. */
    public static final long WC_SRC_QP = ibv_wc.src_qp$offset();
    /** {@code unsigned int wc_flags}: the {@code IBV_WC_*} flags below. */
    public static final long WC_FLAGS = ibv_wc.wc_flags$offset();
    /** {@code uint16_t pkey_index}. */
    public static final long WC_PKEY_INDEX = ibv_wc.pkey_index$offset();
    /** {@code uint16_t slid}. */
    public static final long WC_SLID = ibv_wc.slid$offset();
    /** {@code uint8_t sl}. */
    public static final long WC_SL = ibv_wc.sl$offset();

    /** {@code IBV_WC_GRH}: a 40-byte GRH precedes the payload (UD). */
    public static final int WC_GRH = RdmaCore.IBV_WC_GRH();
    /** {@code IBV_WC_WITH_IMM}. */
    public static final int WC_WITH_IMM = RdmaCore.IBV_WC_WITH_IMM();
    /** {@code IBV_WC_WITH_INV}. */
    public static final int WC_WITH_INV = RdmaCore.IBV_WC_WITH_INV();

    // ---------------------------------------------------------------- ibv_cq_init_attr_ex.wc_flags

    /** {@code IBV_WC_EX_WITH_BYTE_LEN}. */
    public static final int WC_EX_WITH_BYTE_LEN = RdmaCore.IBV_WC_EX_WITH_BYTE_LEN();
    /** {@code IBV_WC_EX_WITH_IMM}. */
    public static final int WC_EX_WITH_IMM = RdmaCore.IBV_WC_EX_WITH_IMM();
    /** {@code IBV_WC_EX_WITH_QP_NUM}. */
    public static final int WC_EX_WITH_QP_NUM = RdmaCore.IBV_WC_EX_WITH_QP_NUM();
    /** {@code IBV_WC_EX_WITH_SRC_QP}. */
    public static final int WC_EX_WITH_SRC_QP = RdmaCore.IBV_WC_EX_WITH_SRC_QP();
    /** {@code IBV_WC_EX_WITH_SLID}. */
    public static final int WC_EX_WITH_SLID = RdmaCore.IBV_WC_EX_WITH_SLID();
    /** {@code IBV_WC_EX_WITH_SL}. */
    public static final int WC_EX_WITH_SL = RdmaCore.IBV_WC_EX_WITH_SL();
    /** {@code IBV_WC_EX_WITH_DLID_PATH_BITS}. */
    public static final int WC_EX_WITH_DLID_PATH_BITS = RdmaCore.IBV_WC_EX_WITH_DLID_PATH_BITS();
    /** {@code IBV_WC_EX_WITH_COMPLETION_TIMESTAMP}. */
    public static final int WC_EX_WITH_COMPLETION_TIMESTAMP = RdmaCore.IBV_WC_EX_WITH_COMPLETION_TIMESTAMP();

    // ---------------------------------------------------------------- struct ibv_poll_cq_attr

    /** {@code sizeof(struct ibv_poll_cq_attr)} ({@code uint32_t comp_mask}; zero: no extensions asked). */
    public static final long POLL_CQ_ATTR_SIZE = ibv_poll_cq_attr.layout().byteSize();
    /** {@code _Alignof(struct ibv_poll_cq_attr)}. */
    public static final long POLL_CQ_ATTR_ALIGNMENT = ibv_poll_cq_attr.layout().byteAlignment();

    // ---------------------------------------------------------------- struct ibv_cq

    /** {@code sizeof(struct ibv_cq)}: what a classic queue's pointer may be read over. */
    public static final long CQ_SIZE = ibv_cq.layout().byteSize();
    /**
     * {@code int cqe}: the entries the device gave the queue. {@code struct ibv_cq_ex} starts
     * with the same members, so the offset holds for an extended queue too.
     */
    public static final long CQ_CQE = ibv_cq.cqe$offset();

    /** {@code cq->cqe} of the queue at {@code cq} (a classic or an extended queue). */
    public static int cqe(MemorySegment cq) {
        return cq.get(ValueLayout.JAVA_INT, CQ_CQE);
    }
}
