package io.github.verbs4j.jmh;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.Arrays;

/**
 * {@link GapRig}'s variants and verbs4j ({@link JavaRig}) measured interleaved in one JVM, for a
 * machine too loaded for JMH's one-fork-per-benchmark numbers: each round runs every variant for
 * one batch (the order rotating from round to round) and records the thread's CPU time per
 * operation, so variants measured a few milliseconds apart see the same machine, and time the
 * thread spent descheduled is not counted. Prints per variant the minimum, first quartile and
 * median over the rounds, and the median over rounds of the variant's difference to the JNI twin
 * of the same verb in the same round.
 *
 * <pre>
 * LD_LIBRARY_PATH=softrdma/target/lib java --enable-native-access=ALL-UNNAMED \
 *     -Dverbs4j.libibverbs=$PWD/softrdma/target/lib/libibverbs.so.1 \
 *     -cp jmh/target/benchmarks.jar io.github.verbs4j.jmh.GapProbe [rounds [batch]]
 * </pre>
 */
public final class GapProbe {

    private GapProbe() {
    }

    @FunctionalInterface
    private interface Batch {
        long run(int n) throws Throwable;
    }

    /**
     * Runs the comparison.
     *
     * @param args rounds (default 150) and operations per batch (default 10000)
     * @throws Throwable when a rig fails
     */
    public static void main(String[] args) throws Throwable {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 150;
        int batch = args.length > 1 ? Integer.parseInt(args[1]) : 10_000;
        GapRig gap = new GapRig();
        JavaRig verbs4j = new JavaRig();
        gap.setUp();
        try {
            verbs4j.setUp();
            try {
                run(gap, verbs4j, rounds, batch);
            } finally {
                verbs4j.tearDown();
            }
        } finally {
            gap.tearDown();
        }
    }

    private static void run(GapRig r, JavaRig v, int rounds, int batch) throws Throwable {
        String[] names = {"writeArena", "writeGlobal", "writeBound", "writeLong", "writeJniShape", "writeVerbs4j",
            "writeJni", "readArena", "readGlobal", "readBound", "readLong", "readJniShape", "readVerbs4j", "readJni"};
        // one loop per variant, so that each is compiled on its own
        Batch[] batches = {
            n -> { long s = 0; for (int i = 0; i < n; i++) { s += r.writeArena(); } return s; },
            n -> { long s = 0; for (int i = 0; i < n; i++) { s += r.writeGlobal(); } return s; },
            n -> { long s = 0; for (int i = 0; i < n; i++) { s += r.writeBound(); } return s; },
            n -> { long s = 0; for (int i = 0; i < n; i++) { s += r.writeLong(); } return s; },
            n -> { long s = 0; for (int i = 0; i < n; i++) { s += r.writeJniShape(); } return s; },
            n -> { long s = 0; for (int i = 0; i < n; i++) { s += v.write(); } return s; },
            n -> { long s = 0; for (int i = 0; i < n; i++) { s += r.writeJni(); } return s; },
            n -> { long s = 0; for (int i = 0; i < n; i++) { s += r.readArena(); } return s; },
            n -> { long s = 0; for (int i = 0; i < n; i++) { s += r.readGlobal(); } return s; },
            n -> { long s = 0; for (int i = 0; i < n; i++) { s += r.readBound(); } return s; },
            n -> { long s = 0; for (int i = 0; i < n; i++) { s += r.readLong(); } return s; },
            n -> { long s = 0; for (int i = 0; i < n; i++) { s += r.readJniShape(); } return s; },
            n -> { long s = 0; for (int i = 0; i < n; i++) { s += v.read(); } return s; },
            n -> { long s = 0; for (int i = 0; i < n; i++) { s += r.readJni(); } return s; },
        };
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        long sink = 0;
        for (int w = 0; w < 30; w++) {
            for (Batch b : batches) {
                sink += b.run(batch);
            }
        }
        double[][] cpu = new double[batches.length][rounds];
        for (int round = 0; round < rounds; round++) {
            for (int k = 0; k < batches.length; k++) {
                int which = (k + round) % batches.length;
                long c0 = mx.getCurrentThreadCpuTime();
                sink += batches[which].run(batch);
                cpu[which][round] = (double) (mx.getCurrentThreadCpuTime() - c0) / batch;
            }
        }
        System.out.printf("%-14s %9s %9s %9s %12s%n", "variant", "cpu min", "cpu p25", "cpu med", "med(v - jni)");
        for (int which = 0; which < batches.length; which++) {
            int jni = Arrays.asList(names).indexOf(names[which].startsWith("write") ? "writeJni" : "readJni");
            double[] c = cpu[which].clone();
            double[] d = new double[rounds];
            for (int round = 0; round < rounds; round++) {
                d[round] = cpu[which][round] - cpu[jni][round];
            }
            Arrays.sort(c);
            Arrays.sort(d);
            System.out.printf("%-14s %9.1f %9.1f %9.1f %12.1f%n", names[which], c[0], c[rounds / 4], c[rounds / 2],
                    d[rounds / 2]);
        }
        System.out.println("(checksum " + sink + ")");
    }
}
