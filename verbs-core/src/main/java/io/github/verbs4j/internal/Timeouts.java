package io.github.verbs4j.internal;

import java.time.Duration;
import java.util.Objects;

/**
 * The one reading of a caller's timeout, for every method of core and cm that takes one: a
 * {@link Duration} that is neither {@code null} nor negative. {@link Duration#ZERO} means "do not
 * wait"; waiting without a bound has methods of its own (no timeout argument), so a bug that
 * computes a negative timeout fails loudly instead of hanging.
 */
public final class Timeouts {

    private Timeouts() {
    }

    /**
     * {@code timeout} in milliseconds, rounded up (1 ns waits 1 ms) and capped so that adding it to
     * {@link System#nanoTime()} in nanoseconds cannot overflow.
     *
     * @throws NullPointerException for {@code null}
     * @throws IllegalArgumentException for a negative duration
     */
    public static long millis(Duration timeout) {
        Objects.requireNonNull(timeout, "timeout");
        if (timeout.isNegative()) {
            throw new IllegalArgumentException("negative timeout " + timeout
                    + ": give Duration.ZERO not to wait, or use the method without a timeout to wait without a bound");
        }
        // from the seconds and nanoseconds: no Duration arithmetic, which allocates wherever the
        // JIT cannot scalar-replace it (seen at 24 B per call on every timed operation)
        long seconds = timeout.getSeconds();
        if (seconds > CAP_MILLIS / 1000) {
            return CAP_MILLIS;
        }
        int nanos = timeout.getNano();
        long ms = seconds * 1000 + nanos / 1_000_000 + (nanos % 1_000_000 == 0 ? 0 : 1);
        return Math.min(ms, CAP_MILLIS);
    }

    /** The longest wait in milliseconds: its nanoseconds added to {@link System#nanoTime()} cannot overflow. */
    private static final long CAP_MILLIS = Long.MAX_VALUE / 4_000_000L;

    /** The {@link System#nanoTime()} deadline {@code timeout} from now. */
    public static long deadline(Duration timeout) {
        return System.nanoTime() + millis(timeout) * 1_000_000L;
    }
}
