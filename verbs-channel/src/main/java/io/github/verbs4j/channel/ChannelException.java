package io.github.verbs4j.channel;

import io.github.verbs4j.RdmaException;

/**
 * Why a channel operation could not complete: the root of the channel's own exceptions, and an
 * {@link RdmaException} like every RDMA failure in verbs4j.
 * <ul>
 *   <li>{@link PeerLostException}: the peer went away without closing (process killed, link
 *       fault, retries exhausted); every pending operation of the channel fails with it.</li>
 *   <li>{@link ChannelClosedException}: this side closed the channel, or the peer closed it
 *       cleanly and every message it sent was received.</li>
 * </ul>
 */
public class ChannelException extends RdmaException {

    private static final long serialVersionUID = 1L;

    /** An exception with this message and cause (which may be {@code null}). */
    public ChannelException(String message, Throwable cause) {
        super(message, cause);
    }
}
