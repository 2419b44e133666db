package io.github.verbs4j;

import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** Error completions provoked on purpose, their statuses asserted by name. */
class ErrorCompletionTest {

    @Test
    void writeIntoMemoryWithoutRemoteWriteIsRemoteAccessError() {
        // both regions local-only (the default): the QP allows remote writes, the region does not
        try (Rig rig = Rig.create(QpType.RC, ConnectOptions.defaults(), Access.LOCAL_WRITE)) {
            rig.mrB.segment().set(ValueLayout.JAVA_LONG, 0, 0x1111L);
            rig.mrA.segment().set(ValueLayout.JAVA_LONG, 0, 0x2222L);
            rig.a.postSend(SendRequest.rdmaWrite().id(5).local(rig.mrA, 0, 8).remote(rig.mrB.remote()).signaled());
            Completion wc = rig.next(rig.cqA);
            assertFalse(wc.ok());
            assertEquals(WcStatus.REMOTE_ACCESS_ERROR, wc.status());
            assertEquals(5, wc.wrId());
            WorkCompletionException e = wc.error();
            assertEquals(WcStatus.REMOTE_ACCESS_ERROR, e.status());
            assertTrue(e.getMessage().contains("REMOTE_ACCESS_ERROR"), e.getMessage());
            assertTrue(e.getMessage().contains("IBV_WC_REM_ACCESS_ERR"), e.getMessage());
            assertEquals(0x1111L, rig.mrB.segment().get(ValueLayout.JAVA_LONG, 0), "target memory untouched");
        }
    }

    @Test
    void writeWithAWrongRkeyIsRemoteAccessError() {
        try (Rig rig = Rig.rc()) {
            RemoteBuffer wrong = new RemoteBuffer(rig.mrB.address(), rig.mrB.length(), rig.mrB.rkey() ^ 0x5a5a00);
            rig.a.postSend(SendRequest.rdmaWrite().id(6).local(rig.mrA, 0, 8).remote(wrong).signaled());
            assertEquals(WcStatus.REMOTE_ACCESS_ERROR, rig.next(rig.cqA).status());
        }
    }

    @Test
    void readIntoMemoryWithoutLocalWriteIsLocalProtectionError() {
        try (Rig rig = Rig.rc()) {
            // a region the device may read but not write: an RDMA READ cannot land in it
            try (MemoryRegion readOnly = rig.pd.allocate(4096, Access.REMOTE_READ)) {
                rig.mrB.segment().set(ValueLayout.JAVA_LONG, 0, 0x77L);
                rig.a.postSend(SendRequest.rdmaRead().id(7).local(readOnly, 0, 8).remote(rig.mrB.remote()).signaled());
                Completion wc = rig.next(rig.cqA);
                assertEquals(WcStatus.LOCAL_PROTECTION_ERROR, wc.status());
                assertEquals(7, wc.wrId());
                assertEquals(0L, readOnly.segment().get(ValueLayout.JAVA_LONG, 0), "nothing written locally");
            }
        }
    }

    @Test
    void sendWithoutPostedReceiveAndNoRnrRetryIsRnrRetryExceeded() {
        try (Rig rig = Rig.create(QpType.RC, ConnectOptions.defaults().withRnrRetry(0), Access.LOCAL_WRITE)) {
            rig.a.postSend(SendRequest.send().id(8).local(rig.mrA, 0, 16).signaled());
            Completion wc = rig.next(rig.cqA);
            assertEquals(WcStatus.RNR_RETRY_EXCEEDED, wc.status());
            assertEquals(8, wc.wrId());
        }
    }

    @Test
    void toErrorFlushesPostedReceives() {
        try (Rig rig = Rig.rc()) {
            ReceiveRequest r = ReceiveRequest.create().local(rig.mrB, 0, 64);
            rig.b.postRecv(r.id(1));
            rig.b.postRecv(r.id(2));
            rig.b.toError();
            assertEquals(QpState.ERR, rig.b.state());
            for (long id = 1; id <= 2; id++) {
                Completion wc = rig.next(rig.cqB);
                assertEquals(WcStatus.WR_FLUSH_ERROR, wc.status());
                assertEquals(id, wc.wrId());
                assertEquals(rig.b.qpNumber(), wc.qpNumber());
            }
        }
    }

    @Test
    void receivesPostedInErrorAreFlushed() {
        // The IB spec flushes requests posted to a QP in ERR; kernel rxe (6.1) leaves a receive
        // posted from user space in its queue until the responder next runs, so this is checked
        // on softrdma only.
        assumeTrue(Rig.onSoftrdma(), "kernel rxe does not flush receives posted in ERR at once");
        try (Rig rig = Rig.rc()) {
            rig.b.toError();
            rig.b.postRecv(ReceiveRequest.create().id(3).local(rig.mrB, 0, 64));
            Completion wc = rig.next(rig.cqB);
            assertEquals(WcStatus.WR_FLUSH_ERROR, wc.status());
            assertEquals(3, wc.wrId());
        }
    }

    @Test
    void errorMovesTheQpToErrorAndLaterSendsFlush() {
        try (Rig rig = Rig.create(QpType.RC, ConnectOptions.defaults(), Access.LOCAL_WRITE)) {
            rig.a.postSend(SendRequest.rdmaWrite().id(1).local(rig.mrA, 0, 8).remote(rig.mrB.remote()).signaled());
            assertEquals(WcStatus.REMOTE_ACCESS_ERROR, rig.next(rig.cqA).status());
            assertEquals(QpState.ERR, rig.a.state(), "the device moved the QP to ERR");
            rig.a.postSend(SendRequest.send().id(2).local(rig.mrA, 0, 8).signaled());
            Completion wc = rig.next(rig.cqA);
            assertEquals(WcStatus.WR_FLUSH_ERROR, wc.status());
            assertNotEquals(WcStatus.SUCCESS, wc.status());
        }
    }
}
