package io.github.verbs4j.cm;

import io.github.verbs4j.QueuePair;
import io.github.verbs4j.testsupport.CloseRaces;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * verbs-core's classic close race ({@code CloseRaceTest}, its round shared as
 * {@link CloseRaces#postPollAndClose}) on queue pairs connected through rdma_cm, so that it runs
 * on every substrate, iWARP (siw0) included, where queue pairs cannot be connected by hand:
 * threads post RDMA WRITEs on three connected RC queue pairs (made by their ids,
 * {@code rdma_create_qp}) and one polls and arms their completion queue while the queue pairs
 * ({@code rdma_destroy_qp}) and then the queue are closed under them. Every call ends with a
 * result or an {@link IllegalStateException} saying its owner is closed; no crash, no hang.
 *
 * <p>On softrdma the race runs under softrdma's close-race check ({@link CloseRaces.Check}): a
 * destroy that meets a post, poll or notify inside the provider, or a call on a destroyed object,
 * is counted, and the count must stay 0. With the guard disabled ({@code -Dverbs4j.closeGuard=off},
 * for the demonstration in docs/architecture.md, "Showing that the guard holds") it rises and
 * the test fails.
 *
 * <p>Sized for CI: 12 rounds on softrdma, 3 on a kernel device (under the VM's emulation each
 * round's three connections take seconds); {@code -Dverbs4j.stress.rounds=N} runs longer.
 */
class CmCloseRaceTest {

    private static final int ROUNDS = Integer.getInteger("verbs4j.stress.rounds", CmTestNet.onSoftrdma() ? 12 : 3);
    private static final int QPS = 3;
    private static final Duration T = CmInProcessTest.T;

    @BeforeAll
    static void softrdmaCm() {
        SoftrdmaCm.require();
    }

    @Test
    void closingCmQueuePairsAndTheirQueueUnderPostingPollingAndArmingThreads() {
        assertTimeoutPreemptively(CmTestNet.scaled(Duration.ofSeconds(180)), this::race);
    }

    private void race() throws Throwable {
        Random random = new Random(20261130L);
        AtomicLong posted = new AtomicLong();
        AtomicLong polled = new AtomicLong();
        try (CloseRaces.Check check = CloseRaces.Check.start()) {
            for (int round = 0; round < ROUNDS; round++) {
                String name = "round " + round;
                try {
                    round(random, posted, polled, name);
                } catch (Throwable t) {
                    long counted = check.counted();
                    if (counted > 0) {
                        AssertionError e = new AssertionError(name + ": softrdma counted " + counted + " close races"
                                + " (stderr names them): the close guard did not hold");
                        e.addSuppressed(t);
                        throw e;
                    }
                    throw t;
                }
                assertEquals(0, check.counted(), () -> name + ": softrdma counted destroys that ran while a call on"
                        + " the object was inside it (or calls on destroyed objects): the close guard did not hold"
                        + " (stderr names them)");
            }
        }
        assertTrue(posted.get() > 0 && polled.get() > 0, "the threads did post and poll: " + posted + " / " + polled);
        System.out.println("CmCloseRaceTest: " + ROUNDS + " rounds, " + posted + " posts, " + polled + " completions");
    }

    private static void round(Random random, AtomicLong posted, AtomicLong polled, String name) throws Exception {
        // closed last (after the race closed the clients' QPs and their queue): the accepted ids
        // (each destroys its QP, the peer), every id before its event channel, the queues, the
        // region and the domain; a failure here comes with the closes' failures suppressed
        try (CmConnections net = CmConnections.listen(QPS, 4096)) {
            List<QueuePair> qps = new ArrayList<>();
            for (int i = 0; i < QPS; i++) {
                qps.add(net.connect(QpInit.defaults().withMaxSendWr(256)).queuePair());
            }
            CloseRaces.postPollAndClose(qps, net.cq(), net.mr(), random, posted, polled, name);
        }
    }
}
