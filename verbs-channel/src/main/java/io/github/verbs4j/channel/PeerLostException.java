package io.github.verbs4j.channel;

/**
 * The peer of a channel went away without closing it: its process died, the link failed, or the
 * transport gave up retrying. The cause is what showed it: a
 * {@link io.github.verbs4j.WorkCompletionException} (RETRY_EXC_ERR, WR_FLUSH_ERR...), or
 * {@code null} when the connection manager reported the disconnect.
 */
public final class PeerLostException extends ChannelException {

    private static final long serialVersionUID = 1L;

    /** An exception with this message and cause (which may be {@code null}). */
    public PeerLostException(String message, Throwable cause) {
        super(message, cause);
    }
}
