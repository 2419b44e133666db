package io.github.verbs4j;

import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/** Completion channels, notification, CQ resize, and asynchronous events. */
class EventsTest {

    @Test
    void channelWakesOnCompletionAndTimesOutOtherwise() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd();
             CompletionChannel ch = ctx.createCompletionChannel();
             CompletionQueue cqA = ctx.createCq(16, ch, 0); CompletionQueue cqB = ctx.createCq(16);
             MemoryRegion mr = pd.allocate(4096)) {
            assertTrue(ch.fd() >= 0);
            assertSame(ch, cqA.channel());
            Rig.assumeHandConnect(ctx);
            QueuePair a = pd.queuePair(QpType.RC).cq(cqA).build();
            QueuePair b = pd.queuePair(QpType.RC).cq(cqB).build();
            try {
                a.connect(b.endpoint());
                b.connect(a.endpoint());
                cqA.requestNotify(false);
                long t0 = System.nanoTime();
                assertNull(ch.await(Duration.ofMillis(100)), "no completion, no event");
                assertTrue(System.nanoTime() - t0 >= 90_000_000L, "await waited for its timeout");

                b.postRecv(ReceiveRequest.create().local(mr, 0, 64));
                a.postSend(SendRequest.send().id(3).local(mr, 0, 8).signaled());
                assertSame(cqA, ch.await(Duration.ofSeconds(5)));
                assertEquals(1, cqA.unacknowledgedEvents(), "acknowledged in batches, later");
                Completions wcs = cqA.completions(4);
                assertEquals(1, cqA.poll(wcs));
                assertEquals(3, wcs.get(0).wrId());
                // not re-armed: a second completion raises no event
                b.postRecv(ReceiveRequest.create().local(mr, 0, 64));
                a.postSend(SendRequest.send().id(4).local(mr, 0, 8).signaled());
                assertNull(ch.await(Duration.ofMillis(100)));
                assertEquals(1, pollUntil(cqA, wcs));
            } finally {
                b.close();
                a.close();
            }
            // closing the CQ acknowledges its pending event first (destroy would otherwise wait forever on rdma-core)
            cqA.close();
            assertEquals(0, cqA.unacknowledgedEvents());
        }
    }

    @Test
    void solicitedOnlyNotificationIgnoresUnsolicitedMessages() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd();
             CompletionChannel ch = ctx.createCompletionChannel();
             CompletionQueue cqA = ctx.createCq(16); CompletionQueue cqB = ctx.createCq(16, ch, 0);
             MemoryRegion mr = pd.allocate(4096)) {
            Rig.assumeHandConnect(ctx);
            QueuePair a = pd.queuePair(QpType.RC).cq(cqA).build();
            QueuePair b = pd.queuePair(QpType.RC).cq(cqB).build();
            try {
                a.connect(b.endpoint());
                b.connect(a.endpoint());
                ReceiveRequest r = ReceiveRequest.create().local(mr, 0, 64);
                b.postRecv(r.id(1));
                b.postRecv(r.id(2));
                cqB.requestNotify(true);
                a.postSend(SendRequest.send().id(1).local(mr, 1024, 8));
                assertNull(ch.await(Duration.ofMillis(150)), "an unsolicited message does not wake a solicited-only waiter");
                a.postSend(SendRequest.send().id(2).local(mr, 1024, 8).solicited(true));
                assertSame(cqB, ch.await(Duration.ofSeconds(5)));
                Completions wcs = cqB.completions(4);
                int n = 0;
                long deadline = System.nanoTime() + 5_000_000_000L;
                while (n < 2 && System.nanoTime() < deadline) {
                    n += cqB.poll(wcs);
                }
                assertEquals(2, n);
            } finally {
                b.close();
                a.close();
            }
        }
    }

    private static int pollUntil(CompletionQueue cq, Completions wcs) {
        long deadline = System.nanoTime() + 5_000_000_000L;
        int n;
        while ((n = cq.poll(wcs)) == 0 && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        return n;
    }

    @Test
    void resizeGrowsTheQueue() {
        try (Context ctx = Rig.open(); CompletionQueue cq = ctx.createCq(8)) {
            assertTrue(cq.capacity() >= 8);
            try {
                cq.resize(300);
            } catch (VerbsException e) {
                // siw (iWARP) implements no resize_cq; anywhere else EOPNOTSUPP stays a failure
                org.junit.jupiter.api.Assumptions.assumeFalse(Rig.iwarp(ctx) && e.is(Errno.EOPNOTSUPP),
                        () -> ctx.device().name() + " reports the iWARP transport and cannot resize a CQ: " + e.getMessage());
                throw e;
            }
            assertTrue(cq.capacity() >= 300, "capacity " + cq.capacity());
            assertThrows(IllegalArgumentException.class, () -> cq.resize(0));
        }
    }

    @Test
    void srqLimitRaisesAnAsyncEvent() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd(); CompletionQueue cq = ctx.createCq(16);
             SharedReceiveQueue srq = pd.createSrq(8, 1); MemoryRegion mr = pd.allocate(4096)) {
            assertNull(ctx.pollAsyncEvent(Duration.ZERO), "no event yet");
            Rig.assumeHandConnect(ctx);
            QueuePair a = pd.queuePair(QpType.RC).cq(cq).build();
            QueuePair b = pd.queuePair(QpType.RC).cq(cq).srq(srq).build();
            try {
                a.connect(b.endpoint());
                b.connect(a.endpoint());
                ReceiveRequest r = ReceiveRequest.create().local(mr, 0, 64);
                srq.postRecv(r.id(1));
                srq.postRecv(r.id(2));
                srq.limit(2);
                a.postSend(SendRequest.send().local(mr, 100, 8));
                AsyncEvent e = ctx.pollAsyncEvent(Duration.ofSeconds(5));
                assertNotNull(e, "SRQ_LIMIT_REACHED expected");
                assertEquals(AsyncEventType.SRQ_LIMIT_REACHED, e.type());
                assertEquals(-1, e.qpNumber());
                assertSame(srq, e.sharedReceiveQueue(), "the event names the SRQ it concerns");
                assertSame(srq, e.element());
                assertNull(e.queuePair());
                assertNull(e.completionQueue());
                assertEquals(0, srq.query().limit(), "the limit is one-shot: disarmed after firing");
            } finally {
                b.close();
                a.close();
            }
        }
    }

    /**
     * Fills a completion queue past its capacity with signaled RDMA WRITEs and never polls it:
     * the overrun raises CQ_ERR naming that queue; {@code keepOpen == false} closes the queue
     * before the event is read, which must then name no object.
     */
    private static AsyncEvent overrunCq(boolean keepOpen) {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd(); CompletionQueue other = ctx.createCq(16);
             MemoryRegion src = pd.allocate(4096);
             MemoryRegion dst = pd.allocate(4096, Access.LOCAL_WRITE, Access.REMOTE_WRITE)) {
            assertNull(ctx.pollAsyncEvent(Duration.ZERO), "no event yet");
            Rig.assumeHandConnect(ctx);
            CompletionQueue small = ctx.createCq(4);
            int capacity = small.capacity();
            QueuePair a = pd.queuePair(QpType.RC).sendCq(small).recvCq(other).maxSendWr(capacity + 8).build();
            QueuePair b = pd.queuePair(QpType.RC).cq(other).build();
            try {
                a.connect(b.endpoint());
                b.connect(a.endpoint());
                SendRequest write = SendRequest.rdmaWrite().local(src, 0, 8).remote(dst.remote()).signaled();
                for (int i = 0; i <= capacity; i++) {
                    a.postSend(write.id(i));
                }
                if (!keepOpen) {
                    // wait until the overrun happened (the event is pending), then drop the queue
                    awaitReadable(ctx);
                    b.close();
                    a.close();
                    small.close();
                }
                AsyncEvent e = ctx.pollAsyncEvent(Duration.ofSeconds(5));
                assertNotNull(e, "CQ_ERR expected after " + (capacity + 1) + " completions on a queue of " + capacity);
                assertEquals(AsyncEventType.CQ_ERR, e.type());
                if (keepOpen) {
                    assertSame(small, e.completionQueue(), "the event names the overrun queue");
                    assertSame(small, e.element());
                }
                return e;
            } finally {
                b.close();
                a.close();
                small.close();
            }
        }
    }

    private static void awaitReadable(Context ctx) {
        assertTrue(io.github.verbs4j.internal.Fds.awaitReadable(ctx.asyncFd(), 5_000, "an async event"), "an async event within 5 s");
    }

    @Test
    void cqOverrunRaisesAnEventNamingTheQueue() {
        AsyncEvent e = overrunCq(true);
        assertEquals(-1, e.qpNumber());
        assertEquals(-1, e.portNumber());
        assertNull(e.queuePair());
        assertNull(e.sharedReceiveQueue());
    }

    @Test
    void anEventAboutAClosedQueueNamesNoObject() {
        // rdma-core's ibv_destroy_cq waits for the event's acknowledgement; softrdma does not, so
        // only there can the queue be closed while its event is pending
        assumeTrue(Rig.onSoftrdma(), "ibv_destroy_cq blocks while an event of the queue is unacknowledged");
        AsyncEvent e = overrunCq(false);
        assertNull(e.completionQueue(), "a closed queue is not handed out");
        assertNull(e.element());
    }

    @Test
    void listenerReceivesEventsOnItsThread() throws Exception {
        BlockingQueue<AsyncEvent> events = new ArrayBlockingQueue<>(16);
        BlockingQueue<String> threads = new ArrayBlockingQueue<>(16);
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd(); CompletionQueue cq = ctx.createCq(16);
             SharedReceiveQueue srq = pd.createSrq(8, 1); MemoryRegion mr = pd.allocate(4096)) {
            ctx.onAsyncEvent(e -> {
                threads.add(Thread.currentThread().getName());
                events.add(e);
            });
            assertThrows(IllegalStateException.class, () -> ctx.onAsyncEvent(e -> { }));
            Rig.assumeHandConnect(ctx);
            QueuePair a = pd.queuePair(QpType.RC).cq(cq).build();
            QueuePair b = pd.queuePair(QpType.RC).cq(cq).srq(srq).build();
            try {
                Endpoint ea = a.endpoint();
                Endpoint eb = b.endpoint();
                a.connect(eb);
                b.connect(ea);
                ReceiveRequest r = ReceiveRequest.create().local(mr, 0, 64);
                srq.postRecv(r.id(1));
                srq.postRecv(r.id(2));
                srq.limit(2);
                a.postSend(SendRequest.send().local(mr, 100, 8));
                AsyncEvent e = events.poll(5, TimeUnit.SECONDS);
                assertNotNull(e, "SRQ_LIMIT_REACHED delivered to the listener");
                assertEquals(AsyncEventType.SRQ_LIMIT_REACHED, e.type());
                assertEquals("verbs4j-async-" + ctx.device().name(), threads.take());
            } finally {
                b.close();
                a.close();
            }
        }
    }

    @Test
    void responderAccessErrorRaisesAQpEventWithTheQpNumber() throws Exception {
        // Hardware (and softrdma) raise IBV_EVENT_QP_ACCESS_ERR on the responder of a refused
        // WRITE; kernel rxe (6.1) raises none, so this is checked on softrdma only.
        assumeTrue(Rig.onSoftrdma(), "kernel rxe raises no async event for a responder access error");
        BlockingQueue<AsyncEvent> events = new ArrayBlockingQueue<>(16);
        try (Rig rig = Rig.create(QpType.RC, ConnectOptions.defaults(), Access.LOCAL_WRITE)) {
            rig.ctx.onAsyncEvent(events::add);
            rig.a.postSend(SendRequest.rdmaWrite().local(rig.mrA, 0, 8).remote(rig.mrB.remote()).signaled());
            assertEquals(WcStatus.REMOTE_ACCESS_ERROR, rig.next(rig.cqA).status());
            AsyncEvent e = events.poll(5, TimeUnit.SECONDS);
            assertNotNull(e, "an async event for the responder QP");
            assertEquals(AsyncEventType.QP_ACCESS_ERR, e.type());
            assertEquals(rig.b.qpNumber(), e.qpNumber());
            assertSame(rig.b, e.queuePair(), "the event names the responder's QueuePair");
            assertNull(e.completionQueue());
            assertNull(e.sharedReceiveQueue());
        }
    }
}
