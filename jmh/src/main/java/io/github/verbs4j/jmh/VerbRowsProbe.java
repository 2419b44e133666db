package io.github.verbs4j.jmh;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import javax.management.ObjectName;

/**
 * {@link JavaVsC}'s verb rows measured nine ways interleaved in one JVM, for a machine whose CPU
 * changes speed under the benchmark: on the 2-vCPU build VMs every memory-bound loop, C included,
 * runs about twice as slow for 0.1 to 5 s at a time (softrdma's {@code inproc_lat --timeline}
 * shows it with a loop that calls no verb), so a JMH fork's median depends on how much of the
 * fork fell into such a stretch, and two benchmarks measured in different forks are compared
 * across modes. Here each round runs every way of every verb for one batch (the order rotating
 * from round to round) and records the thread's CPU time per operation, so the nine ways of a verb
 * measured within a few milliseconds see the same CPU. A round counts as slow for a verb when
 * that verb's C batch took more than 1.4 times the C batch's best round.
 *
 * <p>Prints per verb and way the minimum and median over the rounds, then per verb the median
 * over rounds of verbs4j minus raw FFM and of verbs4j over the JNI twin, for all rounds, the fast
 * ones and the slow ones, with their counts, and last two columns on verbs4j's own objects:
 * verbs4j minus a fifth way, raw FFM on them ({@link RawOnJavaRig}), and verbs4j over a sixth,
 * the JNI twin on them ({@link JniOnJavaRig}). The C, raw FFM and JNI rigs each drive provider
 * objects of their own, and in some JVM runs one rig's set costs 6 to 14 ns more per work request
 * than another's (docs/performance.md), so only those last two columns compare one placement.
 * The summary's rows named {@code <verb> conf} do the same for a second verbs4j rig whose queue
 * pairs and completion queues are confined to the probe's thread ({@code QueuePair.confine()}:
 * no close-guard mark), against raw FFM and the JNI twin on that rig's objects.
 * {@code -Dverbs4j.probe.confined=no} leaves that rig out (the six ways of main's probe), and
 * {@code =only} leaves it out and confines the verbs4j rig instead: with both rigs in one JVM
 * the two kinds share the post's and poll's profiles, so C2 compiles the shared and the confined
 * path into both loops, which a program using one kind never sees.
 *
 * <p>Every rig's verb methods are inlined into the probe's loops, by a compiler directive added
 * before the warm-up ({@link #inlineRigs}): left to C2's heuristics, the raw FFM and JNI rigs'
 * small methods were inlined into their loops while the verbs4j rig's, compiled on their own
 * first into code larger than {@code InlineSmallCode}, stayed a real call per sequence ("already
 * compiled into a big method"), which charged verbs4j a call the other rigs did not pay. Only the
 * rigs' own methods are forced; what C2 makes of verbs4j's methods inside them is left to its
 * heuristics, as a user's loop would. {@code -Dverbs4j.probe.inlineRigs=false} leaves the rigs to
 * the heuristics too (the probe's shape before 2026-11-29, for A/B runs).
 *
 * <pre>
 * LD_LIBRARY_PATH=softrdma/target/lib java --enable-native-access=ALL-UNNAMED \
 *     -Dverbs4j.libibverbs=$PWD/softrdma/target/lib/libibverbs.so.1 \
 *     -cp jmh/target/benchmarks.jar io.github.verbs4j.jmh.VerbRowsProbe [rounds [batch]]
 * </pre>
 */
public final class VerbRowsProbe {

    private static final String[] VERBS = {"sendRecv", "write", "read", "pollEmpty", "chain16Write"};
    /**
     * "raw same" and "JNI same": raw FFM and the JNI twin on verbs4j's own objects; "confined",
     * "raw conf" and "JNI conf": verbs4j on a second rig whose QPs and CQs are confined to the
     * probe's thread ({@code QueuePair.confine()}), and raw FFM and the JNI twin on that rig's objects.
     */
    private static final String[] WAYS = {"C", "raw FFM", "JNI", "verbs4j", "raw same", "JNI same", "confined",
        "raw conf", "JNI conf"};
    private static final double SLOW = 1.4;

    private VerbRowsProbe() {
    }

    @FunctionalInterface
    private interface Batch {
        long run(int n) throws Throwable;
    }

    /**
     * Runs the comparison.
     *
     * @param args rounds (default 300) and sequences per batch (default 2000)
     * @throws Throwable when a rig fails
     */
    public static void main(String[] args) throws Throwable {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 300;
        int batch = args.length > 1 ? Integer.parseInt(args[1]) : 2000;
        if (rounds < 4 || batch < 1) {
            throw new IllegalArgumentException("usage: VerbRowsProbe [rounds >= 4 [batch >= 1]]");
        }
        if (Boolean.parseBoolean(System.getProperty("verbs4j.probe.inlineRigs", "true"))) {
            inlineRigs();
        }
        CRig c = new CRig();
        RawRig raw = new RawRig();
        JniRig jni = new JniRig();
        JavaRig v = new JavaRig();
        c.setUp();
        try {
            raw.setUp();
            try {
                jni.setUp();
                try {
                    v.setUp();
                    try {
                        String mode = System.getProperty("verbs4j.probe.confined", "also");
                        JavaRig k = mode.equals("also") ? new JavaRig() : null;
                        if (mode.equals("only")) {
                            v.confine(); // the "verbs4j" ways on confined objects, no shared rig in the JVM
                        } else if (!mode.equals("also") && !mode.equals("no")) {
                            throw new IllegalArgumentException("verbs4j.probe.confined: also, no or only, not " + mode);
                        }
                        System.out.println("verbs4j.probe.confined=" + mode);
                        if (k != null) {
                            k.setUp();
                        }
                        try {
                            if (k != null) {
                                k.confine();
                            }
                            RawOnJavaRig same = new RawOnJavaRig(v);
                            RawOnJavaRig kSame = k == null ? null : new RawOnJavaRig(k);
                            run(c, raw, jni, v, same, new JniOnJavaRig(same), k, kSame,
                                    k == null ? null : new JniOnJavaRig(kSame), rounds, batch);
                        } finally {
                            if (k != null) {
                                k.tearDown();
                            }
                        }
                    } finally {
                        v.tearDown();
                    }
                } finally {
                    jni.tearDown();
                }
            } finally {
                raw.tearDown();
            }
        } finally {
            c.tearDown();
        }
    }

    private static void run(CRig c, RawRig raw, JniRig jni, JavaRig v, RawOnJavaRig same, JniOnJavaRig jniSame,
            JavaRig conf, RawOnJavaRig kSame, JniOnJavaRig kJni, int rounds, int batch)
            throws Throwable {
        // [verb][way]; one loop per batch, so that each is compiled on its own
        Batch[][] batches = {
            {
                n -> c.run("bl_send_recv", Baseline.SEND_RECV, n),
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += raw.sendRecv(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += jni.sendRecv(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += v.sendRecv(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += same.sendRecv(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += jniSame.sendRecv(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += conf.sendRecv(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += kSame.sendRecv(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += kJni.sendRecv(); } return s; },
            },
            {
                n -> c.run("bl_write", Baseline.WRITE, n),
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += raw.write(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += jni.write(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += v.write(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += same.write(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += jniSame.write(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += conf.write(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += kSame.write(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += kJni.write(); } return s; },
            },
            {
                n -> c.run("bl_read", Baseline.READ, n),
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += raw.read(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += jni.read(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += v.read(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += same.read(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += jniSame.read(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += conf.read(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += kSame.read(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += kJni.read(); } return s; },
            },
            {
                n -> c.run("bl_poll_empty", Baseline.POLL_EMPTY, n),
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += raw.pollEmpty(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += jni.pollEmpty(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += v.pollEmpty(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += same.pollEmpty(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += jniSame.pollEmpty(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += conf.pollEmpty(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += kSame.pollEmpty(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += kJni.pollEmpty(); } return s; },
            },
            {
                n -> c.run("bl_write_chain16", Baseline.WRITE_CHAIN16, n),
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += raw.chain16Write(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += jni.chain16Write(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += v.chain16Write(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += same.chain16Write(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += jniSame.chain16Write(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += conf.chain16Write(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += kSame.chain16Write(); } return s; },
                n -> { long s = 0; for (int i = 0; i < n; i++) { s += kJni.chain16Write(); } return s; },
            },
        };
        int[] opsPerSequence = {1, 1, 1, 1, JavaRig.CHAIN};
        int ways = conf == null ? 6 : WAYS.length; // the confined rig's three ways only with it
        if (conf == null) {
            for (int verb = 0; verb < batches.length; verb++) {
                batches[verb] = Arrays.copyOf(batches[verb], ways);
            }
        }
        int cells = VERBS.length * ways;
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        long sink = 0;
        for (int w = 0; w < 30; w++) { // warm-up: every Java loop compiled before the first measured round
            for (Batch[] verb : batches) {
                for (Batch b : verb) {
                    sink += b.run(batch);
                }
            }
        }
        double[][][] cpu = new double[VERBS.length][ways][rounds];
        for (int round = 0; round < rounds; round++) {
            for (int k = 0; k < cells; k++) {
                int cell = (k + round) % cells;
                int verb = cell / ways, way = cell % ways;
                long c0 = mx.getCurrentThreadCpuTime();
                sink += batches[verb][way].run(batch);
                cpu[verb][way][round] = (double) (mx.getCurrentThreadCpuTime() - c0) / ((long) batch * opsPerSequence[verb]);
            }
        }
        System.out.printf("%d rounds of %d sequences per way; thread CPU time per operation, ns%n", rounds, batch);
        System.out.printf("%-13s %-8s %8s %8s%n", "verb", "way", "min", "median");
        for (int verb = 0; verb < VERBS.length; verb++) {
            for (int way = 0; way < ways; way++) {
                double[] s = cpu[verb][way].clone();
                Arrays.sort(s);
                System.out.printf("%-13s %-8s %8.1f %8.1f%n", VERBS[verb], WAYS[way], s[0], s[rounds / 2]);
            }
        }
        System.out.printf("%nmedians over rounds of the same round's pair: all rounds | rounds where C was fast | slow%n");
        System.out.printf("%-13s %-34s %-34s %-17s %-44s %s%n", "verb", "verbs4j - raw FFM, ns", "verbs4j / JNI",
                "rounds fast/slow", "verbs4j - raw FFM on verbs4j's objects, ns", "verbs4j / JNI on verbs4j's objects");
        for (int row = 0; row < (conf == null ? 1 : 2) * VERBS.length; row++) {
            int verb = row % VERBS.length;
            int base = row < VERBS.length ? 3 : 6; // verbs4j shared, then confined, with their same-objects twins
            double[] cRow = cpu[verb][0];
            double best = Arrays.stream(cRow).min().orElseThrow();
            boolean[] slow = new boolean[rounds];
            int nSlow = 0;
            for (int round = 0; round < rounds; round++) {
                slow[round] = cRow[round] > SLOW * best;
                nSlow += slow[round] ? 1 : 0;
            }
            double[] diff = new double[rounds], ratio = new double[rounds], sameDiff = new double[rounds],
                    sameRatio = new double[rounds];
            for (int round = 0; round < rounds; round++) {
                diff[round] = cpu[verb][base][round] - cpu[verb][1][round];
                ratio[round] = cpu[verb][base][round] / cpu[verb][2][round];
                sameDiff[round] = cpu[verb][base][round] - cpu[verb][base + 1][round];
                sameRatio[round] = cpu[verb][base][round] / cpu[verb][base + 2][round];
            }
            System.out.printf("%-13s %-34s %-34s %-17s %-44s %s%n", VERBS[verb] + (base == 6 ? " conf" : ""),
                    String.format("%+.1f | %s | %s", median(diff, slow, null), fmt("%+.1f", median(diff, slow, false)),
                            fmt("%+.1f", median(diff, slow, true))),
                    String.format("%.2f | %s | %s", median(ratio, slow, null), fmt("%.2f", median(ratio, slow, false)),
                            fmt("%.2f", median(ratio, slow, true))),
                    (rounds - nSlow) + "/" + nSlow,
                    String.format("%+.1f | %s | %s", median(sameDiff, slow, null), fmt("%+.1f", median(sameDiff, slow, false)),
                            fmt("%+.1f", median(sameDiff, slow, true))),
                    String.format("%.2f | %s | %s", median(sameRatio, slow, null), fmt("%.2f", median(sameRatio, slow, false)),
                            fmt("%.2f", median(sameRatio, slow, true))));
        }
        System.out.println("(checksum " + sink + ")");
    }

    /**
     * Adds a compiler directive ({@code jcmd Compiler.directives_add}, through the platform's
     * diagnostic command bean) that inlines the rigs' methods into whatever probe method calls
     * them, so that all the Java rigs have the same shape: one loop per batch with the verb's
     * sequence in it, not a call.
     */
    private static void inlineRigs() throws Exception {
        String rigs = "\"+io/github/verbs4j/jmh/RawRig.*\", \"+io/github/verbs4j/jmh/JniRig.*\", "
                + "\"+io/github/verbs4j/jmh/JavaRig.*\", \"+io/github/verbs4j/jmh/RawOnJavaRig.*\", "
                + "\"+io/github/verbs4j/jmh/JniOnJavaRig.*\"";
        Path file = Files.createTempFile("verb-rows-probe", ".json");
        try {
            Files.writeString(file, "[{ match: \"io/github/verbs4j/jmh/VerbRowsProbe.*\", inline: [" + rigs + "] }]");
            Object reply = ManagementFactory.getPlatformMBeanServer().invoke(
                    new ObjectName("com.sun.management:type=DiagnosticCommand"), "compilerDirectivesAdd",
                    new Object[] {new String[] {file.toString()}}, new String[] {String[].class.getName()});
            String text = String.valueOf(reply).strip();
            if (!text.startsWith("1 compiler directives added")) {
                throw new IllegalStateException("the compiler refused the probe's inline directive: " + text);
            }
        } finally {
            Files.deleteIfExists(file);
        }
    }

    /** The median of the values whose round is slow == which (all of them when which is null); NaN if none. */
    private static double median(double[] values, boolean[] slow, Boolean which) {
        double[] picked = new double[values.length];
        int n = 0;
        for (int i = 0; i < values.length; i++) {
            if (which == null || slow[i] == which) {
                picked[n++] = values[i];
            }
        }
        if (n == 0) {
            return Double.NaN;
        }
        Arrays.sort(picked, 0, n);
        return picked[n / 2];
    }

    private static String fmt(String format, double value) {
        return Double.isNaN(value) ? "-" : String.format(format, value);
    }
}
