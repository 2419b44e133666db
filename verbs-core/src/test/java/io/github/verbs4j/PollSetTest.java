package io.github.verbs4j;

import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** One wait over several completion channels: which one is ready, time-outs, a set that grows. */
class PollSetTest {

    @Test
    void aWaitOverTwoChannelsReportsTheOneWithAnEventAndTimesOutWithoutOne() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd();
             CompletionChannel chA = ctx.createCompletionChannel();
             CompletionChannel chB = ctx.createCompletionChannel();
             CompletionQueue cqA = ctx.createCq(16, chA, 0); CompletionQueue cqB = ctx.createCq(16, chB, 0);
             MemoryRegion mr = pd.allocate(4096)) {
            Rig.assumeHandConnect(ctx);
            PollSet set = new PollSet(1); // grows on the second add
            int b = set.add(chB.fd());
            int a = set.add(chA.fd());
            assertEquals(2, set.size());
            assertEquals(chA.fd(), set.fd(a));
            assertEquals(chB.fd(), set.fd(b));
            QueuePair qa = pd.queuePair(QpType.RC).cq(cqA).build();
            QueuePair qb = pd.queuePair(QpType.RC).cq(cqB).build();
            try {
                qa.connect(qb.endpoint());
                qb.connect(qa.endpoint());
                cqA.requestNotify(false);
                cqB.requestNotify(false);
                assertEquals(0, set.await(50), "no completion, no event");
                assertFalse(set.isReady(a));
                assertFalse(set.isReady(b));
                assertEquals(0, set.await(0), "a look without waiting");

                qb.postRecv(ReceiveRequest.create().local(mr, 0, 64));
                qa.postSend(SendRequest.send().id(7).local(mr, 0, 8)); // unsignaled: only qb completes
                assertEquals(1, set.await(5_000));
                assertTrue(set.isReady(b), "the receiving side's channel");
                assertFalse(set.isReady(a), "the sender asked for no completion");
                assertSame(cqB, chB.await(Duration.ZERO), "the event is there to take");
                Completions wcs = cqB.completions(4);
                assertEquals(1, cqB.poll(wcs));
                assertEquals(WcStatus.SUCCESS, wcs.get(0).status());

                set.clear();
                assertEquals(0, set.size());
                assertThrows(IndexOutOfBoundsException.class, () -> set.isReady(0));
            } finally {
                qb.close();
                qa.close();
            }
            cqA.close();
            cqB.close();
        }
    }

    @Test
    void badArgumentsAreRefusedWithTheReason() {
        assertThrows(IllegalArgumentException.class, () -> new PollSet(0));
        PollSet set = new PollSet();
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> set.add(-1));
        assertTrue(e.getMessage().contains("-1"), e.getMessage());
        assertThrows(IndexOutOfBoundsException.class, () -> set.fd(0));
    }
}
