package io.github.verbs4j.channel;

import io.github.verbs4j.test.SoftRdmaTest;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import static io.github.verbs4j.channel.ChannelTest.T;
import static io.github.verbs4j.channel.ChannelTest.receiveStream;
import static io.github.verbs4j.channel.ChannelTest.sendStream;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Several application threads waiting on different channels of one group with a polling thread
 * (docs/channel.md, "The waiting thread polls"): a waiting thread polls the group's queue and
 * hands other channels their completions while the polling thread stands down, and a thread
 * that spun out and blocked on its channel's monitor must still get every message, whoever
 * polls when it arrives.
 */
@SoftRdmaTest
class WaitingThreadsPollTest {

    /** Channels whose receiver is made to block before each of its messages is sent. */
    private static final int BLOCKED = 2;
    private static final int ROUNDS = 200;

    /**
     * One group of three accepted channels, a receiving thread on each. Channel 0 carries a
     * stream, so its receiver polls the queue nearly all the time; channels 1 and 2 each get a
     * message only once their receiver has blocked on the monitor (its block counter moved), so
     * every one of their messages arrives for a blocked thread and is delivered either by the
     * polling receiver of channel 0 or, when none polls, by the polling thread woken for the
     * blocked one. Every message is checked byte for byte and in order.
     */
    @Test
    void threadsBlockedOnChannelsOfAGroupGetEveryMessageWhileAnotherPolls() throws Exception {
        long streamed = Traffic.messages(20_000);
        // a short spin, so that the receivers of channels 1 and 2 block soon after each message
        ChannelOptions options = ChannelOptions.defaults().withSlots(64).withSlotSize(256).withSpinPolls(200);
        try (ChannelGroup sg = ChannelGroup.create(options); ChannelGroup cg = ChannelGroup.create(options);
             ExecutorService ex = Executors.newFixedThreadPool(2 * (BLOCKED + 1))) {
            ChannelServer server = sg.listen(Traffic.any());
            List<Channel> clients = new ArrayList<>();
            List<Channel> accepted = new ArrayList<>();
            for (int i = 0; i <= BLOCKED; i++) {
                Future<Channel> a = ex.submit(() -> server.accept(T));
                clients.add(cg.connect(server.localAddress(), T));
                accepted.add(a.get(T.toSeconds(), TimeUnit.SECONDS));
            }
            long max = clients.get(0).maxMessageSize();
            long standDownsBefore = sg.standDowns();
            List<Future<?>> work = new ArrayList<>();
            work.add(ex.submit(() -> {
                sendStream(clients.get(0), 10, streamed);
                return null;
            }));
            work.add(ex.submit(() -> {
                receiveStream(accepted.get(0), 10, streamed, max);
                return null;
            }));
            for (int k = 1; k <= BLOCKED; k++) {
                Channel to = clients.get(k);
                Channel at = accepted.get(k);
                long seed = 10 + k;
                work.add(ex.submit(() -> {
                    receiveStream(at, seed, ROUNDS, max);
                    return null;
                }));
                work.add(ex.submit(() -> {
                    sendEachToABlockedReceiver(to, at, seed);
                    return null;
                }));
            }
            for (Future<?> f : work) {
                f.get(2 * T.toSeconds(), TimeUnit.SECONDS);
            }
            assertEquals(streamed, accepted.get(0).receivedCount());
            for (int k = 1; k <= BLOCKED; k++) {
                assertEquals(ROUNDS, accepted.get(k).receivedCount());
                assertTrue(accepted.get(k).monitorWaits() >= ROUNDS,
                        "channel " + k + "'s receiver blocked before each message: " + accepted.get(k).monitorWaits());
            }
            long standDowns = sg.standDowns() - standDownsBefore;
            System.out.printf("one group, %d streamed and 2 x %d to blocked receivers: polling thread stood down %d times, "
                    + "blocked %d times%n", streamed, ROUNDS, standDowns, sg.blockingWaits());
            assertTrue(standDowns > 0, "the polling thread never stood down for a polling receiver");
        }
    }

    /** Sends {@link #ROUNDS} messages of the stream {@code seed}, each once {@code receiver}'s thread has blocked again. */
    private static void sendEachToABlockedReceiver(Channel sender, Channel receiver, long seed) throws Exception {
        long max = sender.maxMessageSize();
        long deadline = System.nanoTime() + T.toNanos();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(max);
            // a fresh channel: none of its receiver's blocks is counted yet; each message is sent
            // only after a block later than the one seen before the message before it, which can
            // only be a block for this message (the receiver could not have had it before)
            long seen = 0;
            for (long seq = 0; seq < ROUNDS; seq++) {
                long now;
                while ((now = receiver.monitorWaits()) <= seen) {
                    assertTrue(System.nanoTime() < deadline, "the receiver of message " + seq + " never blocked");
                    LockSupport.parkNanos(100_000); // pacing only: leaves the CPU to the threads looked at
                }
                seen = now;
                sender.send(Traffic.fill(buf, seed, seq, Traffic.size(seed, seq, max)));
            }
        }
    }
}
