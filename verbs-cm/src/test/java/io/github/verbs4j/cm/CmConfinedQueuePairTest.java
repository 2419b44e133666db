package io.github.verbs4j.cm;

import io.github.verbs4j.Access;
import io.github.verbs4j.Completion;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Completions;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.WcStatus;
import io.github.verbs4j.testsupport.OtherThread;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A queue pair made by an rdma_cm id ({@code rdma_create_qp}) and confined to the thread that
 * posts and polls it ({@link QueuePair#confine()}): {@link CmId#close()} closes that QP first,
 * before the id's state changes, so on any other thread the id's close is refused with
 * {@link WrongThreadException} and leaves the id, its QP and the connection as they were (the id
 * reads open even at the instant of the refusal, the owner's WRITEs still arrive byte-exact); the
 * owner thread's close of the id then destroys both.
 */
class CmConfinedQueuePairTest {

    private static final Duration T = CmInProcessTest.T;

    @BeforeAll
    static void softrdmaCm() {
        SoftrdmaCm.require();
    }

    @Test
    void anIdWhoseQueuePairIsConfinedIsClosedOnlyByTheOwnerThread() {
        assertTimeoutPreemptively(CmTestNet.scaled(Duration.ofSeconds(120)), () -> {
            AtomicReference<Throwable> failed = new AtomicReference<>();
            Owner owner = new Owner(() -> {
                try {
                    run();
                } catch (Throwable t) {
                    failed.set(t);
                }
            });
            owner.start();
            owner.join();
            if (failed.get() != null) {
                throw failed.get();
            }
        });
    }

    /**
     * The owner thread, whose {@code toString()} a refusal reads to name it: on any other thread
     * it runs {@link #probe} first, which sees the id's state at the instant of the refusal.
     */
    private static final class Owner extends Thread {
        volatile Runnable probe = () -> { };

        Owner(Runnable body) {
            super(body, "cm-owner");
        }

        @Override
        public String toString() {
            if (Thread.currentThread() != this) {
                probe.run();
            }
            return super.toString();
        }
    }

    private void run() throws Exception {
        try (CmConnections net = CmConnections.listen(1, 64)) { // every close on the owner thread (this one)
            CmId client = net.connect(QpInit.defaults());
            QueuePair qp = client.queuePair();
            CompletionQueue cq = net.cq();
            MemoryRegion mr = net.mr();

            qp.confine();
            cq.confine();
            Completions wcs = new Completions(4);
            write(qp, cq, wcs, mr, 1);

            // CmId.close() on another thread: its QP's close refuses, naming the QP and this thread.
            // The refusal reads this thread's name: the probe, run then on the refused thread, sees
            // the id open (a method that any other state refuses answers), never closing
            List<String> seen = new CopyOnWriteArrayList<>();
            InetSocketAddress local = client.localAddress();
            ((Owner) Thread.currentThread()).probe = () -> {
                try {
                    seen.add(local.equals(client.localAddress()) && !client.isClosed() ? "open" : "changed");
                } catch (IllegalStateException e) {
                    seen.add(e.getMessage());
                }
            };
            OtherThread.assertWrongThread(OtherThread.thrownBy(client::close), qp);
            ((Owner) Thread.currentThread()).probe = () -> { };
            assertFalse(seen.isEmpty(), "the refusal named the owner thread");
            assertEquals(List.of("open"), List.copyOf(new LinkedHashSet<>(seen)),
                    "the id as the refused thread saw it while refused");
            assertFalse(client.isClosed(), "the id stays open");
            assertEquals(local, client.localAddress(), "and usable");
            assertFalse(qp.isClosed(), "its queue pair stays open");
            assertEquals(qp, client.queuePair());
            write(qp, cq, wcs, mr, 2); // the connection still carries the owner's WRITEs

            client.close(); // on the owner thread: the QP, then the id
            assertTrue(client.isClosed());
            assertTrue(qp.isClosed());
        }
    }

    /** An RDMA WRITE of 4 KiB from the region's first half into its second, byte-exact. */
    private static void write(QueuePair qp, CompletionQueue cq, Completions wcs, MemoryRegion mr, int seed) {
        byte[] data = new byte[4096];
        for (int i = 0; i < data.length; i++) {
            data[i] = (byte) (i * 7 + seed);
        }
        MemorySegment.copy(data, 0, mr.segment(), ValueLayout.JAVA_BYTE, 0, data.length);
        qp.postSend(SendRequest.rdmaWrite().local(mr, 0, data.length).remote(mr.remote(), 32 * 1024).signaled().id(seed));
        long deadline = System.nanoTime() + T.toNanos();
        while (cq.poll(wcs) == 0) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("no completion for WRITE " + seed + " within " + T);
            }
            Thread.onSpinWait();
        }
        Completion wc = wcs.get(0);
        assertEquals(WcStatus.SUCCESS, wc.status(), () -> "WRITE " + seed + ": " + wc);
        assertEquals(seed, wc.wrId());
        assertArrayEquals(data, mr.segment().asSlice(32 * 1024, data.length).toArray(ValueLayout.JAVA_BYTE));
    }
}
