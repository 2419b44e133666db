package io.github.verbs4j.channel;

import io.github.verbs4j.channel.ChannelOptions.Notification;
import io.github.verbs4j.test.SoftRdmaTest;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static io.github.verbs4j.channel.ChannelTest.T;
import static io.github.verbs4j.channel.ChannelTest.pair;
import static io.github.verbs4j.channel.ChannelTest.receiveStream;
import static io.github.verbs4j.channel.ChannelTest.sendStream;
import static io.github.verbs4j.channel.ChannelTest.with;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * One message, no header (docs/channel.md): with immediate data, a WRITE that carries one message
 * carries its bytes alone, to the start of its slot, its length the WRITE's byte count and the
 * sender's credit report in the immediate, so that a message of the path MTU is one packet.
 * Counted per message, bytes and offsets checked, across the ring's wrap, credits carried only
 * in the immediates of a ping-pong, and coalesced WRITEs still with their headers.
 */
@SoftRdmaTest
class BareMessageTest {

    @BeforeEach
    void immediateData() {
        Assumptions.assumeFalse(Traffic.onIwarp(), "iWARP has no immediate data");
    }

    @Test
    void oneMessageAtATimeGoesWithoutItsHeaderByteExactAtTheStartOfItsSlot() throws Exception {
        ChannelOptions options = with(Notification.IMMEDIATE).withSlots(32).withSlotSize(1024);
        int[] sizes = {1, 64, 1015, 1016, 1017, 4088, 4096, 4097, 8184};
        try (ChannelTest.Pair p = pair(options); Arena arena = Arena.ofConfined()) {
            assertEquals(8184, p.client().maxMessageSize());
            MemorySegment buf = arena.allocate(8184);
            for (int round = 0; round < 6; round++) { // about 27 slots a round: the ring wraps in every other
                for (int size : sizes) {
                    MemorySegment m = buf.asSlice(0, size);
                    for (int i = 0; i < size; i++) {
                        m.set(ValueLayout.JAVA_BYTE, i, (byte) (17 * i + size + round));
                    }
                    long posts = p.client().barePosts();
                    long receives = p.accepted().bareReceives();
                    p.client().send(m);
                    try (Message got = p.accepted().receive(T)) {
                        assertEquals(size, got.length(), "the length of a message of " + size + " bytes");
                        assertEquals(-1L, got.segment().mismatch(m), "the bytes of a message of " + size + " bytes");
                        assertEquals(0, got.offset() % 1024, "a message without its header starts its slot");
                    }
                    assertEquals(posts + 1, p.client().barePosts(), "one bare WRITE for " + size + " bytes, round " + round);
                    assertEquals(receives + 1, p.accepted().bareReceives(), "one bare message in, " + size + " bytes");
                }
            }
            // an empty message keeps its header (a WRITE of no bytes could not say its slot count)
            long posts = p.client().barePosts();
            p.client().send(buf.asSlice(0, 0));
            try (Message got = p.accepted().receive(T)) {
                assertEquals(0, got.length());
                assertEquals(8, got.offset() % 1024, "after the header");
            }
            assertEquals(posts, p.client().barePosts());
        }
    }

    /**
     * A ping-pong of 4 KiB through rings of 16 slots of 4160 bytes (a slot a message, so the
     * ring's end skips none): each side's report of what it freed travels only in its replies'
     * immediates (a side that reported in a reply has freed at most one slot since, less than a
     * quarter of the ring, and sends no credit word), so a wrong report would stall the
     * ping-pong within a ring.
     */
    @Test
    void aPingPongReturnsItsCreditsInTheImmediatesAlone() throws Exception {
        ChannelOptions options = with(Notification.IMMEDIATE).withSlots(16).withSlotSize(4160);
        int rounds = 2_000;
        try (ChannelTest.Pair p = pair(options); ExecutorService ex = Executors.newSingleThreadExecutor();
             Arena arena = Arena.ofConfined()) {
            Future<?> echo = ex.submit(() -> {
                for (int i = 0; i < rounds; i++) {
                    try (Message m = p.accepted().receive(T)) {
                        assertTrue(p.accepted().offer(m.segment(), T.toMillis(), TimeUnit.MILLISECONDS), "credits for pong " + i);
                    }
                }
                return null;
            });
            MemorySegment ping = arena.allocate(4096);
            long creditsBefore = p.client().completions(Channel.KIND_CREDIT) + p.accepted().completions(Channel.KIND_CREDIT);
            for (int i = 0; i < rounds; i++) {
                ping.fill((byte) i).set(ValueLayout.JAVA_INT_UNALIGNED, 0, i);
                assertTrue(p.client().offer(ping, T.toMillis(), TimeUnit.MILLISECONDS), "credits for ping " + i);
                try (Message pong = p.client().receive(T)) {
                    assertEquals(-1L, pong.segment().mismatch(ping), "pong " + i);
                }
            }
            echo.get(T.toSeconds(), TimeUnit.SECONDS);
            assertEquals(rounds, p.accepted().bareReceives(), "every ping without its header");
            assertEquals(rounds, p.client().bareReceives(), "every pong without its header");
            assertEquals(creditsBefore, p.client().completions(Channel.KIND_CREDIT) + p.accepted().completions(Channel.KIND_CREDIT),
                    "no credit word: the immediates carried every report");
        }
    }

    /**
     * Streams of mixed sizes both ways through a ring of 16 slots of 64 bytes: some WRITEs carry
     * one message without its header, the coalesced ones several with theirs; every message in
     * order and byte-exact across many wraps.
     */
    @Test
    void mixedSizesBareAndCoalescedThroughASmallRingWrapByteExact() throws Exception {
        long n = Traffic.messages(20_000) / 2;
        ChannelOptions options = with(Notification.IMMEDIATE).withSlots(16).withSlotSize(64);
        try (ChannelTest.Pair p = pair(options); ExecutorService ex = Executors.newFixedThreadPool(3)) {
            long max = p.client().maxMessageSize();
            Future<?> up = ex.submit(() -> {
                sendStream(p.client(), 21, n);
                return null;
            });
            Future<?> down = ex.submit(() -> {
                sendStream(p.accepted(), 22, n);
                return null;
            });
            Future<?> clientReceives = ex.submit(() -> {
                receiveStream(p.client(), 22, n, max);
                return null;
            });
            receiveStream(p.accepted(), 21, n, max);
            up.get(T.toSeconds(), TimeUnit.SECONDS);
            down.get(T.toSeconds(), TimeUnit.SECONDS);
            clientReceives.get(T.toSeconds(), TimeUnit.SECONDS);
            long bare = p.client().barePosts();
            long writes = p.client().dataPosts(false);
            assertTrue(bare > 0, "some WRITEs carried one message without its header: " + bare + " of " + writes);
            assertEquals(bare, p.accepted().bareReceives(), "each one arrived as one");
            assertEquals(p.accepted().barePosts(), p.client().bareReceives(), "the other way too");
        }
    }

    /** Notifying by SEND, every message keeps its header (the SEND carries its head: "Small messages in the SEND"). */
    @Test
    void notifyingBySendNoMessageGoesWithoutItsHeader() throws Exception {
        try (ChannelTest.Pair p = pair(with(Notification.SEND)); Arena arena = Arena.ofConfined()) {
            MemorySegment m = arena.allocate(4096).fill((byte) 3);
            for (int i = 0; i < 10; i++) {
                p.client().send(m);
                try (Message got = p.accepted().receive(T)) {
                    assertEquals(-1L, got.segment().mismatch(m));
                }
            }
            assertEquals(0, p.client().barePosts());
            assertEquals(0, p.accepted().bareReceives());
        }
    }
}
