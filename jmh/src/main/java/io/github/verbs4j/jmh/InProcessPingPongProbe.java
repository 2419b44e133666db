package io.github.verbs4j.jmh;

import io.github.verbs4j.Access;
import io.github.verbs4j.Completion;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Completions;
import io.github.verbs4j.Context;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QpType;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.ReceiveRequest;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.Verbs;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.Arrays;
import java.util.concurrent.CyclicBarrier;

/**
 * An RC SEND ping-pong between two threads of one JVM, each spinning in
 * {@code while (cq.poll(wcs) == 0)} on its own CQ (the in-process case the empty poll's
 * safepoint call was added for, 2026-11-28): per round the wall µs per round trip and each
 * thread's CPU µs per round trip. On a machine short of CPUs the two spinning threads share
 * them with whatever else runs, so the empty poll's periodic call (once a {@code Thread.yield},
 * since 2026-11-30 a plain downcall) decides how soon a spinner lets its peer run.
 *
 * <pre>
 * LD_LIBRARY_PATH=softrdma/target/lib java --enable-native-access=ALL-UNNAMED \
 *     -Dverbs4j.libibverbs=$PWD/softrdma/target/lib/libibverbs.so.1 \
 *     -cp jmh/target/benchmarks.jar io.github.verbs4j.jmh.InProcessPingPongProbe [rounds [round trips]]
 * </pre>
 */
public final class InProcessPingPongProbe {

    private static final int MESSAGE = 64;
    private static final int RECVS = 16;
    private static final long RECV_ID = 1L << 62;

    private InProcessPingPongProbe() {
    }

    /** One side: its QP, CQ and requests. */
    private record Side(QueuePair qp, CompletionQueue cq, Completions wcs, SendRequest send, ReceiveRequest recv) {

        /** Spins until a RECV completion; send completions on the way are only counted. */
        void awaitRecv() {
            while (true) {
                int n;
                while ((n = cq.poll(wcs)) == 0) {
                    // spin, as a user's loop does
                }
                boolean got = false;
                for (int i = 0; i < n; i++) {
                    Completion wc = wcs.get(i);
                    if (!wc.ok()) {
                        throw wc.error();
                    }
                    if ((wc.wrId() & RECV_ID) != 0) {
                        qp.postRecv(recv.id(RECV_ID | wc.wrId()));
                        got = true;
                    }
                }
                if (got) {
                    return;
                }
            }
        }
    }

    /**
     * Runs the rounds.
     *
     * @param args rounds (default 10) and round trips per round (default 20000)
     * @throws Exception when a side fails
     */
    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 10;
        int trips = args.length > 1 ? Integer.parseInt(args[1]) : 20_000;
        Verbs.ensureAvailability();
        try (Context ctx = Verbs.openFirst(); ProtectionDomain pd = ctx.allocatePd();
                CompletionQueue cqA = ctx.createCq(64); CompletionQueue cqB = ctx.createCq(64);
                QueuePair a = pd.queuePair(QpType.RC).cq(cqA).maxSendWr(32).maxRecvWr(32).maxInline(64).build();
                QueuePair b = pd.queuePair(QpType.RC).cq(cqB).maxSendWr(32).maxRecvWr(32).maxInline(64).build();
                MemoryRegion mrA = pd.allocate(4096, Access.LOCAL_WRITE);
                MemoryRegion mrB = pd.allocate(4096, Access.LOCAL_WRITE)) {
            a.connect(b.endpoint());
            b.connect(a.endpoint());
            Side client = side(a, cqA, mrA);
            Side server = side(b, cqB, mrB);
            ThreadMXBean mx = ManagementFactory.getThreadMXBean();
            CyclicBarrier start = new CyclicBarrier(2);
            long[] serverCpu = new long[rounds + 1];
            Throwable[] serverFailure = new Throwable[1];
            Thread serverThread = Thread.ofPlatform().name("ping-pong server").daemon().start(() -> {
                try {
                    for (int r = 0; r <= rounds; r++) {
                        start.await();
                        long c0 = mx.getCurrentThreadCpuTime();
                        for (int i = 0; i < trips; i++) {
                            server.awaitRecv();
                            server.qp().postSend(server.send().id(i));
                        }
                        serverCpu[r] = mx.getCurrentThreadCpuTime() - c0;
                    }
                } catch (Throwable t) {
                    serverFailure[0] = t;
                }
            });
            double[] wall = new double[rounds];
            double[] clientCpu = new double[rounds];
            double[] srvCpu = new double[rounds];
            for (int r = 0; r <= rounds; r++) { // round 0: the warm-up, not reported
                start.await();
                long c0 = mx.getCurrentThreadCpuTime();
                long w0 = System.nanoTime();
                for (int i = 0; i < trips; i++) {
                    client.qp().postSend(client.send().id(i));
                    client.awaitRecv();
                }
                long w1 = System.nanoTime();
                long c1 = mx.getCurrentThreadCpuTime();
                if (r > 0) {
                    wall[r - 1] = (w1 - w0) / 1e3 / trips;
                    clientCpu[r - 1] = (c1 - c0) / 1e3 / trips;
                }
            }
            serverThread.join();
            if (serverFailure[0] != null) {
                throw new IllegalStateException("the server side failed", serverFailure[0]);
            }
            for (int r = 0; r < rounds; r++) {
                srvCpu[r] = serverCpu[r + 1] / 1e3 / trips;
                System.out.printf("round %d: %.2f us wall per round trip; CPU client %.2f us, server %.2f us%n",
                        r + 1, wall[r], clientCpu[r], srvCpu[r]);
            }
            System.out.printf("median: %.2f us wall per round trip; CPU client %.2f us, server %.2f us (%d rounds of %,d)%n",
                    median(wall), median(clientCpu), median(srvCpu), rounds, trips);
        }
    }

    private static Side side(QueuePair qp, CompletionQueue cq, MemoryRegion mr) {
        ReceiveRequest recv = ReceiveRequest.create().local(mr, 1024, MESSAGE);
        for (int i = 0; i < RECVS; i++) {
            qp.postRecv(recv.id(RECV_ID | i));
        }
        return new Side(qp, cq, cq.completions(16), SendRequest.send().local(mr, 0, MESSAGE).inline(true).signaled(), recv);
    }

    private static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }
}
