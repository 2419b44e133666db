package io.github.verbs4j.internal;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The open root owners of this JVM, in the order they were opened: the owners that no other
 * owner tracks as a dependent. These are the contexts a program opened ({@code ibv_open_device},
 * {@code ibv_import_device}; not the ones librdmacm opened, which it keeps for the process),
 * rdma_cm event channels (their ids are their dependents), and the owners of the layers above
 * that open their own parts: {@code RdmaConnection}, {@code RdmaServer}, a channel, its group and
 * server... Every other open owner is reachable from a context or an event channel through the
 * dependents its {@link Lifecycle} tracks. verbs4j-test's leak check reads this before and after
 * a test: what was opened in between and is still open is what the test left open.
 *
 * <p>Off until {@link #track()} (the test harness calls it): until then {@link #opened} and
 * {@link #closed} return at once, so a program pays one volatile read per open and close of a
 * root and holds no reference to what it opened. Once on, a root is held here, strongly, until
 * its close completes ({@link Lifecycle}) or begins ({@code CloseState}): verbs4j releases
 * nothing of an owner that became unreachable, so a root left open is a leak either way, and
 * keeping it lets the leak be named. Nothing here is on a data path: opens and closes only.
 *
 * <p>Thread-safe.
 */
public final class OpenOwners {

    private OpenOwners() {
    }

    /**
     * An open root: {@code owner}, opened as the {@code sequence}-th root of the JVM; its open
     * dependents come from {@code lifecycle} ({@code null} for an owner of a layer above, whose
     * parts are roots of their own).
     */
    public record Root(Object owner, long sequence, Lifecycle lifecycle, Object state) {

        /** The open owners made from this root directly (an event channel's ids, a context's domains...). */
        public List<Object> dependents() {
            return lifecycle == null ? List.of() : lifecycle.dependents();
        }

        /** Whether the root is still open (its close has not completed, or for a layer's owner, not begun). */
        public boolean isOpen() {
            return OPEN.get(state) == this;
        }

        @Override
        public String toString() {
            return String.valueOf(owner);
        }
    }

    private static volatile boolean tracking;
    private static final AtomicLong SEQUENCE = new AtomicLong();
    /** By the owner's state object (its Lifecycle or CloseState: identity, whatever the owner's equals says). */
    private static final Map<Object, Root> OPEN = new ConcurrentHashMap<>();

    /** Starts recording roots (idempotent): those opened before are never seen. */
    public static void track() {
        tracking = true;
    }

    /**
     * Records {@code owner}, whose close protocol {@code state} runs, as an open root; call once,
     * when the owner is open (the end of its constructor), so that an owner whose opening failed
     * is never seen.
     *
     * @param lifecycle the owner's lifecycle, whose dependents are the owner's, or {@code null}
     */
    public static void opened(Object state, Object owner, Lifecycle lifecycle) {
        if (tracking) {
            OPEN.put(state, new Root(owner, SEQUENCE.incrementAndGet(), lifecycle, state));
        }
    }

    /** Takes the root whose close protocol {@code state} runs off the list (no-op for others). */
    public static void closed(Object state) {
        if (tracking) {
            OPEN.remove(state);
        }
    }

    /** The sequence number of the last root opened: {@link #openSince} that mark is what was opened after now. */
    public static long mark() {
        return SEQUENCE.get();
    }

    /** The roots opened after {@code mark} and open now, the last opened first. */
    public static List<Root> openSince(long mark) {
        List<Root> roots = new ArrayList<>();
        for (Root r : OPEN.values()) {
            if (r.sequence() > mark) {
                roots.add(r);
            }
        }
        roots.sort(Comparator.comparingLong(Root::sequence).reversed());
        return roots;
    }
}
