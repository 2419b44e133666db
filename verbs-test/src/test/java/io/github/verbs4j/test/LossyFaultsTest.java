package io.github.verbs4j.test;

import io.github.verbs4j.Context;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** With a third of all packets dropped, duplicated or reordered, RDMA WRITEs still land, in order. */
@SoftRdmaTest
@Faults("seed=3,drop=0.1,dup=0.1,reorder=0.1")
class LossyFaultsTest {

    @Test
    void writesSurviveTheLossyLink(Context ctx, @Peer Context peer) {
        assertEquals("seed=3,drop=0.1,dup=0.1,reorder=0.1", FaultsEnvironment.effective());
        try (Wire wire = new Wire(ctx, peer)) {
            for (int i = 1; i <= 200; i++) {
                wire.write(i * 0x0101010101L);
            }
        }
    }
}
