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
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Counts, rather than times, what a one-way stream of 64 KiB messages costs per message
 * (docs/channel.md, "The 64 KiB stream: what the server checks, and what a message costs beside
 * ib_write_bw"), in the geometry of {@code scripts/channel-benchmark}: 64 slots of 65,600 bytes,
 * 8 WRITEs in flight. The receiver sends no data, so its credits go back as credit words only,
 * one per quarter ring at most; the sender parks only for credits, so at most once per credit
 * word it is sent. Load can only coalesce more (fewer WRITEs) and batch more credits (fewer
 * words), never add either.
 */
@SoftRdmaTest
class StreamCountTest {

    private static final int SIZE = 65_536;
    private static final int SLOTS = 64;
    private static final int MESSAGES = 2_000;

    @Test
    void aStreamReturnsCreditsOncePerQuarterRingAtMostAndTheSenderParksOnlyForThem() throws Exception {
        ChannelOptions options = ChannelOptions.defaults().withSlots(SLOTS).withSlotSize(65_600).withWritesInFlight(8);
        try (ChannelTest.Pair p = pair(options); ExecutorService ex = Executors.newSingleThreadExecutor();
             Arena arena = Arena.ofConfined()) {
            long[] clientBefore = HandOffCountTest.counts(p.client(), p.clientGroup());
            long[] serverBefore = HandOffCountTest.counts(p.accepted(), p.serverGroup());
            long postsBefore = p.client().dataPosts(false) + p.client().dataPosts(true);
            Future<?> sink = ex.submit(() -> {
                try (Arena serverArena = Arena.ofConfined()) {
                    MemorySegment expected = serverArena.allocate(SIZE);
                    for (int i = 0; i < MESSAGES; i++) {
                        expected.fill((byte) (i * 7 + 1));
                        expected.set(Channel.LE_LONG, 0, i);
                        try (Message m = p.accepted().receive(T.toNanos(), TimeUnit.NANOSECONDS)) {
                            assertEquals(SIZE, m.length(), "the length of message " + i);
                            // every byte, as the channel's tests check
                            assertEquals(-1, m.segment().mismatch(expected), "the bytes of message " + i);
                        }
                    }
                }
                return null;
            });
            MemorySegment message = arena.allocate(SIZE);
            for (int i = 0; i < MESSAGES; i++) {
                message.fill((byte) (i * 7 + 1));
                message.set(Channel.LE_LONG, 0, i);
                p.client().send(message);
            }
            sink.get(T.toSeconds(), TimeUnit.SECONDS);
            // the receiver's last credit word may still be on its way: counted once the sender received it
            long deadline = System.nanoTime() + T.toNanos();
            while (p.client().completions(Channel.KIND_RECV) - clientBefore[2]
                    < p.accepted().completions(Channel.KIND_CREDIT) - serverBefore[4] && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            long[] server = HandOffCountTest.counts(p.accepted(), p.serverGroup());
            long[] client = HandOffCountTest.counts(p.client(), p.clientGroup());
            long clientWrites = client[3] - clientBefore[3];
            long clientPosts = p.client().dataPosts(false) + p.client().dataPosts(true) - postsBefore;
            long serverReceives = server[2] - serverBefore[2];
            long serverCreditWords = server[4] - serverBefore[4];
            long clientWaits = client[0] - clientBefore[0];
            System.out.printf("a stream of %d messages of %d B, %d slots, 8 in flight: client WRITEs %d (posts %d), "
                    + "server receive completions %d, credit words %d, client parks %d%n", MESSAGES, SIZE, SLOTS,
                    clientWrites, clientPosts, serverReceives, serverCreditWords, clientWaits);
            // one receive completion on the receiver per WRITE posted (the sender got no credit to send back)
            assertEquals(clientPosts, serverReceives, "receive completions per WRITE");
            assertTrue(clientPosts >= 1 && clientPosts <= MESSAGES, "WRITEs: " + clientPosts);
            // a credit word once a quarter ring (16 slots, 16 messages here) was freed, at most:
            // the sender advances 64 slots on the credits it started with, so the rest needed words
            assertTrue(serverCreditWords <= MESSAGES / (SLOTS / 4), "credit words: " + serverCreditWords);
            assertTrue(serverCreditWords >= (MESSAGES - SLOTS) / SLOTS, "credit words: " + serverCreditWords);
            // the sender parks only for credits (it receives nothing): each park ends with a credit word
            assertTrue(clientWaits <= serverCreditWords + 1, "sender parks " + clientWaits + " for "
                    + serverCreditWords + " credit words");
        }
    }
}
