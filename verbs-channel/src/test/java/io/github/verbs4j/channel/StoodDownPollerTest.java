package io.github.verbs4j.channel;

import io.github.verbs4j.test.SoftRdmaTest;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static io.github.verbs4j.channel.ChannelTest.T;
import static io.github.verbs4j.channel.ChannelTest.pair;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A ping-pong whose both groups' polling threads are held stood down far longer than a round
 * trip (docs/channel.md, "The waiting thread polls; the polling thread stands down"): whatever
 * a side must move for its peer (a data WRITE's completion, a staged message posted on it, a
 * credit word and its completion, a receive reposted) must be moved by the thread that polls
 * while it waits, not by the polling thread's own look at the end of its park. The waiting
 * threads spin without end, so they never block and never wake a polling thread: a round trip
 * that needed one waits for the held park's end ({@link #HELD_NANOS}), far above the bound;
 * one that the waiting threads carried alone takes microseconds, and the bound leaves room for
 * a thread descheduled on a loaded machine (the longest seen at load 9 to 12 on 2 vCPUs, in one
 * JVM and in two processes: 0.6 s, with or without a polling thread). A path that needs a
 * polling thread does not end at the park's end either (the polling thread looks, sees the
 * waiting threads polling and parks again): the round trip then fails on its receive's timeout.
 */
@SoftRdmaTest
class StoodDownPollerTest {

    /** The held park of both polling threads: a round trip that waits for its end is unmistakable. */
    private static final long HELD_NANOS = TimeUnit.SECONDS.toNanos(10L * Traffic.SLOWDOWN);
    /** A round trip longer than this waited for something other than the two waiting threads. */
    private static final long BOUND_NANOS = TimeUnit.SECONDS.toNanos(2L * Traffic.SLOWDOWN);
    private static final int WARM_UP = 200;
    /** Round trips a polling thread must have stood down within (it stands down at its first look while a thread polls). */
    private static final int MAX_WARM_UP = 200_000;

    /**
     * Round trips of {@code size} bytes, the client sending the next ping only after the echo
     * came (each echo checked), the server echoing each ping from its receiving thread, with
     * rings of {@code slots} slots and {@code writesInFlight} WRITEs in flight on both sides
     * (4 KiB in 16 slots: the rings wrap every few messages, and the receivers return credit
     * words of their own). The warm-up lasts until both polling threads stood down (at least
     * {@link #WARM_UP} round trips), each then parked for {@link #HELD_NANOS}; the measured
     * round trips must neither take one out of its park (its
     * stand-down and block counts stay put: it took nothing) nor take longer than
     * {@link #BOUND_NANOS}.
     */
    @ParameterizedTest(name = "notification={0}, {1} B, {2} slots, {3} in flight")
    @CsvSource({
            "AUTO, 64, 256, 8",
            "SEND, 64, 256, 8",
            "AUTO, 64, 16, 1",
            "SEND, 64, 16, 1",
            "AUTO, 4096, 16, 2",
            "SEND, 4096, 16, 2"})
    void aPingPongMovesWithBothPollingThreadsHeldStoodDown(ChannelOptions.Notification notification, int size, int slots,
            int writesInFlight) throws Exception {
        int rounds = Integer.getInteger("verbs4j.channel.stoodDownRounds", 3_000);
        ChannelOptions options = ChannelOptions.defaults().withNotification(notification).withSlots(slots)
                .withSlotSize(size > 512 ? 2048 : 1024).withWritesInFlight(writesInFlight)
                .withSpinPolls(Integer.MAX_VALUE);
        try (ChannelTest.Pair p = pair(options); ExecutorService ex = Executors.newSingleThreadExecutor();
             Arena arena = Arena.ofConfined()) {
            p.serverGroup().holdStandDown(HELD_NANOS);
            p.clientGroup().holdStandDown(HELD_NANOS);
            Future<?> echo = ex.submit(() -> {
                try (Arena serverArena = Arena.ofConfined()) {
                    MemorySegment reply = serverArena.allocate(size);
                    while (true) {
                        try (Message m = p.accepted().receive(T.toNanos(), TimeUnit.NANOSECONDS)) {
                            if (m.length() == 0) {
                                return null; // the end of the round trips
                            }
                            assertEquals(size, m.length());
                            reply.copyFrom(m.segment());
                        }
                        p.accepted().send(reply);
                    }
                }
            });
            MemorySegment ping = arena.allocate(size);
            // the warm-up lasts until both polling threads stood down (each then sits in its held park)
            int i = 0;
            while (i < WARM_UP || p.clientGroup().standDowns() == 0 || p.serverGroup().standDowns() == 0) {
                assertTrue(i < MAX_WARM_UP, "a polling thread never stood down in " + i + " round trips: "
                        + p.clientGroup().standDowns() + " / " + p.serverGroup().standDowns());
                assertTrue(roundTrip(p.client(), ping, i++) < T.toNanos());
            }
            long[] before = pollerCounts(p);
            int slow = 0;
            long longest = 0;
            for (int end = i + rounds; i < end; i++) {
                long took = roundTrip(p.client(), ping, i);
                longest = Math.max(longest, took);
                slow += took > BOUND_NANOS ? 1 : 0;
            }
            p.client().send(MemorySegment.NULL);
            echo.get(T.toSeconds(), TimeUnit.SECONDS);
            long[] after = pollerCounts(p);
            System.out.printf("both polling threads held stood down, notification=%s, %d B, %d slots, %d in flight: "
                    + "%d round trips, %d over %d ms, longest %.1f ms; credit words %d / %d; during them: stand-downs "
                    + "%d / %d, polling-thread blocks %d / %d, application-thread blocks %d / %d (client / server)%n",
                    notification, size, slots, writesInFlight, rounds, slow, BOUND_NANOS / 1_000_000, longest / 1e6,
                    p.client().completions(Channel.KIND_CREDIT), p.accepted().completions(Channel.KIND_CREDIT),
                    after[0] - before[0], after[1] - before[1], after[2] - before[2], after[3] - before[3],
                    after[4] - before[4], after[5] - before[5]);
            assertEquals(0, slow, "round trips longer than " + BOUND_NANOS / 1_000_000 + " ms with both polling threads "
                    + "held stood down (longest " + longest / 1_000_000 + " ms): something waited for a polling thread");
            // the polling threads stayed in the park they were in: they moved nothing of the measured round trips
            assertArrayEquals(Arrays.copyOfRange(before, 0, 4), Arrays.copyOfRange(after, 0, 4),
                    "stand-downs and blocks of the polling threads (client, server) before and after the measured round trips");
            // the waiting threads never blocked (which would have woken a polling thread)
            assertEquals(before[4], after[4], "client application-thread blocks");
            assertEquals(before[5], after[5], "server application-thread blocks");
            if (slots == 16 && size > 512) {
                assertTrue(p.accepted().completions(Channel.KIND_CREDIT) > 0, "no credit word was sent: the case showed nothing");
            }
        }
    }

    /** One round trip {@code i}: a numbered ping and its echo, checked; returns how long it took in ns. */
    private static long roundTrip(Channel client, MemorySegment ping, int i) throws InterruptedException {
        long size = ping.byteSize();
        ping.fill((byte) i);
        ping.set(Channel.LE_LONG, 0, i);
        long t0 = System.nanoTime();
        client.send(ping);
        try (Message m = client.receive(T.toNanos(), TimeUnit.NANOSECONDS)) {
            long took = System.nanoTime() - t0;
            assertEquals(size, m.length());
            assertEquals(i, m.getLong(0), "the echo of round trip " + i);
            assertEquals((byte) i, m.getByte(size - 1), "the last byte of echo " + i);
            return took;
        }
    }

    /** Stand-downs and blocks of both polling threads, blocks of both application threads (client, server). */
    private static long[] pollerCounts(ChannelTest.Pair p) {
        return new long[] {p.clientGroup().standDowns(), p.serverGroup().standDowns(), p.clientGroup().blockingWaits(),
                p.serverGroup().blockingWaits(), p.client().monitorWaits(), p.accepted().monitorWaits()};
    }
}
