package io.github.verbs4j;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The closed state of one native owner and the owners that depend on it.
 *
 * <p>verbs4j's policy for parents: <b>refuse</b>. Closing an owner while others still depend on
 * it (a protection domain with live memory regions, a completion queue still used by a queue
 * pair...) throws {@link IllegalStateException} naming them, and leaves the owner open; close the
 * dependents first (try-with-resources does this naturally). rdma-core itself refuses such
 * destroys with EBUSY; verbs4j says so in Java with the names, before the call.
 */
final class Lifecycle {

    private final Set<Object> dependents = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    boolean isClosed() {
        return closed;
    }

    /** Throws when closed; {@code owner}'s {@code toString()} names it. */
    void ensureOpen(Object owner) {
        if (closed) {
            throw closedException(owner);
        }
    }

    static IllegalStateException closedException(Object owner) {
        return new IllegalStateException(owner + " is closed");
    }

    /** Registers {@code dependent}; throws when this owner is already closed. */
    synchronized void addDependent(Object owner, Object dependent) {
        ensureOpen(owner);
        dependents.add(dependent);
    }

    void removeDependent(Object dependent) {
        dependents.remove(dependent);
    }

    /**
     * Starts closing: {@code false} when already closed (close is idempotent), else marks closed
     * and returns {@code true}. Throws when dependents are alive.
     */
    synchronized boolean beginClose(Object owner) {
        if (closed) {
            return false;
        }
        if (!dependents.isEmpty()) {
            List<String> names = new ArrayList<>();
            for (Object d : dependents) {
                names.add(String.valueOf(d));
            }
            names.sort(null);
            throw new IllegalStateException("cannot close " + owner + ": still in use by " + names.size()
                    + (names.size() == 1 ? " object: " : " objects: ") + String.join(", ", names)
                    + "; close them first");
        }
        closed = true;
        return true;
    }

    /** Undoes {@link #beginClose} when the native destroy failed: the owner is still usable. */
    synchronized void abortClose() {
        closed = false;
    }
}
