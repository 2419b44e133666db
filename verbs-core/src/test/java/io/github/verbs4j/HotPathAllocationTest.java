package io.github.verbs4j;

import io.github.verbs4j.testsupport.ThreadMeter;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Steady-state posting and polling allocate nothing on the Java heap: measured with the
 * thread's allocation counter around a loop of post_send + post_recv + poll_cq + req_notify_cq,
 * after the JIT has compiled it.
 */
class HotPathAllocationTest {

    @Test
    void blockingOnACompletionChannelAllocatesNothing() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd();
             CompletionChannel ch = ctx.createCompletionChannel();
             CompletionQueue cqA = ctx.createCq(16, ch, 0); CompletionQueue cqB = ctx.createCq(16);
             MemoryRegion mr = pd.allocate(4096)) {
            Rig.assumeHandConnect(ctx);
            QueuePair a = pd.queuePair(QpType.RC).cq(cqA).build();
            QueuePair b = pd.queuePair(QpType.RC).cq(cqB).build();
            try {
                a.connect(b.endpoint());
                b.connect(a.endpoint());
                SendRequest send = SendRequest.send().local(mr, 0, 8).signaled();
                ReceiveRequest recv = ReceiveRequest.create().local(mr, 1024, 64);
                Completions wcs = cqA.completions(4);
                Completions rwcs = cqB.completions(4);
                java.time.Duration t = java.time.Duration.ofSeconds(10);
                // warm-up until the wait runs C2-compiled: before, the errno-capturing downcalls
                // (poll, ibv_get_cq_event) slice their capture segment, which only C2 scalar-replaces
                for (int i = 0; i < 10; i++) {
                    awaitLoop(ch, cqA, cqB, a, b, send, recv, wcs, rwcs, t, 3_000);
                }
                long allocated = Long.MAX_VALUE;
                for (int window = 0; window < 3; window++) {
                    long before = ThreadMeter.allocatedBytes();
                    awaitLoop(ch, cqA, cqB, a, b, send, recv, wcs, rwcs, t, 2_000);
                    allocated = Math.min(allocated, ThreadMeter.allocatedBytes() - before);
                }
                // each round: arm, post, block in poll(2) and ibv_get_cq_event, poll; an event
                // acknowledged every 16. Each wait allocated ~909 B before (an arena and its segments,
                // the text naming the wait, the boxed queue address); now ~122 B remain, which JFR puts
                // in the JDK's check of the errno capture segment of the two errno-capturing downcalls
                // (SharedUtils.checkCaptureSegment slices it), not scalar-replaced on this path.
                assertTrue(allocated < 200 * 2_000, "2000 completion-channel waits allocated " + allocated
                        + " bytes (the least of three windows)");
            } finally {
                b.close();
                a.close();
            }
        }
    }

    private static void awaitLoop(CompletionChannel ch, CompletionQueue cqA, CompletionQueue cqB, QueuePair a, QueuePair b,
            SendRequest send, ReceiveRequest recv, Completions wcs, Completions rwcs, java.time.Duration t, int n) {
        for (int i = 0; i < n; i++) {
            cqA.requestNotify(false);
            b.postRecv(recv);
            a.postSend(send);
            if (ch.await(t) != cqA) {
                throw new AssertionError("no completion event for send " + i);
            }
            while (cqA.poll(wcs) == 0) {
                Thread.onSpinWait();
            }
            if (!wcs.get(0).ok()) {
                throw new AssertionError(wcs.get(0).toString());
            }
            while (cqB.poll(rwcs) == 0) {
                Thread.onSpinWait();
            }
        }
    }

    @Test
    void postAndPollAllocateNothing() {
        try (Rig rig = Rig.rc()) {
            SendRequest write = SendRequest.rdmaWrite().local(rig.mrA, 0, 64).remote(rig.mrB.remote()).signaled();
            SendRequest send = SendRequest.send().local(rig.mrA, 64, 32).signaled();
            ReceiveRequest recv = ReceiveRequest.create().local(rig.mrB, 1024, 64);
            Completions wcs = rig.cqA.completions(16);
            Completions rwcs = rig.cqB.completions(16);
            long checksum = 0;
            // warm-up in several calls, so the measured call runs compiled code from its start (one
            // long warm-up call leaves only an OSR compilation; the measured call could then meet a
            // compilation or deoptimization, which may allocate)
            for (int i = 0; i < 3; i++) {
                checksum += loop(rig, write, send, recv, wcs, rwcs, 10_000);
            }
            // The quietest of three windows: a one-off JIT artefact (a deoptimization rematerialising a
            // few objects, seen once in ~10 full-suite runs at 1-2 KB) touches one window; an allocation
            // per operation (>= 16 B, so > 300 KB per window) fails all three.
            long allocated = Long.MAX_VALUE;
            for (int window = 0; window < 3; window++) {
                long before = ThreadMeter.allocatedBytes();
                checksum += loop(rig, write, send, recv, wcs, rwcs, 20_000);
                allocated = Math.min(allocated, ThreadMeter.allocatedBytes() - before);
            }
            assertTrue(checksum > 0); // the loop's result is used
            assertTrue(allocated < 1024, "steady-state post/poll allocated " + allocated
                    + " bytes over 20 000 iterations (the least of three windows)");
        }
    }

    @Test
    void inlineSendsFromUnregisteredMemoryAllocateNothing() {
        try (Rig rig = Rig.rc(); Arena arena = Arena.ofConfined()) {
            MemorySegment data = arena.allocate(48);
            SendRequest send = SendRequest.send().inlineData(data).signaled();
            ReceiveRequest recv = ReceiveRequest.create().local(rig.mrB, 0, 64);
            Completions wcs = rig.cqA.completions(16);
            long checksum = 0;
            // warm-up in several calls, so the measured call runs compiled code from its start
            for (int from = 0; from < 30_000; from += 10_000) {
                checksum += inlineLoop(rig, data, send, recv, wcs, from, from + 10_000);
            }
            // the quietest of three windows, as in postAndPollAllocateNothing
            long allocated = Long.MAX_VALUE;
            for (int from = 30_000; from < 90_000; from += 20_000) {
                long before = ThreadMeter.allocatedBytes();
                checksum += inlineLoop(rig, data, send, recv, wcs, from, from + 20_000);
                allocated = Math.min(allocated, ThreadMeter.allocatedBytes() - before);
            }
            assertTrue(checksum > 0);
            assertTrue(allocated < 1024, "steady-state inline posts allocated " + allocated
                    + " bytes over 20 000 iterations (the least of three windows)");
            // the last message carried the last value written into the unregistered segment
            assertEquals(89_999L, rig.mrB.segment().get(ValueLayout.JAVA_LONG, 0));
        }
    }

    private static long inlineLoop(Rig rig, MemorySegment data, SendRequest send, ReceiveRequest recv, Completions wcs,
                                   int from, int to) {
        long sum = 0;
        for (int i = from; i < to; i++) {
            data.set(ValueLayout.JAVA_LONG, 0, i);
            rig.b.postRecv(recv.id(i));
            rig.a.postSend(send.id(i + 1));
            int n;
            while ((n = rig.cqA.poll(wcs)) == 0) {
                Thread.onSpinWait();
            }
            sum += wcs.get(0).wrId();
            while (rig.cqB.poll(wcs) == 0) {
                Thread.onSpinWait();
            }
            if (!wcs.get(0).ok()) {
                throw wcs.get(0).error();
            }
            sum += wcs.get(0).byteLength();
        }
        return sum;
    }

    private static long loop(Rig rig, SendRequest write, SendRequest send, ReceiveRequest recv, Completions wcs,
                             Completions rwcs, int iterations) {
        long sum = 0;
        for (int i = 0; i < iterations; i++) {
            rig.b.postRecv(recv.id(i));
            rig.a.postSend(write.id(i));
            rig.a.postSend(send.id(i));
            int done = 0;
            while (done < 2) {
                int n = rig.cqA.poll(wcs);
                for (int k = 0; k < n; k++) {
                    Completion wc = wcs.get(k);
                    if (!wc.ok()) {
                        throw wc.error();
                    }
                    sum += wc.wrId();
                }
                done += n;
            }
            while (rig.cqB.poll(rwcs) == 0) {
                Thread.onSpinWait();
            }
            sum += rwcs.get(0).byteLength();
            rig.cqB.requestNotify(false);
        }
        return sum;
    }
}
