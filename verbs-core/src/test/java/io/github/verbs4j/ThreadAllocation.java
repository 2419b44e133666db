package io.github.verbs4j;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;

/**
 * The bytes the current thread has allocated
 * ({@code com.sun.management.ThreadMXBean.getCurrentThreadAllocatedBytes()}), for the tests that
 * show a hot path allocates nothing. Reached by reflection because the tests compile inside the
 * verbs4j module, which does not read java.management; invoked with exact types, so the
 * measurement itself boxes nothing.
 */
final class ThreadAllocation {

    private ThreadAllocation() {
    }

    private static final Object THREADS;
    private static final MethodHandle ALLOCATED_BYTES;

    static {
        try {
            THREADS = Class.forName("java.lang.management.ManagementFactory").getMethod("getThreadMXBean").invoke(null);
            ALLOCATED_BYTES = MethodHandles.publicLookup()
                    .findVirtual(Class.forName("com.sun.management.ThreadMXBean"), "getCurrentThreadAllocatedBytes",
                            MethodType.methodType(long.class))
                    .asType(MethodType.methodType(long.class, Object.class));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** The current thread's allocated bytes so far. */
    static long allocatedBytes() {
        try {
            return (long) ALLOCATED_BYTES.invokeExact(THREADS);
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }
}
