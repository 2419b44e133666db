package io.github.verbs4j;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.time.Duration;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The documented threading contract: several threads post to one QP, each with its own requests. */
class ConcurrencyTest {

    private static final int THREADS = 4;
    private static final int PER_THREAD = 500;

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void severalThreadsPostToOneQueuePair() throws Exception {
        // The CQ holds every request that can complete: a send-queue slot is freed when its
        // completion is generated, not when it is polled, so a lagging poller could otherwise see
        // the CQ overrun (completions lost, IBV_EVENT_CQ_ERR; see cqOverrunRaisesCqErr).
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd();
             CompletionQueue cqA = ctx.createCq(THREADS * PER_THREAD); CompletionQueue cqB = ctx.createCq(16);
             MemoryRegion mrA = pd.allocate(4096); MemoryRegion mrB = pd.allocate(4096, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
             QueuePair a = pd.queuePair(QpType.RC).cq(cqA).maxSendWr(64).build();
             QueuePair b = pd.queuePair(QpType.RC).cq(cqB).build()) {
            Rig.assumeHandConnect(ctx);
            Endpoint ea = a.endpoint();
            Endpoint eb = b.endpoint();
            a.connect(eb);
            b.connect(ea);
            ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
            List<Thread> posters = new ArrayList<>();
            for (int t = 0; t < THREADS; t++) {
                int thread = t;
                posters.add(Thread.ofPlatform().start(() -> {
                    try {
                        // each thread writes its own 8-byte slot of the target, with its own request
                        SendRequest wr = SendRequest.rdmaWrite().local(mrA, thread * 8L, 8)
                                .remote(mrB.remote(), thread * 8L).signaled();
                        for (int i = 0; i < PER_THREAD; i++) {
                            mrA.segment().set(ValueLayout.JAVA_LONG, thread * 8L, i);
                            long id = (long) thread * PER_THREAD + i;
                            int rc;
                            while ((rc = a.tryPostSend(wr.id(id))) == Errno.ENOMEM.code()) {
                                Thread.onSpinWait(); // send queue full: the main thread is draining completions
                            }
                            assertEquals(0, rc);
                        }
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                }));
            }
            BitSet seen = new BitSet(THREADS * PER_THREAD);
            Completions wcs = cqA.completions(16);
            long deadline = System.nanoTime() + 50_000_000_000L;
            while (seen.cardinality() < THREADS * PER_THREAD && failures.isEmpty() && System.nanoTime() < deadline) {
                int n = cqA.poll(wcs);
                for (int k = 0; k < n; k++) {
                    Completion wc = wcs.get(k);
                    if (!wc.ok()) {
                        throw wc.error();
                    }
                    int id = (int) wc.wrId();
                    assertTrue(!seen.get(id), "completion " + id + " seen twice");
                    seen.set(id);
                }
            }
            for (Thread p : posters) {
                p.join();
            }
            if (!failures.isEmpty()) {
                throw new AssertionError("a posting thread failed", failures.peek());
            }
            assertEquals(THREADS * PER_THREAD, seen.cardinality(), "every request completed once");
            for (int t = 0; t < THREADS; t++) {
                // the last write of each thread carried PER_THREAD - 1
                assertEquals(PER_THREAD - 1, mrB.segment().get(ValueLayout.JAVA_LONG, t * 8L));
            }
        }
    }

    @Test
    void cqOverrunRaisesCqErr() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd();
             CompletionQueue small = ctx.createCq(1); CompletionQueue other = ctx.createCq(16);
             MemoryRegion mr = pd.allocate(4096, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
             QueuePair a = pd.queuePair(QpType.RC).cq(small).maxSendWr(64).build();
             QueuePair b = pd.queuePair(QpType.RC).cq(other).build()) {
            Rig.assumeHandConnect(ctx);
            Endpoint ea = a.endpoint();
            Endpoint eb = b.endpoint();
            a.connect(eb);
            b.connect(ea);
            SendRequest wr = SendRequest.rdmaWrite().local(mr, 0, 8).remote(mr.remote(), 64).signaled();
            int posts = small.capacity() + 8;
            for (int i = 0; i < posts; i++) {
                a.postSend(wr.id(i)); // never polled: the queue overruns
            }
            AsyncEvent e = ctx.pollAsyncEvent(Duration.ofSeconds(5));
            assertTrue(e != null, "an async event after " + posts + " completions into a CQ of " + small.capacity());
            assertEquals(AsyncEventType.CQ_ERR, e.type());
        }
    }
}
