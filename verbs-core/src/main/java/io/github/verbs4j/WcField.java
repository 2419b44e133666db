package io.github.verbs4j;

import io.github.verbs4j.raw.WorkCompletionLayout;

/**
 * A field an extended completion queue reports ({@code IBV_WC_EX_WITH_*} in
 * {@code ibv_cq_init_attr_ex.wc_flags}), read in a {@link PollSession} through the provider's
 * {@code ibv_wc_read_*} accessor. Status, work request id, opcode, vendor error and wc flags are
 * always there. rxe and softrdma support the first seven; both refuse
 * {@link #COMPLETION_TIMESTAMP} (EOPNOTSUPP: no completion clock) at
 * {@link Context#createExtendedCq}.
 */
public enum WcField {
    /** {@code ibv_wc_read_byte_len}. */
    BYTE_LEN(WorkCompletionLayout.WC_EX_WITH_BYTE_LEN),
    /** {@code ibv_wc_read_imm_data}. */
    IMM(WorkCompletionLayout.WC_EX_WITH_IMM),
    /** {@code ibv_wc_read_qp_num}. */
    QP_NUM(WorkCompletionLayout.WC_EX_WITH_QP_NUM),
    /** {@code ibv_wc_read_src_qp}. */
    SRC_QP(WorkCompletionLayout.WC_EX_WITH_SRC_QP),
    /** {@code ibv_wc_read_slid}. */
    SLID(WorkCompletionLayout.WC_EX_WITH_SLID),
    /** {@code ibv_wc_read_sl}. */
    SL(WorkCompletionLayout.WC_EX_WITH_SL),
    /** {@code ibv_wc_read_dlid_path_bits}. */
    DLID_PATH_BITS(WorkCompletionLayout.WC_EX_WITH_DLID_PATH_BITS),
    /** {@code ibv_wc_read_completion_ts}: the device's clock at completion (NICs with a clock only). */
    COMPLETION_TIMESTAMP(WorkCompletionLayout.WC_EX_WITH_COMPLETION_TIMESTAMP);

    private final int flag;

    WcField(int flag) {
        this.flag = flag;
    }

    /** The {@code IBV_WC_EX_WITH_*} bit. */
    public long flag() {
        return Integer.toUnsignedLong(flag);
    }
}
