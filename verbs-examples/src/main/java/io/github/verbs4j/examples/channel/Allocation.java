package io.github.verbs4j.examples.channel;

import java.lang.management.ManagementFactory;

/**
 * Heap bytes allocated by every thread of this JVM so far ({@code getTotalThreadAllocatedBytes}
 * of {@link com.sun.management.ThreadMXBean}, which counts threads that ended too): the
 * benchmarks read it at the start and the end of their steady state and print the difference per
 * message. {@code -1} where the JVM does not measure it.
 */
final class Allocation {

    private static final com.sun.management.ThreadMXBean THREADS = threads();

    private Allocation() {
    }

    private static com.sun.management.ThreadMXBean threads() {
        if (ManagementFactory.getThreadMXBean() instanceof com.sun.management.ThreadMXBean t
                && t.isThreadAllocatedMemorySupported()) {
            t.setThreadAllocatedMemoryEnabled(true);
            return t;
        }
        return null;
    }

    /** Whether {@link #total()} measures. */
    static boolean supported() {
        return THREADS != null && THREADS.getTotalThreadAllocatedBytes() >= 0;
    }

    /** Bytes allocated by all threads since the JVM started, or -1. */
    static long total() {
        return THREADS == null ? -1 : THREADS.getTotalThreadAllocatedBytes();
    }

    /** {@code bytes} over {@code messages} per message, NaN when not measured. */
    static double perMessage(long bytes, long messages) {
        return !supported() || messages <= 0 ? Double.NaN : (double) bytes / messages;
    }
}
