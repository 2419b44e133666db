package io.github.verbs4j.examples;

import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;

/**
 * The JIT's total compilation time, as the tools' warm-ups read it. A warm-up round that moved it
 * compiled something: the timed run would then start in code still being compiled, and share the
 * CPUs with the compiler threads (the ping-pong tools and {@code transfer-bench} end their warm-up
 * at the first round that compiles nothing). Where the JVM does not report compilation time,
 * {@link #known()} is false and the warm-ups fall back to their minimum.
 */
public final class JitCompilation {

    private static final CompilationMXBean JIT = ManagementFactory.getCompilationMXBean();
    private static final boolean KNOWN = JIT != null && JIT.isCompilationTimeMonitoringSupported();

    private JitCompilation() {
    }

    /** Whether this JVM reports the JIT's compilation time. */
    public static boolean known() {
        return KNOWN;
    }

    /** The milliseconds the JIT has spent compiling so far; 0 when not {@link #known()}. */
    public static long millis() {
        return KNOWN ? JIT.getTotalCompilationTime() : 0;
    }

    /**
     * Waits (at most {@code maxMillis}) until the JIT has compiled nothing for three 20 ms looks in
     * a row: the compilations a warm-up queued would otherwise run on the CPUs the timed run's
     * polling threads need, which on a machine with few cores costs the first thousand iterations
     * milliseconds each. Returns at once when not {@link #known()}; keeps the interrupt status.
     */
    public static void awaitQuiet(long maxMillis) {
        if (!KNOWN) {
            return;
        }
        long deadline = System.nanoTime() + maxMillis * 1_000_000L;
        long last = millis();
        for (int quiet = 0; quiet < 3 && System.nanoTime() < deadline; ) {
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            long now = millis();
            quiet = now == last ? quiet + 1 : 0;
            last = now;
        }
    }
}
