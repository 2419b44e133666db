package io.github.verbs4j.channel;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * A received message: a view into the channel's receive ring, valid until {@link #close()}
 * gives its slots back (and, in batches, the peer its credits). No copy is made on receipt.
 *
 * <pre>{@code
 * try (Message m = channel.receive(Duration.ofSeconds(1))) {   // RdmaTimeoutException when none came
 *     handle(m.segment());
 * }
 * }</pre>
 *
 * <p><b>Byte order</b>: {@link #getInt} and {@link #getLong} read <em>little-endian</em>, on
 * every host, as the channel's own message headers are (docs/channel.md, "Wire format"): a
 * sender that writes its numbers little-endian is read right on a host of either order. This is not
 * {@link ValueLayout#JAVA_INT}/{@link ValueLayout#JAVA_LONG}, which are the host's native
 * order; a payload in another order is read through {@link #segment()} with a layout of that
 * order, e.g. {@code m.segment().get(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN), 0)}.
 *
 * <p><b>Allocation</b>: {@link #length()}, {@link #ring()}, {@link #offset()}, the
 * {@code get...} methods and {@link #copyTo} allocate nothing; {@link #segment()} returns a new
 * slice (which the JIT often keeps off the heap when it does not escape).
 *
 * <p><b>Lifecycle</b>: the channel owns and reuses Message objects (one per ring slot): after
 * {@link #close()} the view and any segment taken from it may show the next message written
 * there. {@code close} is idempotent per receipt. The accessors throw
 * {@link IllegalStateException} once the message was closed.
 */
public final class Message implements AutoCloseable {

    private final Channel channel;
    private final MemorySegment ring;
    final int slot;
    long offset;
    int length;
    int slotCount;
    /** Bumped at every receipt and release, so a stale close of an earlier receipt does nothing. */
    boolean open;
    long sequence;

    Message(Channel channel, MemorySegment ring, int slot) {
        this.channel = channel;
        this.ring = ring;
        this.slot = slot;
    }

    /** The payload's length in bytes. */
    public int length() {
        ensureOpen();
        return length;
    }

    /** The message's sequence number on its channel: 0 for the first message received, then 1, 2... */
    public long sequence() {
        ensureOpen();
        return sequence;
    }

    /** The whole receive ring (read-only); the payload is {@link #length()} bytes at {@link #offset()}. */
    public MemorySegment ring() {
        ensureOpen();
        return ring;
    }

    /** Where the payload starts in {@link #ring()}. */
    public long offset() {
        ensureOpen();
        return offset;
    }

    /** The payload as a read-only segment (a new slice of the ring). */
    public MemorySegment segment() {
        ensureOpen();
        return ring.asSlice(offset, length);
    }

    /** The byte at {@code index} of the payload. */
    public byte getByte(long index) {
        check(index, 1);
        return ring.get(ValueLayout.JAVA_BYTE, offset + index);
    }

    /**
     * The int at {@code index} of the payload, read little-endian whatever the host's order
     * (see "Byte order" above); {@code index} need not be aligned.
     *
     * @throws IndexOutOfBoundsException when the 4 bytes are not all inside the payload
     */
    public int getInt(long index) {
        check(index, 4);
        return ring.get(Channel.LE_INT_UNALIGNED, offset + index);
    }

    /**
     * The long at {@code index} of the payload, read little-endian whatever the host's order
     * (see "Byte order" above: not {@link ValueLayout#JAVA_LONG}'s native order); {@code index}
     * need not be aligned.
     *
     * @throws IndexOutOfBoundsException when the 8 bytes are not all inside the payload
     */
    public long getLong(long index) {
        check(index, 8);
        return ring.get(Channel.LE_LONG, offset + index);
    }

    /** Copies the payload to {@code target} at {@code targetOffset}. */
    public void copyTo(MemorySegment target, long targetOffset) {
        ensureOpen();
        MemorySegment.copy(ring, offset, target, targetOffset, length);
    }

    private void check(long index, int size) {
        ensureOpen();
        if (index < 0 || index > length - size) {
            throw new IndexOutOfBoundsException("index " + index + " (+" + size + ") outside a message of " + length + " bytes");
        }
    }

    private void ensureOpen() {
        if (!open) {
            throw new IllegalStateException("the message was closed: its slots went back to the ring");
        }
    }

    /** Whether this receipt is still held (not closed). */
    public boolean isOpen() {
        return open;
    }

    /** Gives the message's slots back to the ring. Idempotent. */
    @Override
    public void close() {
        channel.release(this);
    }

    @Override
    public String toString() {
        return "Message[" + (open ? "#" + sequence + ", " + length + " bytes" : "closed") + "]";
    }
}
