package io.github.verbs4j.testsupport;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;

/**
 * A thread's allocated bytes and CPU time ({@code com.sun.management.ThreadMXBean}), for the
 * tests that show a hot path allocates nothing or an idle wait burns no CPU. Reached by
 * reflection because the tests compile inside verbs4j's modules, none of which reads
 * java.management; invoked with exact types, so measuring boxes nothing.
 *
 * <p>The one copy for every module's tests: verbs-core's test-jar carries this package only
 * (verbs-core/pom.xml), and the other modules take it as a test dependency.
 */
public final class ThreadMeter {

    private ThreadMeter() {
    }

    private static final Object THREADS;
    private static final MethodHandle ALLOCATED_BYTES;
    private static final MethodHandle THREAD_ALLOCATED_BYTES;
    private static final MethodHandle CPU_TIME;

    static {
        try {
            THREADS = Class.forName("java.lang.management.ManagementFactory").getMethod("getThreadMXBean").invoke(null);
            Class<?> extended = Class.forName("com.sun.management.ThreadMXBean");
            MethodHandles.Lookup lookup = MethodHandles.publicLookup();
            ALLOCATED_BYTES = lookup
                    .findVirtual(extended, "getCurrentThreadAllocatedBytes", MethodType.methodType(long.class))
                    .asType(MethodType.methodType(long.class, Object.class));
            THREAD_ALLOCATED_BYTES = lookup
                    .findVirtual(extended, "getThreadAllocatedBytes", MethodType.methodType(long.class, long.class))
                    .asType(MethodType.methodType(long.class, Object.class, long.class));
            CPU_TIME = lookup
                    .findVirtual(Class.forName("java.lang.management.ThreadMXBean"), "getCurrentThreadCpuTime",
                            MethodType.methodType(long.class))
                    .asType(MethodType.methodType(long.class, Object.class));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
        // the first call through each handle links it, which allocates: done here, so that no
        // measurement (a thread's own taken just before another thread's) counts it
        allocatedBytes();
        allocatedBytes(Thread.currentThread());
        cpuNanos();
    }

    /**
     * Bytes the current thread allocated so far.
     *
     * @return the running total
     */
    public static long allocatedBytes() {
        try {
            return (long) ALLOCATED_BYTES.invokeExact(THREADS);
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    /**
     * Bytes another live thread allocated so far.
     *
     * @param thread the thread
     * @return the running total, or -1 when the thread is no longer alive
     */
    public static long allocatedBytes(Thread thread) {
        try {
            return (long) THREAD_ALLOCATED_BYTES.invokeExact(THREADS, thread.threadId());
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    /**
     * CPU nanoseconds the current thread used so far.
     *
     * @return the running total
     */
    public static long cpuNanos() {
        try {
            return (long) CPU_TIME.invokeExact(THREADS);
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }
}
