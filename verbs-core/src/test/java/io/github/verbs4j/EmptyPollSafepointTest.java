package io.github.verbs4j;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * A thread spinning on an empty queue lets a stop-the-world operation happen: the provider's
 * poll is a critical downcall (no safepoint check) and the JIT drops the safepoint check of a
 * loop that calls, so without {@link CompletionQueue#letTheJvmStop} a {@code System.gc()} from
 * another thread waits for as long as the loop spins (the hang of 2026-11-28: an in-process
 * ping-pong's second thread waiting for a GC that waited for the poller).
 *
 * <p>The spinning thread gives up after {@link #BOUND} on its own (by {@code System.nanoTime},
 * which needs no safepoint), so a broken build fails here instead of hanging: the assertion is
 * that the GC returned while the thread still spun, the bound is only a bound. Checked by hand
 * (2026-11-30): with the {@code afterEmptyPolls} calls removed from {@code CompletionQueue.poll}
 * and {@code PollSession.begin} both tests fail that way; with only the {@code labs} call
 * removed, {@code -Dverbs4j.emptyPollYieldEvery=0} and {@code afterEmptyPolls} forced inline
 * ({@code -XX:CompileCommand=inline,...}) the classic poll's test fails; with the call, both pass.
 * (Left to C2, {@code afterEmptyPolls} is usually not inlined, "low call site frequency", and a
 * compiled method's return checks for a safepoint too; the downcall makes it not depend on that.)
 */
class EmptyPollSafepointTest {

    private static final Duration BOUND = Duration.ofSeconds(20);
    /** Short spins first, so that the spinning loop runs compiled by C2 (interpreted and C1 code check at every back edge). */
    private static final int WARM_UP_SPINS = 40;
    private static final Duration WARM_UP_SPIN = Duration.ofMillis(10);

    /** The spinning thread's state, shared with the test thread. */
    private static final class Spin {
        volatile boolean warm;
        volatile boolean stop;
        volatile boolean timedOut;
        volatile long found;
    }

    /** One spin: polls the empty queue until {@code spin.stop} or {@code deadline}; returns whether the deadline ended it. */
    @FunctionalInterface
    private interface Loop {
        boolean spin(Spin spin, long deadline);
    }

    @Test
    void aGcHappensWhileAThreadSpinsInPollOnAnEmptyQueue() throws InterruptedException {
        try (Context ctx = Rig.open(); CompletionQueue cq = ctx.createCq(16)) {
            Completions wcs = cq.completions(16);
            assertAGcHappensWhileSpinning((spin, deadline) -> {
                // the loop a user writes, with a way out for the test
                while (cq.poll(wcs) == 0) {
                    if (spin.stop) {
                        return false;
                    }
                    if (System.nanoTime() - deadline > 0) {
                        return true;
                    }
                }
                spin.found++;
                return false;
            });
        }
    }

    @Test
    void aGcHappensWhileAThreadSpinsInStartPollOnAnEmptyQueue() throws InterruptedException {
        try (Context ctx = Rig.open(); CompletionQueue cq = ctx.createExtendedCq(16, null, 0, WcField.BYTE_LEN)) {
            assertAGcHappensWhileSpinning((spin, deadline) -> {
                while (true) {
                    try (PollSession p = cq.startPoll()) {
                        if (p.next()) {
                            spin.found++;
                            return false;
                        }
                    }
                    if (spin.stop) {
                        return false;
                    }
                    if (System.nanoTime() - deadline > 0) {
                        return true;
                    }
                }
            });
        }
    }

    private static void assertAGcHappensWhileSpinning(Loop loop) throws InterruptedException {
        Spin spin = new Spin();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread spinner = Thread.ofPlatform().name("empty-poll spinner").daemon().start(() -> {
            try {
                for (int i = 0; i < WARM_UP_SPINS; i++) {
                    loop.spin(spin, System.nanoTime() + WARM_UP_SPIN.toNanos());
                }
                spin.warm = true;
                spin.timedOut = loop.spin(spin, System.nanoTime() + BOUND.toNanos());
            } catch (Throwable t) {
                failure.set(t);
            }
        });
        try {
            while (!spin.warm && spinner.isAlive()) {
                Thread.sleep(5);
            }
            Thread.sleep(100); // the spinner in its long spin
            // a stop-the-world operation: returns once every thread reached a safepoint (or
            // was in native), and the spinner only reaches one through poll's safepoint call
            System.gc();
        } finally {
            spin.stop = true;
            spinner.join(BOUND.multipliedBy(2).toMillis());
        }
        assertNull(failure.get(), () -> "the spinner failed: " + failure.get());
        assertFalse(spinner.isAlive(), "the spinner did not stop");
        assertEquals(0, spin.found, "a completion on a queue nothing was posted to");
        assertFalse(spin.timedOut, () -> "System.gc() returned only after the spinning poller gave up at its "
                + BOUND.toSeconds() + " s bound: the empty poll gave the JVM no safepoint");
    }
}
