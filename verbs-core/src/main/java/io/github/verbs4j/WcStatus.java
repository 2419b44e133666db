package io.github.verbs4j;

import io.github.verbs4j.raw.VerbsConstants;

/**
 * The status of a work completion ({@code enum ibv_wc_status}), named for Java readers; each
 * constant knows its C name ({@link #cName()}) so logs can be matched against rdma-core's.
 */
public enum WcStatus {
    SUCCESS(VerbsConstants.IBV_WC_SUCCESS, "IBV_WC_SUCCESS"),
    /** The received message was longer than the posted receive buffers. */
    LOCAL_LENGTH_ERROR(VerbsConstants.IBV_WC_LOC_LEN_ERR, "IBV_WC_LOC_LEN_ERR"),
    LOCAL_QP_OPERATION_ERROR(VerbsConstants.IBV_WC_LOC_QP_OP_ERR, "IBV_WC_LOC_QP_OP_ERR"),
    LOCAL_EEC_OPERATION_ERROR(VerbsConstants.IBV_WC_LOC_EEC_OP_ERR, "IBV_WC_LOC_EEC_OP_ERR"),
    /** A local buffer was not covered by a memory region with the needed rights (bad lkey). */
    LOCAL_PROTECTION_ERROR(VerbsConstants.IBV_WC_LOC_PROT_ERR, "IBV_WC_LOC_PROT_ERR"),
    /** The work request was flushed: the QP went to the error state before it was processed. */
    WR_FLUSH_ERROR(VerbsConstants.IBV_WC_WR_FLUSH_ERR, "IBV_WC_WR_FLUSH_ERR"),
    MW_BIND_ERROR(VerbsConstants.IBV_WC_MW_BIND_ERR, "IBV_WC_MW_BIND_ERR"),
    BAD_RESPONSE_ERROR(VerbsConstants.IBV_WC_BAD_RESP_ERR, "IBV_WC_BAD_RESP_ERR"),
    LOCAL_ACCESS_ERROR(VerbsConstants.IBV_WC_LOC_ACCESS_ERR, "IBV_WC_LOC_ACCESS_ERR"),
    REMOTE_INVALID_REQUEST_ERROR(VerbsConstants.IBV_WC_REM_INV_REQ_ERR, "IBV_WC_REM_INV_REQ_ERR"),
    /** The peer refused the rkey, the range or the access (e.g. WRITE into memory without REMOTE_WRITE). */
    REMOTE_ACCESS_ERROR(VerbsConstants.IBV_WC_REM_ACCESS_ERR, "IBV_WC_REM_ACCESS_ERR"),
    REMOTE_OPERATION_ERROR(VerbsConstants.IBV_WC_REM_OP_ERR, "IBV_WC_REM_OP_ERR"),
    /** Transport retries exhausted: the peer did not acknowledge. */
    RETRY_EXCEEDED(VerbsConstants.IBV_WC_RETRY_EXC_ERR, "IBV_WC_RETRY_EXC_ERR"),
    /** Receiver-not-ready retries exhausted: the peer had no receive posted. */
    RNR_RETRY_EXCEEDED(VerbsConstants.IBV_WC_RNR_RETRY_EXC_ERR, "IBV_WC_RNR_RETRY_EXC_ERR"),
    LOCAL_RDD_VIOLATION_ERROR(VerbsConstants.IBV_WC_LOC_RDD_VIOL_ERR, "IBV_WC_LOC_RDD_VIOL_ERR"),
    REMOTE_INVALID_RD_REQUEST_ERROR(VerbsConstants.IBV_WC_REM_INV_RD_REQ_ERR, "IBV_WC_REM_INV_RD_REQ_ERR"),
    REMOTE_ABORT_ERROR(VerbsConstants.IBV_WC_REM_ABORT_ERR, "IBV_WC_REM_ABORT_ERR"),
    INVALID_EECN_ERROR(VerbsConstants.IBV_WC_INV_EECN_ERR, "IBV_WC_INV_EECN_ERR"),
    INVALID_EEC_STATE_ERROR(VerbsConstants.IBV_WC_INV_EEC_STATE_ERR, "IBV_WC_INV_EEC_STATE_ERR"),
    FATAL_ERROR(VerbsConstants.IBV_WC_FATAL_ERR, "IBV_WC_FATAL_ERR"),
    RESPONSE_TIMEOUT_ERROR(VerbsConstants.IBV_WC_RESP_TIMEOUT_ERR, "IBV_WC_RESP_TIMEOUT_ERR"),
    GENERAL_ERROR(VerbsConstants.IBV_WC_GENERAL_ERR, "IBV_WC_GENERAL_ERR"),
    TM_ERROR(VerbsConstants.IBV_WC_TM_ERR, "IBV_WC_TM_ERR"),
    TM_RNDV_INCOMPLETE(VerbsConstants.IBV_WC_TM_RNDV_INCOMPLETE, "IBV_WC_TM_RNDV_INCOMPLETE"),
    /** A value this version of verbs4j does not know. */
    UNKNOWN(-1, "unknown");

    private static final WcStatus[] BY_VALUE;

    static {
        int max = 0;
        for (WcStatus s : values()) {
            max = Math.max(max, s.value);
        }
        BY_VALUE = new WcStatus[max + 1];
        for (WcStatus s : values()) {
            if (s.value >= 0) {
                BY_VALUE[s.value] = s;
            }
        }
    }

    private final int value;
    private final String cName;

    WcStatus(int value, String cName) {
        this.value = value;
        this.cName = cName;
    }

    /** The C enum value ({@code -1} for {@link #UNKNOWN}). */
    public int value() {
        return value;
    }

    /** The rdma-core name, e.g. {@code IBV_WC_REM_ACCESS_ERR}. */
    public String cName() {
        return cName;
    }

    /** The status for a C value, without allocating; {@link #UNKNOWN} for values not listed. */
    public static WcStatus of(int value) {
        return value >= 0 && value < BY_VALUE.length && BY_VALUE[value] != null ? BY_VALUE[value] : UNKNOWN;
    }
}
