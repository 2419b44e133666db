package io.github.verbs4j;

import io.github.verbs4j.raw.VerbsConstants;

/** What a work completion completed ({@code enum ibv_wc_opcode}). */
public enum WcOpcode {
    SEND(VerbsConstants.IBV_WC_SEND),
    RDMA_WRITE(VerbsConstants.IBV_WC_RDMA_WRITE),
    RDMA_READ(VerbsConstants.IBV_WC_RDMA_READ),
    ATOMIC_CMP_AND_SWP(VerbsConstants.IBV_WC_COMP_SWAP),
    ATOMIC_FETCH_AND_ADD(VerbsConstants.IBV_WC_FETCH_ADD),
    BIND_MW(VerbsConstants.IBV_WC_BIND_MW),
    LOCAL_INV(VerbsConstants.IBV_WC_LOCAL_INV),
    TSO(VerbsConstants.IBV_WC_TSO),
    /** A receive consumed by a SEND or SEND_WITH_IMM. */
    RECV(VerbsConstants.IBV_WC_RECV),
    /** A receive consumed by an RDMA_WRITE_WITH_IMM. */
    RECV_RDMA_WITH_IMM(VerbsConstants.IBV_WC_RECV_RDMA_WITH_IMM),
    /** A value this version of verbs4j does not know (or an error completion's undefined opcode). */
    UNKNOWN(-1);

    private final int value;

    WcOpcode(int value) {
        this.value = value;
    }

    /** The C enum value ({@code -1} for {@link #UNKNOWN}). */
    public int value() {
        return value;
    }

    /** The opcode for a C value, without allocating. */
    public static WcOpcode of(int value) {
        return switch (value) {
            case 0 -> SEND;
            case 1 -> RDMA_WRITE;
            case 2 -> RDMA_READ;
            case 3 -> ATOMIC_CMP_AND_SWP;
            case 4 -> ATOMIC_FETCH_AND_ADD;
            case 5 -> BIND_MW;
            case 6 -> LOCAL_INV;
            case 7 -> TSO;
            case 128 -> RECV;
            case 129 -> RECV_RDMA_WITH_IMM;
            default -> UNKNOWN;
        };
    }
}
