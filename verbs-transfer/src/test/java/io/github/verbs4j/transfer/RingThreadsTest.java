package io.github.verbs4j.transfer;

import io.github.verbs4j.transfer.collective.Ring;
import io.github.verbs4j.transfer.collective.RingOptions;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

/**
 * The ring's collectives with three ranks as threads of this JVM, each with connections of its
 * own (the same rendezvous, ring connections and RDMA WRITEs as separate processes, without
 * their start-up): allreduce of float32 and int64 twice and a broadcast, every element checked on
 * every rank ({@link RankPeer#run}). The test of the ring that also runs inside the rxe/siw VM,
 * where {@link RingProcessTest}'s four JVMs take too long.
 */
class RingThreadsTest {

    static final int RANKS = 3;
    static final int COUNT = 96 << 10;

    @Test
    void aWildcardOrUnresolvedRendezvousIsRefusedUpFront() {
        InetSocketAddress wildcard = new InetSocketAddress("0.0.0.0", 0);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Ring.rendezvous(wildcard));
        assertEquals("open the rendezvous on the address of an RDMA device, not " + wildcard, e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> Ring.rendezvous(new InetSocketAddress(0)));
        assertThrows(IllegalArgumentException.class,
                () -> Ring.rendezvous(InetSocketAddress.createUnresolved("rank0.invalid", 7000)));
        // the joining side refuses the wildcard too, before any connection
        InetSocketAddress wildcardRendezvous = new InetSocketAddress("0.0.0.0", 7000);
        IllegalArgumentException j = assertThrows(IllegalArgumentException.class,
                () -> Ring.join(wildcardRendezvous, 1, 2, RingOptions.defaults()));
        assertEquals("join the rendezvous at rank 0's address, not " + wildcardRendezvous, j.getMessage());
        // nothing was left bound: a rendezvous on the device's address still opens
        try (Ring.Rendezvous ok = Ring.rendezvous(TestNet.anyPort())) {
            assertTrue(ok.address().getPort() > 0);
        }
    }

    @Test
    void threeRanksInThreadsAllreduceAndBroadcastElementByElement() throws Exception {
        assumeFalse(TestNet.iwarp(), "iWARP has no immediate data; the ring's steps are RDMA WRITE with immediate");
        List<CompletableFuture<String>> ranks = new ArrayList<>();
        try (Ring.Rendezvous rendezvous = Ring.rendezvous(TestNet.anyPort())) {
            InetSocketAddress at = rendezvous.address();
            for (int r = 0; r < RANKS; r++) {
                int rank = r;
                ranks.add(CompletableFuture.supplyAsync(() -> {
                    RingOptions options = TestNet.ring(COUNT * 8L, TestNet.SLOWDOWN);
                    try (Ring ring = rank == 0 ? rendezvous.join(RANKS, options)
                            : Ring.join(at, rank, RANKS, options)) {
                        assertEquals(rank, ring.rank());
                        assertEquals(RANKS, ring.size());
                        return RankPeer.run(ring, COUNT);
                    }
                }, task -> Thread.ofPlatform().name("rank-" + rank).start(task)));
            }
            for (int r = 0; r < RANKS; r++) {
                assertEquals("OK " + r, ranks.get(r).get(120L * TestNet.SLOWDOWN, TimeUnit.SECONDS));
            }
        }
    }
}
