package io.github.verbs4j.transfer;

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
import static org.junit.jupiter.api.Assertions.assertThrows;
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
