package io.github.verbs4j.channel;

import io.github.verbs4j.test.SoftRdmaTest;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

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
 * (docs/measurements/channel.md, "The 64 KiB stream: what the server checks, and what a message costs beside
 * ib_write_bw"), in the geometry of {@code scripts/channel-benchmark}: slots of 65,600 bytes, 8
 * WRITEs in flight, and the ring at 16 slots (the benchmark's: twice the WRITEs in flight), at the
 * window itself (8), and at 32 and 64 (docs/channel.md, "The ring's size by counts": each halving
 * of the ring multiplies the WRITEs, credit words and sender parks a message by 1.6 to 2.5, within
 * the bounds below). The receiver sends no data, so its credits go back as credit words only,
 * one per quarter ring at most; the sender parks only for credits, so at most once per credit
 * word it is sent. Load can only coalesce more (fewer WRITEs) and batch more credits (fewer
 * words), never add either.
 */
@SoftRdmaTest
class StreamCountTest {

    private static final int SIZE = 65_536;
    private static final int MESSAGES = 2_000;

    @ParameterizedTest(name = "{0} slots")
    @ValueSource(ints = {8, 16, 32, 64})
    void aStreamReturnsCreditsOncePerQuarterRingAtMostAndTheSenderParksOnlyForThem(int slots) throws Exception {
        ChannelOptions options = ChannelOptions.defaults().withSlots(slots).withSlotSize(65_600).withWritesInFlight(8);
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
                    + "server receive completions %d, credit words %d, client parks %d; server parks %d, "
                    + "polling threads blocked: client %d, server %d; stand-downs client %d, server %d%n",
                    MESSAGES, SIZE, slots, clientWrites, clientPosts, serverReceives, serverCreditWords, clientWaits,
                    server[0] - serverBefore[0], client[1] - clientBefore[1], server[1] - serverBefore[1],
                    client[6] - clientBefore[6], server[6] - serverBefore[6]);
            // one receive completion on the receiver per WRITE posted (the sender got no credit to send back)
            assertEquals(clientPosts, serverReceives, "receive completions per WRITE");
            assertTrue(clientPosts >= 1 && clientPosts <= MESSAGES, "WRITEs: " + clientPosts);
            // a credit word once a quarter ring (a slot a message here) was freed, at most: the
            // sender advances a ring on the credits it started with, so the rest needed words
            assertTrue(serverCreditWords <= MESSAGES / (slots / 4), "credit words: " + serverCreditWords);
            assertTrue(serverCreditWords >= (MESSAGES - slots) / slots, "credit words: " + serverCreditWords);
            // the sender parks only for credits (it receives nothing): each park ends with a credit word
            assertTrue(clientWaits <= serverCreditWords + 1, "sender parks " + clientWaits + " for "
                    + serverCreditWords + " credit words");
        }
    }
}
