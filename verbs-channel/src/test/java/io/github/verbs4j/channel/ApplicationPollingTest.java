package io.github.verbs4j.channel;

import io.github.verbs4j.RdmaTimeoutException;
import io.github.verbs4j.test.SoftRdmaTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static io.github.verbs4j.channel.ChannelTest.T;
import static io.github.verbs4j.channel.ChannelTest.pair;
import static io.github.verbs4j.channel.ChannelTest.receiveStream;
import static io.github.verbs4j.channel.ChannelTest.sendStream;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Channels driven by the application's threads ({@link ChannelOptions#applicationPolling()}):
 * no polling thread, the same stream checks as {@link ChannelTest}. The peer killed while the
 * application's threads wait is in {@link TwoProcessChannelTest}.
 */
@SoftRdmaTest
class ApplicationPollingTest {

    private static final ChannelOptions APP = ChannelOptions.defaults().withApplicationPolling(true);

    @Test
    void mixedSizesArriveInOrderByteExactBothWaysWithoutAPollingThread() throws Exception {
        long n = Traffic.messages(10_000);
        try (ChannelTest.Pair p = pair(APP); ExecutorService ex = Executors.newFixedThreadPool(3)) {
            assertNull(p.serverGroup().pollingThread());
            assertNull(p.clientGroup().pollingThread());
            long max = p.client().maxMessageSize();
            Future<?> up = ex.submit(() -> {
                sendStream(p.client(), 1, n);
                return null;
            });
            Future<?> down = ex.submit(() -> {
                sendStream(p.accepted(), 2, n / 2);
                return null;
            });
            Future<?> clientReceives = ex.submit(() -> {
                receiveStream(p.client(), 2, n / 2, max);
                return null;
            });
            receiveStream(p.accepted(), 1, n, max);
            up.get(T.toSeconds(), TimeUnit.SECONDS);
            down.get(T.toSeconds(), TimeUnit.SECONDS);
            clientReceives.get(T.toSeconds(), TimeUnit.SECONDS);
            assertEquals(n, p.accepted().receivedCount());
            assertEquals(n / 2, p.client().receivedCount());
            RdmaTimeoutException none = assertThrows(RdmaTimeoutException.class,
                    () -> p.accepted().receive(50, TimeUnit.MILLISECONDS), "a message beyond the stream arrived");
            assertEquals(Duration.ofMillis(50), none.timeout());
            assertNull(p.accepted().poll(), "a message beyond the stream arrived");
        }
    }

    /**
     * One thread per end, each sending a burst and then receiving the peer's, on a ring of 8
     * slots: the rings turn over hundreds of times, so credits must come back both ways, carried
     * only by the two threads' own calls.
     */
    /** On a ring of 8 slots credit words carry most credits: with immediate data, and as SENDs. */
    @ParameterizedTest
    @EnumSource(names = {"AUTO", "SEND"})
    void creditsFlowBothWaysWithOneThreadPerEnd(ChannelOptions.Notification mode) throws Exception {
        int rounds = 500;
        int burst = 3;
        ChannelOptions small = APP.withSlots(8).withSlotSize(64).withNotification(mode);
        try (ChannelTest.Pair p = pair(small); ExecutorService ex = Executors.newSingleThreadExecutor();
             Arena arena = Arena.ofShared()) {
            long max = p.client().maxMessageSize();
            assertEquals(2 * 64 - 8, max);
            Future<?> server = ex.submit(() -> {
                try (Arena a = Arena.ofConfined()) {
                    MemorySegment buf = a.allocate(max);
                    for (long r = 0; r < rounds; r++) {
                        for (long i = 0; i < burst; i++) {
                            long seq = r * burst + i;
                            try (Message m = p.accepted().receive(T)) {
                                assertNotNull(m, "request " + seq);
                                assertEquals(seq, m.sequence());
                                Traffic.verify(m, 5, seq, max);
                            }
                        }
                        for (long i = 0; i < burst; i++) {
                            long seq = r * burst + i;
                            p.accepted().send(Traffic.fill(buf, 6, seq, Traffic.size(6, seq, max)));
                        }
                    }
                }
                return null;
            });
            MemorySegment buf = arena.allocate(max);
            for (long r = 0; r < rounds; r++) {
                for (long i = 0; i < burst; i++) {
                    long seq = r * burst + i;
                    p.client().send(Traffic.fill(buf, 5, seq, Traffic.size(5, seq, max)));
                }
                for (long i = 0; i < burst; i++) {
                    long seq = r * burst + i;
                    try (Message m = p.client().receive(T)) {
                        assertNotNull(m, "reply " + seq);
                        assertEquals(seq, m.sequence());
                        Traffic.verify(m, 6, seq, max);
                    }
                }
            }
            server.get(T.toSeconds(), TimeUnit.SECONDS);
            assertEquals((long) rounds * burst, p.client().sentCount());
            assertEquals((long) rounds * burst, p.client().receivedCount());
        }
    }

    /**
     * A sender that never waits: {@code offer(m, 0)} on a ring of 8 slots, retried while it
     * says full, and nothing else on its side polls the queue. Each call polls once (before
     * the post when the credits at hand do not suffice, after it when they do), so the
     * credits of the peer's releases and the completions of the sender's WRITEs come back
     * through these calls alone: every message arrives, in order and whole, and the ring
     * turns over hundreds of times (the count of calls that found it full shows it did fill).
     */
    @Test
    void aSenderThatOnlyOffersWithoutWaitingGetsItsCreditsBack() throws Exception {
        int n = 2_000;
        ChannelOptions small = APP.withSlots(8).withSlotSize(64);
        try (ChannelTest.Pair p = pair(small); ExecutorService ex = Executors.newSingleThreadExecutor();
             Arena arena = Arena.ofShared()) {
            long max = p.client().maxMessageSize();
            Future<?> receiver = ex.submit(() -> {
                for (long seq = 0; seq < n; seq++) {
                    try (Message m = p.accepted().receive(T)) {
                        assertEquals(seq, m.sequence());
                        Traffic.verify(m, 7, seq, max);
                    }
                }
                return null;
            });
            MemorySegment buf = arena.allocate(max);
            long full = 0;
            long deadline = System.nanoTime() + T.toNanos();
            for (long seq = 0; seq < n; seq++) {
                MemorySegment m = Traffic.fill(buf, 7, seq, Traffic.size(7, seq, max));
                while (!p.client().offer(m, 0, TimeUnit.NANOSECONDS)) {
                    full++;
                    assertTrue(System.nanoTime() - deadline < 0, "message " + seq + " found the ring full for " + T);
                }
            }
            receiver.get(T.toSeconds(), TimeUnit.SECONDS);
            assertEquals(n, p.client().sentCount());
            assertEquals(n, p.accepted().receivedCount());
            assertTrue(full > 0, "the ring of 8 slots never filled in " + n + " offers");
        }
    }

    @Test
    void closeDrainsEveryStagedMessageThenThePeerSeesTheEnd() throws Exception {
        long n = 5_000;
        try (ChannelTest.Pair p = pair(APP.withSlots(64))) {
            long max = p.client().maxMessageSize();
            try (ExecutorService ex = Executors.newSingleThreadExecutor()) {
                Future<?> sender = ex.submit(() -> {
                    sendStream(p.client(), 3, n);
                    p.client().close(); // this thread drives the drain and the end's handshake
                    return null;
                });
                receiveStream(p.accepted(), 3, n, max);
                sender.get(T.toSeconds(), TimeUnit.SECONDS);
            }
            ChannelClosedException end = assertThrows(ChannelClosedException.class, () -> p.accepted().receive(T));
            assertTrue(end.getMessage().contains("closed the channel"), end.getMessage());
            assertTrue(p.client().isClosed());
        }
    }

    @Test
    void steadyStateAllocatesNothingPerMessage() throws Exception {
        try (ChannelTest.Pair p = pair(APP.withSlots(256).withSlotSize(256))) {
            assertNull(p.serverGroup().pollingThread());
            ChannelTest.assertSteadyStateAllocatesNothing(p, "application polling");
        }
    }
}
