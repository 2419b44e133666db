package io.github.verbs4j.channel;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * A message being written in place into a channel's staging memory, handed to a
 * {@link MessageWriter} by {@link Channel#send(int, MessageWriter)}: {@link #length()} bytes
 * that the channel posts, as they are when the writer returns, in the RDMA WRITE that carries
 * them. Bytes the writer does not set hold whatever was staged at this place before (they are
 * not cleared): see {@link #position()}.
 *
 * <p><b>Bounds</b>: every access is checked against {@link #length()}
 * ({@link IndexOutOfBoundsException}); nothing outside the message can be written through it.
 *
 * <p><b>Byte order</b>: {@link #setInt} and {@link #setLong} write little-endian on every host,
 * as {@link Message#getInt} and {@link Message#getLong} read.
 *
 * <p><b>Lifecycle and threads</b>: the channel owns one of these and reuses it for every
 * message it sends in place. It is valid only inside the writer's call and only in the thread
 * that called {@code send}: used after the writer returned (after the message was committed),
 * or from another thread, every method throws {@link IllegalStateException}.
 *
 * <p><b>Allocation</b>: none.
 */
public final class StagedMessage {

    private MemorySegment stage;
    private long base;
    private int length;
    /** The thread inside the writer's call, or {@code null} outside it. */
    Thread owner;

    StagedMessage() {
    }

    /** Makes this the message of {@code length} bytes at {@code base} of {@code stage}, for the current thread's writer. */
    void open(MemorySegment stage, long base, int length) {
        this.stage = stage;
        this.base = base;
        this.length = length;
        this.owner = Thread.currentThread();
    }

    /** Ends the writer's call: from now on every use is refused. */
    void commit() {
        owner = null;
    }

    /** The message's length in bytes, as given to {@code send}. */
    public int length() {
        ensureOwned();
        return length;
    }

    /**
     * Where this message lies in the channel's staging memory, in bytes. A later message that
     * gets the same position (the staging memory mirrors the peer's ring, so positions recur as
     * the ring goes round) finds there the bytes the last message staged at it left, unless a
     * message at another position overlapped them since: an application that sends mostly the
     * same bytes may write only what changed, as long as it tracks which bytes those are.
     */
    public long position() {
        ensureOwned();
        return base;
    }

    /** Sets the byte at {@code index}. */
    public void setByte(long index, byte value) {
        check(index, 1);
        stage.set(ValueLayout.JAVA_BYTE, base + index, value);
    }

    /**
     * Sets the int at {@code index}, little-endian whatever the host's order; {@code index}
     * need not be aligned.
     *
     * @throws IndexOutOfBoundsException when the 4 bytes are not all inside the message
     */
    public void setInt(long index, int value) {
        check(index, 4);
        stage.set(Channel.LE_INT_UNALIGNED, base + index, value);
    }

    /**
     * Sets the long at {@code index}, little-endian whatever the host's order; {@code index}
     * need not be aligned.
     *
     * @throws IndexOutOfBoundsException when the 8 bytes are not all inside the message
     */
    public void setLong(long index, long value) {
        check(index, 8);
        stage.set(Channel.LE_LONG, base + index, value);
    }

    /**
     * Copies {@code bytes} bytes of {@code source} from {@code sourceOffset} into the message at
     * {@code index}.
     *
     * @throws IndexOutOfBoundsException when the bytes are not all inside the message, or not
     *         all inside {@code source}
     */
    public void copyFrom(MemorySegment source, long sourceOffset, long index, long bytes) {
        if (bytes < 0) {
            throw new IndexOutOfBoundsException("a copy of " + bytes + " bytes");
        }
        check(index, bytes);
        MemorySegment.copy(source, sourceOffset, stage, base + index, bytes);
    }

    private void check(long index, long size) {
        ensureOwned();
        if (index < 0 || index > length - size) {
            throw new IndexOutOfBoundsException("index " + index + " (+" + size + ") outside a message of " + length + " bytes");
        }
    }

    private void ensureOwned() {
        Thread t = owner;
        if (t != Thread.currentThread()) {
            throw new IllegalStateException(t == null
                    ? "the staged message was committed: it is valid only inside its MessageWriter's call"
                    : "the staged message belongs to the thread sending it (" + t.getName() + ")");
        }
    }

    @Override
    public String toString() {
        return "StagedMessage[" + (owner == null ? "committed" : length + " bytes at " + base) + "]";
    }
}
