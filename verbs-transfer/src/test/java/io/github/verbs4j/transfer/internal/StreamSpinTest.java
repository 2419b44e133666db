package io.github.verbs4j.transfer.internal;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The wait's spin budget while batches stream ({@link StreamSpin}), fed with made-up times: it
 * follows the usual gap between completions, stays within [spinWait, 20 x spinWait], is not
 * stretched by one stall, and starts from spinWait again with each stream.
 */
class StreamSpinTest {

    private static final long US = 1_000;
    private static final long BASE = 50 * US;

    /** Feeds {@code n} completions {@code gap} apart after {@code at}; returns the time of the last. */
    private static long feed(StreamSpin s, long at, long gap, int n) {
        for (int i = 1; i <= n; i++) {
            s.completions(at + i * gap);
        }
        return at + n * gap;
    }

    @Test
    void followsFourTimesTheUsualGapOfAStream() {
        StreamSpin s = new StreamSpin(BASE);
        assertEquals(BASE, s.spinNanos());
        s.completions(1_000_000);
        assertEquals(BASE, s.spinNanos(), "one completion shows no gap yet");
        feed(s, 1_000_000, 100 * US, 60);
        // the average after 60 gaps of 100 us is within 0.1 % of 100 us
        assertTrue(s.spinNanos() > 399 * US && s.spinNanos() <= 400 * US, "spin " + s.spinNanos());
    }

    @Test
    void gapsShorterThanAQuarterOfSpinWaitLeaveSpinWait() {
        StreamSpin s = new StreamSpin(BASE);
        feed(s, 0, 10 * US, 100);
        assertEquals(BASE, s.spinNanos());
    }

    @Test
    void oneStallMovesTheSpinByAnEighthOfTheLongestAndManyReachTheBoundOnly() {
        StreamSpin s = new StreamSpin(BASE);
        long t = feed(s, 0, 10 * US, 100); // usual gap ~10 us: spin = spinWait
        assertEquals(BASE, s.spinNanos());
        s.completions(t + 5_000_000_000L); // a 5 s stall counts as the longest spin, 1 ms
        long after = s.spinNanos();
        // 4 x (10 us + (1000 - 10) us / 8) = 535 us
        assertTrue(after > 525 * US && after < 545 * US, "spin after one stall " + after);
        t += 5_000_000_000L;
        for (int i = 0; i < 50; i++) {
            t += 5_000_000_000L;
            s.completions(t);
        }
        assertEquals(StreamSpin.MAX_FACTOR * BASE, s.spinNanos());
    }

    @Test
    void aNewStreamStartsFromSpinWaitAndDoesNotCountThePauseBefore() {
        StreamSpin s = new StreamSpin(BASE);
        long t = feed(s, 0, 200 * US, 60);
        assertTrue(s.spinNanos() > BASE);
        s.streamEnded();
        assertEquals(BASE, s.spinNanos());
        s.completions(t + 10_000_000_000L); // the first completion of the next stream, 10 s later
        assertEquals(BASE, s.spinNanos(), "the pause between two streams is no gap");
        feed(s, t + 10_000_000_000L, 30 * US, 60);
        assertTrue(s.spinNanos() > 110 * US && s.spinNanos() <= 120 * US, "spin " + s.spinNanos());
    }

    @Test
    void aSpinWaitOfZeroBlocksAtOnceWhateverTheStream() {
        StreamSpin s = new StreamSpin(0);
        feed(s, 0, 300 * US, 100);
        assertEquals(0, s.spinNanos());
    }
}
