package io.github.verbs4j;

import io.github.verbs4j.raw.VerbsConstants;

/** The operation of a send work request ({@code enum ibv_wr_opcode}) that verbs4j supports. */
public enum SendOpcode {
    /** RC, UC, UD. Consumes a receive at the peer. */
    SEND(VerbsConstants.IBV_WR_SEND),
    /** RC, UC, UD. A SEND carrying 32 bits of immediate data. */
    SEND_WITH_IMM(VerbsConstants.IBV_WR_SEND_WITH_IMM),
    /** RC, UC. Writes into the peer's memory; the peer sees no completion. */
    RDMA_WRITE(VerbsConstants.IBV_WR_RDMA_WRITE),
    /** RC, UC. A WRITE that also consumes a receive at the peer, carrying immediate data. */
    RDMA_WRITE_WITH_IMM(VerbsConstants.IBV_WR_RDMA_WRITE_WITH_IMM),
    /** RC only. Reads the peer's memory into the local buffers. */
    RDMA_READ(VerbsConstants.IBV_WR_RDMA_READ),
    /** RC only. 64-bit compare-and-swap at the remote address; the old value lands locally. */
    ATOMIC_CMP_AND_SWP(VerbsConstants.IBV_WR_ATOMIC_CMP_AND_SWP),
    /** RC only. 64-bit fetch-and-add at the remote address; the old value lands locally. */
    ATOMIC_FETCH_AND_ADD(VerbsConstants.IBV_WR_ATOMIC_FETCH_AND_ADD),
    /**
     * RC only. A SEND that also invalidates a type 2 memory window of the peer named by its rkey
     * ({@link SendRequest#sendWithInvalidate}); the peer's receive completion reports the rkey
     * ({@link Completion#invalidatedRkey()}).
     */
    SEND_WITH_INV(VerbsConstants.IBV_WR_SEND_WITH_INV),
    /** RC, UC. Binds a type 2 memory window ({@link SendRequest#bindMemoryWindow}); nothing is sent. */
    BIND_MW(VerbsConstants.IBV_WR_BIND_MW),
    /** RC only. Invalidates a local type 2 memory window ({@link SendRequest#localInvalidate}); nothing is sent. */
    LOCAL_INV(VerbsConstants.IBV_WR_LOCAL_INV);

    private final int value;

    SendOpcode(int value) {
        this.value = value;
    }

    /** The C enum value. */
    public int value() {
        return value;
    }

    boolean isAtomic() {
        return this == ATOMIC_CMP_AND_SWP || this == ATOMIC_FETCH_AND_ADD;
    }

    boolean hasImmediate() {
        return this == SEND_WITH_IMM || this == RDMA_WRITE_WITH_IMM;
    }

    boolean isRdma() {
        return this == RDMA_WRITE || this == RDMA_WRITE_WITH_IMM || this == RDMA_READ;
    }

    /** Whether {@code IBV_SEND_INLINE} applies: the operations that move local data to the peer. */
    boolean carriesInline() {
        return this == SEND || this == SEND_WITH_IMM || this == SEND_WITH_INV || this == RDMA_WRITE
                || this == RDMA_WRITE_WITH_IMM;
    }

    /** The opcodes that carry an rkey to invalidate in {@code invalidate_rkey}. */
    boolean invalidates() {
        return this == SEND_WITH_INV || this == LOCAL_INV;
    }

    boolean allowedOn(QpType type) {
        return switch (type) {
            case RC, XRC_SEND -> true;
            case UC -> this == SEND || this == SEND_WITH_IMM || this == RDMA_WRITE || this == RDMA_WRITE_WITH_IMM
                    || this == BIND_MW;
            case UD -> this == SEND || this == SEND_WITH_IMM;
        };
    }
}
