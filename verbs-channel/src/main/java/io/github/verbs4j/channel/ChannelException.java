package io.github.verbs4j.channel;

import io.github.verbs4j.RdmaException;

/**
 * Why a channel operation could not complete, other than a lost peer: the root of the channel's
 * own exceptions, and an {@link RdmaException} like every RDMA failure in verbs4j.
 * <ul>
 *   <li>{@link ChannelClosedException}: this side closed the channel, or the peer closed it
 *       cleanly and every message it sent was received;</li>
 *   <li>a plain {@code ChannelException}: {@link Channel#close()} timed out with messages not
 *       yet delivered.</li>
 * </ul>
 * A peer that went away without closing (process killed, link fault, retries exhausted) is
 * core's {@link io.github.verbs4j.PeerLostException}, as in every layer: every pending
 * operation of the channel fails with it.
 */
public class ChannelException extends RdmaException {

    private static final long serialVersionUID = 1L;

    /** An exception with this message and cause (which may be {@code null}). */
    public ChannelException(String message, Throwable cause) {
        super(message, cause);
    }
}
