package io.github.verbs4j.netty;

import io.github.verbs4j.TransportType;

import java.nio.ByteBuffer;

/**
 * What each side of an {@link RdmaSocketChannel} connection tells the other in rdma_cm's private
 * data (the connect's and the accept's), in one format for both wire modes: 40 bytes, big-endian
 * (network order), within the 56 bytes rdma_cm allows a connect request on RC.
 *
 * <pre>
 *  0  int   receive slots of the sender's ring
 *  4  int   bytes per slot
 *  8  int   wire mode: 1 SEND, 3 WRITE_WITH_IMM (0, as in a shorter, padded message, is no mode;
 *           2 was WRITE_WITH_IMM with the slot queue used whole, refused as another format)
 * 12  int   entries (2 bytes each) of the sender's slot queue (WRITE_WITH_IMM; 0 otherwise)
 * 16  long  address of the receive ring            (WRITE_WITH_IMM; 0 otherwise)
 * 24  int   rkey of the receive ring               (WRITE_WITH_IMM; 0 otherwise)
 * 28  long  address of the slot queue              (WRITE_WITH_IMM; 0 otherwise)
 * 36  int   rkey of the slot queue                 (WRITE_WITH_IMM; 0 otherwise)
 * </pre>
 *
 * A side that refuses a connection request for its mode rejects it with its own handshake, so
 * that the connecting side can name both modes.
 *
 * @param slots        receive slots of the sender's ring
 * @param slotSize     bytes per receive slot
 * @param mode         the sender's wire mode, {@code SEND} or {@code WRITE_WITH_IMM}
 * @param queueLength  entries of the sender's slot queue, into which the peer writes the slots it freed
 * @param ringAddress  where the peer writes messages
 * @param ringRkey     the rkey of the receive ring
 * @param queueAddress where the peer writes the slots it freed
 * @param queueRkey    the rkey of the slot queue
 */
record WireHandshake(int slots, int slotSize, RdmaWireMode mode, int queueLength, long ringAddress, int ringRkey,
                     long queueAddress, int queueRkey) {

    static final int LENGTH = 40;
    private static final int SEND_CODE = 1;
    /**
     * WRITE_WITH_IMM with its slot queues used modulo {@link #usedQueueEntries}. The code before,
     * 2, used them whole: the two disagree on where an entry goes, so a peer of that format is
     * refused as no handshake of this one rather than misread.
     */
    private static final int WRITE_WITH_IMM_CODE = 3;

    byte[] encode() {
        return ByteBuffer.allocate(LENGTH).putInt(slots).putInt(slotSize)
                .putInt(mode == RdmaWireMode.WRITE_WITH_IMM ? WRITE_WITH_IMM_CODE : SEND_CODE).putInt(queueLength)
                .putLong(ringAddress).putInt(ringRkey).putLong(queueAddress).putInt(queueRkey).array();
    }

    /**
     * Reads a peer's handshake.
     *
     * @throws IllegalStateException when {@code data} is not one (a peer that is no RDMA Netty
     *                               channel, or of an older wire format), or its values are out of range
     */
    static WireHandshake decode(byte[] data) {
        RdmaWireMode mode = modeOf(data);
        if (mode == null) {
            throw new IllegalStateException("the peer sent no ring parameters of this wire format ("
                    + (data == null ? 0 : data.length) + " bytes of private data): it is not an RDMA Netty channel"
                    + " of this version");
        }
        ByteBuffer b = ByteBuffer.wrap(data);
        WireHandshake h = new WireHandshake(b.getInt(), b.getInt(), mode, b.getInt(12), b.getLong(16), b.getInt(24),
                b.getLong(28), b.getInt(36));
        if (h.slots < 4 || h.slots > 65535 || h.slotSize < RdmaSocketChannelConfig.MIN_SLOT_SIZE
                || h.slotSize > RdmaSocketChannelConfig.MAX_SLOT_SIZE) {
            throw new IllegalStateException("the peer's ring parameters are out of range: " + h.slots + " slots of "
                    + h.slotSize + " bytes");
        }
        if (mode == RdmaWireMode.WRITE_WITH_IMM && (h.queueLength < 4 || h.queueLength > 65535
                || h.ringAddress == 0 || h.queueAddress == 0)) {
            throw new IllegalStateException("the peer's WRITE_WITH_IMM parameters are out of range: a slot queue of "
                    + h.queueLength + " entries, ring at 0x" + Long.toHexString(h.ringAddress) + ", queue at 0x"
                    + Long.toHexString(h.queueAddress));
        }
        return h;
    }

    /**
     * The entries of a slot queue of {@code entries} that a connection uses, the queue carrying
     * slots of a ring of {@code ringSlots}: the largest multiple of the ring's slots that fits
     * (all of them when the ring is larger). The queue starts as the ring's slots in order,
     * repeated, so a receiver that frees its slots in the order they were written finds each
     * entry holding the slot it frees there, lap after lap, and writes nothing. Both sides
     * compute it from the two handshakes: the queue's owner with the peer's ring, the writer
     * with its own.
     */
    static int usedQueueEntries(int entries, int ringSlots) {
        return entries >= ringSlots ? entries - entries % ringSlots : entries;
    }

    /** The wire mode of a handshake, or null when {@code data} is none. */
    static RdmaWireMode modeOf(byte[] data) {
        if (data == null || data.length < LENGTH) {
            return null;
        }
        return switch (ByteBuffer.wrap(data).getInt(8)) {
            case SEND_CODE -> RdmaWireMode.SEND;
            case WRITE_WITH_IMM_CODE -> RdmaWireMode.WRITE_WITH_IMM;
            default -> null;
        };
    }

    /**
     * The mode a channel asking for {@code asked} uses on a device of {@code transport}.
     *
     * @throws UnsupportedOperationException for {@code WRITE_WITH_IMM} on iWARP, which has no
     *                                       immediate data on RDMA WRITE
     */
    static RdmaWireMode resolve(RdmaWireMode asked, TransportType transport, String deviceName) {
        boolean iwarp = transport == TransportType.IWARP;
        return switch (asked) {
            case AUTO -> iwarp ? RdmaWireMode.SEND : RdmaWireMode.WRITE_WITH_IMM;
            case SEND -> RdmaWireMode.SEND;
            case WRITE_WITH_IMM -> {
                if (iwarp) {
                    throw new UnsupportedOperationException("RDMA_WIRE_MODE WRITE_WITH_IMM cannot be used on "
                            + deviceName + ": iWARP has no immediate data on RDMA WRITE (use AUTO or SEND)");
                }
                yield RdmaWireMode.WRITE_WITH_IMM;
            }
        };
    }

    /** The message of a connection refused for its mode. */
    static String mismatch(RdmaWireMode local, RdmaWireMode peer) {
        return "the peer's wire mode is " + peer + ", this side's " + local
                + " (set RdmaChannelOption.RDMA_WIRE_MODE alike on both sides, or AUTO on devices of one transport)";
    }
}
