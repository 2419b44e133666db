package io.github.verbs4j.transfer;

import io.github.verbs4j.transfer.collective.ElementType;
import io.github.verbs4j.transfer.collective.ReduceOp;
import io.github.verbs4j.RdmaTimeoutException;
import io.github.verbs4j.transfer.collective.Ring;
import io.github.verbs4j.transfer.collective.RingOptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.LongUnaryOperator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

/**
 * The ring's public collectives (allreduce, reduce-scatter, all-gather, broadcast) for every
 * element type and reduction, on Java arrays and on native segments, with 2 and 3 ranks as
 * threads of this JVM; every element of every rank's result is checked against a reference
 * computed here. The sizes cut each chunk into several pieces, so the pipeline (a piece reduced
 * and passed on while the next arrives) is what runs; one allreduce has fewer elements than ranks.
 */
class RingCollectivesTest {

    /** Divisible by 2 and 3 (reduce-scatter), and 256 KiB of ints per block of 3: four pieces per chunk. */
    static final int COUNT = 3 << 16;
    static final ElementType[] TYPES = ElementType.values();

    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 3})
    void allreduceEveryTypeAndOperationOnArraysAndSegments(int ranks) throws Exception {
        runRing(ranks, COUNT * 8L + 64, ring -> {
            for (ElementType t : TYPES) {
                for (ReduceOp op : ReduceOp.values()) {
                    Object a = array(t, COUNT);
                    fill(t, op, ring.rank(), view(a), 0);
                    if (op == ReduceOp.SUM) {
                        sumOverload(ring, a);
                    } else {
                        allreduceArray(ring, a, op);
                    }
                    String bad = check("allreduce " + t + " " + op + " array", t, op, ranks, view(a),
                            COUNT, i -> i);
                    if (bad != null) {
                        return bad;
                    }
                }
                // a native segment, with a count no chunking divides evenly, and one with fewer elements than ranks
                for (int count : new int[] {COUNT + 5, 1}) {
                    try (Arena arena = Arena.ofConfined()) {
                        MemorySegment s = arena.allocate((long) count * t.bytes(), 8);
                        fill(t, ReduceOp.MAX, ring.rank(), s, 0);
                        ring.allreduce(s, t, ReduceOp.MAX);
                        String bad = check("allreduce " + t + " MAX segment of " + count, t, ReduceOp.MAX, ranks, s,
                                count, i -> i);
                        if (bad != null) {
                            return bad;
                        }
                    }
                }
            }
            return "OK";
        });
    }

    /**
     * {@link Ring#allreduceInWorkspace}: every type reduced in place in a slice of the ring's
     * workspace, at its start and at an odd offset (the neighbours write at the same offset, the
     * staging as far in), the bytes around the slice untouched, a copying allreduce between them
     * still exact; segments outside the workspace refused with a message naming both ranges; the
     * workspace unusable, not a crash, once the ring is closed.
     */
    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 3})
    void allreduceInTheWorkspaceReducesInPlaceAndRefusesOtherSegments(int ranks) throws Exception {
        long maxBytes = COUNT * 8L + 256;
        List<MemorySegment> workspaces = new java.util.concurrent.CopyOnWriteArrayList<>();
        runRing(ranks, maxBytes, ring -> {
            MemorySegment ws = ring.workspace();
            workspaces.add(ws);
            if (ws.byteSize() != maxBytes) {
                return "workspace of " + ws.byteSize() + " bytes, not maxBytes " + maxBytes;
            }
            if (ring.rank() == 0) {
                String refused = "is not inside this ring's workspace (0x" + Long.toHexString(ws.address()) + ", "
                        + maxBytes + " bytes): take workspace() slices, or allreduce(MemorySegment, ElementType,"
                        + " ReduceOp), which copies";
                assertEquals("data (on the heap, 16 bytes) " + refused, assertThrows(IllegalArgumentException.class,
                        () -> ring.allreduceInWorkspace(MemorySegment.ofArray(new float[4]), ElementType.FLOAT,
                                ReduceOp.SUM)).getMessage());
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment other = arena.allocate(64, 8);
                    assertEquals("data (native, 0x" + Long.toHexString(other.address()) + ", 64 bytes) " + refused,
                            assertThrows(IllegalArgumentException.class,
                                    () -> ring.allreduceInWorkspace(other, ElementType.LONG, ReduceOp.SUM)).getMessage());
                }
                // the last 8 bytes of the workspace and 8 beyond it
                MemorySegment straddling = MemorySegment.ofAddress(ws.address() + maxBytes - 8).reinterpret(16);
                assertEquals("data (native, 0x" + Long.toHexString(straddling.address()) + ", 16 bytes) " + refused,
                        assertThrows(IllegalArgumentException.class,
                                () -> ring.allreduceInWorkspace(straddling, ElementType.INT, ReduceOp.MAX)).getMessage());
                assertEquals("data has 6 bytes, not a whole number of 4-byte INT elements",
                        assertThrows(IllegalArgumentException.class,
                                () -> ring.allreduceInWorkspace(ws.asSlice(0, 6), ElementType.INT, ReduceOp.SUM))
                                .getMessage());
            }
            for (ElementType t : TYPES) {
                MemorySegment head = ws.asSlice(0, (long) COUNT * t.bytes());
                fill(t, ReduceOp.SUM, ring.rank(), head, 0);
                ring.allreduceInWorkspace(head, t, ReduceOp.SUM);
                String bad = check("workspace " + t + " SUM at 0", t, ReduceOp.SUM, ranks, head, COUNT, i -> i);
                if (bad != null) {
                    return bad;
                }
                // an odd offset and a count no chunking divides evenly, between bytes that must stay as they are
                long at = 40;
                int count = COUNT / 2 + 5;
                ws.fill((byte) 0x5A);
                MemorySegment mid = ws.asSlice(at, (long) count * t.bytes());
                fill(t, ReduceOp.MIN, ring.rank(), mid, 7);
                ring.allreduceInWorkspace(mid, t, ReduceOp.MIN);
                bad = check("workspace " + t + " MIN at " + at, t, ReduceOp.MIN, ranks, mid, count, i -> i + 7);
                if (bad != null) {
                    return bad;
                }
                for (long b = 0; b < maxBytes; b++) {
                    if ((b < at || b >= at + mid.byteSize()) && ws.get(ValueLayout.JAVA_BYTE, b) != 0x5A) {
                        return "workspace " + t + " MIN at " + at + ": byte " + b + " outside the slice changed";
                    }
                }
                // the copying form between two in the workspace
                Object a = array(t, COUNT);
                fill(t, ReduceOp.MAX, ring.rank(), view(a), 0);
                allreduceArray(ring, a, ReduceOp.MAX);
                bad = check("array " + t + " MAX after the workspace", t, ReduceOp.MAX, ranks, view(a), COUNT, i -> i);
                if (bad != null) {
                    return bad;
                }
            }
            return "OK";
        });
        assertEquals(ranks, workspaces.size());
        for (MemorySegment ws : workspaces) {
            assertThrows(IllegalStateException.class, () -> ws.get(ValueLayout.JAVA_BYTE, 0));
        }
    }

    /**
     * What the copying collectives copy ({@link Ring#bytesCopied()}): an allreduce of S bytes
     * copies in only the chunk it sends first (S / N) and reads every chunk it reduces straight
     * from the caller's array, then copies S out piece by piece (before: S in and S out, 2 S); a
     * reduce-scatter S / N in and its block out; an all-gather its block in and N blocks out; the
     * workspace form nothing. A workspace slice given to the copying allreduce (it overlaps the
     * buffer the ring writes into) is still copied whole both ways, and every result is exact.
     */
    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 3})
    void copyingCollectivesCopyInOnlyTheChunkSentFirst(int ranks) throws Exception {
        long maxBytes = COUNT * 8L + 256;
        runRing(ranks, maxBytes, ring -> {
            int rank = ring.rank();
            for (ElementType t : TYPES) {
                long bytes = (long) COUNT * t.bytes();
                Object a = array(t, COUNT);
                fill(t, ReduceOp.SUM, rank, view(a), 0);
                long before = ring.bytesCopied();
                sumOverload(ring, a);
                String bad = check("allreduce " + t + " array", t, ReduceOp.SUM, ranks, view(a), COUNT, i -> i);
                if (bad != null) {
                    return bad;
                }
                if (ring.bytesCopied() - before != bytes / ranks + bytes) {
                    return "allreduce " + t + " of " + bytes + " bytes copied " + (ring.bytesCopied() - before)
                            + ", not " + (bytes / ranks + bytes) + " (its first chunk in, all out)";
                }

                // a workspace slice past the start, given to the copying form: the data area overlaps it
                MemorySegment inside = ring.workspace().asSlice(64, bytes);
                fill(t, ReduceOp.MAX, rank, inside, 3);
                before = ring.bytesCopied();
                ring.allreduce(inside, t, ReduceOp.MAX);
                bad = check("allreduce " + t + " of a workspace slice", t, ReduceOp.MAX, ranks, inside, COUNT,
                        i -> i + 3);
                if (bad != null) {
                    return bad;
                }
                if (ring.bytesCopied() - before != 2 * bytes) {
                    return "allreduce " + t + " of a workspace slice copied " + (ring.bytesCopied() - before)
                            + ", not " + 2 * bytes;
                }

                MemorySegment head = ring.workspace().asSlice(0, bytes);
                fill(t, ReduceOp.SUM, rank, head, 0);
                before = ring.bytesCopied();
                ring.allreduceInWorkspace(head, t, ReduceOp.SUM);
                if (ring.bytesCopied() != before) {
                    return "allreduceInWorkspace " + t + " copied " + (ring.bytesCopied() - before) + " bytes";
                }

                int block = COUNT / ranks;
                Object send = array(t, COUNT);
                Object recv = array(t, block);
                fill(t, ReduceOp.MIN, rank, view(send), 0);
                before = ring.bytesCopied();
                reduceScatterArray(ring, send, recv, ReduceOp.MIN);
                bad = check("reduce-scatter " + t, t, ReduceOp.MIN, ranks, view(recv), block,
                        i -> (long) rank * block + i);
                if (bad != null) {
                    return bad;
                }
                if (ring.bytesCopied() - before != 2 * (bytes / ranks)) {
                    return "reduce-scatter " + t + " copied " + (ring.bytesCopied() - before) + ", not "
                            + 2 * (bytes / ranks);
                }

                Object mine = array(t, block);
                Object all = array(t, COUNT);
                fill(t, ReduceOp.SUM, rank, view(mine), (long) rank * block);
                before = ring.bytesCopied();
                allGatherArray(ring, mine, all);
                bad = checkGathered("all-gather " + t, t, ranks, view(all), block);
                if (bad != null) {
                    return bad;
                }
                if (ring.bytesCopied() - before != bytes / ranks + bytes) {
                    return "all-gather " + t + " copied " + (ring.bytesCopied() - before) + ", not "
                            + (bytes / ranks + bytes);
                }
            }
            return "OK";
        });
    }

    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 3})
    void reduceScatterGivesRankRItsReducedBlockAndAllGatherEveryBlockInRankOrder(int ranks) throws Exception {
        runRing(ranks, COUNT * 8L, ring -> {
            int rank = ring.rank();
            int block = COUNT / ranks;
            for (ElementType t : TYPES) {
                // twice in a row (the second's first writes reuse the staging the first just reduced), then an allreduce
                for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.MIN}) {
                    Object send = array(t, COUNT);
                    Object recv = array(t, block);
                    fill(t, op, rank, view(send), 0);
                    reduceScatterArray(ring, send, recv, op);
                    String bad = check("reduce-scatter " + t + " " + op + " array", t, op, ranks,
                            view(recv), block, i -> (long) rank * block + i);
                    if (bad != null) {
                        return bad;
                    }
                }
                Object all = array(t, COUNT);
                fill(t, ReduceOp.SUM, rank, view(all), 0);
                sumOverload(ring, all);
                String bad = check("allreduce after reduce-scatter " + t, t, ReduceOp.SUM, ranks,
                        view(all), COUNT, i -> i);
                if (bad != null) {
                    return bad;
                }
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment send = arena.allocate((long) COUNT * t.bytes(), 8);
                    // recv larger than a block: the rest stays as it was
                    MemorySegment recv = arena.allocate((long) (block + 1) * t.bytes(), 8).fill((byte) 0x5A);
                    fill(t, ReduceOp.PROD, rank, send, 0);
                    ring.reduceScatter(send, recv, t, ReduceOp.PROD);
                    bad = check("reduce-scatter " + t + " PROD segment", t, ReduceOp.PROD, ranks, recv, block,
                            i -> (long) rank * block + i);
                    if (bad == null && recv.get(ValueLayout.JAVA_BYTE, recv.byteSize() - 1) != 0x5A) {
                        bad = "reduce-scatter " + t + " wrote past the block";
                    }
                    if (bad != null) {
                        return bad;
                    }
                }
                // all-gather: rank r contributes its block of inputs; every rank gets rank order
                Object mine = array(t, block);
                fillContribution(t, rank, view(mine), block);
                Object gathered = array(t, COUNT);
                allGatherArray(ring, mine, gathered);
                bad = checkGathered("all-gather " + t + " array", t, ranks, view(gathered), block);
                if (bad != null) {
                    return bad;
                }
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment send = arena.allocate((long) block * t.bytes(), 8);
                    fillContribution(t, rank, send, block);
                    MemorySegment recv = arena.allocate((long) COUNT * t.bytes(), 8);
                    ring.allGather(send, recv);
                    bad = checkGathered("all-gather " + t + " segment", t, ranks, recv, block);
                    if (bad != null) {
                        return bad;
                    }
                }
            }
            // a reduce-scatter last: its word to the left neighbour is not awaited, as that one may have
            // ended and closed its ring already (the ranks close as soon as they are done)
            int[] send = new int[ranks];
            int[] recv = new int[1];
            java.util.Arrays.fill(send, rank + 1);
            ring.reduceScatter(send, recv, ReduceOp.SUM);
            if (recv[0] != ranks * (ranks + 1) / 2) {
                return "last reduce-scatter: " + recv[0];
            }
            return "OK";
        });
    }

    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 3})
    void broadcastEveryTypeFromEveryRoot(int ranks) throws Exception {
        runRing(ranks, COUNT * 8L, ring -> {
            for (int root = 0; root < ranks; root++) {
                for (ElementType t : TYPES) {
                    Object a = array(t, COUNT);
                    MemorySegment view = view(a);
                    if (ring.rank() == root) {
                        fill(t, ReduceOp.SUM, root, view, 0);
                    } else {
                        view.fill((byte) -1);
                    }
                    broadcastArray(ring, a, root);
                    for (int i = 0; i < COUNT; i++) {
                        if (get(t, view, i) != input(t, ReduceOp.SUM, root, i)) {
                            return "broadcast " + t + " from " + root + " on rank " + ring.rank() + ", element " + i
                                    + ": " + get(t, view, i);
                        }
                    }
                }
                try (Arena arena = Arena.ofConfined()) {
                    // bytes of any length: not a whole number of pieces nor of words
                    MemorySegment s = arena.allocate(COUNT + 3);
                    for (long i = 0; i < s.byteSize(); i++) {
                        s.set(ValueLayout.JAVA_BYTE, i,
                                ring.rank() == root ? TestNet.pattern(root, i) : 0);
                    }
                    ring.broadcast(s, root);
                    for (long i = 0; i < s.byteSize(); i++) {
                        if (s.get(ValueLayout.JAVA_BYTE, i) != TestNet.pattern(root, i)) {
                            return "broadcast segment from " + root + " on rank " + ring.rank() + ", byte " + i;
                        }
                    }
                }
            }
            return "OK";
        });
    }

    @Test
    void badInputIsRefusedWithTheNumbersAndTheRingGoesOn() throws Exception {
        runRing(2, 1024, ring -> {
            if (ring.rank() == 0) {
                assertEquals("send has 9 FLOAT elements, not divisible by the ring's 2 ranks",
                        assertThrows(IllegalArgumentException.class,
                                () -> ring.reduceScatter(new float[9], new float[9], ReduceOp.SUM)).getMessage());
                assertEquals("recv has 12 bytes, too small for one block (8 elements / 2 ranks): 16 bytes",
                        assertThrows(IllegalArgumentException.class,
                                () -> ring.reduceScatter(new int[8], new int[3], ReduceOp.SUM)).getMessage());
                assertEquals("recv has 56 bytes, too small for 2 blocks of 32 bytes: 64 bytes",
                        assertThrows(IllegalArgumentException.class,
                                () -> ring.allGather(new long[4], new long[7])).getMessage());
                assertEquals("data has 1032 bytes, more than the ring's maxBytes 1024",
                        assertThrows(IllegalArgumentException.class,
                                () -> ring.allreduce(new double[129])).getMessage());
                assertEquals("size() * send has 1040 bytes, more than the ring's maxBytes 1024",
                        assertThrows(IllegalArgumentException.class,
                                () -> ring.allGather(MemorySegment.ofArray(new byte[520]),
                                        MemorySegment.ofArray(new byte[1040]))).getMessage());
                assertEquals("data has 6 bytes, not a whole number of 4-byte INT elements",
                        assertThrows(IllegalArgumentException.class,
                                () -> ring.allreduce(MemorySegment.ofArray(new byte[6]), ElementType.INT, ReduceOp.SUM))
                                .getMessage());
                assertEquals("data is read-only: the result is written into it",
                        assertThrows(IllegalArgumentException.class,
                                () -> ring.broadcast(MemorySegment.ofArray(new byte[8]).asReadOnly(), 0)).getMessage());
                assertEquals("root must be within 0..1, got 2",
                        assertThrows(IllegalArgumentException.class, () -> ring.broadcast(new int[1], 2)).getMessage());
            }
            // nothing was sent: both ranks still run the same collectives
            int[] x = {ring.rank() + 1, 10 * (ring.rank() + 1)};
            ring.allreduce(x);
            return x[0] == 3 && x[1] == 30 ? "OK" : "sum after refusals: " + x[0] + ", " + x[1];
        });
    }

    /**
     * docs/transfer.md's example, as written there (between the markers), run by 3 ranks as
     * threads; what each collective left is checked after it.
     */
    @Test
    void theDocumentedExampleRuns() throws Exception {
        int n = 3;
        Duration timeout = Duration.ofSeconds(60L * TestNet.SLOWDOWN);
        List<CompletableFuture<String>> results = new ArrayList<>();
        assumeFalse(TestNet.iwarp(), "iWARP has no immediate data; the ring's steps are RDMA WRITE with immediate");
        try (Ring.Rendezvous rendezvous = Ring.rendezvous(TestNet.anyPort())) {
            InetSocketAddress at = rendezvous.address();
            for (int r = 0; r < n; r++) {
                int rank = r;
                results.add(CompletableFuture.supplyAsync(() -> {
                    long maxBytes = 1 << 20;
                    // --- docs/transfer.md: collectives
                    try (Ring ring = rank == 0 ? rendezvous.join(n, maxBytes, timeout)   // rank 0 joins too
                                               : Ring.join(at, rank, n, maxBytes, timeout)) {
                        float[] grads = {rank, 1.5f};
                        ring.allreduce(grads);                          // {0+1+2, 4.5f} on every rank
                        double[] lows = {rank + 0.25, -rank};
                        ring.allreduce(lows, ReduceOp.MIN);             // {0.25, -2.0}
                        long[] counts = {1, 2, 3, 4, 5, 6};             // 6 elements: 2 per rank
                        long[] mine = new long[counts.length / n];
                        ring.reduceScatter(counts, mine, ReduceOp.SUM); // rank r: sums of elements 2r, 2r+1
                        int[] all = new int[n * 2];
                        ring.allGather(new int[] {rank, 10 * rank}, all); // {0, 0, 1, 10, 2, 20}
                        byte[] config = rank == 0 ? "v2".getBytes() : new byte[2];
                        ring.broadcast(config, 0);                      // rank 0's bytes everywhere
                        try (Arena arena = Arena.ofConfined()) {
                            MemorySegment s = arena.allocate(ValueLayout.JAVA_INT, 4).fill((byte) rank);
                            ring.allreduce(s, ElementType.INT, ReduceOp.MAX); // every byte 2
                            // --- end
                            String want = "[3.0, 4.5] [0.25, -2.0] [" + 3 * (2 * rank + 1) + ", " + 3 * (2 * rank + 2)
                                    + "] [0, 0, 1, 10, 2, 20] v2 " + 0x02020202;
                            String got = java.util.Arrays.toString(grads) + " " + java.util.Arrays.toString(lows) + " "
                                    + java.util.Arrays.toString(mine) + " " + java.util.Arrays.toString(all) + " "
                                    + new String(config) + " " + s.getAtIndex(ValueLayout.JAVA_INT, 3);
                            return want.equals(got) ? "OK " + rank : got;
                        }
                    }
                }, task -> Thread.ofPlatform().name("rank-" + rank).start(task)));
            }
            for (int r = 0; r < n; r++) {
                assertEquals("OK " + r, results.get(r).get(120L * TestNet.SLOWDOWN, TimeUnit.SECONDS));
            }
        }
    }

    /**
     * A collective whose neighbour joined but takes no part ends after the ring's operation
     * timeout, not the join's: rank 1 of two joins and then waits; rank 0's allreduce throws
     * {@link RdmaTimeoutException} carrying the operation timeout (the join's is a minute, far
     * beyond this test's wait for it), naming the collective and the rank it waited for, and no
     * verb (the wait is the ring's own).
     */
    @Test
    void aCollectiveWhoseNeighbourTakesNoPartTimesOutAfterTheOperationTimeout() throws Exception {
        assumeFalse(TestNet.iwarp(), "iWARP has no immediate data; the ring's steps are RDMA WRITE with immediate");
        Duration operation = Duration.ofMillis(300);
        RingOptions options = TestNet.ring(1 << 16, TestNet.SLOWDOWN).withOperationTimeout(operation);
        assertTrue(options.joinTimeout().compareTo(Duration.ofSeconds(60)) >= 0);
        CompletableFuture<Void> rankZeroDone = new CompletableFuture<>();
        try (Ring.Rendezvous rendezvous = Ring.rendezvous(TestNet.anyPort())) {
            InetSocketAddress at = rendezvous.address();
            CompletableFuture<Throwable> zero = CompletableFuture.supplyAsync(() -> {
                try (Ring ring = rendezvous.join(2, options)) {
                    ring.allreduce(new float[1024]);
                    return null;
                } catch (RuntimeException e) {
                    return e;
                } finally {
                    rankZeroDone.complete(null);
                }
            }, task -> Thread.ofPlatform().name("rank-0").start(task));
            CompletableFuture<String> one = CompletableFuture.supplyAsync(() -> {
                try (Ring ring = Ring.join(at, 1, 2, options)) {
                    rankZeroDone.join(); // joined, then no collective: rank 0 waits for its chunks in vain
                    return "idle " + ring.rank();
                }
            }, task -> Thread.ofPlatform().name("rank-1").start(task));
            // bounded well below the join timeout: a collective that waited that long fails here
            Throwable failure = zero.get(30L * TestNet.SLOWDOWN, TimeUnit.SECONDS);
            RdmaTimeoutException e = assertInstanceOf(RdmaTimeoutException.class, failure);
            assertEquals(operation, e.timeout(), "the operation timeout, not the join's");
            assertNull(e.verb(), "no verb timed out: the wait is the ring's own");
            assertEquals("rank 1, the left neighbour: its chunk 0x10000000 (allreduce on rank 0 of 2)", e.awaited());
            assertEquals("idle 1", one.get(30L * TestNet.SLOWDOWN, TimeUnit.SECONDS));
        }
    }

    @Test
    void ringOptionsHaveAWitherForEveryFieldAndCheckEachValue() {
        RingOptions o = RingOptions.defaults().withMaxBytes(1024).withJoinTimeout(Duration.ofSeconds(5))
                .withOperationTimeout(Duration.ofMillis(250)).withSpinWait(Duration.ZERO);
        assertEquals(new RingOptions(1024, Duration.ofSeconds(5), Duration.ofMillis(250), Duration.ZERO), o);
        assertEquals(new RingOptions(RingOptions.DEFAULT_MAX_BYTES, RingOptions.DEFAULT_JOIN_TIMEOUT,
                RingOptions.DEFAULT_OPERATION_TIMEOUT, RingOptions.DEFAULT_SPIN_WAIT), RingOptions.defaults());
        assertEquals("maxBytes must be a positive multiple of 8, got 12",
                assertThrows(IllegalArgumentException.class, () -> o.withMaxBytes(12)).getMessage());
        assertThrows(IllegalArgumentException.class, () -> o.withMaxBytes(0));
        assertEquals("operationTimeout must be positive, got PT0S",
                assertThrows(IllegalArgumentException.class, () -> o.withOperationTimeout(Duration.ZERO)).getMessage());
        assertThrows(IllegalArgumentException.class, () -> o.withJoinTimeout(Duration.ofSeconds(-1)));
        assertThrows(NullPointerException.class, () -> o.withJoinTimeout(null));
        assertThrows(IllegalArgumentException.class, () -> o.withSpinWait(Duration.ofSeconds(2)));
        // the shorthand's maxBytes goes through the same check
        assertThrows(IllegalArgumentException.class,
                () -> Ring.join(TestNet.anyPort(), 1, 2, 12, Duration.ofSeconds(1)));
    }

    // ---------------------------------------------------------------- the ring of threads

    static void runRing(int ranks, long maxBytes, Function<Ring, String> body) throws Exception {
        assumeFalse(TestNet.iwarp(), "iWARP has no immediate data; the ring's steps are RDMA WRITE with immediate");
        List<CompletableFuture<String>> results = new ArrayList<>();
        try (Ring.Rendezvous rendezvous = Ring.rendezvous(TestNet.anyPort())) {
            InetSocketAddress at = rendezvous.address();
            for (int r = 0; r < ranks; r++) {
                int rank = r;
                results.add(CompletableFuture.supplyAsync(() -> {
                    RingOptions options = TestNet.ring(maxBytes, TestNet.SLOWDOWN);
                    try (Ring ring = rank == 0 ? rendezvous.join(ranks, options)
                            : Ring.join(at, rank, ranks, options)) {
                        return body.apply(ring) + " " + rank;
                    }
                }, task -> Thread.ofPlatform().name("rank-" + rank).start(task)));
            }
            for (int r = 0; r < ranks; r++) {
                assertEquals("OK " + r, results.get(r).get(180L * TestNet.SLOWDOWN, TimeUnit.SECONDS));
            }
        }
    }

    // ---------------------------------------------------------------- inputs and references

    /**
     * Rank {@code r}'s element {@code i}, as a long: small integers for the floating types and for
     * products (exact in any order), values beyond 32 bits for LONG, wrapping ones for INT.
     */
    static long input(ElementType t, ReduceOp op, int r, long i) {
        if (op == ReduceOp.PROD) {
            return (i + r) % 5 - 2;
        }
        return switch (t) {
            case FLOAT, DOUBLE -> (i * 7 + r * 13L) % 1000 - 300;
            case INT -> (int) (i * 0x9E3779B1L + r * 0x7F4A7C15L);
            case LONG -> i * 1_000_003L - r * (1L << 40) + r * i;
        };
    }

    static long reduce(ElementType t, ReduceOp op, long a, long b) {
        long v = switch (op) {
            case SUM -> a + b;
            case PROD -> a * b;
            case MIN -> Math.min(a, b);
            case MAX -> Math.max(a, b);
        };
        return t == ElementType.INT ? (int) v : v;
    }

    static void fill(ElementType t, ReduceOp op, int r, MemorySegment s, long first) {
        long n = s.byteSize() / t.bytes();
        for (long i = 0; i < n; i++) {
            set(t, s, i, input(t, op, r, first + i));
        }
    }

    /** All-gather's input: rank r's block is elements r*block.. of its SUM inputs. */
    static void fillContribution(ElementType t, int r, MemorySegment s, int block) {
        for (int i = 0; i < block; i++) {
            set(t, s, i, input(t, ReduceOp.SUM, r, (long) r * block + i));
        }
    }

    /** Whether {@code count} elements of {@code s} are the reduction of every rank's input at {@code index(i)}. */
    static String check(String what, ElementType t, ReduceOp op, int ranks, MemorySegment s, int count,
            LongUnaryOperator index) {
        for (int i = 0; i < count; i++) {
            long at = index.applyAsLong(i);
            long want = input(t, op, 0, at);
            for (int r = 1; r < ranks; r++) {
                want = reduce(t, op, want, input(t, op, r, at));
            }
            long got = get(t, s, i);
            if (got != want) {
                return what + ": element " + i + " is " + got + ", want " + want;
            }
        }
        return null;
    }

    static String checkGathered(String what, ElementType t, int ranks, MemorySegment s, int block) {
        for (int r = 0; r < ranks; r++) {
            for (int i = 0; i < block; i++) {
                long got = get(t, s, (long) r * block + i);
                long want = input(t, ReduceOp.SUM, r, (long) r * block + i);
                if (got != want) {
                    return what + ": rank " + r + "'s element " + i + " is " + got + ", want " + want;
                }
            }
        }
        return null;
    }

    static void set(ElementType t, MemorySegment s, long i, long v) {
        switch (t) {
            case FLOAT -> s.setAtIndex(ValueLayout.JAVA_FLOAT, i, (float) v);
            case DOUBLE -> s.setAtIndex(ValueLayout.JAVA_DOUBLE, i, (double) v);
            case INT -> s.setAtIndex(ValueLayout.JAVA_INT, i, (int) v);
            case LONG -> s.setAtIndex(ValueLayout.JAVA_LONG, i, v);
        }
    }

    /** Element {@code i} as a long; a float or double that is not an integer reads as Long.MIN_VALUE. */
    static long get(ElementType t, MemorySegment s, long i) {
        double d;
        switch (t) {
            case INT -> {
                return s.getAtIndex(ValueLayout.JAVA_INT, i);
            }
            case LONG -> {
                return s.getAtIndex(ValueLayout.JAVA_LONG, i);
            }
            case FLOAT -> d = s.getAtIndex(ValueLayout.JAVA_FLOAT, i);
            default -> d = s.getAtIndex(ValueLayout.JAVA_DOUBLE, i);
        }
        return d == Math.rint(d) ? (long) d : Long.MIN_VALUE;
    }

    static Object array(ElementType t, int n) {
        return switch (t) {
            case FLOAT -> new float[n];
            case DOUBLE -> new double[n];
            case INT -> new int[n];
            case LONG -> new long[n];
        };
    }

    /** A heap segment over a primitive array of any of the four types. */
    static MemorySegment view(Object a) {
        return switch (a) {
            case float[] f -> MemorySegment.ofArray(f);
            case double[] d -> MemorySegment.ofArray(d);
            case int[] n -> MemorySegment.ofArray(n);
            case long[] l -> MemorySegment.ofArray(l);
            default -> throw new AssertionError(a);
        };
    }

    // the typed overloads, reached from the element type

    static void sumOverload(Ring ring, Object a) {
        switch (a) {
            case float[] f -> ring.allreduce(f);
            case double[] d -> ring.allreduce(d);
            case int[] n -> ring.allreduce(n);
            case long[] l -> ring.allreduce(l);
            default -> throw new AssertionError(a);
        }
    }

    static void allreduceArray(Ring ring, Object a, ReduceOp op) {
        switch (a) {
            case float[] f -> ring.allreduce(f, op);
            case double[] d -> ring.allreduce(d, op);
            case int[] n -> ring.allreduce(n, op);
            case long[] l -> ring.allreduce(l, op);
            default -> throw new AssertionError(a);
        }
    }

    static void reduceScatterArray(Ring ring, Object send, Object recv, ReduceOp op) {
        switch (send) {
            case float[] f -> ring.reduceScatter(f, (float[]) recv, op);
            case double[] d -> ring.reduceScatter(d, (double[]) recv, op);
            case int[] n -> ring.reduceScatter(n, (int[]) recv, op);
            case long[] l -> ring.reduceScatter(l, (long[]) recv, op);
            default -> throw new AssertionError(send);
        }
    }

    static void allGatherArray(Ring ring, Object send, Object recv) {
        switch (send) {
            case float[] f -> ring.allGather(f, (float[]) recv);
            case double[] d -> ring.allGather(d, (double[]) recv);
            case int[] n -> ring.allGather(n, (int[]) recv);
            case long[] l -> ring.allGather(l, (long[]) recv);
            default -> throw new AssertionError(send);
        }
    }

    static void broadcastArray(Ring ring, Object a, int root) {
        switch (a) {
            case float[] f -> ring.broadcast(f, root);
            case double[] d -> ring.broadcast(d, root);
            case int[] n -> ring.broadcast(n, root);
            case long[] l -> ring.broadcast(l, root);
            default -> throw new AssertionError(a);
        }
    }
}
