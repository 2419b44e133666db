package io.github.verbs4j.examples.channel;

import java.io.PrintWriter;
import java.util.Arrays;

/**
 * Where the slow round trips of a run fall (issue 26, p99 ≤ 3 × p50; docs/measurements/channel.md, "The
 * stood-down polling thread's wake-ups"): with {@code -Dverbs4j.bench.tail=true} (in
 * {@code VERBS4J_JAVA_OPTS}), the client prints how many round trips took more than 3 × and
 * 10 × the median, and how far apart in time the slow ones came. A cause that ticks (a thread
 * waking every 1 ms, another every 200 ms) shows as a peak of the gaps at its period; the
 * scheduler's preemptions on a shared CPU come at no period.
 */
final class RoundTripTail {

    /** Whether the benches print the tail (the arrays are filled either way: recording costs two stores). */
    static final boolean ENABLED = Boolean.getBoolean("verbs4j.bench.tail");

    /** The gap bounds, in µs, of the histogram of the times between two slow round trips. */
    private static final long[] GAP_BOUNDS_MICROS = {10, 100, 900, 1_100, 10_000, 190_000, 210_000};

    private RoundTripTail() {
    }

    /**
     * Prints the summary of round trips {@code i} that began at {@code startNanos[i]} and took
     * {@code rttNanos[i]} (in the order they ran; neither array is changed).
     */
    static void print(PrintWriter out, long[] startNanos, long[] rttNanos) {
        int n = rttNanos.length;
        if (n == 0) {
            return;
        }
        long[] sorted = rttNanos.clone();
        Arrays.sort(sorted);
        long median = sorted[n / 2];
        int slow = 0;
        int verySlow = 0;
        long slowNanos = 0;
        long[] gapCounts = new long[GAP_BOUNDS_MICROS.length + 1];
        long lastSlowStart = -1;
        for (int i = 0; i < n; i++) {
            if (rttNanos[i] > 10 * median) {
                verySlow++;
            }
            if (rttNanos[i] <= 3 * median) {
                continue;
            }
            slow++;
            slowNanos += rttNanos[i] - median;
            if (lastSlowStart >= 0) {
                long gapMicros = (startNanos[i] - lastSlowStart) / 1_000;
                int b = 0;
                while (b < GAP_BOUNDS_MICROS.length && gapMicros >= GAP_BOUNDS_MICROS[b]) {
                    b++;
                }
                gapCounts[b]++;
            }
            lastSlowStart = startNanos[i];
        }
        double spanMillis = (startNanos[n - 1] + rttNanos[n - 1] - startNanos[0]) / 1e6;
        out.printf(" tail: %d round trips over %.1f ms, median %.2f us; %d (%.2f %%) over 3 x median, %d over 10 x, max %.1f us;"
                        + " the slow ones added %.1f us each beyond the median%n",
                n, spanMillis, median / 1e3, slow, 100.0 * slow / n, verySlow, sorted[n - 1] / 1e3,
                slow == 0 ? 0.0 : slowNanos / 1e3 / slow);
        StringBuilder gaps = new StringBuilder(" tail: gaps between slow round trips (us):");
        for (int b = 0; b < gapCounts.length; b++) {
            String lo = b == 0 ? "0" : Long.toString(GAP_BOUNDS_MICROS[b - 1]);
            String hi = b == GAP_BOUNDS_MICROS.length ? "" : Long.toString(GAP_BOUNDS_MICROS[b]);
            gaps.append(' ').append(lo).append('-').append(hi).append(": ").append(gapCounts[b]).append(';');
        }
        out.println(gaps);
    }
}
