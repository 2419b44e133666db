package io.github.verbs4j;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What posts return when the provider refuses (a full queue): the errno from {@code tryPost...},
 * a {@link VerbsException} naming the verb and the request from {@code post...}; and
 * {@code sq_sig_all}.
 */
class PostContractTest {

    @Test
    void aFullReceiveQueueIsEnomem() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd(); CompletionQueue cq = ctx.createCq(64);
             MemoryRegion mr = pd.allocate(4096); QueuePair qp = pd.queuePair(QpType.RC).cq(cq).maxRecvWr(4).build()) {
            qp.init();
            ReceiveRequest r = ReceiveRequest.create().local(mr, 0, 64);
            int capacity = qp.capabilities().maxRecvWr();
            assertTrue(capacity >= 4);
            // the device may hold more than it reported (rxe rounds its ring up): post until refused
            int posted = 0;
            int rc;
            while ((rc = qp.tryPostRecv(r.id(posted))) == 0 && posted < 100_000) {
                posted++;
            }
            assertEquals(Errno.ENOMEM.code(), rc, "after " + posted + " receives");
            assertTrue(posted >= capacity, "refused after " + posted + " receives, capacity " + capacity);
            VerbsException e = assertThrows(VerbsException.class, () -> qp.postRecv(r.id(1001)));
            assertEquals("ibv_post_recv", e.verb());
            assertEquals("ENOMEM", e.errnoName());
            assertTrue(e.getMessage().contains("ReceiveRequest[id 1001"), e.getMessage());
        }
    }

    @Test
    void aSendQueueStalledByRnrFillsUpWithEnomem() {
        // no receive at the peer and infinite RNR retries: the first SEND stays outstanding
        try (Rig rig = Rig.create(QpType.RC, ConnectOptions.defaults().withRnrRetry(7), Access.LOCAL_WRITE)) {
            SendRequest send = SendRequest.send().local(rig.mrA, 0, 8);
            int rc = 0;
            int posted = 0;
            while (posted < 10_000 && (rc = rig.a.tryPostSend(send.id(posted))) == 0) {
                posted++;
            }
            assertEquals(Errno.ENOMEM.code(), rc, "after " + posted + " posts");
            assertTrue(posted >= rig.a.capabilities().maxSendWr(), "posted " + posted);
            VerbsException e = assertThrows(VerbsException.class, () -> rig.a.postSend(send.id(77)));
            assertEquals("ibv_post_send", e.verb());
            assertEquals(Errno.ENOMEM, e.error());
            assertTrue(e.getMessage().contains("SendRequest[SEND, id 77"), e.getMessage());
        }
    }

    @Test
    void signalAllMakesUnsignaledRequestsComplete() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd(); CompletionQueue cq = ctx.createCq(16);
             MemoryRegion mr = pd.allocate(4096, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
             QueuePair a = pd.queuePair(QpType.RC).cq(cq).signalAll(true).build();
             QueuePair b = pd.queuePair(QpType.RC).cq(cq).build()) {
            Rig.assumeHandConnect(ctx);
            a.connect(b.endpoint());
            b.connect(a.endpoint());
            SendRequest write = SendRequest.rdmaWrite().id(5).local(mr, 0, 8).remote(mr.remote(), 8);
            assertEquals(0, write.flags(), "not signaled");
            a.postSend(write);
            Completions wcs = cq.completions(2);
            long deadline = System.nanoTime() + 5_000_000_000L;
            while (cq.poll(wcs) == 0 && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            assertEquals(1, wcs.count());
            assertEquals(5, wcs.get(0).wrId());
            assertEquals(WcOpcode.RDMA_WRITE, wcs.get(0).opcode());
        }
    }
}
