package io.github.verbs4j.transfer;

/** The state of one request of a {@link Batch}. */
public enum TransferStatus {
    /** Not submitted yet, or some of its chunks are still posted or waiting to be. */
    PENDING,
    /** Every chunk completed successfully: the bytes are in place. */
    DONE,
    /**
     * The peer is gone: rdma_cm reported its connection DISCONNECTED (its process died or closed
     * the connection: chunks in flight then flush, chunks not posted never are), its queue pair
     * reported a transport retry or receiver-not-ready retry failure (the host or the link is
     * down), or every queue pair to it has failed.
     */
    PEER_LOST,
    /**
     * The peer refused the access (a remote access or protection error: a stale rkey, a
     * deregistered segment, missing rights).
     */
    ACCESS_ERROR,
    /**
     * A chunk was flushed because an earlier request failed on the same queue pair (RC queue
     * pairs stop at the first error); the data may be partly moved.
     */
    FLUSHED,
    /** The batch's await ended at its timeout before this request finished. */
    TIMED_OUT,
    /** Posting failed locally (the provider refused the work request), or another local error. */
    LOCAL_ERROR;

    /** Whether this status is final (anything but {@link #PENDING}). */
    public boolean isFinal() {
        return this != PENDING;
    }
}
