package io.github.verbs4j.netty;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The event loop's wakeup: an {@code eventfd(2)} that {@link RdmaIoHandler#wakeup()} writes and
 * the loop's wait ({@link io.github.verbs4j.PollSet}, with the loop's completion and CM channels)
 * watches. It stays here rather than beside {@code PollSet} in verbs-core: a wakeup descriptor is
 * the event loop's own business, nothing of RDMA, and nothing else in verbs4j uses one.
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
    private static final MethodHandle CLOSE = LINKER.downcallHandle(LIBC.find("close").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));

    private static final int EFD_CLOEXEC = 02000000;
    private static final int EFD_NONBLOCK = 04000;

    private Syscalls() {
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
