package io.github.verbs4j.channel;

import io.github.verbs4j.test.SoftRdmaTest;
import io.github.verbs4j.testsupport.ThreadMeter;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static io.github.verbs4j.channel.ChannelTest.T;
import static io.github.verbs4j.channel.ChannelTest.pair;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link Channel#send(int, MessageWriter)}: messages written in place into the staging memory,
 * byte-exact and in order with the copying {@code send} between them; every misuse refused
 * with a Java exception, the channel still working after it; nothing allocated per message.
 */
@SoftRdmaTest
class InPlaceSendTest {

    /** Alternates the copying form and two in-place writers (a bulk copy, and field by field) over the tests' mixed sizes. */
    @Test
    void inPlaceAndCopiedMessagesArriveInOrderByteExact() throws Exception {
        long n = Traffic.messages(6_000);
        long seed = 26;
        try (ChannelTest.Pair p = pair(ChannelOptions.defaults()); Arena arena = Arena.ofShared();
             ExecutorService ex = Executors.newSingleThreadExecutor()) {
            long max = p.client().maxMessageSize();
            Future<?> receiving = ex.submit(() -> {
                ChannelTest.receiveStream(p.accepted(), seed, n, max);
                return null;
            });
            MemorySegment buf = arena.allocate(max);
            for (long seq = 0; seq < n; seq++) {
                MemorySegment m = Traffic.fill(buf, seed, seq, Traffic.size(seed, seq, max));
                int size = (int) m.byteSize();
                switch ((int) (seq % 3)) {
                    case 0 -> p.client().send(m);
                    case 1 -> p.client().send(size, staged -> {
                        assertEquals(size, staged.length());
                        staged.copyFrom(m, 0, 0, size);
                    });
                    default -> p.client().send(size, staged -> {
                        staged.setLong(0, m.get(Traffic.LONG, 0));
                        staged.setInt(8, m.get(Traffic.INT, 8));
                        staged.setInt(12, m.get(Traffic.INT, 12));
                        int i = 16;
                        for (; i + 8 <= size; i += 8) {
                            staged.setLong(i, m.get(Traffic.LONG, i));
                        }
                        for (; i < size; i++) {
                            staged.setByte(i, m.get(ValueLayout.JAVA_BYTE, i));
                        }
                    });
                }
            }
            receiving.get(T.toSeconds(), TimeUnit.SECONDS);
            assertEquals(n, p.client().sentCount());
        }
    }

    /**
     * Positions recur as the peer's ring goes round, and bytes a writer leaves unset are what
     * the last message staged at its position left there (what {@link StagedMessage#position()}
     * promises an application that rewrites only what changed).
     */
    @Test
    void positionsRecurWithTheRingAndUnsetBytesKeepTheLastMessageStagedThere() throws Exception {
        int slots = 8;
        int size = 56; // one slot of 64 with the header
        try (ChannelTest.Pair p = pair(ChannelOptions.defaults().withSlots(slots).withSlotSize(64))) {
            long[] positions = new long[3 * slots];
            for (int i = 0; i < positions.length; i++) {
                int seq = i;
                boolean whole = i < slots; // the first round writes every byte, the later ones only the first 8
                p.client().send(size, staged -> {
                    positions[seq] = staged.position();
                    staged.setLong(0, seq);
                    if (whole) {
                        for (int b = 8; b < size; b++) {
                            staged.setByte(b, (byte) (seq * 7 + b));
                        }
                    }
                });
                try (Message m = p.accepted().receive(T)) {
                    assertEquals(size, m.length());
                    assertEquals(seq, m.getLong(0));
                    int writer = seq % slots; // the message of the first round at this position
                    for (int b = 8; b < size; b++) {
                        assertEquals((byte) (writer * 7 + b), m.getByte(b), "message " + seq + ", byte " + b);
                    }
                }
            }
            Set<Long> firstRound = new HashSet<>();
            for (int i = 0; i < positions.length; i++) {
                assertEquals(8, positions[i] % 64, "message " + i + " starts after its header, at a slot's start");
                if (i < slots) {
                    firstRound.add(positions[i]);
                } else {
                    assertEquals(positions[i - slots], positions[i], "message " + i + " one ring later");
                }
            }
            assertEquals(slots, firstRound.size(), "one position per slot: " + firstRound);
        }
    }

    @Test
    void misuseIsRefusedWithAClearMessageAndSendsNothing() throws Exception {
        try (ChannelTest.Pair p = pair(ChannelOptions.defaults().withSlots(8).withSlotSize(64));
             ExecutorService other = Executors.newSingleThreadExecutor()) {
            Channel ch = p.client();
            long expected = 0;
            // the view after its writer returned
            AtomicReference<StagedMessage> kept = new AtomicReference<>();
            ch.send(16, staged -> {
                kept.set(staged);
                staged.setLong(0, 0);
                staged.setLong(8, 0);
            });
            expected++;
            IllegalStateException late = assertThrows(IllegalStateException.class, () -> kept.get().setLong(0, 1));
            assertTrue(late.getMessage().contains("committed"), late.getMessage());
            assertThrows(IllegalStateException.class, () -> kept.get().length());
            // from another thread while the writer runs
            ch.send(16, staged -> {
                Future<?> f = other.submit(() -> staged.setLong(0, 99));
                Throwable t = assertThrows(java.util.concurrent.ExecutionException.class, f::get).getCause();
                assertInstanceOf(IllegalStateException.class, t);
                assertTrue(t.getMessage().contains("belongs to the thread"), t.getMessage());
                staged.setLong(0, 1);
                staged.setLong(8, 1);
            });
            expected++;
            // outside the message: refused, and the writer's exception sends nothing
            IndexOutOfBoundsException[] out = new IndexOutOfBoundsException[4];
            MemorySegment src = MemorySegment.ofArray(new byte[64]);
            MessageWriter[] bad = {
                staged -> staged.setLong(9, 0),
                staged -> staged.setByte(-1, (byte) 0),
                staged -> staged.copyFrom(src, 0, 8, 9),
                staged -> staged.copyFrom(src, 60, 0, 8), // past the source's end
            };
            for (int i = 0; i < bad.length; i++) {
                int k = i;
                out[i] = assertThrows(IndexOutOfBoundsException.class, () -> ch.send(16, bad[k]), "bad write " + k);
            }
            assertTrue(out[0].getMessage().contains("outside a message of 16 bytes"), out[0].getMessage());
            // the channel's own operations from inside a writer
            for (String op : new String[] {"send", "offer", "receive", "poll", "close"}) {
                IllegalStateException e = assertThrows(IllegalStateException.class, () -> ch.send(16, staged -> {
                    try {
                        switch (op) {
                            case "send" -> ch.send(MemorySegment.ofArray(new byte[8]));
                            case "offer" -> ch.offer(8, s -> { }, 0, TimeUnit.MILLISECONDS);
                            case "receive" -> ch.receive(10, TimeUnit.MILLISECONDS);
                            case "poll" -> ch.poll();
                            default -> ch.close();
                        }
                    } catch (InterruptedException e1) {
                        throw new AssertionError(e1);
                    }
                }), op);
                assertTrue(e.getMessage().contains("MessageWriter"), op + ": " + e.getMessage());
            }
            assertFalse(ch.isClosed(), "close from inside a writer was refused before it began");
            // lengths
            int[] calls = {0};
            assertThrows(IllegalArgumentException.class, () -> ch.send((int) ch.maxMessageSize() + 1, s -> calls[0]++));
            assertThrows(IllegalArgumentException.class, () -> ch.send(-1, s -> calls[0]++));
            assertThrows(NullPointerException.class, () -> ch.send(16, null));
            assertEquals(0, calls[0], "a writer was called for a refused length");
            assertEquals(expected, ch.sentCount(), "a refused or failed writer sent a message");
            // the channel works on: the refused ones left no trace in the ring
            for (long seq = 0; seq < 40; seq++) { // five times round the ring
                long s = seq;
                if (seq >= expected) {
                    ch.send(16, staged -> {
                        staged.setLong(0, s);
                        staged.setLong(8, ~s);
                    });
                }
                try (Message m = p.accepted().receive(T)) {
                    assertEquals(16, m.length());
                    assertEquals(seq, m.getLong(0), "message " + seq);
                    assertEquals(seq < 2 ? seq : ~seq, m.getLong(8), "message " + seq);
                }
            }
        }
    }

    @Test
    void offerWithAFullRingReturnsFalseWithoutCallingTheWriter() throws Exception {
        try (ChannelTest.Pair p = pair(ChannelOptions.defaults().withSlots(8).withSlotSize(64))) {
            int[] calls = {0};
            MessageWriter writer = staged -> {
                staged.setLong(0, calls[0]++);
            };
            int sent = 0;
            while (p.client().offer(56, writer, 200, TimeUnit.MILLISECONDS)) {
                sent++;
                assertTrue(sent <= 8, "more messages than slots went out without a receive");
            }
            assertEquals(8, sent);
            assertEquals(8, calls[0], "the writer ran for the offer that found no room");
            for (int i = 0; i < 8; i++) {
                try (Message m = p.accepted().receive(T)) {
                    assertEquals(i, m.getLong(0));
                }
            }
        }
    }

    /** A reused writer that stamps a sequence number: what an allocation-free sender looks like. */
    private static final class Stamp implements MessageWriter {
        long seq;

        @Override
        public void write(StagedMessage message) {
            message.setLong(0, seq);
        }
    }

    private static final int ROUNDS = 4;

    /** Rounds of 20 000 in-place sends: one of the measured rounds allocates under 0.1 B per message on the sending thread. */
    @Test
    void inPlaceSendsAllocateNothingPerMessage() throws Exception {
        int n = 20_000;
        try (ChannelTest.Pair p = pair(ChannelOptions.defaults().withSlots(256).withSlotSize(256));
             ExecutorService ex = Executors.newSingleThreadExecutor()) {
            Future<Long> receiver = ex.submit(() -> {
                long sum = 0;
                for (int i = 0; i < ROUNDS * n; i++) {
                    Message m = p.accepted().receive(20, TimeUnit.SECONDS);
                    sum += m.getLong(0);
                    m.close();
                }
                return sum;
            });
            Stamp stamp = new Stamp();
            long[] sender = new long[ROUNDS];
            for (int round = 0; round < ROUNDS; round++) {
                long before = ThreadMeter.allocatedBytes();
                for (int i = 0; i < n; i++) {
                    stamp.seq = i;
                    p.client().send(64, stamp);
                }
                sender[round] = ThreadMeter.allocatedBytes() - before;
            }
            assertEquals(ROUNDS * ((long) n * (n - 1) / 2), receiver.get(T.toSeconds(), TimeUnit.SECONDS));
            System.out.printf("in-place sends: allocation per round of %d messages, the first warming up: %s B%n", n,
                    Arrays.toString(sender));
            long least = Arrays.stream(sender, 1, ROUNDS).min().orElseThrow();
            assertTrue(least < n / 10, "the sender allocated in every round: " + Arrays.toString(sender));
        }
    }
}
