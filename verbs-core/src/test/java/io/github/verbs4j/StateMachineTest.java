package io.github.verbs4j;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** QP transitions: the attributes each needs, illegal orders, and what the device then reports. */
class StateMachineTest {

    private Context ctx;
    private ProtectionDomain pd;
    private CompletionQueue cq;
    private MemoryRegion mr;

    @BeforeEach
    void open() {
        ctx = Rig.open();
        pd = ctx.allocatePd();
        cq = ctx.createCq(16);
        mr = pd.allocate(4096);
    }

    @AfterEach
    void close() {
        mr.close();
        cq.close();
        pd.close();
        ctx.close();
    }

    private QueuePair qp(QpType type) {
        return pd.queuePair(type).cq(cq).build();
    }

    @Test
    void newQpIsInReset() {
        try (QueuePair qp = qp(QpType.RC)) {
            assertEquals(QpState.RESET, qp.state());
            assertEquals(QpState.RESET, qp.trackedState());
            assertTrue(qp.qpNumber() > 0 && qp.qpNumber() <= 0xffffff);
        }
    }

    @Test
    void initNeedsPortAndAccessForRc() {
        try (QueuePair qp = qp(QpType.RC)) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> qp.toInit(new QpAttr().pkeyIndex(0)));
            assertEquals("toInit of a RC QP needs port (IBV_QP_PORT), access (IBV_QP_ACCESS_FLAGS)", e.getMessage());
            assertEquals(QpState.RESET, qp.state(), "nothing reached the device");
        }
    }

    @Test
    void initOfUdNeedsQkeyAndRefusesAccess() {
        Rig.assumeNotIwarp(ctx, "it has no UD queue pairs");
        try (QueuePair qp = qp(QpType.UD)) {
            IllegalArgumentException missing = assertThrows(IllegalArgumentException.class,
                    () -> qp.toInit(new QpAttr().port(1).pkeyIndex(0)));
            assertEquals("toInit of a UD QP needs qkey (IBV_QP_QKEY)", missing.getMessage());
            IllegalArgumentException unexpected = assertThrows(IllegalArgumentException.class,
                    () -> qp.toInit(new QpAttr().port(1).pkeyIndex(0).qkey(1).access(Access.REMOTE_WRITE)));
            assertEquals("toInit of a UD QP does not take access (IBV_QP_ACCESS_FLAGS)", unexpected.getMessage());
        }
    }

    @Test
    void rtrOfRcNamesEveryMissingAttribute() {
        Rig.assumeNotIwarp(ctx, "this test reads the QP's state back, and siw's query_qp reports none"
                + " (every QP reads RESET)");
        try (QueuePair qp = qp(QpType.RC)) {
            qp.toInit(new QpAttr().port(1).pkeyIndex(0).access(Access.REMOTE_WRITE));
            assertEquals(QpState.INIT, qp.state());
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> qp.toRtr(new QpAttr().pathMtu(Mtu.MTU_1024).rqPsn(0)));
            assertEquals("toRtr of a RC QP needs addressVector (IBV_QP_AV), destQpNum (IBV_QP_DEST_QPN),"
                    + " maxDestRdAtomic (IBV_QP_MAX_DEST_RD_ATOMIC), minRnrTimer (IBV_QP_MIN_RNR_TIMER)", e.getMessage());
        }
    }

    @Test
    void rtrOfUcDoesNotTakeRcOnlyAttributes() {
        Rig.assumeNotIwarp(ctx, "it has no UC queue pairs");
        try (QueuePair qp = qp(QpType.UC)) {
            qp.toInit(new QpAttr().port(1).pkeyIndex(0).access(Access.REMOTE_WRITE));
            Endpoint self = qp.endpoint();
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> qp.toRtr(new QpAttr().pathMtu(Mtu.MTU_1024).rqPsn(0).destQpNum(self.qpn())
                            .addressVector(AddressVector.to(self).port(1).sgidIndex(1)).minRnrTimer(12)));
            assertEquals("toRtr of a UC QP does not take minRnrTimer (IBV_QP_MIN_RNR_TIMER)", e.getMessage());
        }
    }

    @Test
    void roceNeedsAGrhAtRtr() {
        Rig.assumeNotIwarp(ctx, "this test reads the QP's state back, and siw's query_qp reports none"
                + " (every QP reads RESET)");
        assertEquals(LinkLayer.ETHERNET, ctx.port(1).query().linkLayer(), "softrdma is RoCE-style");
        try (QueuePair qp = qp(QpType.RC)) {
            qp.toInit(new QpAttr().port(1).pkeyIndex(0).access());
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> qp.toRtr(new QpAttr().pathMtu(Mtu.MTU_1024).rqPsn(0).destQpNum(1).maxDestRdAtomic(1)
                            .minRnrTimer(12).addressVector(new AddressVector().port(1).dlid(0))));
            assertTrue(e.getMessage().contains("needs a GRH"), e.getMessage());
            assertEquals(QpState.INIT, qp.state());
        }
    }

    @Test
    void rtsNeedsRtrFirst() {
        try (QueuePair qp = qp(QpType.RC)) {
            IllegalStateException e = assertThrows(IllegalStateException.class,
                    () -> qp.toRts(new QpAttr().sqPsn(0).timeout(14).retryCount(7).rnrRetry(7).maxRdAtomic(1)));
            assertEquals("toRts needs " + qp + " in RTR, it is in RESET", e.getMessage());
            IllegalStateException e2 = assertThrows(IllegalStateException.class,
                    () -> qp.toRtr(new QpAttr()));
            assertEquals("toRtr needs " + qp + " in INIT, it is in RESET", e2.getMessage());
        }
    }

    @Test
    void fullRcWalkThroughTheTypedTransitionsThenErrorAndReset() {
        Rig.assumeHandConnect(ctx);
        try (QueuePair a = qp(QpType.RC); QueuePair b = qp(QpType.RC)) {
            Endpoint eb = b.endpoint(1, 1);
            a.toInit(new QpAttr().port(1).pkeyIndex(0).access(Access.REMOTE_READ));
            a.toRtr(new QpAttr().pathMtu(Mtu.MTU_1024).destQpNum(eb.qpn()).rqPsn(eb.psn()).maxDestRdAtomic(2)
                    .minRnrTimer(14).addressVector(AddressVector.to(eb).port(1).sgidIndex(1)));
            a.toRts(new QpAttr().sqPsn(0x123456).timeout(10).retryCount(5).rnrRetry(3).maxRdAtomic(2));
            QpAttributes q = a.query();
            assertEquals(QpState.RTS, q.state());
            assertEquals(Mtu.MTU_1024, q.pathMtu());
            assertEquals(eb.qpn(), q.destQpNum());
            assertEquals(eb.psn(), q.rqPsn());
            assertEquals(0x123456, q.sqPsn());
            assertEquals(10, q.timeout());
            assertEquals(5, q.retryCount());
            assertEquals(3, q.rnrRetry());
            assertEquals(14, q.minRnrTimer());
            assertEquals(1, q.portNumber());
            assertTrue(q.access().contains(Access.REMOTE_READ));
            a.toError();
            assertEquals(QpState.ERR, a.state());
            a.reset();
            assertEquals(QpState.RESET, a.state());
            // from RESET the walk can start again
            a.toInit(new QpAttr().port(1).pkeyIndex(0).access());
            assertEquals(QpState.INIT, a.state());
        }
    }

    @Test
    void deviceRejectionIsAVerbsExceptionWithErrno() {
        try (QueuePair qp = qp(QpType.RC)) {
            // port 9 does not exist: Java cannot know, the device says EINVAL
            VerbsException e = assertThrows(VerbsException.class,
                    () -> qp.toInit(new QpAttr().port(9).pkeyIndex(0).access()));
            assertEquals("ibv_modify_qp", e.verb());
            assertEquals("EINVAL", e.errnoName());
            assertEquals(22, e.errno());
            assertEquals(QpState.RESET, qp.trackedState());
        }
    }

    @Test
    void connectIsForConnectedTypesAndActivateForUd() {
        Rig.assumeNotIwarp(ctx, "it has no UD queue pairs");
        try (QueuePair rc = qp(QpType.RC); QueuePair ud = qp(QpType.UD)) {
            assertThrows(IllegalStateException.class, rc::activate);
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> ud.connect(rc.endpoint()));
            assertTrue(e.getMessage().contains("UD QPs are not connected"), e.getMessage());
            ud.activate();
            assertEquals(QpState.RTS, ud.state());
            assertEquals(ConnectOptions.DEFAULT_QKEY, ud.query().qkey());
        }
    }

    @Test
    void postingToAQpBeforeRtsIsRefusedInJava() {
        try (QueuePair qp = qp(QpType.RC)) {
            SendRequest send = SendRequest.send().local(mr, 0, 8);
            ReceiveRequest recv = ReceiveRequest.create().local(mr, 0, 8);
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> qp.postSend(send));
            assertTrue(e.getMessage().contains("in state RESET"), e.getMessage());
            IllegalStateException r = assertThrows(IllegalStateException.class, () -> qp.postRecv(recv));
            assertTrue(r.getMessage().contains("in state RESET"), r.getMessage());
            qp.toInit(new QpAttr().port(1).pkeyIndex(0).access());
            assertThrows(IllegalStateException.class, () -> qp.postSend(send));
            qp.postRecv(recv); // receives may be posted from INIT on
        }
    }

    @Test
    void postsFollowEveryStateChangeAndTheClose() {
        // a post reads one field derived from the QP state and the owner's open state
        // (QueuePair.postable): every change of either must reach it, both ways
        try (Rig rig = Rig.rc()) {
            SendRequest write = SendRequest.rdmaWrite().local(rig.mrA, 0, 8).remote(rig.mrB.remote(), 0).signaled();
            ReceiveRequest recv = ReceiveRequest.create().local(rig.mrA, 64, 8);
            rig.a.postSend(write.id(1));
            assertEquals(1, rig.ok(rig.cqA).wrId());

            rig.a.toError();
            rig.a.postSend(write.id(2)); // ERR takes sends: they complete flushed
            Completion flushed = rig.next(rig.cqA);
            assertEquals(2, flushed.wrId());
            assertEquals(WcStatus.WR_FLUSH_ERROR, flushed.status());

            rig.a.reset();
            IllegalStateException send = assertThrows(IllegalStateException.class, () -> rig.a.postSend(write));
            assertEquals("cannot post a send request to " + rig.a + " in state RESET: sends need RTS (connect() or"
                    + " toRts() first)", send.getMessage());
            IllegalStateException receive = assertThrows(IllegalStateException.class, () -> rig.a.postRecv(recv));
            assertEquals("cannot post a receive request to " + rig.a + " in state RESET: move it to INIT first",
                    receive.getMessage());

            rig.a.init();
            rig.a.postRecv(recv.id(3)); // from INIT on
            IllegalStateException inInit = assertThrows(IllegalStateException.class, () -> rig.a.postSend(write));
            assertTrue(inInit.getMessage().contains("in state INIT"), inInit.getMessage());

            rig.a.close();
            IllegalStateException closedSend = assertThrows(IllegalStateException.class, () -> rig.a.postSend(write));
            assertEquals(rig.a + " is closed", closedSend.getMessage());
            IllegalStateException closedRecv = assertThrows(IllegalStateException.class, () -> rig.a.postRecv(recv));
            assertEquals(rig.a + " is closed", closedRecv.getMessage());
        }
    }

    @Test
    void connectTwiceIsRefused() {
        try (Rig rig = Rig.rc()) {
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> rig.a.connect(rig.b.endpoint()));
            assertEquals("connect needs " + rig.a + " in RESET or INIT, it is in RTS", e.getMessage());
        }
    }
}
