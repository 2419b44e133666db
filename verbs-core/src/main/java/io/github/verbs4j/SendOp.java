package io.github.verbs4j;

import io.github.verbs4j.raw.WorkRequestLayout;

/**
 * An operation of the post-send API ({@code ibv_qp_ex}, {@code ibv_wr_*}) that a queue pair is
 * created for ({@code IBV_QP_EX_WITH_*} in {@code ibv_qp_init_attr_ex.send_ops_flags}): see
 * {@link QueuePairBuilder#sendOps(SendOp...)} and {@link PostSession}. Only the operations
 * named at creation may be built; a provider refuses, with EOPNOTSUPP, an operation it cannot do
 * on the QP's type (rxe and softrdma: RC all ten below; UC writes, sends, BIND_MW and
 * SEND_WITH_INV; UD sends only).
 */
public enum SendOp {
    /** {@code ibv_wr_send}. */
    SEND(WorkRequestLayout.QP_EX_WITH_SEND),
    /** {@code ibv_wr_send_imm}. */
    SEND_WITH_IMM(WorkRequestLayout.QP_EX_WITH_SEND_WITH_IMM),
    /** {@code ibv_wr_send_inv}: a SEND that invalidates an rkey at the peer. */
    SEND_WITH_INV(WorkRequestLayout.QP_EX_WITH_SEND_WITH_INV),
    /** {@code ibv_wr_rdma_write}. */
    RDMA_WRITE(WorkRequestLayout.QP_EX_WITH_RDMA_WRITE),
    /** {@code ibv_wr_rdma_write_imm}. */
    RDMA_WRITE_WITH_IMM(WorkRequestLayout.QP_EX_WITH_RDMA_WRITE_WITH_IMM),
    /** {@code ibv_wr_rdma_read}. */
    RDMA_READ(WorkRequestLayout.QP_EX_WITH_RDMA_READ),
    /** {@code ibv_wr_atomic_cmp_swp}. */
    ATOMIC_CMP_AND_SWP(WorkRequestLayout.QP_EX_WITH_ATOMIC_CMP_AND_SWP),
    /** {@code ibv_wr_atomic_fetch_add}. */
    ATOMIC_FETCH_AND_ADD(WorkRequestLayout.QP_EX_WITH_ATOMIC_FETCH_AND_ADD),
    /** {@code ibv_wr_local_inv}: invalidates a local rkey. */
    LOCAL_INV(WorkRequestLayout.QP_EX_WITH_LOCAL_INV),
    /** {@code ibv_wr_bind_mw}: binds a memory window (enabled here; built by verbs4j once memory windows are). */
    BIND_MW(WorkRequestLayout.QP_EX_WITH_BIND_MW);

    private final int flag;

    SendOp(int flag) {
        this.flag = flag;
    }

    /** The {@code IBV_QP_EX_WITH_*} bit. */
    public long flag() {
        return Integer.toUnsignedLong(flag);
    }
}
