package io.github.verbs4j;

/**
 * The peer of a connection is gone: its process died or closed the connection without the
 * layer's own goodbye, the link failed, or the transport gave up retrying. Every layer that keeps
 * a connection (verbs-cm's {@code RdmaConnection}, verbs-channel's {@code Channel}, verbs-transfer's
 * {@code TransferPeer} and {@code Ring}) throws this one type for it, so that an application
 * catches "the peer is lost" once, whichever layer it uses.
 *
 * <p>What showed the loss is kept once, never doubled:
 * <ul>
 *   <li>{@link #status()}: the status of the completion that showed it (RETRY_EXCEEDED when the
 *       transport gave up on a silent host, WR_FLUSH_ERROR for a request flushed once rdma_cm
 *       disconnected the queue pair), or {@code null} when no completion did (rdma_cm reported
 *       the connection DISCONNECTED before anything failed);</li>
 *   <li>{@link #getCause()}: the {@link WorkCompletionException} of the caller's own work request
 *       when that is what failed (its status is then {@link #status()}), another failure that
 *       broke the connection (a refused post), or {@code null}; never a second
 *       {@code PeerLostException}: given one as cause, the constructor takes its cause and status
 *       instead.</li>
 * </ul>
 * A layer adds its context in the message (which peer, which call); it does not subclass.
 *
 * <p>It is not a {@link VerbsException}: no verb failed (no errno; the loss is not a
 * {@code ECONNRESET} returned by any call).
 */
public final class PeerLostException extends RdmaException {

    private static final long serialVersionUID = 1L;

    private final WcStatus status;

    /**
     * A loss that no completion showed: rdma_cm reported the connection DISCONNECTED (or the
     * device removed). {@link #status()} and the cause are {@code null}.
     *
     * @param message what was lost and where, naming the peer
     */
    public PeerLostException(String message) {
        this(message, null, null);
    }

    /**
     * A loss shown by {@code cause}: its status when it is a {@link WorkCompletionException}
     * (else {@code null}), and its cause and status when it is itself a {@code PeerLostException}.
     *
     * @param message what was lost and where, naming the peer
     * @param cause   what showed the loss, or {@code null}
     */
    public PeerLostException(String message, Throwable cause) {
        this(message, cause instanceof WorkCompletionException wc ? wc.status() : null, cause);
    }

    /**
     * A loss shown by a completion with {@code status}, with {@code cause} (which may be
     * {@code null}: the completion that showed it was another request's, not the caller's).
     *
     * @param message what was lost and where, naming the peer
     * @param status  the status of the completion that showed the loss, or {@code null}
     * @param cause   the caller's own failure, or {@code null}; a {@code PeerLostException} is
     *                replaced by its cause (and its status, when {@code status} is {@code null})
     */
    public PeerLostException(String message, WcStatus status, Throwable cause) {
        super(message, cause instanceof PeerLostException lost ? lost.getCause() : cause);
        this.status = status == null && cause instanceof PeerLostException lost ? lost.status : status;
    }

    /**
     * Whether a completion with {@code status} shows the peer gone by itself: the transport gave
     * up on it (RETRY_EXCEEDED, RNR_RETRY_EXCEEDED, RESPONSE_TIMEOUT_ERROR, REMOTE_ABORT_ERROR).
     * A WR_FLUSH_ERROR does only when it is the queue pair's first error (rdma_cm moved it to ERR
     * on a disconnect), which the caller knows and this method cannot.
     *
     * @param status a completion status, not {@code null}
     * @return whether it means the peer is lost
     */
    public static boolean shows(WcStatus status) {
        return switch (status) {
            case RETRY_EXCEEDED, RNR_RETRY_EXCEEDED, RESPONSE_TIMEOUT_ERROR, REMOTE_ABORT_ERROR -> true;
            default -> false;
        };
    }

    /** The status of the completion that showed the peer gone, or {@code null} when rdma_cm reported it. */
    public WcStatus status() {
        return status;
    }
}
