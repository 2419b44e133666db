package io.github.verbs4j.channel;

import io.github.verbs4j.test.SoftRdmaTest;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static io.github.verbs4j.channel.ChannelTest.T;
import static io.github.verbs4j.channel.ChannelTest.pair;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Counts, rather than times, what a request/response round trip costs in steady state
 * (docs/measurements/channel.md, "Where the polling thread's round trip goes"): per round trip, how often the
 * application's threads blocked on their channel's monitor (each block a park, and its end a
 * wake-up by the polling thread: a hand-off), how often the polling threads blocked on their
 * completion channels, and the completions each side handled by kind. Counts do not depend on
 * the machine's speed as timings do; what load changes (a peer descheduled past a spin) can
 * only add waits, so the bounds are set well above what a quiet run counts and below what the
 * code before the change counted on every run.
 */
@SoftRdmaTest
class HandOffCountTest {

    private static final int SIZE = 64;
    private static final int ROUNDS = 1_000;

    /** What one side of the round trips counted, per round trip. */
    record PerRoundTrip(double monitorWaits, double pollerBlocks, double receives, double dataWrites, double creditWords,
            double wakeUps, double pollerStandDowns) {
        static PerRoundTrip between(long[] before, long[] after, int rounds) {
            return new PerRoundTrip((after[0] - before[0]) / (double) rounds, (after[1] - before[1]) / (double) rounds,
                    (after[2] - before[2]) / (double) rounds, (after[3] - before[3]) / (double) rounds,
                    (after[4] - before[4]) / (double) rounds, (after[5] - before[5]) / (double) rounds,
                    (after[6] - before[6]) / (double) rounds);
        }

        @Override
        public String toString() {
            return String.format("waits %.3f, poller blocks %.3f, receive completions %.3f, data WRITEs %.3f, credit words %.3f,"
                    + " wake-ups %.3f, poller stand-downs %.3f", monitorWaits, pollerBlocks, receives, dataWrites, creditWords,
                    wakeUps, pollerStandDowns);
        }
    }

    static long[] counts(Channel ch, ChannelGroup group) {
        return new long[] {ch.monitorWaits(), group.blockingWaits(), ch.completions(Channel.KIND_RECV),
                ch.completions(Channel.KIND_DATA), ch.completions(Channel.KIND_CREDIT), ch.wakeUps(), group.standDowns()};
    }

    /**
     * Ping-pong of 64-byte messages, one thread per end, each message checked: the client's
     * thread sends a numbered ping and waits for its echo, the server's thread waits for the ping
     * and echoes it. In both modes the waiting thread polls the queue itself (with the polling
     * thread, the default, that thread stands down meanwhile), so no thread is handed its
     * message and none blocks but when the peer's answer took longer than the spin.
     */
    @ParameterizedTest(name = "applicationPolling={0}, notification={1}")
    @CsvSource({"false, AUTO", "false, SEND", "true, AUTO", "true, SEND"})
    void aRoundTripBlocksEachWaitingThreadAtMostOnceAndNeverForItsOwnWrite(boolean applicationPolling,
            ChannelOptions.Notification notification) throws Exception {
        int rounds = ROUNDS;
        int warmUp = 2 * rounds;
        // a longer spin only removes blocks, so the bounds hold for any; -Dverbs4j.channel.spinPolls=1000000
        // shows the polling thread's mode without hand-offs where the peer answers within the spin
        int spinPolls = Integer.getInteger("verbs4j.channel.spinPolls", ChannelOptions.defaults().spinPolls());
        ChannelOptions options = ChannelOptions.defaults().withApplicationPolling(applicationPolling)
                .withNotification(notification).withSpinPolls(spinPolls);
        try (ChannelTest.Pair p = pair(options); ExecutorService ex = Executors.newSingleThreadExecutor();
             Arena arena = Arena.ofConfined()) {
            Future<?> echo = ex.submit(() -> {
                try (Arena serverArena = Arena.ofConfined()) {
                    MemorySegment reply = serverArena.allocate(SIZE);
                    for (int i = 0; i < warmUp + rounds; i++) {
                        try (Message m = p.accepted().receive(T.toNanos(), TimeUnit.NANOSECONDS)) {
                            assertEquals(SIZE, m.length());
                            reply.copyFrom(m.segment());
                        }
                        p.accepted().send(reply);
                    }
                }
                return null;
            });
            MemorySegment ping = arena.allocate(SIZE);
            long[] clientBefore = null;
            long[] serverBefore = null;
            for (int i = 0; i < warmUp + rounds; i++) {
                if (i == warmUp) {
                    clientBefore = counts(p.client(), p.clientGroup());
                    serverBefore = counts(p.accepted(), p.serverGroup());
                }
                ping.fill((byte) i);
                ping.set(Channel.LE_LONG, 0, i);
                p.client().send(ping);
                try (Message m = p.client().receive(T.toNanos(), TimeUnit.NANOSECONDS)) {
                    assertEquals(SIZE, m.length());
                    assertEquals(i, m.getLong(0), "the echo of round trip " + i);
                    assertEquals((byte) i, m.getByte(SIZE - 1), "the last byte of echo " + i);
                }
            }
            echo.get(T.toSeconds(), TimeUnit.SECONDS);
            // the server's last send may still be in flight: its counts settle once it completed
            PerRoundTrip client = PerRoundTrip.between(clientBefore, counts(p.client(), p.clientGroup()), rounds);
            PerRoundTrip server = PerRoundTrip.between(serverBefore, counts(p.accepted(), p.serverGroup()), rounds);
            System.out.printf("round trips of %d B, applicationPolling=%s, notification=%s, spinPolls=%d, per round trip:%n"
                    + "  client: %s%n  server: %s%n", SIZE, applicationPolling, notification, spinPolls, client, server);
            // each side received one message and wrote one per round trip (no coalescing: one in flight)
            assertEquals(1.0, client.receives(), 0.01, "client receive completions per round trip");
            assertEquals(1.0, server.receives(), 0.01, "server receive completions per round trip");
            assertEquals(1.0, client.dataWrites(), 0.01, "client WRITE completions per round trip");
            assertEquals(1.0, server.dataWrites(), 0.01, "server WRITE completions per round trip");
            // credits ride on the replies' headers: no credit word in a ping-pong
            assertEquals(0.0, client.creditWords(), 0.0, "client credit words");
            assertEquals(0.0, server.creditWords(), 0.0, "server credit words");
            // nothing is handed to the waiting thread: it polls; it blocks only when it spun out
            // (the polling thread's mode counted 1.0 per round trip on each side before the
            // waiting thread polled, and 2.0 before a WRITE's completion stopped waking it)
            assertTrue(client.monitorWaits() < MAX_WAITS_PER_ROUND_TRIP, "client blocks per round trip: " + client);
            assertTrue(server.monitorWaits() < MAX_WAITS_PER_ROUND_TRIP, "server blocks per round trip: " + server);
            if (applicationPolling) {
                // nobody waits on the channel's monitor while a message or credits arrive (the
                // waiting thread is the one polling): no notifyAll on the data path (the code before
                // called it twice per message received, for the message and for its header's credits)
                assertEquals(0.0, client.wakeUps(), 0.0, "client wake-ups per round trip: " + client);
                assertEquals(0.0, server.wakeUps(), 0.0, "server wake-ups per round trip: " + server);
            } else {
                // a wake-up only for a thread that blocked (the code before woke twice per message:
                // 2.000 per round trip on each side, whether anyone waited or not)
                assertTrue(client.wakeUps() < MAX_WAITS_PER_ROUND_TRIP, "client wake-ups per round trip: " + client);
                assertTrue(server.wakeUps() < MAX_WAITS_PER_ROUND_TRIP, "server wake-ups per round trip: " + server);
                // the polling thread stood down rather than arming the queue while the waiting thread polled
                assertTrue(client.pollerBlocks() < MAX_WAITS_PER_ROUND_TRIP, "client polling thread blocks: " + client);
                assertTrue(server.pollerBlocks() < MAX_WAITS_PER_ROUND_TRIP, "server polling thread blocks: " + server);
            }
        }
    }

    /** Blocks per round trip a side may count: what load adds when a peer is descheduled past a spin, well below 1. */
    static final double MAX_WAITS_PER_ROUND_TRIP = 0.5;
}
