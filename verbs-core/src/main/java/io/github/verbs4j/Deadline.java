package io.github.verbs4j;

import io.github.verbs4j.internal.Timeouts;
import java.time.Duration;

/**
 * A point in time on {@link System#nanoTime()}'s clock, made from a caller's timeout, for an
 * operation that waits in several steps (resolve, connect, accept, poll...) under one timeout:
 * each step waits {@link #remaining()}, and the operation throws {@link #timedOut} when it runs out.
 *
 * <p>The timeout is read as every timed method of verbs4j reads it: a {@link Duration} neither
 * {@code null} nor negative, {@link Duration#ZERO} meaning "do not wait", rounded up to whole
 * milliseconds and capped far in the future (a huge timeout waits "forever" without overflow).
 * Immutable.
 */
public final class Deadline {

    private final long at;
    private final Duration timeout;

    private Deadline(long at, Duration timeout) {
        this.at = at;
        this.timeout = timeout;
    }

    /**
     * The deadline {@code timeout} from now.
     *
     * @throws NullPointerException     for {@code null}
     * @throws IllegalArgumentException for a negative duration
     */
    public static Deadline after(Duration timeout) {
        return new Deadline(Timeouts.deadline(timeout), timeout);
    }

    /** The timeout this deadline was made from, for messages. */
    public Duration timeout() {
        return timeout;
    }

    /** The deadline on {@link System#nanoTime()}'s clock. */
    public long nanoTime() {
        return at;
    }

    /** Whether the deadline has passed. */
    public boolean expired() {
        return System.nanoTime() - at >= 0;
    }

    /** Nanoseconds left, 0 once expired. */
    public long remainingNanos() {
        return Math.max(0, at - System.nanoTime());
    }

    /** Milliseconds left, rounded up (so a wait of it does not end just short), 0 once expired. */
    public long remainingMillis() {
        return (remainingNanos() + 999_999) / 1_000_000;
    }

    /** The time left, {@link Duration#ZERO} once expired: the timeout to give the next step. */
    public Duration remaining() {
        return Duration.ofNanos(remainingNanos());
    }

    /**
     * The exception for this deadline running out while waiting on {@code verb}.
     *
     * @param verb    the rdma-core function waited on, e.g. {@code "ibv_poll_cq"}
     * @param awaited what did not come
     */
    public RdmaTimeoutException timedOut(String verb, String awaited) {
        return new RdmaTimeoutException(verb, awaited, timeout);
    }

    /**
     * The exception for this deadline running out in a wait of verbs4j's own (no one verb timed out).
     *
     * @param awaited what did not come
     */
    public RdmaTimeoutException timedOut(String awaited) {
        return new RdmaTimeoutException(null, awaited, timeout);
    }

    @Override
    public String toString() {
        return "Deadline[" + timeout.toMillis() + " ms, " + remainingMillis() + " ms left]";
    }
}
