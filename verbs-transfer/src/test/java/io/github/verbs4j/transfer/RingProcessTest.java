package io.github.verbs4j.transfer;

import io.github.verbs4j.PeerLostException;
import io.github.verbs4j.WcStatus;
import io.github.verbs4j.WorkCompletionException;
import io.github.verbs4j.testsupport.ThreadMeter;
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
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
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
                try (Ring ring = rendezvous.join(RANKS, TestNet.ring(COUNT * 8L, TestNet.WAIT))) {
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
     * allreduce for its chunk. While it waits (1 s) rank 0's thread leaves the core idle: it
     * blocks on the completion channel once its spin is spent (its CPU time from the allreduce's
     * start to its end is under 30 % of the wall time; a spinning wait takes all of it, and the
     * thread's CPU time is reached through verbs-core's ThreadMeter, which measures the current
     * thread only, so the thread measures itself). Then rank 1 is killed with SIGKILL: rank 0's
     * allreduce ends through rdma_cm's DISCONNECTED with a {@link PeerLostException} naming the
     * neighbour, whose cause is the flushed receive's {@link WorkCompletionException} (once: its
     * own cause none) and whose status is that flush's, not after the ring's 60 s timeout.
     * The CPU share and the delay are printed.
     */
    @Test
    void aRankWaitingForAStalledNeighbourBlocksAndTheNeighboursDeathEndsTheCollective() throws Exception {
        assumeTrue(TestNet.PROCESSES, TestNet.PROCESSES_SKIPPED);
        assumeTrue(!TestNet.iwarp(), "iWARP has no immediate data; the ring's steps are RDMA WRITE with immediate");
        int count = 64 << 10;
        try (Ring.Rendezvous rendezvous = Ring.rendezvous(TestNet.anyPort())) {
            InetSocketAddress at = rendezvous.address();
            try (TestNet.Child neighbour = TestNet.start(RankPeer.class, Map.of(), "1", "2",
                    at.getAddress().getHostAddress(), Integer.toString(at.getPort()), Integer.toString(count), "hold");
                 Ring ring = rendezvous.join(2, TestNet.ring(count * 8L, TestNet.WAIT))) {
                assertEquals("1", neighbour.expect("JOINED "));
                float[] data = new float[count];
                // the waiting thread measures itself: CPU and wall time from the allreduce's start to its end
                long[] spent = new long[2];
                CompletableFuture<Throwable> failure = new CompletableFuture<>();
                Thread waiter = Thread.ofPlatform().name("rank-0").start(() -> {
                    long cpu0 = ThreadMeter.cpuNanos();
                    long wall0 = System.nanoTime();
                    try {
                        ring.allreduce(data);
                        failure.complete(null);
                    } catch (Throwable t) {
                        spent[0] = ThreadMeter.cpuNanos() - cpu0;
                        spent[1] = System.nanoTime() - wall0;
                        failure.complete(t);
                    }
                });
                Thread.sleep(1000); // rank 0 writes its chunk and waits for rank 1's, which does not come
                assertTrue(waiter.isAlive(), "the allreduce ended without its neighbour");
                long killed = System.nanoTime();
                // when this JVM saw the process end: most of the delay is the killed JVM's teardown
                CompletableFuture<Long> exited = neighbour.process().onExit()
                        .thenApply(p -> (System.nanoTime() - killed) / 1000);
                neighbour.process().destroyForcibly();
                Throwable t = failure.get(120L * TestNet.WAIT, TimeUnit.SECONDS);
                long seenMicros = (System.nanoTime() - killed) / 1000;
                System.out.printf("killed neighbour: rank 0's allreduce failed %.1f ms after SIGKILL (the process's end"
                        + " was seen here after %.1f ms): %s%n", seenMicros / 1000.0,
                        exited.get(60L * TestNet.WAIT, TimeUnit.SECONDS) / 1000.0, t);
                System.out.printf("rank 0 waiting for a stalled neighbour, then failing: %.1f ms of CPU in %.1f ms"
                        + " (%.1f %%)%n", spent[0] / 1e6, spent[1] / 1e6, 100.0 * spent[0] / spent[1]);
                PeerLostException e = assertInstanceOf(PeerLostException.class, t);
                assertEquals(WcStatus.WR_FLUSH_ERROR, e.status(), "flushed after rdma_cm's DISCONNECTED: " + e);
                assertTrue(e.getMessage().startsWith("rank 0 of 2: its "), e.getMessage());
                assertTrue(e.getMessage().contains("neighbour, rank 1, disconnected (rdma_cm DISCONNECTED)"),
                        e.getMessage());
                WorkCompletionException flushed = assertInstanceOf(WorkCompletionException.class, e.getCause());
                assertEquals(WcStatus.WR_FLUSH_ERROR, flushed.status());
                assertFalse(flushed.getMessage().contains("disconnected"), "the neighbour named once: " + flushed);
                assertNull(flushed.getCause(), "the completion is the cause, not wrapped again");
                assertTrue(spent[1] > 500_000_000L, "the wait was shorter than the neighbour's stall of 1 s");
                assertTrue(spent[0] < 0.3 * spent[1], "the waiting rank used " + spent[0] / 1_000_000 + " ms of CPU in "
                        + spent[1] / 1_000_000 + " ms");
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
