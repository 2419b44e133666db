package io.github.verbs4j.channel;

/**
 * Writes a message in place, straight into the channel's registered staging memory:
 * {@link Channel#send(int, MessageWriter)} calls it once the peer's ring has room, with a
 * {@link StagedMessage} of the length asked for, and posts what it wrote. The message is not
 * copied again: the RDMA WRITE carries it from where the writer put it.
 *
 * <p>The call runs with the channel's lock held, in the sending thread: keep it short (the
 * group's polling thread waits for the lock to deliver to this channel meanwhile), and do not
 * call the channel's {@code send}, {@code offer}, {@code receive}, {@code poll} or
 * {@code close} from it (they throw {@link IllegalStateException}). An exception thrown by the
 * writer propagates out of {@code send} and sends nothing.
 */
@FunctionalInterface
public interface MessageWriter {

    /** Writes the message into {@code message}, which is valid only during this call. */
    void write(StagedMessage message);
}
