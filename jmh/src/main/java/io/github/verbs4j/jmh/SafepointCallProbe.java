package io.github.verbs4j.jmh;

import io.github.verbs4j.CompletionQueue;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.Arrays;

/**
 * The cost of one call of the empty poll's safepoint call ({@code CompletionQueue.letTheJvmStop},
 * package-private, reached through a private lookup: whatever the verbs-core on the class path
 * makes of it) beside one {@link Thread#yield}, in alternated rounds: per round and way the
 * thread's CPU ns per call and the wall ns per call. Before 2026-11-30 {@code letTheJvmStop} was
 * {@code Thread.yield()} itself; since, a non-critical downcall to libc's {@code labs}.
 *
 * <pre>
 * java --enable-native-access=ALL-UNNAMED -cp jmh/target/benchmarks.jar \
 *     io.github.verbs4j.jmh.SafepointCallProbe [rounds [yields per round]]
 * </pre>
 *
 * The safepoint call runs 100 times as many calls per round as the yield (it is that much shorter).
 */
public final class SafepointCallProbe {

    private static final MethodHandle LET_THE_JVM_STOP;

    static {
        try {
            LET_THE_JVM_STOP = MethodHandles.privateLookupIn(CompletionQueue.class, MethodHandles.lookup())
                    .findStatic(CompletionQueue.class, "letTheJvmStop", MethodType.methodType(void.class));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private SafepointCallProbe() {
    }

    private static void safepointCalls(int n) throws Throwable {
        for (int i = 0; i < n; i++) {
            LET_THE_JVM_STOP.invokeExact();
        }
    }

    private static void yields(int n) {
        for (int i = 0; i < n; i++) {
            Thread.yield();
        }
    }

    /**
     * Runs the rounds.
     *
     * @param args rounds (default 5) and yields per round (default 20000)
     * @throws Throwable when the call fails
     */
    public static void main(String[] args) throws Throwable {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
        int yieldsPerRound = args.length > 1 ? Integer.parseInt(args[1]) : 20_000;
        int callsPerRound = yieldsPerRound * 100;
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        // warm-up: both loops compiled
        for (int i = 0; i < 3; i++) {
            safepointCalls(callsPerRound / 10);
            yields(yieldsPerRound / 10);
        }
        double[] callCpu = new double[rounds];
        double[] callWall = new double[rounds];
        double[] yieldCpu = new double[rounds];
        double[] yieldWall = new double[rounds];
        for (int r = 0; r < rounds; r++) {
            long c0 = mx.getCurrentThreadCpuTime();
            long w0 = System.nanoTime();
            safepointCalls(callsPerRound);
            long w1 = System.nanoTime();
            long c1 = mx.getCurrentThreadCpuTime();
            yields(yieldsPerRound);
            long w2 = System.nanoTime();
            long c2 = mx.getCurrentThreadCpuTime();
            callCpu[r] = (double) (c1 - c0) / callsPerRound;
            callWall[r] = (double) (w1 - w0) / callsPerRound;
            yieldCpu[r] = (double) (c2 - c1) / yieldsPerRound;
            yieldWall[r] = (double) (w2 - w1) / yieldsPerRound;
            System.out.printf("round %d: letTheJvmStop %.1f ns CPU %.1f ns wall per call; Thread.yield %.1f ns CPU %.1f ns wall%n",
                    r + 1, callCpu[r], callWall[r], yieldCpu[r], yieldWall[r]);
        }
        System.out.printf("median: letTheJvmStop %.1f ns CPU %.1f ns wall per call; Thread.yield %.1f ns CPU %.1f ns wall"
                + " (%d rounds; %,d and %,d calls a round)%n", median(callCpu), median(callWall), median(yieldCpu),
                median(yieldWall), rounds, callsPerRound, yieldsPerRound);
    }

    private static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }
}
