package io.github.verbs4j;

import io.github.verbs4j.raw.VerbsConstants;

/** The state of a queue pair ({@code enum ibv_qp_state}). */
public enum QpState {
    RESET(VerbsConstants.IBV_QPS_RESET),
    INIT(VerbsConstants.IBV_QPS_INIT),
    /** Ready to receive. */
    RTR(VerbsConstants.IBV_QPS_RTR),
    /** Ready to send. */
    RTS(VerbsConstants.IBV_QPS_RTS),
    /** Send queue drained. */
    SQD(VerbsConstants.IBV_QPS_SQD),
    /** Send queue error. */
    SQE(VerbsConstants.IBV_QPS_SQE),
    /** Error: outstanding and new work requests complete with {@code WR_FLUSH_ERROR}. */
    ERR(VerbsConstants.IBV_QPS_ERR),
    UNKNOWN(VerbsConstants.IBV_QPS_UNKNOWN);

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
