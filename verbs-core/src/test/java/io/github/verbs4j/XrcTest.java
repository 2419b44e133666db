package io.github.verbs4j;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.ValueLayout;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * XRC (ibv_open_xrcd, XRC SRQs, XRC_SEND and XRC_RECV QPs, ibv_open_qp): a sender's messages
 * land byte-exact in the SRQ each names, and the bad flows. Runs where the device has XRC
 * (softrdma); kernel rxe and siw have none (IBV_DEVICE_XRC unset, ibv_open_xrcd EOPNOTSUPP) and skip.
 */
class XrcTest {

    @TempDir
    Path dir;

    /** Skips where the device has no XRC (kernel rxe, siw), saying so; XrcTwoProcessTest too. */
    static void assumeXrc(Context ctx) {
        assumeTrue(ctx.queryDevice().hasXrc(), () -> ctx.device().name()
                + " has no XRC (IBV_DEVICE_XRC unset: kernel rxe and siw implement none)");
    }

    private static void fill(MemoryRegion mr, long off, int len, int seed) {
        for (int i = 0; i < len; i++) {
            mr.segment().set(ValueLayout.JAVA_BYTE, off + i, (byte) (i * 31 + seed));
        }
    }

    private static void assertFilled(MemoryRegion mr, long off, int len, int seed) {
        for (int i = 0; i < len; i++) {
            assertEquals((byte) (i * 31 + seed), mr.segment().get(ValueLayout.JAVA_BYTE, off + i), "byte " + i);
        }
    }

    @Test
    void sendsLandInTheSrqEachNamesOnItsOwnCq() {
        try (Context ctx = Rig.open()) {
            assumeXrc(ctx);
            try (ProtectionDomain pd = ctx.allocatePd();
                 CompletionQueue sendCq = ctx.createCq(16);
                 CompletionQueue cq1 = ctx.createCq(16);
                 CompletionQueue cq2 = ctx.createCq(16);
                 MemoryRegion src = pd.allocate(65536, Access.LOCAL_WRITE);
                 MemoryRegion dst = pd.allocate(65536, Access.LOCAL_WRITE);
                 XrcDomain dom = ctx.openXrcDomain(dir.resolve("xrc"), XrcDomain.OpenFlag.CREATE)) {
                SharedReceiveQueue s1 = dom.createSrq(pd, cq1, 16, 1);
                SharedReceiveQueue s2 = dom.createSrq(pd, cq2, 16, 1);
                XrcTarget tgt = dom.createTarget();
                QueuePair ini = pd.queuePair(QpType.XRC_SEND).sendCq(sendCq).build();
                assertNotEquals(s1.srqNumber(), s2.srqNumber());
                assertEquals(QpState.RESET, tgt.trackedState());

                Endpoint te = tgt.endpoint();
                ini.connect(te);
                tgt.connect(ini.endpoint());
                assertEquals(QpState.RTS, tgt.state());

                s1.postRecv(ReceiveRequest.create().id(101).local(dst, 0, 8192));
                s2.postRecv(ReceiveRequest.create().id(202).local(dst, 32768, 8192));
                fill(src, 0, 5000, 1);
                fill(src, 16384, 3000, 2);
                ini.postSend(SendRequest.send().id(1).local(src, 16384, 3000).xrcRemoteSrqn(s2.srqNumber()).signaled());
                ini.postSend(SendRequest.send().id(2).local(src, 0, 5000).xrcRemoteSrqn(s1.srqNumber()).signaled());
                assertEquals(1, ok(sendCq).wrId());
                assertEquals(2, ok(sendCq).wrId());
                Completion c2 = ok(cq2);
                assertEquals(202, c2.wrId());
                assertEquals(3000, c2.byteLength());
                assertEquals(WcOpcode.RECV, c2.opcode());
                assertEquals(tgt.qpNumber(), c2.qpNumber());
                Completion c1 = ok(cq1);
                assertEquals(101, c1.wrId());
                assertEquals(5000, c1.byteLength());
                assertFilled(dst, 32768, 3000, 2);
                assertFilled(dst, 0, 5000, 1);

                // the post needs the SRQ number; the XRC_SEND QP has no receive queue
                assertThrows(IllegalArgumentException.class, () -> ini.postSend(SendRequest.send().local(src, 0, 8)));
                assertThrows(IllegalStateException.class, () -> ini.postRecv(ReceiveRequest.create().local(src, 0, 8)));
                // children keep parents alive
                assertThrows(IllegalStateException.class, dom::close);
                assertThrows(IllegalStateException.class, cq1::close);
                ini.close();
                tgt.close();
                s1.close();
                s2.close();
                s2.close();
            }
        }
    }

    @Test
    void thePostSendApiNamesTheSrqWithWrSetXrcSrqn() {
        try (Context ctx = Rig.open()) {
            assumeXrc(ctx);
            try (ProtectionDomain pd = ctx.allocatePd();
                 CompletionQueue sendCq = ctx.createCq(16);
                 CompletionQueue cq = ctx.createCq(16);
                 MemoryRegion src = pd.allocate(8192, Access.LOCAL_WRITE);
                 MemoryRegion dst = pd.allocate(8192, Access.LOCAL_WRITE);
                 XrcDomain dom = ctx.openXrcDomain(dir.resolve("x"), XrcDomain.OpenFlag.CREATE);
                 SharedReceiveQueue s1 = dom.createSrq(pd, cq, 4, 1);
                 SharedReceiveQueue s2 = dom.createSrq(pd, cq, 4, 1);
                 XrcTarget tgt = dom.createTarget();
                 QueuePair ini = pd.queuePair(QpType.XRC_SEND).sendCq(sendCq).sendOps(SendOp.SEND).build()) {
                ini.connect(tgt.endpoint());
                tgt.connect(ini.endpoint());
                s1.postRecv(ReceiveRequest.create().id(1).local(dst, 0, 4096));
                s2.postRecv(ReceiveRequest.create().id(2).local(dst, 4096, 4096));
                fill(src, 0, 700, 5);
                try (PostSession s = ini.startPosting()) {
                    s.id(7).send().sge(src, 0, 700).xrcRemoteSrqn(s2.srqNumber());
                }
                assertEquals(7, ok(sendCq).wrId());
                Completion wc = ok(cq);
                assertEquals(2, wc.wrId(), "the SRQ named by ibv_wr_set_xrc_srqn");
                assertEquals(700, wc.byteLength());
                assertFilled(dst, 4096, 700, 5);
            }
        }
    }

    @Test
    void anSrqOfAnotherDomainIsARemoteAccessErrorAndTheTargetGoesToErr() {
        try (Context ctx = Rig.open()) {
            assumeXrc(ctx);
            try (ProtectionDomain pd = ctx.allocatePd();
                 CompletionQueue sendCq = ctx.createCq(16);
                 CompletionQueue cq = ctx.createCq(16);
                 MemoryRegion mr = pd.allocate(4096, Access.LOCAL_WRITE);
                 XrcDomain d1 = ctx.openXrcDomain(dir.resolve("one"), XrcDomain.OpenFlag.CREATE);
                 XrcDomain d2 = ctx.openXrcDomain(dir.resolve("two"), XrcDomain.OpenFlag.CREATE);
                 SharedReceiveQueue other = d2.createSrq(pd, cq, 4, 1);
                 XrcTarget tgt = d1.createTarget();
                 QueuePair ini = pd.queuePair(QpType.XRC_SEND).sendCq(sendCq).build()) {
                ini.connect(tgt.endpoint());
                tgt.connect(ini.endpoint());
                other.postRecv(ReceiveRequest.create().id(9).local(mr, 0, 4096));
                ini.postSend(SendRequest.send().id(3).local(mr, 0, 64).xrcRemoteSrqn(other.srqNumber()).signaled());
                Completion wc = next(sendCq);
                assertEquals(3, wc.wrId());
                assertEquals(WcStatus.REMOTE_ACCESS_ERROR, wc.status(), wc.toString());
                assertEquals(QpState.ERR, tgt.state());
                assertEquals(0, cq.poll(new Completions(4)), "nothing lands in the other domain's SRQ");
            }
        }
    }

    @Test
    void domainFileSemanticsOpenedTargetsAndCloseWhileBusy() {
        try (Context ctx = Rig.open()) {
            assumeXrc(ctx);
            Path file = dir.resolve("shared");
            VerbsException none = assertThrows(VerbsException.class, () -> ctx.openXrcDomain(file));
            assertTrue(none.is(Errno.EINVAL), "no domain for the file and no CREATE: " + none.getMessage());
            try (XrcDomain d = ctx.openXrcDomain(file, XrcDomain.OpenFlag.CREATE);
                 XrcDomain again = ctx.openXrcDomain(file)) {
                VerbsException excl = assertThrows(VerbsException.class,
                        () -> ctx.openXrcDomain(file, XrcDomain.OpenFlag.CREATE, XrcDomain.OpenFlag.EXCLUSIVE));
                assertTrue(excl.is(Errno.EINVAL), excl.getMessage());
                XrcTarget tgt = d.createTarget();
                // a second handle of the same domain opens the target by number
                XrcTarget opened = again.openTarget(tgt.qpNumber());
                assertTrue(opened.isOpened());
                assertEquals(tgt.qpNumber(), opened.qpNumber());
                VerbsException busy = assertThrows(VerbsException.class, tgt::close, "opened handles keep the QP");
                assertTrue(busy.is(Errno.EBUSY), busy.getMessage());
                assertFalse(tgt.isClosed());
                assertEquals(QpState.RESET, opened.state());
                opened.close();
                opened.close();
                tgt.close();
                VerbsException unknown = assertThrows(VerbsException.class, () -> d.openTarget(tgt.qpNumber()));
                assertTrue(unknown.is(Errno.EINVAL), unknown.getMessage());
                assertThrows(IllegalStateException.class, () -> tgt.endpoint());
            }
            // every handle closed: the file has no domain again
            VerbsException gone = assertThrows(VerbsException.class, () -> ctx.openXrcDomain(file));
            assertTrue(gone.is(Errno.EINVAL), gone.getMessage());
        }
    }

    private final Completions one = new Completions(1);

    /** The next completion on cq within 5 s. */
    private Completion next(CompletionQueue cq) {
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (System.nanoTime() < deadline) {
            if (cq.poll(one) == 1) {
                return one.get(0);
            }
            Thread.onSpinWait();
        }
        throw new AssertionError("no completion on " + cq + " within 5 s");
    }

    private Completion ok(CompletionQueue cq) {
        Completion wc = next(cq);
        if (!wc.ok()) {
            throw wc.error();
        }
        return wc;
    }
}
