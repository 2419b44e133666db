package io.github.verbs4j.netty;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The few libc calls of the event loop's wait: {@code poll(2)} over several descriptors and the
 * {@code eventfd(2)} that wakes it. The raw layer's {@code Poll.awaitAnyReadable} does the same
 * wait over the generated {@code pollfd} layout, with errno captured, but verbs-ffi exports its raw
 * package to core, cm and the test harness only; until the transport may use it (or core offers a
 * public wait over several descriptors), this second binding of {@code poll(2)}, with the
 * {@code pollfd} offsets written by hand, stands in for it and should then be removed.
 */
final class Syscalls {

    private static final Linker LINKER = Linker.nativeLinker();
    private static final SymbolLookup LIBC = LINKER.defaultLookup();

    private static final MethodHandle POLL = LINKER.downcallHandle(LIBC.find("poll").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT));
    private static final MethodHandle EVENTFD = LINKER.downcallHandle(LIBC.find("eventfd").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
    // read/write of 8 bytes on an eventfd never block long: critical (no thread-state transition)
    private static final MethodHandle READ = LINKER.downcallHandle(LIBC.find("read").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG),
            Linker.Option.critical(false));
    private static final MethodHandle WRITE = LINKER.downcallHandle(LIBC.find("write").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG),
            Linker.Option.critical(false));
    private static final MethodHandle CLOSE = LINKER.downcallHandle(LIBC.find("close").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));

    /** {@code struct pollfd}: int fd; short events; short revents. */
    static final long POLLFD_SIZE = 8;
    static final short POLLIN = 0x1;
    /** POLLERR | POLLHUP | POLLNVAL: a descriptor worth looking at although not readable. */
    static final short POLL_TROUBLE = 0x8 | 0x10 | 0x20;

    private static final int EFD_CLOEXEC = 02000000;
    private static final int EFD_NONBLOCK = 04000;

    private Syscalls() {
    }

    /** {@code poll(2)}; a negative result is an error (EINTR among them), which callers treat as no events. */
    static int poll(MemorySegment fds, int count, int timeoutMillis) {
        try {
            return (int) POLL.invokeExact(fds, (long) count, timeoutMillis);
        } catch (Throwable t) {
            throw new IllegalStateException("poll(2) failed to run", t);
        }
    }

    /** A non-blocking, close-on-exec eventfd with counter 0. */
    static int eventfd() {
        try {
            int fd = (int) EVENTFD.invokeExact(0, EFD_CLOEXEC | EFD_NONBLOCK);
            if (fd < 0) {
                throw new IllegalStateException("eventfd(2) failed: no descriptor for the event loop's wakeup");
            }
            return fd;
        } catch (IllegalStateException e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("eventfd(2) failed to run", t);
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
