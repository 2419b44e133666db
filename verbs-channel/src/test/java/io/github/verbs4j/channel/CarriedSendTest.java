package io.github.verbs4j.channel;

import io.github.verbs4j.channel.ChannelOptions.Notification;
import io.github.verbs4j.test.SoftRdmaTest;
import org.junit.jupiter.api.Assumptions;
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
 * Small messages in the SEND (docs/channel.md, "Small messages in the SEND"): notifying by SEND,
 * the SEND after the word carries the head of the staged slots, as much as the peer's receive
 * buffer takes, and the receiver copies it into its ring: slots that fit travel in that SEND
 * alone (one request, no WRITE), larger ones as a WRITE of the rest and the SEND. Counted per
 * message, bytes checked exactly, at the size boundary and across the ring's wrap.
 */
@SoftRdmaTest
class CarriedSendTest {

    /** The largest message whose slots a SEND carries: the receive buffer, less the word and the header. */
    static final int LARGEST_CARRIED = Channel.RECEIVE_BYTES - Channel.WORD - Channel.HEADER;

    /** What the two ends counted so far: the client's lone SENDs and WRITEs, the server's SENDs that carried slots. */
    record Counts(long carriedPosts, long writePosts, long carriedReceives) {
        static Counts of(ChannelTest.Pair p) {
            return new Counts(p.client().dataPosts(true), p.client().dataPosts(false), p.accepted().carriedReceives());
        }

        Counts minus(Counts before) {
            return new Counts(carriedPosts - before.carriedPosts, writePosts - before.writePosts,
                    carriedReceives - before.carriedReceives);
        }
    }

    @Test
    void byteExactOnEitherSideOfTheBoundaryASendAloneUpToItAndAWriteOfTheRestAbove() throws Exception {
        assertEquals(116, LARGEST_CARRIED, "the receive buffer is 128 bytes: 4 of the word, 8 of the header");
        int[] sizes = {0, 1, 64, LARGEST_CARRIED - 1, LARGEST_CARRIED, LARGEST_CARRIED + 1, 1000, 4096};
        try (ChannelTest.Pair p = pair(with(Notification.SEND)); Arena arena = Arena.ofConfined()) {
            MemorySegment buf = arena.allocate(4096);
            for (int round = 0; round < 3; round++) {
                for (int size : sizes) {
                    MemorySegment m = buf.asSlice(0, size);
                    for (int i = 0; i < size; i++) {
                        m.set(ValueLayout.JAVA_BYTE, i, (byte) (31 * i + size + round));
                    }
                    Counts before = Counts.of(p);
                    p.client().send(m);
                    try (Message got = p.accepted().receive(T)) {
                        assertEquals(size, got.length(), "the length of a message of " + size + " bytes");
                        assertEquals(-1L, got.segment().mismatch(m), "the bytes of a message of " + size + " bytes");
                    }
                    Counts d = Counts.of(p).minus(before);
                    boolean carried = size <= LARGEST_CARRIED;
                    assertEquals(new Counts(carried ? 1 : 0, carried ? 0 : 1, 1), d,
                            "requests for one message of " + size + " bytes (round " + round + ")");
                }
            }
        }
    }

    /**
     * A ring of 16 slots of 64 bytes, streams of mixed sizes both ways (most carried, some
     * with a WRITE, coalesced while WRITEs are out): every message in order and byte-exact across
     * many wraps, with both forms used and every data SEND's head copied by the receiver.
     */
    @Test
    void mixedSizesThroughASmallRingWrapByteExact() throws Exception {
        long n = Traffic.messages(20_000) / 2;
        ChannelOptions options = with(Notification.SEND).withSlots(16).withSlotSize(64);
        try (ChannelTest.Pair p = pair(options); ExecutorService ex = Executors.newFixedThreadPool(3)) {
            long max = p.client().maxMessageSize();
            assertEquals(16 / 4 * 64 - 8, max);
            Future<?> up = ex.submit(() -> {
                sendStream(p.client(), 11, n);
                return null;
            });
            Future<?> down = ex.submit(() -> {
                sendStream(p.accepted(), 12, n);
                return null;
            });
            Future<?> clientReceives = ex.submit(() -> {
                receiveStream(p.client(), 12, n, max);
                return null;
            });
            receiveStream(p.accepted(), 11, n, max);
            up.get(T.toSeconds(), TimeUnit.SECONDS);
            down.get(T.toSeconds(), TimeUnit.SECONDS);
            clientReceives.get(T.toSeconds(), TimeUnit.SECONDS);
            Counts c = Counts.of(p);
            assertTrue(c.carriedPosts() > 0 && c.writePosts() > 0, "both forms were used: " + c);
            assertEquals(c.carriedPosts() + c.writePosts(), c.carriedReceives(), "every data SEND carried slots: " + c);
            assertEquals(p.accepted().dataPosts(true) + p.accepted().dataPosts(false), p.client().carriedReceives(),
                    "the other way too");
        }
    }

    /** With immediate data nothing is carried: a WRITE_WITH_IMM per message, whatever its size. */
    @Test
    void withImmediateDataEveryMessageIsAWrite() throws Exception {
        Assumptions.assumeFalse(Traffic.onIwarp(), "iWARP has no immediate data");
        try (ChannelTest.Pair p = pair(with(Notification.IMMEDIATE)); Arena arena = Arena.ofConfined()) {
            MemorySegment m = arena.allocate(64).fill((byte) 7);
            for (int i = 0; i < 10; i++) {
                p.client().send(m);
                try (Message got = p.accepted().receive(T)) {
                    assertEquals(-1L, got.segment().mismatch(m));
                }
            }
            assertEquals(new Counts(0, 10, 0), Counts.of(p));
        }
    }
}
