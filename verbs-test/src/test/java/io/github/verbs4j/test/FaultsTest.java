package io.github.verbs4j.test;

import io.github.verbs4j.Context;
import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Declared faults reach softrdma: every packet is held 40 ms, so an RDMA WRITE (the write and its
 * acknowledgement, two packets) takes at least 80 ms, where it takes well under a millisecond
 * without faults. (This class runs in a JVM of its own: the module's surefire does not reuse forks.)
 */
@SoftRdmaTest
@Faults(delay = 1.0, delayTime = "40ms", seed = 7)
class FaultsTest {

    @Test
    void environmentCarriesTheDeclaredFaults() {
        assertEquals("seed=7,delay=1.0:40ms", FaultsEnvironment.effective());
    }

    @Test
    void everyPacketIsDelayed(Context ctx, @Peer Context peer) {
        try (Wire wire = new Wire(ctx, peer)) {
            for (int i = 1; i <= 3; i++) {
                long start = System.nanoTime();
                wire.write(i);
                Duration took = Duration.ofNanos(System.nanoTime() - start);
                assertTrue(took.toMillis() >= 80, "RDMA WRITE " + i + " took " + took + " with every packet held 40 ms");
            }
        }
    }
}
