package io.github.verbs4j;

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
 */
public final class CloseState {

    private volatile boolean closed;

    /** An open state. */
    public CloseState() {
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
            return true;
        }
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
