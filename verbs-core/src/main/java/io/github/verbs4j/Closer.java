package io.github.verbs4j;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Objects;

/**
 * Closes what it was given in reverse order, every one of them even when some fail, and throws
 * the first failure with the later ones {@linkplain Throwable#addSuppressed suppressed} on it.
 * The one "close these, keep the errors" loop for owners built of several resources:
 * <pre>{@code
 * Closer closer = new Closer();
 * try {
 *     ProtectionDomain pd = closer.register(context.allocatePd());
 *     CompletionQueue cq = closer.register(context.createCq(64));
 *     ...
 * } catch (Throwable t) {
 *     closer.closeSuppressingInto(t); // a constructor that fails releases what it made
 *     throw t;
 * }
 * ...
 * closer.close(); // in the owner's close(): cq, then pd
 * }</pre>
 * A failure that is an {@link Error} or {@link RuntimeException} is thrown as it is; a checked
 * exception from an {@link AutoCloseable} other than verbs4j's owners (which throw none) is
 * wrapped once in an {@link IllegalStateException}. Closing twice closes nothing the second
 * time. Thread-safe.
 */
public final class Closer implements AutoCloseable {

    private final Deque<AutoCloseable> open = new ArrayDeque<>();

    /** An empty closer. */
    public Closer() {
    }

    /**
     * Adds {@code resource}, to be closed before everything registered earlier.
     *
     * @return {@code resource}, for {@code var x = closer.register(make())}
     * @throws NullPointerException for {@code null}
     */
    public synchronized <T extends AutoCloseable> T register(T resource) {
        open.push(Objects.requireNonNull(resource, "resource"));
        return resource;
    }

    /**
     * Closes every registered resource, the last registered first.
     *
     * @throws RuntimeException the first failure (an {@link Error} as it is), the later ones
     *                          suppressed on it
     */
    @Override
    public void close() {
        Throwable first = closeAll(drain(), null);
        if (first != null) {
            throw unchecked(first);
        }
    }

    /**
     * Closes every registered resource, the last registered first, and adds each failure to
     * {@code primary} as suppressed: for the failure path of a constructor or an open method,
     * where {@code primary} is what the caller rethrows.
     */
    public void closeSuppressingInto(Throwable primary) {
        Objects.requireNonNull(primary, "primary");
        closeAll(drain(), primary);
    }

    /**
     * Closes {@code resources} in the order given, every one even when some fail ({@code null}
     * elements are skipped).
     *
     * @throws RuntimeException the first failure (an {@link Error} as it is), the later ones
     *                          suppressed on it
     */
    public static void closeAll(Iterable<? extends AutoCloseable> resources) {
        Throwable first = closeAll(resources, null);
        if (first != null) {
            throw unchecked(first);
        }
    }

    private synchronized Iterable<AutoCloseable> drain() {
        Deque<AutoCloseable> copy = new ArrayDeque<>(open); // already last-registered first
        open.clear();
        return copy;
    }

    /** Closes all; failures go onto {@code into} when given, else onto the first. Returns the first. */
    private static Throwable closeAll(Iterable<? extends AutoCloseable> resources, Throwable into) {
        Throwable first = into;
        for (AutoCloseable r : resources) {
            if (r == null) {
                continue;
            }
            try {
                r.close();
            } catch (Throwable t) {
                if (first == null) {
                    first = t;
                } else if (first != t) {
                    first.addSuppressed(t);
                }
            }
        }
        return into == null ? first : null;
    }

    private static RuntimeException unchecked(Throwable t) {
        if (t instanceof Error e) {
            throw e;
        }
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof InterruptedException) {
            Thread.currentThread().interrupt();
        }
        return new IllegalStateException("close failed: " + t, t);
    }
}
