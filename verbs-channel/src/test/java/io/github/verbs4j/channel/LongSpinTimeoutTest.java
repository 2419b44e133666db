package io.github.verbs4j.channel;

import io.github.verbs4j.test.SoftRdmaTest;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static io.github.verbs4j.channel.ChannelTest.T;
import static io.github.verbs4j.channel.ChannelTest.pair;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A waiting thread's spin ({@link ChannelOptions#spinPolls()}) does not carry a wait past its
 * timeout: the credit wait of {@code offer} looks at its deadline while it spins, as
 * {@code receive} does (docs/channel.md, "Nothing a waiting thread waits for needs the polling
 * thread"). Before, a spin without end made {@code offer(m, timeout)} on a full ring spin on
 * for good.
 */
@SoftRdmaTest
class LongSpinTimeoutTest {

    /** {@code offer(m, 50 ms)} on a full ring, in {@code ex}: returns {@code false} after at least 50 ms, within the test's timeout. */
    private static void timedOutOffer(ExecutorService ex, Channel ch, MemorySegment m) throws Exception {
        Future<Long> offered = ex.submit(() -> {
            long t0 = System.nanoTime();
            assertFalse(ch.offer(m, 50, TimeUnit.MILLISECONDS), "the full ring took a message");
            return System.nanoTime() - t0;
        });
        long took = offered.get(T.toSeconds(), TimeUnit.SECONDS);
        assertTrue(took >= TimeUnit.MILLISECONDS.toNanos(50), "returned before its timeout: " + took + " ns");
    }

    @Test
    void anOfferOnAFullRingTimesOutWhileItsSpinHasNoEnd() throws Exception {
        int slots = 16;
        ChannelOptions options = ChannelOptions.defaults().withSlots(slots).withSpinPolls(Integer.MAX_VALUE);
        try (ChannelTest.Pair p = pair(options); ExecutorService ex = Executors.newSingleThreadExecutor();
             Arena arena = Arena.ofConfined()) {
            MemorySegment m = arena.allocate(64);
            // one slot each; the receiver takes none, so no credit comes back
            for (int i = 0; i < slots; i++) {
                assertTrue(p.client().offer(m, 0, TimeUnit.MILLISECONDS), "message " + i + " fits the empty ring");
            }
            // no poll of the polling thread may end the spin (it ends at the first poll that finds
            // another thread polling): offers until it stood down for a spinning one, then held there
            p.clientGroup().holdStandDown(TimeUnit.SECONDS.toNanos(60));
            for (int k = 0; p.clientGroup().standDowns() == 0; k++) {
                assertTrue(k < 200, "the polling thread never stood down for a spinning offer");
                timedOutOffer(ex, p.client(), m);
            }
            for (int k = 0; k < 5; k++) {
                timedOutOffer(ex, p.client(), m);
            }
            assertEquals(slots, p.client().sentCount());
        }
    }
}
