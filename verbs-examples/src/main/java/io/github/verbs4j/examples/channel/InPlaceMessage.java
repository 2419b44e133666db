package io.github.verbs4j.examples.channel;

import io.github.verbs4j.channel.MessageWriter;
import io.github.verbs4j.channel.StagedMessage;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * channel-bench's message written in place ({@code --in-place}, {@link
 * io.github.verbs4j.channel.Channel#send(int, MessageWriter)}): per message only what changes,
 * the sequence number in the first 8 bytes and its inverse in the last 8, as perftest never
 * refills its buffer and {@code --raw} writes 8 bytes a message; the fixed body (the pattern the
 * server checks byte by byte) goes in only where the staging memory does not hold it whole yet.
 *
 * <p>Where it does is tracked by {@link StagedMessage#position()}: a body written at position
 * {@code p} stays whole until a message at another position overlaps it (with its 8-byte
 * header), which only a start within {@code size + 8} bytes of {@code p} can; keyed by
 * {@code p / (size + 8)}, such a start falls in the same key or a neighbouring one, and writing
 * a body there forgets the overlapped one. The server's check of every byte ({@code
 * --check-every-byte}, which the tool's tests give) catches any error
 * in this reasoning. One per sending thread; allocates only while the table grows (the first
 * round of the ring).
 */
final class InPlaceMessage implements MessageWriter {

    private final MemorySegment body;
    private final int size;
    /** Per key: the position plus 1 of a whole body staged there, 0 for none. */
    private long[] bodyAt = new long[64];
    /** The sequence number of the message the next {@link #write} writes. */
    long sequence;
    /** Messages for which the body was written (the rest had it in place already). */
    long bodiesWritten;

    InPlaceMessage(MemorySegment body) {
        this.body = body;
        this.size = (int) body.byteSize();
    }

    @Override
    public void write(StagedMessage message) {
        long p = message.position();
        int key = (int) (p / (size + 8));
        if (key + 1 >= bodyAt.length) {
            bodyAt = Arrays.copyOf(bodyAt, Math.max(key + 2, 2 * bodyAt.length));
        }
        if (bodyAt[key] != p + 1) {
            message.copyFrom(body, 0, 0, size);
            bodiesWritten++;
            forgetOverlapping(key - 1, p);
            forgetOverlapping(key + 1, p);
            bodyAt[key] = p + 1;
        }
        message.setLong(0, sequence);
        if (size >= 16) {
            message.setLong(size - 8, ~sequence);
        }
    }

    private void forgetOverlapping(int key, long p) {
        if (key >= 0 && bodyAt[key] != 0 && Math.abs(bodyAt[key] - 1 - p) < size + 8) {
            bodyAt[key] = 0;
        }
    }
}
