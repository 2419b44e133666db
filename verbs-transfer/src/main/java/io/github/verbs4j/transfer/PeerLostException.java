package io.github.verbs4j.transfer;

import io.github.verbs4j.RdmaException;
import io.github.verbs4j.WcStatus;

/**
 * A call needed a {@link TransferPeer} that is lost: the exception form of
 * {@link TransferStatus#PEER_LOST}, thrown where a call (not a batch's request) meets the loss,
 * as {@link TransferPeer#lookup}. Its {@link #status()} is the completion status that showed the
 * loss ({@link TransferPeer#lostBecause()}: RETRY_EXC_ERR when the transport gave up on a silent
 * host), or {@code null} when rdma_cm reported the connection DISCONNECTED; its cause is the
 * {@link io.github.verbs4j.WorkCompletionException} of the call's own work request when that is
 * what failed, else {@code null}. The channel's {@code PeerLostException} is its counterpart
 * there; both are {@link RdmaException}s.
 */
public final class PeerLostException extends RdmaException {

    private static final long serialVersionUID = 1L;

    private final transient WcStatus status;

    /** An exception with this message, the status that showed the loss (or {@code null}) and cause (or {@code null}). */
    public PeerLostException(String message, WcStatus status, Throwable cause) {
        super(message, cause);
        this.status = status;
    }

    /** The completion status that showed the peer gone, or {@code null} when rdma_cm reported it. */
    public WcStatus status() {
        return status;
    }
}
