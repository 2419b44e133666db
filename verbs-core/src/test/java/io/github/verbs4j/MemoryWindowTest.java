package io.github.verbs4j;

import io.github.verbs4j.raw.VerbsConstants;

import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Memory windows (ibv_alloc_mw, ibv_bind_mw, BIND_MW, LOCAL_INV, SEND_WITH_INV): data through a
 * window's rkey byte-exact, and the statuses of the bad flows. Runs where the provider has
 * memory windows (softrdma, rxe); skips on siw, which has none.
 */
class MemoryWindowTest {

    private static final String RXE_UNVERIFIED = "this bad flow's status is asserted as softrdma gives it;"
            + " the kernel substrates' answer has not been checked in the VM tier yet";

    /** A window of {@code type} in the rig's domain, or a skip where the provider has none. */
    private static MemoryWindow window(Rig rig, MemoryWindow.Type type) {
        try {
            return rig.pd.allocateMemoryWindow(type);
        } catch (UnsupportedOperationException e) {
            assumeTrue(false, rig.ctx.device().name() + " has no memory windows: " + e.getMessage());
        } catch (VerbsException e) {
            assumeTrue(!e.is(Errno.EOPNOTSUPP) && !e.is(Errno.ENOSYS), rig.ctx.device().name()
                    + " has no memory windows of " + type + ": " + e.getMessage());
            throw e;
        }
        return null;
    }

    /** B's memory that windows may be bound to (the rig's regions lack MW_BIND). */
    private static MemoryRegion bindable(Rig rig) {
        return rig.pd.allocate(8192, Access.LOCAL_WRITE, Access.MW_BIND);
    }

    @Test
    void type1WindowCarriesWriteAndReadThenItsOldRkeyIsRefused() {
        try (Rig rig = Rig.rc(); MemoryRegion mem = bindable(rig);
             MemoryWindow mw = window(rig, MemoryWindow.Type.TYPE_1)) {
            int first = mw.rkey();
            int rkey = rig.b.bindMemoryWindow(mw, mem.slice(1024, 2048), 11, true, Access.REMOTE_WRITE,
                    Access.REMOTE_READ);
            assertEquals((first & ~0xff) | ((first + 1) & 0xff), rkey, "ibv_bind_mw moves the key byte");
            assertEquals(rkey, mw.rkey());
            Completion bind = rig.ok(rig.cqB);
            assertEquals(WcOpcode.BIND_MW, bind.opcode());
            assertEquals(11, bind.wrId());
            RemoteBuffer remote = mw.remote();
            assertEquals(mem.address() + 1024, remote.address());
            assertEquals(2048, remote.length());

            for (int i = 0; i < 100; i++) {
                rig.mrA.segment().set(ValueLayout.JAVA_BYTE, i, (byte) (i * 7 + 1));
            }
            rig.a.postSend(SendRequest.rdmaWrite().id(1).local(rig.mrA, 0, 100).remote(remote, 10).signaled());
            rig.ok(rig.cqA);
            for (int i = 0; i < 100; i++) {
                assertEquals((byte) (i * 7 + 1), mem.segment().get(ValueLayout.JAVA_BYTE, 1024 + 10 + i), "byte " + i);
            }
            rig.a.postSend(SendRequest.rdmaRead().id(2).local(rig.mrA, 4096, 100).remote(remote, 10).signaled());
            rig.ok(rig.cqA);
            assertEquals(rig.mrA.segment().asSlice(0, 100).asByteBuffer(), rig.mrA.segment().asSlice(4096, 100).asByteBuffer());

            VerbsException busy = assertThrows(VerbsException.class, mem::close, "a region with a bound window stays");
            assertFalse(mem.isClosed());
            if (Rig.onSoftrdma()) {
                assertTrue(busy.is(Errno.EINVAL), busy.getMessage());
            }

            // a second bind moves the window and retires the rkey the peer holds
            int second = rig.b.bindMemoryWindow(mw, mem.slice(0, 512), 12, true, Access.REMOTE_WRITE);
            assertNotEquals(rkey, second);
            rig.ok(rig.cqB);
            rig.a.postSend(SendRequest.rdmaWrite().id(3).local(rig.mrA, 0, 8).remote(remote).signaled());
            Completion wc = rig.next(rig.cqA);
            assertEquals(WcStatus.REMOTE_ACCESS_ERROR, wc.status());
            assertEquals(3, wc.wrId());
        }
    }

    @Test
    void type2WindowBoundByRequestTakesAtomicsAndSendWithInvalidateRevokesIt() {
        try (Rig rig = Rig.rc(); MemoryRegion mem = bindable(rig);
             MemoryWindow mw = window(rig, MemoryWindow.Type.TYPE_2)) {
            int before = mw.rkey();
            rig.b.postSend(SendRequest.bindMemoryWindow(mw, mem.slice(0, 4096), Access.REMOTE_WRITE, Access.REMOTE_READ,
                    Access.REMOTE_ATOMIC).id(21).signaled());
            assertEquals((before & ~0xff) | ((before + 1) & 0xff), mw.rkey());
            Completion bind = rig.ok(rig.cqB);
            assertEquals(WcOpcode.BIND_MW, bind.opcode());
            assertEquals(21, bind.wrId());
            RemoteBuffer remote = mw.remote();

            mem.segment().set(ValueLayout.JAVA_LONG, 64, 40L);
            rig.a.postSend(SendRequest.fetchAndAdd(2).id(4).local(rig.mrA, 0, 8).remote(remote, 64).signaled());
            rig.ok(rig.cqA);
            assertEquals(40L, rig.mrA.segment().get(ValueLayout.JAVA_LONG, 0));
            assertEquals(42L, mem.segment().get(ValueLayout.JAVA_LONG, 64));

            rig.b.postRecv(ReceiveRequest.create().local(rig.mrB, 0, 256).id(77));
            rig.a.postSend(SendRequest.sendWithInvalidate(remote.rkey()).id(5).local(rig.mrA, 0, 32).signaled());
            Completion sent = rig.ok(rig.cqA);
            assertEquals(WcOpcode.SEND, sent.opcode());
            Completion recv = rig.ok(rig.cqB);
            assertEquals(77, recv.wrId());
            assertEquals(WcOpcode.RECV, recv.opcode());
            assertEquals(32, recv.byteLength());
            if (!Rig.onSoftrdma() && rig.ctx.device().name().startsWith("rxe")) {
                // rxe: the kernel's do_complete (rxe_resp.c) sets IB_WC_WITH_INVALIDATE, bit 2 of
                // the kernel's ib_wc_flags, and rdma-core's rxe provider copies wc_flags unchanged:
                // bit 2 is IBV_WC_IP_CSUM_OK in libibverbs, IBV_WC_WITH_INV is bit 3
                // (docs/substrates.md). The rkey is reported all the same.
                int both = VerbsConstants.IBV_WC_IP_CSUM_OK | VerbsConstants.IBV_WC_WITH_INV;
                assertEquals(VerbsConstants.IBV_WC_IP_CSUM_OK, recv.flags() & both, recv::toString);
                assertFalse(recv.hasInvalidate(), recv::toString);
            } else {
                assertTrue(recv.hasInvalidate(), recv::toString);
            }
            assertEquals(remote.rkey(), recv.invalidatedRkey());
            assertFalse(recv.hasImmediate());

            rig.a.postSend(SendRequest.rdmaWrite().id(6).local(rig.mrA, 0, 8).remote(remote).signaled());
            assertEquals(WcStatus.REMOTE_ACCESS_ERROR, rig.next(rig.cqA).status(), "an invalidated window's rkey");
        }
    }

    @Test
    void localInvalidateRevokesAType2Window() {
        try (Rig rig = Rig.rc(); MemoryRegion mem = bindable(rig);
             MemoryWindow mw = window(rig, MemoryWindow.Type.TYPE_2)) {
            rig.b.postSend(SendRequest.bindMemoryWindow(mw, mem.slice(0, 4096), Access.REMOTE_WRITE).id(1).signaled());
            rig.ok(rig.cqB);
            RemoteBuffer remote = mw.remote();
            rig.a.postSend(SendRequest.rdmaWrite().id(2).local(rig.mrA, 0, 8).remote(remote).signaled());
            rig.ok(rig.cqA);
            rig.b.postSend(SendRequest.localInvalidate(remote.rkey()).id(3).signaled());
            Completion inv = rig.ok(rig.cqB);
            assertEquals(WcOpcode.LOCAL_INV, inv.opcode());
            assertEquals(3, inv.wrId());
            rig.a.postSend(SendRequest.rdmaWrite().id(4).local(rig.mrA, 0, 8).remote(remote).signaled());
            assertEquals(WcStatus.REMOTE_ACCESS_ERROR, rig.next(rig.cqA).status());
        }
    }

    @Test
    void bindingARegionWithoutMwBindIsABindError() {
        try (Rig rig = Rig.rc(); MemoryWindow mw = window(rig, MemoryWindow.Type.TYPE_1)) {
            rig.b.bindMemoryWindow(mw, rig.mrB.slice(0, 4096), 8, true, Access.REMOTE_READ);
            Completion wc = rig.next(rig.cqB);
            assertEquals(WcStatus.MW_BIND_ERROR, wc.status());
            assertEquals(8, wc.wrId());
        }
    }

    @Test
    void bindingABoundType2WindowAgainIsABindError() {
        try (Rig rig = Rig.rc(); MemoryRegion mem = bindable(rig);
             MemoryWindow mw = window(rig, MemoryWindow.Type.TYPE_2)) {
            SendRequest bind = SendRequest.bindMemoryWindow(mw, mem.slice(0, 4096), Access.REMOTE_READ).signaled();
            rig.b.postSend(bind.id(1));
            rig.ok(rig.cqB);
            rig.b.postSend(bind.id(2));
            Completion wc = rig.next(rig.cqB);
            assertEquals(WcStatus.MW_BIND_ERROR, wc.status(), "a bound type 2 window must be invalidated first");
            assertEquals(2, wc.wrId());
        }
    }

    @Test
    void invalidatingWhatIsNotAType2WindowFails() {
        try (Rig rig = Rig.rc()) {
            assumeTrue(Rig.onSoftrdma(), RXE_UNVERIFIED);
            rig.b.postSend(SendRequest.localInvalidate(rig.mrB.rkey()).id(9).signaled());
            Completion wc = rig.next(rig.cqB);
            assertEquals(WcStatus.LOCAL_QP_OPERATION_ERROR, wc.status(), "a region's rkey cannot be invalidated");
        }
        try (Rig rig = Rig.rc()) {
            rig.b.postRecv(ReceiveRequest.create().local(rig.mrB, 0, 256).id(10));
            rig.a.postSend(SendRequest.sendWithInvalidate(rig.mrB.rkey()).id(11).local(rig.mrA, 0, 16).signaled());
            assertEquals(WcStatus.REMOTE_INVALID_REQUEST_ERROR, rig.next(rig.cqA).status());
            assertEquals(WcStatus.REMOTE_INVALID_REQUEST_ERROR, rig.next(rig.cqB).status());
        }
    }

    @Test
    void aType2WindowAnswersOnlyTheQueuePairItWasBoundThrough() {
        try (Rig rig = Rig.rc(); MemoryRegion mem = bindable(rig);
             MemoryWindow mw = window(rig, MemoryWindow.Type.TYPE_2)) {
            assumeTrue(Rig.onSoftrdma(), RXE_UNVERIFIED);
            // bound through A: requests arriving at B may not use it
            rig.a.postSend(SendRequest.bindMemoryWindow(mw, mem.slice(0, 4096), Access.REMOTE_WRITE).id(1).signaled());
            rig.ok(rig.cqA);
            rig.a.postSend(SendRequest.rdmaWrite().id(2).local(rig.mrA, 0, 8).remote(mw.remote()).signaled());
            assertEquals(WcStatus.REMOTE_ACCESS_ERROR, rig.next(rig.cqA).status());
        }
    }

    @Test
    void misuseIsRefusedInJava() {
        try (Rig rig = Rig.rc(); MemoryRegion mem = bindable(rig); MemoryWindow one = window(rig, MemoryWindow.Type.TYPE_1);
             MemoryWindow two = window(rig, MemoryWindow.Type.TYPE_2)) {
            assertThrows(IllegalArgumentException.class,
                    () -> rig.b.bindMemoryWindow(two, mem.slice(0, 64), 1, true, Access.REMOTE_READ), "type 2 via ibv_bind_mw");
            assertThrows(IllegalArgumentException.class,
                    () -> rig.b.postSend(SendRequest.bindMemoryWindow(one, mem.slice(0, 64), Access.REMOTE_READ)),
                    "type 1 via a BIND_MW request");
            assertThrows(IllegalArgumentException.class,
                    () -> rig.b.bindMemoryWindow(one, mem.slice(0, 64), 1, true, Access.ZERO_BASED), "zero-based type 1");
            assertThrows(IllegalArgumentException.class,
                    () -> SendRequest.bindMemoryWindow(two, mem.slice(0, 64), Access.MW_BIND), "not a window right");
            assertThrows(IllegalArgumentException.class,
                    () -> rig.b.bindMemoryWindow(one, mem.slice(0, 64), 1, true, Access.ON_DEMAND), "not a window right");
            IllegalStateException busy = assertThrows(IllegalStateException.class, rig.pd::close);
            assertTrue(busy.getMessage().contains("MemoryWindow"), busy.getMessage());
            try (ProtectionDomain other = rig.ctx.allocatePd(); MemoryWindow foreign = other.allocateMemoryWindow(
                    MemoryWindow.Type.TYPE_1)) {
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> rig.b.bindMemoryWindow(foreign, mem.slice(0, 64), 1, true, Access.REMOTE_READ));
                assertTrue(e.getMessage().contains("protection domain"), e.getMessage());
            }
            one.close();
            one.close();
            assertTrue(one.isClosed());
            assertThrows(IllegalStateException.class, one::remote);
            // no completion came from any refused call
            assertEquals(0, rig.cqB.poll(rig.wcs));
        }
    }

    // ---- rdma-core's tests/test_mr.py MWTest, as rxe runs it: each side's region registered with
    // LOCAL_WRITE | MW_BIND (no remote right of its own), a window over all of it bound with
    // REMOTE_WRITE | LOCAL_WRITE, RDMA WRITEs both ways through the windows, then the window
    // revoked and a WRITE through it refused

    private static final int MW_REGION = 4096;
    private static final int MW_ITERATIONS = 10;

    /** How a flow revokes the windows after the traffic. */
    private enum Revoke { EMPTY_REBIND, LOCAL_INVALIDATE, REMOTE_INVALIDATE, DEALLOC }

    private static void rdmaCoreWindowFlow(MemoryWindow.Type type, Revoke revoke) {
        try (Rig rig = Rig.rc();
             MemoryRegion memA = rig.pd.allocate(MW_REGION, Access.LOCAL_WRITE, Access.MW_BIND);
             MemoryRegion memB = rig.pd.allocate(MW_REGION, Access.LOCAL_WRITE, Access.MW_BIND);
             MemoryWindow mwA = window(rig, type);
             MemoryWindow mwB = window(rig, type)) {
            // each window bound through its own side's QP (a type 2 window answers only that QP)
            if (type == MemoryWindow.Type.TYPE_1) {
                rig.a.bindMemoryWindow(mwA, memA.all(), 1, true, Access.REMOTE_WRITE, Access.LOCAL_WRITE);
                rig.b.bindMemoryWindow(mwB, memB.all(), 2, true, Access.REMOTE_WRITE, Access.LOCAL_WRITE);
            } else {
                rig.a.postSend(SendRequest.bindMemoryWindow(mwA, memA.all(), Access.REMOTE_WRITE, Access.LOCAL_WRITE)
                        .id(1).signaled());
                rig.b.postSend(SendRequest.bindMemoryWindow(mwB, memB.all(), Access.REMOTE_WRITE, Access.LOCAL_WRITE)
                        .id(2).signaled());
            }
            assertEquals(WcOpcode.BIND_MW, rig.ok(rig.cqA).opcode());
            assertEquals(WcOpcode.BIND_MW, rig.ok(rig.cqB).opcode());
            RemoteBuffer toA = mwA.remote();
            RemoteBuffer toB = mwB.remote();
            assertEquals(memB.address(), toB.address());
            assertEquals(MW_REGION, toB.length());

            for (int i = 0; i < MW_ITERATIONS; i++) {
                int n = 1 + i * (MW_REGION / MW_ITERATIONS);
                byte[] ab = fillPattern(memA, n, i);
                rig.a.postSend(SendRequest.rdmaWrite().id(10 + i).local(memA, 0, n).remote(toB).signaled());
                rig.ok(rig.cqA);
                assertArrayEquals(ab, memB.segment().asSlice(0, n).toArray(ValueLayout.JAVA_BYTE), "A to B, iteration " + i);
                byte[] ba = fillPattern(memB, n, i + 500);
                rig.b.postSend(SendRequest.rdmaWrite().id(20 + i).local(memB, 0, n).remote(toA).signaled());
                rig.ok(rig.cqB);
                assertArrayEquals(ba, memA.segment().asSlice(0, n).toArray(ValueLayout.JAVA_BYTE), "B to A, iteration " + i);
            }

            RemoteBuffer revoked = toB;
            switch (revoke) {
                case EMPTY_REBIND -> {
                    // test_mr's invalidate_mw_type1: rebind with length 0 and no rights; even the
                    // window's new rkey then reaches nothing
                    int rkey = rig.b.bindMemoryWindow(mwB, memB.slice(0, 0), 3, true);
                    assertEquals(WcOpcode.BIND_MW, rig.ok(rig.cqB).opcode());
                    revoked = new RemoteBuffer(memB.address(), 8, rkey);
                }
                case LOCAL_INVALIDATE -> {
                    rig.b.postSend(SendRequest.localInvalidate(toB.rkey()).id(3).signaled());
                    assertEquals(WcOpcode.LOCAL_INV, rig.ok(rig.cqB).opcode());
                }
                case REMOTE_INVALIDATE -> {
                    rig.b.postRecv(ReceiveRequest.create().local(memB, 0, 64).id(4));
                    rig.a.postSend(SendRequest.sendWithInvalidate(toB.rkey()).id(5).local(memA, 0, 16).signaled());
                    assertEquals(WcOpcode.SEND, rig.ok(rig.cqA).opcode());
                    Completion recv = rig.ok(rig.cqB);
                    assertEquals(4, recv.wrId());
                    assertEquals(toB.rkey(), recv.invalidatedRkey());
                }
                case DEALLOC -> {
                    // test_mr's test_mw_type2_invalidate_dealloc: the bound window deallocated
                    mwB.close();
                    assertTrue(mwB.isClosed());
                }
            }
            rig.a.postSend(SendRequest.rdmaWrite().id(6).local(memA, 0, 8).remote(revoked).signaled());
            Completion refused = rig.next(rig.cqA);
            assertEquals(6, refused.wrId());
            assertEquals(WcStatus.REMOTE_ACCESS_ERROR, refused.status(), revoke + " of a " + type + " window");
            if (revoke != Revoke.EMPTY_REBIND) {
                // nothing is bound to B's region any more: it deregisters (a bound window would refuse it)
                memB.close();
                assertTrue(memB.isClosed());
            }
        }
    }

    /** Fills the first {@code n} bytes of {@code mr} with a pattern of {@code seed} and returns them. */
    private static byte[] fillPattern(MemoryRegion mr, int n, int seed) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * 13 + seed * 3 + 5);
        }
        MemorySegment.copy(MemorySegment.ofArray(b), 0, mr.segment(), 0, n);
        return b;
    }

    @Test
    void rdmaCoresType1FlowThenAnEmptyRebindAnswersNothing() {
        rdmaCoreWindowFlow(MemoryWindow.Type.TYPE_1, Revoke.EMPTY_REBIND);
    }

    @Test
    void rdmaCoresType2FlowThenLocalInvalidate() {
        rdmaCoreWindowFlow(MemoryWindow.Type.TYPE_2, Revoke.LOCAL_INVALIDATE);
    }

    @Test
    void rdmaCoresType2FlowThenRemoteInvalidate() {
        rdmaCoreWindowFlow(MemoryWindow.Type.TYPE_2, Revoke.REMOTE_INVALIDATE);
    }

    @Test
    void rdmaCoresType2FlowThenDeallocOfTheBoundWindow() {
        rdmaCoreWindowFlow(MemoryWindow.Type.TYPE_2, Revoke.DEALLOC);
    }

    /**
     * IBA C10-74, as rxe_check_bind_mw applies it: a window with REMOTE_WRITE (or REMOTE_ATOMIC)
     * binds only to a region registered with LOCAL_WRITE; REMOTE_READ needs no local right.
     */
    @Test
    void aWritableWindowNeedsLocalWriteOnTheRegion() {
        for (MemoryWindow.Type type : MemoryWindow.Type.values()) {
            try (Rig rig = Rig.rc(); MemoryRegion readOnly = rig.pd.allocate(MW_REGION, Access.MW_BIND);
                 MemoryWindow mw = window(rig, type)) {
                if (type == MemoryWindow.Type.TYPE_1) {
                    rig.b.bindMemoryWindow(mw, readOnly.all(), 7, true, Access.REMOTE_WRITE);
                } else {
                    rig.b.postSend(SendRequest.bindMemoryWindow(mw, readOnly.all(), Access.REMOTE_WRITE).id(7).signaled());
                }
                Completion wc = rig.next(rig.cqB);
                assertEquals(7, wc.wrId());
                assertEquals(WcStatus.MW_BIND_ERROR, wc.status(), type + " REMOTE_WRITE window on a region without LOCAL_WRITE");
            }
            try (Rig rig = Rig.rc(); MemoryRegion readOnly = rig.pd.allocate(MW_REGION, Access.MW_BIND);
                 MemoryWindow mw = window(rig, type)) {
                if (type == MemoryWindow.Type.TYPE_1) {
                    rig.b.bindMemoryWindow(mw, readOnly.slice(256, 1024), 8, true, Access.REMOTE_READ);
                } else {
                    rig.b.postSend(SendRequest.bindMemoryWindow(mw, readOnly.slice(256, 1024), Access.REMOTE_READ)
                            .id(8).signaled());
                }
                assertEquals(WcOpcode.BIND_MW, rig.ok(rig.cqB).opcode());
                byte[] expected = new byte[300];
                for (int i = 0; i < expected.length; i++) {
                    expected[i] = (byte) (255 - i);
                    readOnly.segment().set(ValueLayout.JAVA_BYTE, 256 + 100 + i, expected[i]);
                }
                rig.a.postSend(SendRequest.rdmaRead().id(9).local(rig.mrA, 0, 300).remote(mw.remote(), 100).signaled());
                rig.ok(rig.cqA);
                assertArrayEquals(expected, rig.mrA.segment().asSlice(0, 300).toArray(ValueLayout.JAVA_BYTE), type + " READ");
                // the window grants no write: the region's own lack of LOCAL_WRITE is never reached
                rig.a.postSend(SendRequest.rdmaWrite().id(10).local(rig.mrA, 0, 8).remote(mw.remote()).signaled());
                assertEquals(WcStatus.REMOTE_ACCESS_ERROR, rig.next(rig.cqA).status(), type + " WRITE through a read window");
            }
        }
    }
}
