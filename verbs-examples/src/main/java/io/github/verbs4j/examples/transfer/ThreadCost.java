package io.github.verbs4j.examples.transfer;

import java.lang.management.ManagementFactory;

/**
 * The current thread's CPU time and allocated bytes between {@link #start()} and
 * {@link #stop()} ({@code com.sun.management.ThreadMXBean}): what the benchmark prints per chunk.
 * Each is -1 where the JVM does not measure it.
 */
final class ThreadCost {

    private static final com.sun.management.ThreadMXBean THREADS =
            ManagementFactory.getThreadMXBean() instanceof com.sun.management.ThreadMXBean t ? t : null;

    /** What a thread spent: CPU nanoseconds and heap bytes, -1 when not measured. */
    record Measured(long cpuNanos, long allocatedBytes) {
    }

    private final long cpu0;
    private final long bytes0;

    private ThreadCost() {
        this.cpu0 = cpu();
        this.bytes0 = bytes();
    }

    /** Starts measuring the current thread. */
    static ThreadCost start() {
        return new ThreadCost();
    }

    /** What the current thread (the one that started this) spent since {@link #start()}. */
    Measured stop() {
        long c = cpu();
        long b = bytes();
        return new Measured(c < 0 || cpu0 < 0 ? -1 : c - cpu0, b < 0 || bytes0 < 0 ? -1 : b - bytes0);
    }

    private static long cpu() {
        return THREADS != null && THREADS.isCurrentThreadCpuTimeSupported() ? THREADS.getCurrentThreadCpuTime() : -1;
    }

    private static long bytes() {
        return THREADS != null && THREADS.isThreadAllocatedMemorySupported() ? THREADS.getCurrentThreadAllocatedBytes()
                : -1;
    }
}
