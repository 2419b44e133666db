package io.github.verbs4j;

import io.github.verbs4j.ffi.RdmaCore;

/** The state of a queue pair ({@code enum ibv_qp_state}). */
public enum QpState {
    RESET(RdmaCore.IBV_QPS_RESET()),
    INIT(RdmaCore.IBV_QPS_INIT()),
    /** Ready to receive. */
    RTR(RdmaCore.IBV_QPS_RTR()),
    /** Ready to send. */
    RTS(RdmaCore.IBV_QPS_RTS()),
    /** Send queue drained. */
    SQD(RdmaCore.IBV_QPS_SQD()),
    /** Send queue error. */
    SQE(RdmaCore.IBV_QPS_SQE()),
    /** Error: outstanding and new work requests complete with {@code WR_FLUSH_ERROR}. */
    ERR(RdmaCore.IBV_QPS_ERR()),
    UNKNOWN(RdmaCore.IBV_QPS_UNKNOWN());

    private final int value;

    QpState(int value) {
        this.value = value;
    }

    /** The C enum value. */
    public int value() {
        return value;
    }

    /** The state for a C value; {@link #UNKNOWN} for values not listed. */
    public static QpState of(int value) {
        for (QpState s : values()) {
            if (s.value == value) {
                return s;
            }
        }
        return UNKNOWN;
    }
}
