package io.github.verbs4j.channel;

import io.github.verbs4j.Errno;
import io.github.verbs4j.RdmaTimeoutException;
import io.github.verbs4j.test.SoftRdmaTest;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.TimeUnit;

import static io.github.verbs4j.channel.ChannelTest.T;
import static io.github.verbs4j.channel.ChannelTest.pair;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Counts how often a group's polling thread looks up while an application thread polls the
 * queue (docs/channel.md, "The stood-down polling thread's wake-ups"): each look is a wake-up on
 * a CPU that the polling threads need, so it must not come every millisecond while a thread
 * polls without a pause.
 */
@SoftRdmaTest
class StandDownCountTest {

    /** How long the receiver polls for a message that does not come. */
    private static final long POLLING_MILLIS = 500;
    /**
     * The stand-downs allowed in {@link #POLLING_MILLIS}: parks of 1, 2, 4, ... 64 ms (7), then
     * one per 64 ms (8 in 500 ms), and slack. The code before parked 1 ms at a time: about 500
     * looks in the same wait on a quiet machine, and more than 20 even if every 1 ms park took 20.
     */
    private static final long MAX_STAND_DOWNS = 20;

    /**
     * A receiver with a spin longer than its wait polls the queue for all of its 500 ms; the
     * polling thread of its group stands down meanwhile and looks up at most 20 times. A message
     * sent afterwards still arrives, byte for byte, for a receiver that then waits.
     */
    @Test
    void aStoodDownPollingThreadLooksUpLessAndLessOftenWhileAThreadPolls() throws Exception {
        // the receiver polls without running out of spin until its deadline
        ChannelOptions options = ChannelOptions.defaults().withSpinPolls(Integer.MAX_VALUE);
        try (ChannelTest.Pair p = pair(options); Arena arena = Arena.ofConfined()) {
            ChannelGroup group = p.serverGroup();
            long before = group.standDowns();
            long t0 = System.nanoTime();
            RdmaTimeoutException timedOut = assertThrows(RdmaTimeoutException.class,
                    () -> p.accepted().receive(POLLING_MILLIS, TimeUnit.MILLISECONDS), "no message was sent");
            assertTrue(timedOut.is(Errno.ETIMEDOUT), "errno: " + timedOut.errnoName());
            long polledMillis = (System.nanoTime() - t0) / 1_000_000;
            long standDowns = group.standDowns() - before;
            System.out.printf("a receiver polled %d ms: the polling thread stood down %d times%n", polledMillis, standDowns);
            assertTrue(standDowns >= 1, "the polling thread never stood down for the polling receiver");
            assertTrue(standDowns <= MAX_STAND_DOWNS, "the polling thread looked up " + standDowns + " times in "
                    + polledMillis + " ms of a receiver's polling");

            MemorySegment sent = arena.allocate(100);
            for (int i = 0; i < 100; i++) {
                sent.set(ValueLayout.JAVA_BYTE, i, (byte) (7 * i + 3));
            }
            p.client().send(sent);
            try (Message m = p.accepted().receive(T.toNanos(), TimeUnit.NANOSECONDS)) {
                assertEquals(100, m.length());
                assertEquals(-1, m.segment().mismatch(sent), "the message's bytes");
            }
        }
    }
}
