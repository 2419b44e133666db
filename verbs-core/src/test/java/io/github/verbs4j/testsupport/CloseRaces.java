package io.github.verbs4j.testsupport;

import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Completions;
import io.github.verbs4j.Errno;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.SendRequest;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The classic close race, shared by verbs-core's {@code CloseRaceTest} (queue pairs connected by
 * hand) and verbs-cm's {@code CmCloseRaceTest} (connected through rdma_cm, so that it runs on
 * iWARP too): threads post RDMA WRITEs on connected queue pairs and one polls and arms their
 * completion queue while the test closes the queue pairs, then the queue, under them. Every call
 * must end with a result or an {@link IllegalStateException} saying its owner is closed.
 *
 * <p>On softrdma, {@link Check} turns on softrdma's close-race check
 * ({@code softrdma_close_race_check}, softrdma/src/closerace.h): every post, poll and notify
 * lingers inside the provider, and a destroy that meets one (or a call on an object already
 * destroyed) is counted and refused. The count must stay 0 (docs/architecture.md, "Showing that
 * the guard holds").
 */
public final class CloseRaces {

    private CloseRaces() {
    }

    /** How long a checked call stays inside softrdma: wide enough that a destroy not waiting for it meets it. */
    public static final int LINGER_NANOS = 2_000;

    /**
     * softrdma's close-race check, or nothing on a library without it (the system's rdma-core, on
     * rxe0 or siw0): the C side is softrdma's own, exported for tests only, so the check is on
     * exactly when the loaded libibverbs has the symbol.
     */
    public static final class Check implements AutoCloseable {
        private final MethodHandle check;
        private final MethodHandle races;
        private final long before;

        private Check(MethodHandle check, MethodHandle races) throws Throwable {
            this.check = check;
            this.races = races;
            this.before = races == null ? 0 : (long) races.invokeExact();
            if (check != null) {
                check.invokeExact(1, LINGER_NANOS);
            }
        }

        /** Turns the check on (calls linger {@value #LINGER_NANOS} ns) when the loaded libibverbs is softrdma's. */
        public static Check start() throws Throwable {
            SymbolLookup lib = io.github.verbs4j.raw.NativeLibraries.verbs();
            Optional<java.lang.foreign.MemorySegment> on = lib.find("softrdma_close_race_check");
            if (on.isEmpty()) {
                return new Check(null, null);
            }
            Linker linker = Linker.nativeLinker();
            MethodHandle check = linker.downcallHandle(on.get(),
                    FunctionDescriptor.ofVoid(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
            MethodHandle races = linker.downcallHandle(lib.find("softrdma_close_races").orElseThrow(),
                    FunctionDescriptor.of(ValueLayout.JAVA_LONG));
            return new Check(check, races);
        }

        /** Races softrdma counted since {@link #start}; 0 on another provider. */
        public long counted() throws Throwable {
            return races == null ? 0 : (long) races.invokeExact() - before;
        }

        @Override
        public void close() {
            if (check != null) {
                try {
                    check.invokeExact(0, 0);
                } catch (Throwable t) {
                    throw new AssertionError("softrdma_close_race_check(0, 0)", t);
                }
            }
        }
    }

    /**
     * One round of the classic race: one thread per queue pair in {@code qps} posts RDMA WRITEs
     * (64 B from its slot of {@code mr} to {@code mr}'s upper half, every 32nd signaled, so the
     * send queue drains through {@code cq}); one thread polls {@code cq} and arms it
     * ({@code ibv_req_notify_cq}) every 16th pass. After a random pause of 0 to 3 ms, the queue
     * pairs are closed (a queue refuses to close under them), then {@code cq} under its poller;
     * every thread must then end within 10 s, with "closed" from the owner it used.
     *
     * <p>{@code qps} must be connected RC queue pairs whose send queue is {@code cq}, whose peers
     * may write {@code mr} (REMOTE_WRITE, 64 KiB); the peers stay open (the caller closes them).
     *
     * @throws AssertionError naming what a racing call ended with other than a result or "closed"
     */
    public static void postPollAndClose(List<QueuePair> qps, CompletionQueue cq, MemoryRegion mr, Random random,
            AtomicLong posted, AtomicLong polled, String round) throws InterruptedException {
        ConcurrentLinkedQueue<Throwable> unexpected = new ConcurrentLinkedQueue<>();
        CountDownLatch running = new CountDownLatch(qps.size() + 1);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < qps.size(); i++) {
            QueuePair qp = qps.get(i);
            int slot = i;
            threads.add(Thread.ofPlatform().start(() -> {
                SendRequest wr = SendRequest.rdmaWrite().local(mr, slot * 64L, 64).remote(mr.remote(), 32768 + slot * 64L);
                running.countDown();
                try {
                    for (long n = 0; ; n++) {
                        // every 32nd signaled, so the send queue drains through the CQ
                        wr.id(n).signaled((n & 31) == 31);
                        int rc = qp.tryPostSend(wr);
                        if (rc == 0) {
                            posted.incrementAndGet();
                        } else if (rc != Errno.ENOMEM.code()) {
                            unexpected.add(new AssertionError("tryPostSend returned " + Errno.describe(rc)));
                            return;
                        }
                    }
                } catch (IllegalStateException closed) {
                    expectClosed(closed, qp, unexpected);
                } catch (Throwable t) {
                    unexpected.add(t);
                }
            }));
        }
        threads.add(Thread.ofPlatform().start(() -> {
            Completions wcs = cq.completions(32);
            running.countDown();
            try {
                for (long pass = 0; ; pass++) {
                    polled.addAndGet(cq.poll(wcs));
                    if ((pass & 15) == 15) {
                        cq.requestNotify(false);
                    }
                }
            } catch (IllegalStateException closed) {
                expectClosed(closed, cq, unexpected);
            } catch (Throwable t) {
                unexpected.add(t);
            }
        }));
        if (!running.await(10, TimeUnit.SECONDS)) {
            throw new AssertionError(round + ": the racing threads did not start within 10 s");
        }
        Thread.sleep(random.nextInt(4));
        // the QPs first (a CQ refuses to close under them), then the CQ under its poller
        for (QueuePair qp : qps) {
            qp.close();
            if (!qp.isClosed()) {
                throw new AssertionError(round + ": " + qp + " reads open after close()");
            }
        }
        cq.close();
        awaitRacers(threads, unexpected, round + ": a racing call");
    }

    /** Adds {@code e} to {@code unexpected} unless it says {@code owner} is closed or being closed. */
    public static void expectClosed(IllegalStateException e, Object owner, ConcurrentLinkedQueue<Throwable> unexpected) {
        String m = String.valueOf(e.getMessage());
        if (!m.startsWith(owner + " is closed") && !m.startsWith(owner + " is being closed")) {
            unexpected.add(e);
        }
    }

    /** Joins the racing threads after the close and fails with what any of them met otherwise than 'closed'. */
    public static void awaitRacers(List<Thread> threads, ConcurrentLinkedQueue<Throwable> unexpected, String racer)
            throws InterruptedException {
        for (Thread t : threads) {
            t.join(10_000);
            if (t.isAlive()) {
                throw new AssertionError(t + " still runs 10 s after the close");
            }
        }
        if (!unexpected.isEmpty()) {
            AssertionError e = new AssertionError(racer + " ended otherwise than with a result or 'closed'");
            unexpected.forEach(e::addSuppressed);
            throw e;
        }
    }
}
