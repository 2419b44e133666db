package io.github.verbs4j;

import io.github.verbs4j.internal.OpenOwners;

/**
 * The closed-state model of verbs4j's owners, for the layers built on it: an owner is open until
 * its {@code close()} begins, closed from then on ({@link #isClosed()} says so at once, so
 * nothing new starts while it releases), and every operation on a closed owner throws
 * {@link IllegalStateException} naming the owner ({@code "TransferEngine[a] is closed"}).
 * {@code close()} is idempotent: only the first call, the one {@link #beginClose()} answers
 * {@code true}, releases anything.
 * <pre>{@code
 * private final CloseState state = new CloseState();
 * public void send(...) { state.ensureOpen(this); ... }
 * public boolean isClosed() { return state.isClosed(); }
 * public void close() { if (state.beginClose()) { closer.close(); } }
 * }</pre>
 * Thread-safe; the state is volatile, so a check costs one volatile read.
 *
 * <p>An owner that opens verbs objects of its own (a connection, a group of channels) calls
 * {@link #opened(Object)} once it is open, at the end of its constructor: verbs4j-test's
 * {@code @SoftRdmaTest} then sees it, and a test that leaves it open fails naming it, and the
 * harness closes it with its own {@code close()}.
 */
public final class CloseState {

    private volatile boolean closed;

    /** An open state. */
    public CloseState() {
    }

    /**
     * Records {@code owner} as open, for verbs4j-test's leak check (a test that leaves it open
     * fails naming it by its {@code toString()}), until {@link #beginClose()}. Call once, when the
     * owner is open (the end of its constructor): an owner whose constructor failed is never
     * seen. Costs nothing outside that harness (one volatile read).
     *
     * @param owner the owner of this state
     */
    public void opened(Object owner) {
        OpenOwners.opened(this, owner, null);
    }

    /** Whether {@code close()} has begun. */
    public boolean isClosed() {
        return closed;
    }

    /**
     * Marks the owner closed.
     *
     * @return {@code true} for the first call only: that caller releases the owner's resources
     */
    public boolean beginClose() {
        if (closed) {
            return false;
        }
        synchronized (this) {
            if (closed) {
                return false;
            }
            closed = true;
        }
        OpenOwners.closed(this);
        return true;
    }

    /**
     * Throws unless open.
     *
     * @param owner the owner, named in the message by its {@code toString()}
     * @throws IllegalStateException when closed
     */
    public void ensureOpen(Object owner) {
        if (closed) {
            throw new IllegalStateException(owner + " is closed");
        }
    }
}
