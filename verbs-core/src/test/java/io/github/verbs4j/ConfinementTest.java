package io.github.verbs4j;

import io.github.verbs4j.testsupport.CloseRaces;
import io.github.verbs4j.testsupport.ConnectedPairs;
import io.github.verbs4j.testsupport.OtherThread;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * {@link QueuePair#confine()} and {@link CompletionQueue#confine()}: the owner thread's posts and
 * polls without the close guard's mark deliver data as the shared ones do; every other thread's
 * posts, polls, notify requests and closes, and parents' closes, are refused with
 * {@link WrongThreadException} before anything is posted or closed; the owner's close lands.
 */
class ConfinementTest {

    private static byte[] fill(MemoryRegion mr, long offset, int length, int seed) {
        byte[] data = new byte[length];
        for (int i = 0; i < length; i++) {
            data[i] = (byte) (i * 31 + seed);
        }
        MemorySegment.copy(data, 0, mr.segment(), ValueLayout.JAVA_BYTE, offset, length);
        return data;
    }

    private static byte[] read(MemoryRegion mr, long offset, int length) {
        return mr.segment().asSlice(offset, length).toArray(ValueLayout.JAVA_BYTE);
    }

    private static void confineAll(Rig rig) {
        assertSame(rig.a, rig.a.confine());
        rig.b.confine();
        rig.cqA.confine();
        rig.cqB.confine();
    }

    @Test
    void writeReadAndSendReceiveArriveByteExactThroughConfinedQueues() {
        try (Rig rig = Rig.rc()) {
            confineAll(rig);
            assertEquals(Thread.currentThread(), rig.a.confinedTo().orElseThrow());
            assertEquals(Thread.currentThread(), rig.cqA.confinedTo().orElseThrow());
            RemoteBuffer remote = rig.mrB.remote();
            for (int round = 0; round < 3; round++) { // again: the quick path once the requests are checked
                byte[] data = fill(rig.mrA, 0, 3000, round);
                rig.a.postSend(SendRequest.rdmaWrite().local(rig.mrA, 0, 3000).remote(remote, 8192).signaled().id(1));
                assertEquals(1, rig.ok(rig.cqA).wrId());
                assertArrayEquals(data, read(rig.mrB, 8192, 3000), "WRITE");

                byte[] far = fill(rig.mrB, 20_000, 500, round + 7);
                SendRequest readRequest = SendRequest.rdmaRead().local(rig.mrA, 4096, 500).remote(remote, 20_000)
                        .signaled().id(2);
                assertEquals(0, rig.a.tryPostSend(readRequest));
                assertEquals(2, rig.ok(rig.cqA).wrId());
                assertArrayEquals(far, read(rig.mrA, 4096, 500), "READ");

                byte[] message = fill(rig.mrA, 10_000, 64, round + 3);
                ReceiveRequest recv = ReceiveRequest.create().local(rig.mrB, 30_000, 64).id(3);
                if (round % 2 == 0) {
                    rig.b.postRecv(recv);
                } else {
                    assertEquals(0, rig.b.tryPostRecv(recv));
                }
                rig.cqB.requestNotify(false);
                rig.a.postSend(SendRequest.send().local(rig.mrA, 10_000, 64).signaled().id(4));
                assertEquals(4, rig.ok(rig.cqA).wrId());
                Completion wc = rig.ok(rig.cqB);
                assertEquals(3, wc.wrId());
                assertEquals(64, wc.byteLength());
                assertArrayEquals(message, read(rig.mrB, 30_000, 64), "SEND + RECV");
            }
            // a chain of two WRITEs in one post
            byte[] data = fill(rig.mrA, 0, 128, 99);
            SendRequest second = SendRequest.rdmaWrite().local(rig.mrA, 64, 64).remote(remote, 40_064).signaled().id(6);
            SendRequest first = SendRequest.rdmaWrite().local(rig.mrA, 0, 64).remote(remote, 40_000).id(5).next(second);
            rig.a.postSend(first);
            assertEquals(6, rig.ok(rig.cqA).wrId());
            assertArrayEquals(data, read(rig.mrB, 40_000, 128), "chain");
        }
    }

    @Test
    void anotherThreadsPostPollAndNotifyAreRefusedAndPostNothing() throws Exception {
        try (Rig rig = Rig.rc()) {
            confineAll(rig);
            RemoteBuffer remote = rig.mrB.remote();
            SendRequest write = SendRequest.rdmaWrite().local(rig.mrA, 0, 64).remote(remote, 0).signaled().id(1);
            ReceiveRequest recv = ReceiveRequest.create().local(rig.mrB, 0, 64).id(2);
            Completions wcs = rig.cqA.completions(4);
            OtherThread.assertWrongThread(OtherThread.thrownBy(() -> rig.a.postSend(write)), rig.a);
            OtherThread.assertWrongThread(OtherThread.thrownBy(() -> rig.a.tryPostSend(write)), rig.a);
            OtherThread.assertWrongThread(OtherThread.thrownBy(() -> rig.b.postRecv(recv)), rig.b);
            OtherThread.assertWrongThread(OtherThread.thrownBy(() -> rig.b.tryPostRecv(recv)), rig.b);
            OtherThread.assertWrongThread(OtherThread.thrownBy(() -> rig.cqA.poll(wcs)), rig.cqA);
            OtherThread.assertWrongThread(OtherThread.thrownBy(() -> rig.cqA.requestNotify(false)), rig.cqA);
            // nothing was posted: no completion, and a SEND finds no receive (the refused one) posted
            Thread.sleep(20);
            assertEquals(0, rig.cqA.poll(wcs));
            assertEquals(0, rig.cqB.poll(wcs));
            // the control path stays open to every thread
            assertEquals(null, OtherThread.thrownBy(() -> rig.a.query()));
            // and the owner goes on
            rig.a.postSend(write);
            assertEquals(1, rig.ok(rig.cqA).wrId());
        }
    }

    /**
     * A thread other than the owner is told it is the wrong thread in every state, before what
     * the state refuses (RESET and INIT for sends, RESET for receives, ERR, after the close): as
     * a confined {@link java.lang.foreign.Arena}'s segment checks the thread before the arena's
     * liveness. The owner thread gets the state's own refusal.
     */
    @Test
    void anotherThreadIsToldItIsTheWrongThreadInEveryState() throws Exception {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd();
             MemoryRegion mr = pd.allocate(4096, Access.LOCAL_WRITE)) {
            CompletionQueue cq = ctx.createCq(16);
            QueuePair qp = pd.queuePair(QpType.RC).cq(cq).build();
            qp.confine();
            cq.confine();
            SendRequest send = SendRequest.send().local(mr, 0, 64).id(1);
            ReceiveRequest recv = ReceiveRequest.create().local(mr, 64, 64).id(2);
            Completions wcs = cq.completions(4);

            // RESET: sends and receives both refused by the state
            assertRefusedByState(() -> qp.postSend(send), "in state RESET");
            assertRefusedByState(() -> qp.postRecv(recv), "in state RESET");
            assertWrongThreadOnly(qp, () -> qp.postSend(send), () -> qp.tryPostSend(send), () -> qp.postRecv(recv),
                    () -> qp.tryPostRecv(recv));

            // INIT: receives taken (and refused to the other thread as before), sends refused by the state
            qp.toInit(new QpAttr().port(1).pkeyIndex(0).access(Access.REMOTE_WRITE));
            assertRefusedByState(() -> qp.postSend(send), "in state INIT");
            assertWrongThreadOnly(qp, () -> qp.postSend(send), () -> qp.tryPostSend(send), () -> qp.postRecv(recv));

            // ERR: taken (flushed) by the owner; the other thread refused
            qp.toError();
            assertWrongThreadOnly(qp, () -> qp.postSend(send), () -> qp.postRecv(recv));

            // closed: the owner is told "is closed", the other thread that it is the wrong thread
            qp.close();
            assertRefusedByState(() -> qp.postSend(send), "is closed");
            assertRefusedByState(() -> qp.postRecv(recv), "is closed");
            assertWrongThreadOnly(qp, () -> qp.postSend(send), () -> qp.tryPostSend(send), () -> qp.postRecv(recv),
                    () -> qp.tryPostRecv(recv));

            assertEquals(0, cq.poll(wcs), "nothing posted on the other thread's behalf");
            cq.close();
            assertRefusedByState(() -> cq.poll(wcs), "is closed");
            assertRefusedByState(() -> cq.requestNotify(false), "is closed");
            assertWrongThreadOnly(cq, () -> cq.poll(wcs), () -> cq.requestNotify(false), () -> cq.requestNotify(true));
        }
    }

    /** On the owner thread (this one): an {@link IllegalStateException} whose message contains {@code says}. */
    private static void assertRefusedByState(Runnable call, String says) {
        IllegalStateException e = assertThrows(IllegalStateException.class, call::run);
        assertTrue(e.getMessage().contains(says), e::getMessage);
    }

    /** Each call, on another thread, throws {@link WrongThreadException} naming {@code owner} and this thread. */
    private static void assertWrongThreadOnly(Object owner, Runnable... calls) throws InterruptedException {
        for (Runnable call : calls) {
            OtherThread.assertWrongThread(OtherThread.thrownBy(call), owner);
        }
    }

    @Test
    void aCloseOnAnotherThreadIsRefusedAndTheOwnerClosesLater() throws Exception {
        try (Rig rig = Rig.rc()) {
            confineAll(rig);
            OtherThread.assertWrongThread(OtherThread.thrownBy(rig.a::close), rig.a);
            OtherThread.assertWrongThread(OtherThread.thrownBy(rig.cqB::close), rig.cqB); // b is confined, and uses cqB
            assertFalse(rig.a.isClosed());
            assertFalse(rig.cqB.isClosed());
            RemoteBuffer remote = rig.mrB.remote();
            rig.a.postSend(SendRequest.rdmaWrite().local(rig.mrA, 0, 64).remote(remote, 0).signaled().id(7));
            assertEquals(7, rig.ok(rig.cqA).wrId());
            rig.a.close();
            assertTrue(rig.a.isClosed());
            assertEquals(null, OtherThread.thrownBy(rig.a::close), "a close of a closed QP does nothing on any thread");
        }
    }

    @Test
    void aParentsCloseOnAnotherThreadIsRefusedBeforeItClosesAnything() throws Exception {
        Context ctx = Rig.open();
        Rig.assumeHandConnect(ctx);
        ProtectionDomain pd = ctx.allocatePd();
        CompletionQueue cq = ctx.createCq(16);
        CompletionQueue shared = ctx.createCq(16);
        QueuePair qp = pd.queuePair(QpType.RC).cq(shared).build();
        qp.confine();
        cq.confine();
        OtherThread.assertWrongThread(OtherThread.thrownBy(pd::close), qp);
        OtherThread.assertWrongThread(OtherThread.thrownBy(shared::close), qp);
        OtherThread.assertWrongThread(OtherThread.thrownBy(ctx::close), cq);
        assertFalse(pd.isClosed());
        assertFalse(shared.isClosed());
        assertFalse(cq.isClosed());
        assertFalse(qp.isClosed());
        assertFalse(ctx.isClosed());
        qp.close();
        cq.close();
        assertEquals(null, OtherThread.thrownBy(() -> {
            shared.close();
            pd.close();
            ctx.close();
        }));
        assertTrue(ctx.isClosed());
    }

    @Test
    void useAfterCloseOnTheOwnerSaysClosed() {
        try (Rig rig = Rig.rc()) {
            confineAll(rig);
            SendRequest write = SendRequest.rdmaWrite().local(rig.mrA, 0, 64).remote(rig.mrB.remote(), 0).id(1);
            ReceiveRequest recv = ReceiveRequest.create().local(rig.mrB, 0, 64);
            rig.a.postSend(write.signaled()); // checked: the later post takes the quick test first
            rig.ok(rig.cqA);
            rig.mrB.close();
            rig.mrA.close();
            rig.b.close();
            rig.a.close();
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> rig.a.postSend(write));
            assertTrue(e.getMessage().contains("is closed"), e::getMessage);
            e = assertThrows(IllegalStateException.class, () -> rig.b.postRecv(recv));
            assertTrue(e.getMessage().contains("is closed"), e::getMessage);
            rig.cqB.close();
            e = assertThrows(IllegalStateException.class, () -> rig.cqB.poll(rig.wcs));
            assertTrue(e.getMessage().contains("is closed"), e::getMessage);
            e = assertThrows(IllegalStateException.class, () -> rig.cqB.requestNotify(true));
            assertTrue(e.getMessage().contains("is closed"), e::getMessage);
            CompletionQueue extra = rig.ctx.createCq(4);
            extra.close();
            assertThrows(IllegalStateException.class, extra::confine);
        }
    }

    @Test
    void confiningTwiceIsANoOpOnTheOwnerAndRefusedElsewhere() throws Exception {
        try (Rig rig = Rig.rc()) {
            rig.a.confine();
            rig.a.confine();
            rig.cqA.confine();
            rig.cqA.confine();
            OtherThread.assertWrongThread(OtherThread.thrownBy(rig.a::confine), rig.a);
            OtherThread.assertWrongThread(OtherThread.thrownBy(rig.cqA::confine), rig.cqA);
            assertTrue(rig.b.confinedTo().isEmpty(), "confinement is per object");
            assertEquals(Thread.currentThread(), rig.a.confinedTo().orElseThrow());
        }
    }

    @Test
    void objectsOfAThreadThatEndedCloseOnAnyThread() throws Exception {
        try (Rig rig = Rig.rc()) {
            Thread owner = new Thread(() -> {
                rig.a.confine();
                rig.cqA.confine();
            });
            owner.start();
            owner.join();
            assertWrongThread2(() -> rig.a.postSend(SendRequest.rdmaWrite().local(rig.mrA, 0, 64)
                    .remote(rig.mrB.remote(), 0)), rig.a);
            rig.a.close(); // the owner ended: it is inside no call
            rig.cqA.close();
            assertTrue(rig.a.isClosed());
            assertTrue(rig.cqA.isClosed());
        }
    }

    private static void assertWrongThread2(Runnable action, Object owner) {
        WrongThreadException e = assertThrows(WrongThreadException.class, action::run);
        assertTrue(e.getMessage().contains(owner.toString()), e::getMessage);
    }

    /**
     * CloseRaceTest's race on confined objects: threads other than the owner hammer the confined
     * QPs and CQ with posts, polls, notify requests and closes while the owner posts and polls
     * them; the others get {@link WrongThreadException} only, the owner's closes land, and
     * softrdma's close-race check counts nothing.
     */
    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void otherThreadsHammeringConfinedObjectsGetOnlyWrongThread() throws Throwable {
        int rounds = Rig.onSoftrdma() ? 6 : 2;
        AtomicLong refused = new AtomicLong();
        AtomicLong posted = new AtomicLong();
        try (CloseRaces.Check check = CloseRaces.Check.start()) {
            for (int round = 0; round < rounds; round++) {
                try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd();
                     MemoryRegion mr = pd.allocate(64 * 1024, Access.LOCAL_WRITE, Access.REMOTE_WRITE)) {
                    Rig.assumeHandConnect(ctx);
                    CompletionQueue cq = ctx.createCq(4096);
                    ConnectedPairs pairs = ConnectedPairs.rc(pd, cq, 3);
                    List<QueuePair> qps = pairs.qps();
                    qps.forEach(QueuePair::confine);
                    cq.confine();
                    ConcurrentLinkedQueue<Throwable> unexpected = new ConcurrentLinkedQueue<>();
                    AtomicBoolean stop = new AtomicBoolean();
                    AtomicBoolean ownerClosing = new AtomicBoolean();
                    CountDownLatch started = new CountDownLatch(3);
                    List<Thread> others = new ArrayList<>();
                    for (int t = 0; t < 3; t++) {
                        int which = t;
                        Thread other = new Thread(() -> {
                            SendRequest write = SendRequest.rdmaWrite().local(mr, 0, 64).remote(mr.remote(), 32_768);
                            Completions wcs = new Completions(8);
                            started.countDown();
                            for (int k = 0; !stop.get(); k++) {
                                QueuePair qp = qps.get((k + which) % qps.size());
                                try {
                                    boolean closed = switch (k % 5) {
                                        case 0 -> { qp.postSend(write); yield false; }
                                        case 1 -> { cq.poll(wcs); yield false; }
                                        case 2 -> { cq.requestNotify(false); yield false; }
                                        case 3 -> { qp.close(); yield qp.isClosed(); }
                                        default -> { cq.close(); yield cq.isClosed(); }
                                    };
                                    if (!closed && !ownerClosing.get()) {
                                        // a close of what the owner closes or closed returns at once
                                        unexpected.add(new AssertionError("a call on another thread went through ("
                                                + k % 5 + ")"));
                                    }
                                } catch (WrongThreadException e) {
                                    // in every state, closing and closed included (a close of what
                                    // the owner closed returns at once)
                                    refused.incrementAndGet();
                                } catch (Throwable e) {
                                    unexpected.add(e);
                                }
                            }
                        }, "hammer-" + t);
                        others.add(other);
                        other.start();
                    }
                    started.await();
                    SendRequest write = SendRequest.rdmaWrite().local(mr, 0, 64).remote(mr.remote(), 32_768).signaled();
                    Completions wcs = cq.completions(16);
                    for (int k = 0; k < 2000; k++) {
                        qps.get(k % qps.size()).postSend(write.id(k));
                        posted.incrementAndGet();
                        Rig.okWithin(cq, wcs, java.time.Duration.ofSeconds(5));
                    }
                    ownerClosing.set(true);
                    for (QueuePair qp : qps) {
                        qp.close();
                    }
                    cq.close();
                    stop.set(true);
                    for (Thread t : others) {
                        t.join(10_000);
                        assertFalse(t.isAlive(), t + " did not end");
                    }
                    if (!unexpected.isEmpty()) {
                        AssertionError e = new AssertionError(unexpected.size() + " unexpected outcomes on other threads");
                        unexpected.forEach(e::addSuppressed);
                        throw e;
                    }
                    pairs.closePeers();
                }
            }
            assertEquals(0, check.counted(), "softrdma counted a destroy under a call (stderr names it)");
        }
        assertTrue(refused.get() > 0, "the other threads were refused: " + refused);
        if (posted.get() == 0) {
            fail("the owner posted nothing");
        }
    }
}
