package io.github.verbs4j.cm;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;

/**
 * The current thread's allocated bytes and CPU time ({@code com.sun.management.ThreadMXBean}),
 * reached by reflection because the tests compile inside the verbs4j cm module, which does not
 * read java.management. Invoked with exact types: measuring boxes nothing.
 */
final class ThreadMeter {

    private ThreadMeter() {
    }

    private static final Object THREADS;
    private static final MethodHandle ALLOCATED_BYTES;
    private static final MethodHandle CPU_TIME;

    static {
        try {
            THREADS = Class.forName("java.lang.management.ManagementFactory").getMethod("getThreadMXBean").invoke(null);
            ALLOCATED_BYTES = MethodHandles.publicLookup()
                    .findVirtual(Class.forName("com.sun.management.ThreadMXBean"), "getCurrentThreadAllocatedBytes",
                            MethodType.methodType(long.class))
                    .asType(MethodType.methodType(long.class, Object.class));
            CPU_TIME = MethodHandles.publicLookup()
                    .findVirtual(Class.forName("java.lang.management.ThreadMXBean"), "getCurrentThreadCpuTime",
                            MethodType.methodType(long.class))
                    .asType(MethodType.methodType(long.class, Object.class));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** Bytes the current thread allocated so far. */
    static long allocatedBytes() {
        try {
            return (long) ALLOCATED_BYTES.invokeExact(THREADS);
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    /** CPU nanoseconds the current thread used so far. */
    static long cpuNanos() {
        try {
            return (long) CPU_TIME.invokeExact(THREADS);
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }
}
