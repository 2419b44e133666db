package io.github.verbs4j.netty;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The event loop's wakeups: an {@code eventfd(2)} that {@link RdmaIoHandler#wakeup()} writes, and
 * a {@code timerfd(2)} that ends a wait at the next scheduled task to the nanosecond (the wait's
 * own timeout, {@code poll(2)}'s, is in milliseconds), both watched by the loop's wait
 * ({@link io.github.verbs4j.PollSet}, with the loop's completion and CM channels). They stay here
 * rather than beside {@code PollSet} in verbs-core: wakeup descriptors are the event loop's own
 * business, nothing of RDMA, and nothing else in verbs4j uses them.
 */
final class Syscalls {

    private static final Linker LINKER = Linker.nativeLinker();
    private static final SymbolLookup LIBC = LINKER.defaultLookup();

    private static final MethodHandle EVENTFD = LINKER.downcallHandle(LIBC.find("eventfd").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
    // read/write of 8 bytes on an eventfd never block long: critical (no thread-state transition)
    private static final MethodHandle READ = LINKER.downcallHandle(LIBC.find("read").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG),
            Linker.Option.critical(false));
    private static final MethodHandle WRITE = LINKER.downcallHandle(LIBC.find("write").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG),
            Linker.Option.critical(false));
    private static final MethodHandle TIMERFD_CREATE = LINKER.downcallHandle(LIBC.find("timerfd_create").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
    // arming a timer never blocks: critical, as read and write above
    private static final MethodHandle TIMERFD_SETTIME = LINKER.downcallHandle(LIBC.find("timerfd_settime").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.ADDRESS,
                    ValueLayout.ADDRESS),
            Linker.Option.critical(false));
    private static final MethodHandle CLOSE = LINKER.downcallHandle(LIBC.find("close").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));

    private static final int EFD_CLOEXEC = 02000000;
    private static final int EFD_NONBLOCK = 04000;
    private static final int CLOCK_MONOTONIC = 1;
    private static final int TFD_CLOEXEC = 02000000;
    private static final int TFD_NONBLOCK = 04000;
    /** {@code struct itimerspec}: the interval's and the first expiry's seconds and nanoseconds. */
    static final long ITIMERSPEC_SIZE = 4 * Long.BYTES;

    private Syscalls() {
    }

    /** A non-blocking, close-on-exec eventfd with counter 0. */
    static int eventfd() {
        return descriptor(EVENTFD, 0, EFD_CLOEXEC | EFD_NONBLOCK, "eventfd(2)", "wakeup");
    }

    /** A non-blocking, close-on-exec timerfd on the monotonic clock, disarmed. */
    static int timerfd() {
        return descriptor(TIMERFD_CREATE, CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK, "timerfd_create(2)", "timer");
    }

    /** The descriptor {@code create(a, b)} returns, or an exception naming {@code call} and what the loop wanted it for. */
    private static int descriptor(MethodHandle create, int a, int b, String call, String purpose) {
        int fd;
        try {
            fd = (int) create.invokeExact(a, b);
        } catch (Throwable t) {
            throw new IllegalStateException(call + " failed to run", t);
        }
        if (fd < 0) {
            throw new IllegalStateException(call + " failed: no descriptor for the event loop's " + purpose);
        }
        return fd;
    }

    /**
     * Arms timer {@code fd} to expire once, {@code nanos} (at least 1) from now; {@code spec} is
     * scratch of {@link #ITIMERSPEC_SIZE} bytes.
     *
     * @return 0, or -1 when the kernel refused (then the wait falls back to its millisecond timeout)
     */
    static int armTimer(int fd, long nanos, MemorySegment spec) {
        long n = Math.max(1, nanos);
        spec.set(ValueLayout.JAVA_LONG, 0, 0L); // no interval: one expiry
        spec.set(ValueLayout.JAVA_LONG, 8, 0L);
        spec.set(ValueLayout.JAVA_LONG, 16, n / 1_000_000_000L);
        spec.set(ValueLayout.JAVA_LONG, 24, n % 1_000_000_000L);
        try {
            return (int) TIMERFD_SETTIME.invokeExact(fd, 0, spec, MemorySegment.NULL);
        } catch (Throwable t) {
            throw new IllegalStateException("timerfd_settime(2) failed to run", t);
        }
    }

    static long read(int fd, MemorySegment buffer) {
        try {
            return (long) READ.invokeExact(fd, buffer, buffer.byteSize());
        } catch (Throwable t) {
            throw new IllegalStateException("read(2) failed to run", t);
        }
    }

    static long write(int fd, MemorySegment buffer) {
        try {
            return (long) WRITE.invokeExact(fd, buffer, buffer.byteSize());
        } catch (Throwable t) {
            throw new IllegalStateException("write(2) failed to run", t);
        }
    }

    static void close(int fd) {
        try {
            int rc = (int) CLOSE.invokeExact(fd);
            assert rc == 0 || rc == -1;
        } catch (Throwable t) {
            throw new IllegalStateException("close(2) failed to run", t);
        }
    }
}
