package io.github.verbs4j;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_wc;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * One work completion ({@code struct ibv_wc}), read in place: a flyweight over one slot of a
 * {@link Completions} batch. Its values change when the batch is polled again; copy what must
 * outlive the next poll. No method allocates, except {@link #error()} and {@link #toString()}.
 *
 * <p>Not thread-safe (like the batch it views).
 */
public final class Completion {

    private static final long WR_ID = ibv_wc.wr_id$offset();
    private static final long STATUS = ibv_wc.status$offset();
    private static final long OPCODE = ibv_wc.opcode$offset();
    private static final long VENDOR_ERR = ibv_wc.vendor_err$offset();
    private static final long BYTE_LEN = ibv_wc.byte_len$offset();
    private static final long IMM_DATA = ibv_wc.imm_data$offset();
    private static final long QP_NUM = ibv_wc.qp_num$offset();
    private static final long SRC_QP = ibv_wc.src_qp$offset();
    private static final long WC_FLAGS = ibv_wc.wc_flags$offset();
    private static final long PKEY_INDEX = ibv_wc.pkey_index$offset();
    private static final long SLID = ibv_wc.slid$offset();
    private static final long SL = ibv_wc.sl$offset();
    /** {@code __be32 imm_data}: read big-endian, it is the host-order value ({@code ntohl}). */
    private static final ValueLayout.OfInt NETWORK_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    private static final int FLAG_GRH = RdmaCore.IBV_WC_GRH();
    private static final int FLAG_WITH_IMM = RdmaCore.IBV_WC_WITH_IMM();
    private static final int FLAG_WITH_INV = RdmaCore.IBV_WC_WITH_INV();

    private final MemorySegment array;
    private final long base;

    Completion(MemorySegment array, int index) {
        this.array = array;
        this.base = index * ibv_wc.layout().byteSize();
    }

    /** The id of the work request ({@code wr_id}). */
    public long wrId() {
        return array.get(ValueLayout.JAVA_LONG, base + WR_ID);
    }

    /** The status. */
    public WcStatus status() {
        return WcStatus.of(array.get(ValueLayout.JAVA_INT, base + STATUS));
    }

    /** The raw status value. */
    public int statusValue() {
        return array.get(ValueLayout.JAVA_INT, base + STATUS);
    }

    /** Whether the status is {@link WcStatus#SUCCESS}. */
    public boolean ok() {
        return array.get(ValueLayout.JAVA_INT, base + STATUS) == 0;
    }

    /** The operation (defined only for successful completions). */
    public WcOpcode opcode() {
        return WcOpcode.of(array.get(ValueLayout.JAVA_INT, base + OPCODE));
    }

    /** The device-specific error ({@code vendor_err}). */
    public int vendorError() {
        return array.get(ValueLayout.JAVA_INT, base + VENDOR_ERR);
    }

    /** Bytes received (receives) or read/atomically fetched ({@code byte_len}). */
    public int byteLength() {
        return array.get(ValueLayout.JAVA_INT, base + BYTE_LEN);
    }

    /** Whether immediate data came with a receive ({@code IBV_WC_WITH_IMM}). */
    public boolean hasImmediate() {
        return (flags() & FLAG_WITH_IMM) != 0;
    }

    /**
     * The immediate data in host order (the wire carries it big-endian; verbs4j converts both
     * ways, so the value a sender set with {@link SendRequest#immediate(int)} reads back equal).
     */
    public int immediate() {
        return array.get(NETWORK_INT, base + IMM_DATA);
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
        return (flags() & FLAG_WITH_INV) != 0;
    }

    /**
     * The rkey a SEND with Invalidate invalidated ({@code invalidated_rkey}; meaningful only when
     * {@link #hasInvalidate()}).
     */
    public int invalidatedRkey() {
        return array.get(ValueLayout.JAVA_INT, base + IMM_DATA);
    }

    /** The local QP number. */
    public int qpNumber() {
        return array.get(ValueLayout.JAVA_INT, base + QP_NUM);
    }

    /** The sender's QP number (UD receives). */
    public int sourceQp() {
        return array.get(ValueLayout.JAVA_INT, base + SRC_QP);
    }

    /** {@code wc_flags}: {@code IBV_WC_GRH}, {@code IBV_WC_WITH_IMM}, ... */
    public int flags() {
        return array.get(ValueLayout.JAVA_INT, base + WC_FLAGS);
    }

    /** Whether a 40-byte GRH precedes the payload in the receive buffer (UD). */
    public boolean hasGrh() {
        return (flags() & FLAG_GRH) != 0;
    }

    /** The P_Key index (GSI QPs). */
    public int pkeyIndex() {
        return Short.toUnsignedInt(array.get(ValueLayout.JAVA_SHORT, base + PKEY_INDEX));
    }

    /** The source LID (UD receives on InfiniBand). */
    public int sourceLid() {
        return Short.toUnsignedInt(array.get(ValueLayout.JAVA_SHORT, base + SLID));
    }

    /** The service level. */
    public int serviceLevel() {
        return Byte.toUnsignedInt(array.get(ValueLayout.JAVA_BYTE, base + SL));
    }

    /** The native {@code struct ibv_wc} this view reads (control-path use only: it allocates). */
    MemorySegment slot() {
        return array.asSlice(base, ibv_wc.layout().byteSize());
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
