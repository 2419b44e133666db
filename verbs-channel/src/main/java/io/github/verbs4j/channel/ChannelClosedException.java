package io.github.verbs4j.channel;

/**
 * The channel is closed: by this side ({@link Channel#close()}), or by the peer, whose every
 * message was received before this was thrown.
 */
public final class ChannelClosedException extends ChannelException {

    private static final long serialVersionUID = 1L;

    /** An exception with this message and cause (which may be {@code null}). */
    public ChannelClosedException(String message, Throwable cause) {
        super(message, cause);
    }
}
