package io.github.verbs4j.transfer;

import io.github.verbs4j.WcStatus;
import io.github.verbs4j.WorkCompletionException;
import io.github.verbs4j.transfer.collective.Ring;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Allreduce (float32 and int64 sums) and broadcast over a ring of 4 ranks: rank 0 in this JVM,
 * ranks 1..3 in JVMs of their own ({@link RankPeer}), every element checked on every rank against
 * a reference computed in Java. 256 Ki elements (1/2 MiB) per rank in CI; 64 MiB per rank with
 * {@code -Dverbs4j.transfer.full=true} (8 Mi int64 elements, 16 Mi float32 rounded to the same
 * count).
 */
class RingProcessTest {

    static final int RANKS = 4;
    static final int COUNT = TestNet.FULL ? 8 << 20 : 256 << 10;

    @Test
    void fourRanksAllreduceAndBroadcastElementByElement() throws Exception {
        assumeTrue(TestNet.PROCESSES, TestNet.PROCESSES_SKIPPED);
        List<TestNet.Child> children = new ArrayList<>();
        try (Ring.Rendezvous rendezvous = Ring.rendezvous(TestNet.anyPort())) {
            InetSocketAddress at = rendezvous.address();
            for (int r = 1; r < RANKS; r++) {
                children.add(TestNet.start(RankPeer.class, faults(), Integer.toString(r), Integer.toString(RANKS),
                        at.getAddress().getHostAddress(), Integer.toString(at.getPort()), Integer.toString(COUNT)));
            }
            CompletableFuture<String> zero = CompletableFuture.supplyAsync(() -> {
                try (Ring ring = rendezvous.join(RANKS, COUNT * 8L, Duration.ofSeconds(60L * TestNet.WAIT))) {
                    assertEquals(0, ring.rank());
                    return RankPeer.run(ring, COUNT);
                }
            });
            assertEquals("OK 0", zero.get(120L * TestNet.WAIT, TimeUnit.SECONDS));
            for (int r = 1; r < RANKS; r++) {
                assertEquals("OK " + r, children.get(r - 1).expect(""));
            }
        } finally {
            for (TestNet.Child c : children) {
                c.close();
            }
        }
    }

    /**
     * Two ranks: rank 1 in a JVM that joins and then takes no part, rank 0 here waiting in an
     * allreduce for its chunk. Rank 1 is killed with SIGKILL: rank 0's allreduce ends through
     * rdma_cm's DISCONNECTED with a {@link WorkCompletionException} (its receives flushed, the
     * message naming the neighbour), not after the ring's 60 s timeout. The delay is printed.
     */
    @Test
    void aKilledNeighbourEndsTheCollectiveThroughRdmaCm() throws Exception {
        assumeTrue(TestNet.PROCESSES, TestNet.PROCESSES_SKIPPED);
        assumeTrue(!TestNet.iwarp(), "iWARP has no immediate data; the ring's steps are RDMA WRITE with immediate");
        int count = 64 << 10;
        try (Ring.Rendezvous rendezvous = Ring.rendezvous(TestNet.anyPort())) {
            InetSocketAddress at = rendezvous.address();
            try (TestNet.Child neighbour = TestNet.start(RankPeer.class, Map.of(), "1", "2",
                    at.getAddress().getHostAddress(), Integer.toString(at.getPort()), Integer.toString(count), "hold");
                 Ring ring = rendezvous.join(2, count * 8L, Duration.ofSeconds(60L * TestNet.WAIT))) {
                assertEquals("1", neighbour.expect("JOINED "));
                float[] data = new float[count];
                CompletableFuture<Throwable> failure = new CompletableFuture<>();
                Thread waiter = Thread.ofPlatform().name("rank-0").start(() -> {
                    try {
                        ring.allreduce(data);
                        failure.complete(null);
                    } catch (Throwable t) {
                        failure.complete(t);
                    }
                });
                Thread.sleep(200); // rank 0 has written its chunk and waits for rank 1's
                assertTrue(waiter.isAlive(), "the allreduce ended without its neighbour");
                long killed = System.nanoTime();
                neighbour.process().destroyForcibly();
                Throwable t = failure.get(120L * TestNet.WAIT, TimeUnit.SECONDS);
                long seenMicros = (System.nanoTime() - killed) / 1000;
                System.out.printf("killed neighbour: rank 0's allreduce failed %.1f ms after SIGKILL: %s%n",
                        seenMicros / 1000.0, t);
                WorkCompletionException e = assertInstanceOf(WorkCompletionException.class, t);
                assertEquals(WcStatus.WR_FLUSH_ERROR, e.status(), "flushed after rdma_cm's DISCONNECTED: " + e);
                assertTrue(e.getMessage().contains("neighbour, rank 1, disconnected"), e.getMessage());
            }
        }
    }

    /** Light faults on the other ranks' packets (softrdma only); WRITE-only traffic recovers from them. */
    static Map<String, String> faults() {
        return TestNet.onSoftrdma() ? Map.of("SOFTRDMA_FAULTS", "seed=3,drop=0.002,dup=0.002,reorder=0.005") : Map.of();
    }

    @Test
    void badArgumentsAreRefusedBeforeAnyConnection() {
        InetSocketAddress somewhere = new InetSocketAddress(TestNet.ADDRESS, 1);
        assertThrows(IllegalArgumentException.class, () -> Ring.join(somewhere, 0, 4, 64, Duration.ofSeconds(1)));
        assertThrows(IllegalArgumentException.class, () -> Ring.join(somewhere, 4, 4, 64, Duration.ofSeconds(1)));
        assertThrows(IllegalArgumentException.class, () -> Ring.join(somewhere, 1, 1, 64, Duration.ofSeconds(1)));
        assertThrows(IllegalArgumentException.class,
                () -> Ring.join(somewhere, 1, Ring.MAX_RANKS + 1, 64, Duration.ofSeconds(1)));
    }
}
