package io.github.verbs4j;

import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A request checked at one post is not checked in full again while unchanged; these are the
 * cases where it changed, or what it names changed, after a successful post: each is refused at
 * the next post exactly as a fresh request would be, before the device sees anything.
 */
class RevalidationTest {

    /** Posts {@code wr} on A, expects its one completion, successful. */
    private static void postOk(Rig rig, SendRequest wr) {
        rig.a.postSend(wr);
        Completion wc = rig.next(rig.cqA);
        assertEquals(WcStatus.SUCCESS, wc.status(), wc::toString);
        assertEquals(wr.id(), wc.wrId());
    }

    @Test
    void repostingUnchangedRequestsDeliversEveryTime() {
        try (Rig rig = Rig.rc()) {
            MemorySegment src = rig.mrA.segment();
            MemorySegment dst = rig.mrB.segment();
            SendRequest write = SendRequest.rdmaWrite().local(rig.mrA, 0, 8).remote(rig.mrB.remote(), 64).signaled();
            for (long i = 0; i < 5; i++) {
                src.set(ValueLayout.JAVA_LONG, 0, 0x1000 + i);
                postOk(rig, write.id(i));
                assertEquals(0x1000 + i, dst.get(ValueLayout.JAVA_LONG, 64));
            }
            // a flag the checks do not read may change between posts: still posted, still exact
            write.signaled(false);
            src.set(ValueLayout.JAVA_LONG, 0, 77);
            rig.a.postSend(write.id(5));
            write.signaled(true);
            postOk(rig, write.id(6));
            assertEquals(77, dst.get(ValueLayout.JAVA_LONG, 64));
        }
    }

    @Test
    void aRegionClosedAfterAPostIsRefusedAtTheNext() {
        try (Rig rig = Rig.rc()) {
            MemoryRegion temp = rig.pd.allocate(64);
            SendRequest send = SendRequest.send().local(temp, 0, 8).signaled();
            ReceiveRequest recv = ReceiveRequest.create().local(temp, 8, 8);
            rig.b.postRecv(recv.id(1));
            postOk(rig, send.id(2));
            assertEquals(WcStatus.SUCCESS, rig.next(rig.cqB).status());
            rig.b.postRecv(recv.id(3));
            rig.cqB.poll(rig.wcs);
            temp.close();
            IllegalStateException s = assertThrows(IllegalStateException.class, () -> rig.a.postSend(send));
            assertEquals(temp + " is closed", s.getMessage());
            IllegalStateException r = assertThrows(IllegalStateException.class, () -> rig.b.postRecv(recv));
            assertEquals(temp + " is closed", r.getMessage());
            assertEquals(0, rig.cqA.poll(rig.wcs), "nothing was posted");
        }
    }

    @Test
    void aClosedRegionInTheMiddleOfAPostedChainStopsTheWholeChain() {
        try (Rig rig = Rig.rc()) {
            MemoryRegion temp = rig.pd.allocate(64);
            SendRequest last = SendRequest.rdmaWrite().local(rig.mrA, 16, 8).remote(rig.mrB.remote(), 16).signaled();
            SendRequest middle = SendRequest.rdmaWrite().local(temp, 0, 8).remote(rig.mrB.remote(), 8).next(last);
            SendRequest head = SendRequest.rdmaWrite().local(rig.mrA, 0, 8).remote(rig.mrB.remote(), 0).next(middle);
            postOk(rig, last.id(1));
            // the chain once more: every member already checked
            last.id(2);
            rig.a.postSend(head);
            assertEquals(2, rig.next(rig.cqA).wrId());
            temp.close();
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> rig.a.postSend(head));
            assertEquals(temp + " is closed", e.getMessage());
            assertEquals(0, rig.cqA.poll(rig.wcs), "nothing was posted");
            // repaired: posts again
            middle.local(rig.mrA, 8, 8);
            last.id(3);
            rig.a.postSend(head);
            assertEquals(3, rig.next(rig.cqA).wrId());
        }
    }

    @Test
    void aMutatedMemberOfAPostedChainIsCheckedAgain() {
        try (Rig rig = Rig.rc()) {
            SendRequest last = SendRequest.rdmaWrite().local(rig.mrA, 8, 8).remote(rig.mrB.remote(), 8).signaled();
            SendRequest head = SendRequest.fetchAndAdd(1).local(rig.mrA, 0, 8).remote(rig.mrB.remote(), 0).next(last);
            last.id(1);
            rig.a.postSend(head);
            assertEquals(1, rig.next(rig.cqA).wrId());
            head.remote(rig.mrB.remote(), 4);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(head));
            assertTrue(e.getMessage().contains("8-byte aligned"), e.getMessage());
            head.remote(rig.mrB.remote(), 0);
            last.local(rig.mrA, 8, 4096).inline(true);
            IllegalArgumentException tooLong = assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(head));
            assertTrue(tooLong.getMessage().contains("inlines 4096 bytes"), tooLong.getMessage());
            assertEquals(0, rig.cqA.poll(rig.wcs), "nothing was posted");
        }
    }

    @Test
    void anOpcodeChangedAfterAPostIsCheckedAgain() {
        try (Rig rig = Rig.rc()) {
            SendRequest wr = SendRequest.send().id(9).local(rig.mrA, 0, 8).signaled();
            rig.b.postRecv(ReceiveRequest.create().local(rig.mrB, 0, 8));
            postOk(rig, wr);
            wr.opcode(SendOpcode.RDMA_WRITE);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(wr));
            assertEquals("RDMA_WRITE needs remote(address, rkey) (request 9)", e.getMessage());
            wr.opcode(SendOpcode.ATOMIC_FETCH_AND_ADD).remote(rig.mrB.remote(), 0).local(rig.mrA, 0, 16);
            IllegalArgumentException atomic = assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(wr));
            assertTrue(atomic.getMessage().contains("exactly one local buffer of 8 bytes"), atomic.getMessage());
        }
    }

    @Test
    void aBufferMovedToAnotherProtectionDomainAfterAPostIsRefused() {
        try (Rig rig = Rig.rc(); ProtectionDomain other = rig.ctx.allocatePd(); MemoryRegion foreign = other.allocate(64)) {
            SendRequest wr = SendRequest.rdmaWrite().local(rig.mrA, 0, 8).remote(rig.mrB.remote()).signaled();
            ReceiveRequest recv = ReceiveRequest.create().local(rig.mrB, 0, 8);
            rig.b.postRecv(recv);
            postOk(rig, wr);
            wr.local(foreign, 0, 8);
            recv.sge(0, foreign, 0, 8);
            IllegalArgumentException s = assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(wr));
            assertTrue(s.getMessage().contains("another protection domain"), s.getMessage());
            IllegalArgumentException r = assertThrows(IllegalArgumentException.class, () -> rig.b.postRecv(recv));
            assertTrue(r.getMessage().contains("another protection domain"), r.getMessage());
            assertEquals(0, rig.cqA.poll(rig.wcs), "nothing was posted");
        }
    }

    @Test
    void callerMemoryWhoseArenaClosedAfterAPostIsRefused() {
        try (Rig rig = Rig.rc()) {
            Arena arena = Arena.ofShared();
            MemoryRegion mr = rig.pd.register(arena.allocate(4096, 4096), Access.LOCAL_WRITE);
            Arena inlineArena = Arena.ofConfined();
            MemorySegment bytes = inlineArena.allocate(8);
            try {
                SendRequest wr = SendRequest.rdmaWrite().local(mr, 0, 64).remote(rig.mrB.remote()).signaled();
                SendRequest inl = SendRequest.rdmaWrite().inlineData(bytes).remote(rig.mrB.remote(), 128).signaled();
                ReceiveRequest recv = ReceiveRequest.create().local(mr, 0, 64);
                rig.b.postRecv(ReceiveRequest.create().local(rig.mrB, 0, 8)); // not used by WRITEs
                rig.a.postRecv(recv);
                postOk(rig, wr.id(1));
                postOk(rig, inl.id(2));
                arena.close();
                inlineArena.close();
                IllegalStateException e = assertThrows(IllegalStateException.class, () -> rig.a.postSend(wr));
                assertTrue(e.getMessage().contains("arena of its memory was closed"), e.getMessage());
                IllegalStateException i = assertThrows(IllegalStateException.class, () -> rig.a.postSend(inl));
                assertTrue(i.getMessage().contains("arena of its inline data was closed"), i.getMessage());
                assertThrows(IllegalStateException.class, () -> rig.a.postRecv(recv));
                assertEquals(0, rig.cqA.poll(rig.wcs), "nothing was posted");
            } finally {
                mr.close();
            }
        }
    }

    @Test
    void aRequestCheckedForOneQueuePairIsCheckedAgainForAnother() {
        try (Rig rc = Rig.rc();
             Rig uc = Rig.create(QpType.UC, ConnectOptions.defaults(), Access.LOCAL_WRITE, Access.REMOTE_WRITE)) {
            SendRequest read = SendRequest.rdmaRead().id(4).local(rc.mrA, 0, 8).remote(rc.mrB.remote()).signaled();
            postOk(rc, read);
            // same request, a UC QP of another domain: the opcode and the region are refused again
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> uc.a.postSend(read));
            assertEquals("RDMA_READ is not supported on UC QPs (request 4)", e.getMessage());
            SendRequest write = SendRequest.rdmaWrite().local(rc.mrA, 0, 8).remote(rc.mrB.remote()).signaled();
            postOk(rc, write);
            IllegalArgumentException pd = assertThrows(IllegalArgumentException.class, () -> uc.a.postSend(write));
            assertTrue(pd.getMessage().contains("another protection domain"), pd.getMessage());
            ReceiveRequest recv = ReceiveRequest.create().local(rc.mrB, 0, 8);
            rc.b.postRecv(recv);
            assertThrows(IllegalArgumentException.class, () -> uc.b.postRecv(recv));
        }
    }

    /** A chain of three WRITEs (the last signaled) into B at 0, 8 and 16, posted twice: checked once, then re-posted as known valid. */
    private static SendRequest[] postedChain(Rig rig) {
        SendRequest last = SendRequest.rdmaWrite().local(rig.mrA, 16, 8).remote(rig.mrB.remote(), 16).signaled();
        SendRequest middle = SendRequest.rdmaWrite().local(rig.mrA, 8, 8).remote(rig.mrB.remote(), 8).next(last);
        SendRequest head = SendRequest.rdmaWrite().local(rig.mrA, 0, 8).remote(rig.mrB.remote(), 0).next(middle);
        for (long i = 1; i <= 2; i++) {
            rig.mrA.segment().set(ValueLayout.JAVA_LONG, 8, 0x500 + i);
            rig.a.postSend(head);
            Completion wc = rig.next(rig.cqA);
            assertEquals(WcStatus.SUCCESS, wc.status(), wc::toString);
            assertEquals(0x500 + i, rig.mrB.segment().get(ValueLayout.JAVA_LONG, 8));
        }
        return new SendRequest[] {head, middle, last};
    }

    @Test
    void aMiddleMemberChangedInsideACheckedChainIsCheckedAgain() {
        try (Rig rig = Rig.rc(); ProtectionDomain other = rig.ctx.allocatePd(); MemoryRegion foreign = other.allocate(64)) {
            SendRequest[] chain = postedChain(rig);
            chain[1].local(foreign, 0, 8);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(chain[0]));
            assertTrue(e.getMessage().contains("another protection domain"), e.getMessage());
            chain[1].opcode(SendOpcode.ATOMIC_FETCH_AND_ADD).local(rig.mrA, 8, 16);
            IllegalArgumentException atomic = assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(chain[0]));
            assertTrue(atomic.getMessage().contains("exactly one local buffer of 8 bytes"), atomic.getMessage());
            assertEquals(0, rig.cqA.poll(rig.wcs), "nothing was posted");
            // repaired: the chain posts and delivers again
            chain[1].opcode(SendOpcode.RDMA_WRITE).local(rig.mrA, 8, 8).remote(rig.mrB.remote(), 8);
            rig.mrA.segment().set(ValueLayout.JAVA_LONG, 8, 0x777);
            rig.a.postSend(chain[0]);
            assertEquals(WcStatus.SUCCESS, rig.next(rig.cqA).status());
            assertEquals(0x777, rig.mrB.segment().get(ValueLayout.JAVA_LONG, 8));
        }
    }

    @Test
    void theLastMemberChangedInsideACheckedChainIsCheckedAgain() {
        try (Rig rig = Rig.rc()) {
            SendRequest[] chain = postedChain(rig);
            chain[2].local(rig.mrA, 16, 4096).inline(true);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(chain[0]));
            assertTrue(e.getMessage().contains("inlines 4096 bytes"), e.getMessage());
            assertEquals(0, rig.cqA.poll(rig.wcs), "nothing was posted");
        }
    }

    @Test
    void aCheckedChainRelinkedToAnUncheckedRequestIsCheckedAgain() {
        try (Rig rig = Rig.rc()) {
            SendRequest[] chain = postedChain(rig);
            SendRequest noRemote = SendRequest.rdmaWrite().id(42).local(rig.mrA, 0, 8).signaled();
            chain[2].next(noRemote);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(chain[0]));
            assertEquals("RDMA_WRITE needs remote(address, rkey) (request 42)", e.getMessage());
            // relinking the middle past the bad tail: posts again, two WRITEs
            chain[1].next(null);
            chain[1].signaled(true);
            rig.a.postSend(chain[0]);
            assertEquals(WcStatus.SUCCESS, rig.next(rig.cqA).status());
            assertEquals(0, rig.cqA.poll(rig.wcs), "one completion: the middle was the last member");
        }
    }

    @Test
    void aMemberSharedByTwoCheckedChainsIsCheckedAgainThroughBoth() {
        try (Rig rig = Rig.rc(); ProtectionDomain other = rig.ctx.allocatePd(); MemoryRegion foreign = other.allocate(64)) {
            SendRequest shared = SendRequest.rdmaWrite().local(rig.mrA, 16, 8).remote(rig.mrB.remote(), 16).signaled();
            SendRequest one = SendRequest.rdmaWrite().local(rig.mrA, 0, 8).remote(rig.mrB.remote(), 0).next(shared);
            SendRequest two = SendRequest.rdmaWrite().local(rig.mrA, 8, 8).remote(rig.mrB.remote(), 8).next(shared);
            for (int i = 0; i < 2; i++) {
                rig.a.postSend(one);
                assertEquals(WcStatus.SUCCESS, rig.next(rig.cqA).status());
                rig.a.postSend(two);
                assertEquals(WcStatus.SUCCESS, rig.next(rig.cqA).status());
            }
            // two was checked last and covers shared; one, posted again, checks it again and covers it
            rig.a.postSend(one);
            assertEquals(WcStatus.SUCCESS, rig.next(rig.cqA).status());
            shared.local(foreign, 0, 8);
            IllegalArgumentException e1 = assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(one));
            assertTrue(e1.getMessage().contains("another protection domain"), e1.getMessage());
            IllegalArgumentException e2 = assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(two));
            assertTrue(e2.getMessage().contains("another protection domain"), e2.getMessage());
            assertEquals(0, rig.cqA.poll(rig.wcs), "nothing was posted");
        }
    }

    @Test
    void aRegionClosedAfterAChainWasCheckedStopsItAtTheNextPost() {
        try (Rig rig = Rig.rc()) {
            MemoryRegion temp = rig.pd.allocate(64);
            SendRequest last = SendRequest.rdmaWrite().local(temp, 0, 8).remote(rig.mrB.remote(), 16).signaled();
            SendRequest head = SendRequest.rdmaWrite().local(rig.mrA, 0, 8).remote(rig.mrB.remote(), 0).next(last);
            for (int i = 0; i < 2; i++) {
                rig.a.postSend(head);
                assertEquals(WcStatus.SUCCESS, rig.next(rig.cqA).status());
            }
            temp.close();
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> rig.a.postSend(head));
            assertEquals(temp + " is closed", e.getMessage());
            assertEquals(0, rig.cqA.poll(rig.wcs), "nothing was posted");
        }
    }

    @Test
    void aMemberChangedInsideACheckedReceiveChainIsCheckedAgain() {
        try (Rig rig = Rig.rc(); ProtectionDomain other = rig.ctx.allocatePd(); MemoryRegion foreign = other.allocate(64)) {
            ReceiveRequest last = ReceiveRequest.create().id(3).local(rig.mrB, 16, 8);
            ReceiveRequest middle = ReceiveRequest.create().id(2).local(rig.mrB, 8, 8).next(last);
            ReceiveRequest head = ReceiveRequest.create().id(1).local(rig.mrB, 0, 8).next(middle);
            SendRequest send = SendRequest.send().local(rig.mrA, 0, 8).signaled();
            for (int round = 0; round < 2; round++) {
                rig.b.postRecv(head);
                for (long id = 1; id <= 3; id++) {
                    postOk(rig, send.id(id));
                    Completion wc = rig.next(rig.cqB);
                    assertEquals(WcStatus.SUCCESS, wc.status(), wc::toString);
                    assertEquals(id, wc.wrId());
                }
            }
            middle.sge(0, foreign, 0, 8);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> rig.b.postRecv(head));
            assertTrue(e.getMessage().contains("another protection domain"), e.getMessage());
            middle.local(rig.mrB, 8, 8);
            last.next(ReceiveRequest.create().id(4).local(foreign, 0, 8));
            IllegalArgumentException relinked = assertThrows(IllegalArgumentException.class, () -> rig.b.postRecv(head));
            assertTrue(relinked.getMessage().contains("another protection domain"), relinked.getMessage());
            // repaired, with new ids: the receives consumed are these, none of a refused post
            last.next(null);
            head.id(11);
            middle.id(12);
            last.id(13);
            rig.b.postRecv(head);
            for (long id = 11; id <= 13; id++) {
                postOk(rig, send.id(id));
                assertEquals(id, rig.next(rig.cqB).wrId());
            }
        }
    }
}
