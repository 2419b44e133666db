package io.github.verbs4j.raw;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * libc's file-descriptor calls that core makes itself (the XRC domain's file, the shared-PD
 * model's dup of a command fd), in one place; errno captured on each.
 */
public final class FileDescriptors {

    private FileDescriptors() {
    }

    private static final Linker LINKER = Linker.nativeLinker();

    /** {@code int open(const char *path, int flags, ...)} with a mode. */
    public static final MethodHandle OPEN = Downcalls.errnoCapturing(LINKER.defaultLookup(), "open",
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT),
            Linker.Option.firstVariadicArg(2));
    /** {@code int dup(int fd)}. */
    public static final MethodHandle DUP = Downcalls.errnoCapturing(LINKER.defaultLookup(), "dup",
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
    /** {@code int close(int fd)}. */
    private static final MethodHandle CLOSE = Downcalls.errnoCapturing(LINKER.defaultLookup(), "close",
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));

    /**
     * Closes {@code fd}; returns 0, or the errno {@code close} failed with.
     *
     * @param errno a segment of {@link Downcalls#errnoSegment} for the capture
     */
    public static int close(MemorySegment errno, int fd) {
        try {
            int rc = (int) CLOSE.invokeExact(errno, fd);
            return rc == 0 ? 0 : Downcalls.errno(errno);
        } catch (Throwable t) {
            throw Downcalls.unexpected("close", t);
        }
    }
}
