package io.github.verbs4j.transfer.internal;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The wait's spin budget while batches stream ({@link StreamSpin}), fed with made-up times: it
 * follows the usual gap between completions, stays within [spinWait, 20 x spinWait], is not
 * stretched by one stall, and starts from spinWait again with each stream; and a wait's spin
 * counts the time it polled, not the time its thread was away ({@link StreamSpin#spinStart}).
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

    /**
     * A wait that polls every {@code step} from 0 with nothing arriving, its thread away for
     * {@code pause} once at {@code pauseAt}, the loop of {@code Batch.awaitUntil} with spinStart as
     * it is; returns the time it blocks, or -1 when it polls past {@code until} without blocking.
     */
    private static long blockTime(long spin, long step, long pauseAt, long pause, long until) {
        long idleSince = 0;
        long polled = 0;
        for (long now = step; now <= until; now += step) {
            if (now > pauseAt && now - step <= pauseAt) {
                now += pause; // this poll comes after the pause
            }
            idleSince = StreamSpin.spinStart(idleSince, polled, now, spin);
            polled = now;
            if (now - idleSince >= spin) {
                return now;
            }
        }
        return -1;
    }

    @Test
    void aPollAfterThePollingThreadWasAwayStartsTheSpinAgain() {
        long spin = 800 * US;
        // polling every microsecond, nothing arriving: it blocks once the spin is spent
        assertEquals(spin, blockTime(spin, US, Long.MAX_VALUE / 2, 0, 10 * spin));
        // away for 3 ms after 200 us of the spin: it blocked on its first poll back (before the
        // change: 200 us + 3 ms + 1 us); now it spins a whole spin from that poll
        long back = 200 * US + 3_000 * US + US;
        assertEquals(back + spin, blockTime(spin, US, 200 * US, 3_000 * US, 10 * spin));
        // a pause of less than half the spin is a slow poll, not time away: the spin goes on
        assertEquals(spin, blockTime(spin, US, 200 * US, 300 * US, 10 * spin));
    }

    @Test
    void shortPausesAndASpinOfZeroNeverRestartTheSpin() {
        assertEquals(BASE, StreamSpin.spinStart(BASE, 0, StreamSpin.PAUSE_NANOS, 30 * US),
                "a pause of PAUSE_NANOS restarts nothing, however short the spin");
        assertEquals(7, StreamSpin.spinStart(7, 0, 10_000_000, 0), "a spin of zero blocks at once");
        assertEquals(10_000_000, StreamSpin.spinStart(7, 0, 10_000_000, 1), "a spin of 1 ns after 10 ms away starts again");
        // polls slower than PAUSE_NANOS but each after less than half the spin: the spin is spent
        assertEquals(800 * US, blockTime(800 * US, 25 * US, Long.MAX_VALUE / 2, 0, 100_000 * US));
    }
}
