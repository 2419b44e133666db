package io.github.verbs4j;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.abort;

/**
 * {@code ibv_rereg_mr} through {@link MemoryRegion#reregister()}: byte-exact data after each kind
 * of change (translation, protection domain, access), requests built before following the
 * region, the region re-parented in its domains, and the bad flows. On the system's rdma-core
 * the rxe and siw providers have no re-registration: there the test asserts the status they
 * give (IBV_REREG_MR_ERR_CMD, EOPNOTSUPP) and skips the rest, saying so.
 */
class ReregistrationTest {

    /**
     * Runs a re-registration; where the provider has none (the system's rxe or siw), asserts
     * what libibverbs answers for it and skips the calling test.
     */
    private static void rereg(MemoryRegion mr, Executable apply) throws Throwable {
        if (Rig.onSoftrdma()) {
            apply.execute();
            return;
        }
        try {
            apply.execute();
        } catch (VerbsException e) {
            if (e.is(Errno.EOPNOTSUPP)) {
                assertTrue(e.getMessage().contains("ibv_rereg_mr") && e.getMessage().contains("IBV_REREG_MR_ERR_CMD"),
                        e.getMessage());
                abort(mr.protectionDomain().context().device().name() + ": the provider has no ibv_rereg_mr"
                        + " (libibverbs answers IBV_REREG_MR_ERR_CMD with EOPNOTSUPP, asserted): " + e.getMessage());
            }
            throw e;
        }
    }

    private static byte[] fill(MemorySegment s, long offset, int n, int seed) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * 31 + seed);
            s.set(ValueLayout.JAVA_BYTE, offset + i, b[i]);
        }
        return b;
    }

    private static byte[] read(MemorySegment s, long offset, int n) {
        return s.asSlice(offset, n).toArray(ValueLayout.JAVA_BYTE);
    }

    @Test
    void translationMovesTheRegionAndRequestsBuiltBeforeFollowIt() throws Throwable {
        try (Rig rig = Rig.rc()) {
            MemoryRegion mr = rig.mrB;
            MemorySegment old = mr.segment();
            int lkey = mr.lkey();
            int rkey = mr.rkey();
            // built and posted once before: B writes 100 bytes at offset 64 of its region into A
            SendRequest push = SendRequest.rdmaWrite().id(1).local(mr, 64, 100).remote(rig.mrA.remote()).signaled();
            fill(old, 64, 100, 1);
            rig.b.postSend(push);
            rig.ok(rig.cqB);

            MemorySegment fresh = Arena.ofAuto().allocate(8192, 4096);
            rereg(mr, () -> mr.reregister().memory(fresh).apply());
            assertEquals(fresh.address(), mr.address());
            assertEquals(8192, mr.length());
            assertSame(fresh, mr.segment());
            assertFalse(old.scope().isAlive(), "the memory the region owned (pd.allocate) is freed with the change");
            if (Rig.onSoftrdma()) {
                assertEquals(lkey, mr.lkey(), "softrdma keeps the keys");
                assertEquals(rkey, mr.rkey(), "softrdma keeps the keys");
            }
            assertEquals(new RemoteBuffer(fresh.address(), 8192, mr.rkey()), mr.remote());

            // a peer's WRITE lands in the new memory
            byte[] sent = fill(rig.mrA.segment(), 0, 4096, 2);
            rig.a.postSend(SendRequest.rdmaWrite().id(2).local(rig.mrA, 0, 4096).remote(mr.remote(), 1000).signaled());
            rig.ok(rig.cqA);
            assertArrayEquals(sent, read(fresh, 1000, 4096));

            // the request built before reads offset 64 of the new memory
            byte[] pushed = fill(fresh, 64, 100, 3);
            rig.b.postSend(push);
            rig.ok(rig.cqB);
            assertArrayEquals(pushed, read(rig.mrA.segment(), 0, 100));

            // shrunk below an entry: refused at the post, before the device
            SendRequest far = SendRequest.rdmaWrite().id(3).local(mr, 4096, 4096).remote(rig.mrA.remote()).signaled();
            MemorySegment small = Arena.ofAuto().allocate(4096, 4096);
            mr.reregister().memory(small).apply();
            IndexOutOfBoundsException e = assertThrows(IndexOutOfBoundsException.class, () -> rig.b.postSend(far));
            assertTrue(e.getMessage().contains("re-registration"), e.getMessage());
        }
    }

    @Test
    void accessChangeGrantsAndRevokesRemoteRead() throws Throwable {
        try (Rig rig = Rig.rc(); MemoryRegion mr = rig.pd.allocate(4096, Access.LOCAL_WRITE)) {
            byte[] data = fill(mr.segment(), 0, 256, 4);
            rereg(mr, () -> mr.reregister().access(Access.LOCAL_WRITE, Access.REMOTE_READ).apply());
            assertEquals(java.util.Set.of(Access.LOCAL_WRITE, Access.REMOTE_READ), mr.access());
            rig.a.postSend(SendRequest.rdmaRead().id(1).local(rig.mrA, 0, 256).remote(mr.remote()).signaled());
            rig.ok(rig.cqA);
            assertArrayEquals(data, read(rig.mrA.segment(), 0, 256));

            mr.reregister().access(Access.LOCAL_WRITE).apply();
            assertEquals(java.util.Set.of(Access.LOCAL_WRITE), mr.access());
            rig.a.postSend(SendRequest.rdmaRead().id(2).local(rig.mrA, 0, 256).remote(mr.remote()).signaled());
            Completion wc = rig.next(rig.cqA);
            assertEquals(WcStatus.REMOTE_ACCESS_ERROR, wc.status());
            assertEquals(2, wc.wrId());
        }
    }

    @Test
    void protectionDomainChangeReparentsTheRegion() throws Throwable {
        try (Rig rig = Rig.rc()) {
            ProtectionDomain other = rig.ctx.allocatePd();
            MemoryRegion mr = other.allocate(4096, Access.LOCAL_WRITE);
            try {
                SendRequest write = SendRequest.rdmaWrite().id(1).local(mr, 0, 512).remote(rig.mrB.remote(), 8).signaled();
                IllegalArgumentException wrongPd = assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(write));
                assertTrue(wrongPd.getMessage().contains("another protection domain"), wrongPd.getMessage());

                rereg(mr, () -> mr.reregister().protectionDomain(rig.pd).apply());
                assertSame(rig.pd, mr.protectionDomain());
                other.close(); // no longer its parent
                assertTrue(other.isClosed());
                IllegalStateException parent = assertThrows(IllegalStateException.class, rig.pd::close);
                assertTrue(parent.getMessage().contains(mr.toString()), "the new domain names the region: "
                        + parent.getMessage());

                byte[] data = fill(mr.segment(), 0, 512, 5);
                rig.a.postSend(write); // the same request, checked again
                rig.ok(rig.cqA);
                assertArrayEquals(data, read(rig.mrB.segment(), 8, 512));
            } finally {
                mr.close();
                other.close();
            }
        }
    }

    @Test
    void badFlowsAreRefusedAndLeaveTheRegionAsItWas() throws Throwable {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd();
             MemoryRegion mr = pd.allocate(8192, Access.LOCAL_WRITE, Access.MW_BIND)) {
            long address = mr.address();
            int lkey = mr.lkey();
            assertThrows(IllegalArgumentException.class, () -> mr.reregister().apply(), "nothing to change");
            IllegalArgumentException access = assertThrows(IllegalArgumentException.class,
                    () -> mr.reregister().access(Access.REMOTE_WRITE).apply());
            assertTrue(access.getMessage().contains("LOCAL_WRITE"), access.getMessage());
            try (Arena confined = Arena.ofConfined()) {
                MemorySegment closeable = confined.allocate(4096, 4096);
                IllegalArgumentException remote = assertThrows(IllegalArgumentException.class,
                        () -> mr.reregister().memory(closeable).access(Access.LOCAL_WRITE, Access.REMOTE_WRITE).apply());
                assertTrue(remote.getMessage().contains("unsafe()"), remote.getMessage());
            }
            ProtectionDomain closed = ctx.allocatePd();
            closed.close();
            assertThrows(IllegalStateException.class, () -> mr.reregister().protectionDomain(closed).apply());
            try (Context ctx2 = Rig.open(); ProtectionDomain foreign = ctx2.allocatePd()) {
                IllegalArgumentException owner = assertThrows(IllegalArgumentException.class,
                        () -> mr.reregister().protectionDomain(foreign).apply());
                assertTrue(owner.getMessage().contains("another context"), owner.getMessage());
                assertTrue(foreign.life.dependents().isEmpty(), "a refused move leaves the domain without the region");
            }
            assertThrows(IllegalArgumentException.class,
                    () -> mr.reregister().memory(MemorySegment.ofArray(new byte[64])).apply(), "heap memory");

            // a region with a bound memory window: the device refuses (EBUSY on softrdma)
            if (Rig.onSoftrdma()) {
                try (CompletionQueue cq = ctx.createCq(8);
                     QueuePair qp = pd.queuePair(QpType.RC).cq(cq).maxSendWr(8).maxRecvWr(8).build();
                     MemoryWindow mw = pd.allocateMemoryWindow(MemoryWindow.Type.TYPE_1)) {
                    qp.connect(qp.endpoint(), ConnectOptions.defaults());
                    qp.bindMemoryWindow(mw, mr.slice(0, 4096), 1, true, Access.REMOTE_READ);
                    Completions wcs = new Completions(1);
                    long deadline = System.nanoTime() + 5_000_000_000L;
                    while (cq.poll(wcs) == 0 && System.nanoTime() < deadline) {
                        Thread.onSpinWait();
                    }
                    assertTrue(wcs.get(0).ok(), "the bind completed");
                    VerbsException busy = assertThrows(VerbsException.class,
                            () -> mr.reregister().access(Access.LOCAL_WRITE, Access.REMOTE_READ).apply());
                    assertTrue(busy.is(Errno.EBUSY), busy.getMessage());
                    assertTrue(busy.getMessage().contains("ibv_rereg_mr")
                            && busy.getMessage().contains("IBV_REREG_MR_ERR_CMD"), busy.getMessage());
                    ProtectionDomain pd2 = ctx.allocatePd();
                    assertThrows(VerbsException.class, () -> mr.reregister().protectionDomain(pd2).apply());
                    pd2.close(); // the refused move did not leave the region registered with it
                    assertTrue(pd2.isClosed());
                }
            }
            assertEquals(address, mr.address());
            assertEquals(lkey, mr.lkey());
            assertSame(pd, mr.protectionDomain());
            assertEquals(java.util.Set.of(Access.LOCAL_WRITE, Access.MW_BIND), mr.access());
            mr.close();
            assertThrows(IllegalStateException.class, mr::reregister, "a closed region");
        }
    }

    @Test
    void udSendLongerThanTheActiveMtuIsRefusedAtPost() {
        try (Rig rig = Rig.create(QpType.UD, ConnectOptions.defaults(), Access.LOCAL_WRITE)) {
            int mtu = rig.ctx.port(1).query().activeMtu().bytes();
            Endpoint eb = rig.b.endpoint(1, 1);
            try (AddressHandle ah = rig.pd.createAh(AddressVector.to(eb).port(1).sgidIndex(1))) {
                SendRequest big = SendRequest.send().id(1).local(rig.mrA, 0, mtu + 1)
                        .ud(ah, eb.qpn(), ConnectOptions.DEFAULT_QKEY).signaled();
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(big));
                assertTrue(e.getMessage().contains("active MTU (" + mtu + " bytes)"), e.getMessage());
                assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(big), "refused at every post");

                // exactly the MTU is carried, byte-exact
                byte[] data = fill(rig.mrA.segment(), 0, mtu, 6);
                rig.b.postRecv(ReceiveRequest.create().id(2).local(rig.mrB, 0, 40 + mtu));
                rig.a.postSend(big.local(rig.mrA, 0, mtu));
                rig.ok(rig.cqA);
                Completion r = rig.ok(rig.cqB);
                assertEquals(40 + mtu, r.byteLength());
                assertArrayEquals(data, read(rig.mrB.segment(), 40, mtu));
            }
        }
    }
}
