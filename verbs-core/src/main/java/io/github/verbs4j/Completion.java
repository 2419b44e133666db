package io.github.verbs4j;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import static io.github.verbs4j.raw.WorkCompletionLayout.WC_BYTE_LEN;
import static io.github.verbs4j.raw.WorkCompletionLayout.WC_FLAGS;
import static io.github.verbs4j.raw.WorkCompletionLayout.WC_GRH;
import static io.github.verbs4j.raw.WorkCompletionLayout.WC_IMM_DATA;
import static io.github.verbs4j.raw.WorkCompletionLayout.WC_OPCODE;
import static io.github.verbs4j.raw.WorkCompletionLayout.WC_PKEY_INDEX;
import static io.github.verbs4j.raw.WorkCompletionLayout.WC_QP_NUM;
import static io.github.verbs4j.raw.WorkCompletionLayout.WC_SIZE;
import static io.github.verbs4j.raw.WorkCompletionLayout.WC_SL;
import static io.github.verbs4j.raw.WorkCompletionLayout.WC_SLID;
import static io.github.verbs4j.raw.WorkCompletionLayout.WC_SRC_QP;
import static io.github.verbs4j.raw.WorkCompletionLayout.WC_STATUS;
import static io.github.verbs4j.raw.WorkCompletionLayout.WC_VENDOR_ERR;
import static io.github.verbs4j.raw.WorkCompletionLayout.WC_WITH_IMM;
import static io.github.verbs4j.raw.WorkCompletionLayout.WC_WITH_INV;
import static io.github.verbs4j.raw.WorkCompletionLayout.WC_WR_ID;

/**
 * One work completion ({@code struct ibv_wc}), read in place: a flyweight over one slot of a
 * {@link Completions} batch. Its values change when the batch is polled again; copy what must
 * outlive the next poll. No method allocates, except {@link #error()} and {@link #toString()}.
 *
 * <p>Not thread-safe (like the batch it views).
 */
public final class Completion {

    /** {@code __be32 imm_data}: read big-endian, it is the host-order value ({@code ntohl}). */
    private static final ValueLayout.OfInt NETWORK_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private final MemorySegment array;
    private final long base;

    Completion(MemorySegment array, int index) {
        this.array = array;
        this.base = index * WC_SIZE;
    }

    /** The id of the work request ({@code wr_id}). */
    public long wrId() {
        return array.get(ValueLayout.JAVA_LONG, base + WC_WR_ID);
    }

    /** The status. */
    public WcStatus status() {
        return WcStatus.of(array.get(ValueLayout.JAVA_INT, base + WC_STATUS));
    }

    /** The raw status value. */
    public int statusValue() {
        return array.get(ValueLayout.JAVA_INT, base + WC_STATUS);
    }

    /** Whether the status is {@link WcStatus#SUCCESS}. */
    public boolean ok() {
        return array.get(ValueLayout.JAVA_INT, base + WC_STATUS) == 0;
    }

    /** The operation (defined only for successful completions). */
    public WcOpcode opcode() {
        return WcOpcode.of(array.get(ValueLayout.JAVA_INT, base + WC_OPCODE));
    }

    /** The device-specific error ({@code vendor_err}). */
    public int vendorError() {
        return array.get(ValueLayout.JAVA_INT, base + WC_VENDOR_ERR);
    }

    /** Bytes received (receives) or read/atomically fetched ({@code byte_len}). */
    public int byteLength() {
        return array.get(ValueLayout.JAVA_INT, base + WC_BYTE_LEN);
    }

    /** Whether immediate data came with a receive ({@code IBV_WC_WITH_IMM}). */
    public boolean hasImmediate() {
        return (flags() & WC_WITH_IMM) != 0;
    }

    /**
     * The immediate data in host order (the wire carries it big-endian; verbs4j converts both
     * ways, so the value a sender set with {@link SendRequest#immediate(int)} reads back equal).
     */
    public int immediate() {
        return array.get(NETWORK_INT, base + WC_IMM_DATA);
    }

    /**
     * Whether a receive came from a SEND with Invalidate and invalidated one of this side's
     * memory windows ({@code IBV_WC_WITH_INV}).
     *
     * <p>On rxe (Linux 6.1 to this day) this reads false: its kernel marks such a receive with
     * its own {@code IB_WC_WITH_INVALIDATE}, bit 2, and rdma-core's rxe provider hands
     * {@code wc_flags} over unchanged, where bit 2 means {@code IBV_WC_IP_CSUM_OK} and
     * {@code IBV_WC_WITH_INV} is bit 3. The rkey is in {@link #invalidatedRkey()} all the same,
     * and the window is invalidated (docs/substrates.md).
     */
    public boolean hasInvalidate() {
        return (flags() & WC_WITH_INV) != 0;
    }

    /**
     * The rkey a SEND with Invalidate invalidated ({@code invalidated_rkey}; meaningful only when
     * {@link #hasInvalidate()}).
     */
    public int invalidatedRkey() {
        return array.get(ValueLayout.JAVA_INT, base + WC_IMM_DATA);
    }

    /** The local QP number. */
    public int qpNumber() {
        return array.get(ValueLayout.JAVA_INT, base + WC_QP_NUM);
    }

    /** The sender's QP number (UD receives). */
    public int sourceQp() {
        return array.get(ValueLayout.JAVA_INT, base + WC_SRC_QP);
    }

    /** {@code wc_flags}: {@code IBV_WC_GRH}, {@code IBV_WC_WITH_IMM}, ... */
    public int flags() {
        return array.get(ValueLayout.JAVA_INT, base + WC_FLAGS);
    }

    /** Whether a 40-byte GRH precedes the payload in the receive buffer (UD). */
    public boolean hasGrh() {
        return (flags() & WC_GRH) != 0;
    }

    /** The P_Key index (GSI QPs). */
    public int pkeyIndex() {
        return Short.toUnsignedInt(array.get(ValueLayout.JAVA_SHORT, base + WC_PKEY_INDEX));
    }

    /** The source LID (UD receives on InfiniBand). */
    public int sourceLid() {
        return Short.toUnsignedInt(array.get(ValueLayout.JAVA_SHORT, base + WC_SLID));
    }

    /** The service level. */
    public int serviceLevel() {
        return Byte.toUnsignedInt(array.get(ValueLayout.JAVA_BYTE, base + WC_SL));
    }

    /** The native {@code struct ibv_wc} this view reads (control-path use only: it allocates). */
    MemorySegment slot() {
        return array.asSlice(base, WC_SIZE);
    }

    /** An exception describing this completion's failure (call only when {@link #ok()} is false). */
    public WorkCompletionException error() {
        return new WorkCompletionException(status(), wrId(), vendorError(), qpNumber(), ok() ? opcode() : WcOpcode.UNKNOWN);
    }

    @Override
    public String toString() {
        return "Completion[wrId " + wrId() + ", " + status() + (ok() ? ", " + opcode() + ", " + byteLength() + " bytes" : "")
                + (hasImmediate() ? ", imm 0x" + Integer.toHexString(immediate()) : "")
                + (hasInvalidate() ? ", invalidated rkey 0x" + Integer.toHexString(invalidatedRkey()) : "") + ", qp 0x"
                + Integer.toHexString(qpNumber()) + "]";
    }
}
