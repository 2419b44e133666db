package io.github.verbs4j.raw;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * {@code fcntl(2)}'s file status flags: how verbs4j makes a file descriptor it reads after
 * {@link Poll} non-blocking, so that a read whose event another thread took meanwhile answers
 * EAGAIN instead of blocking without a bound.
 */
public final class FileStatusFlags {

    private FileStatusFlags() {
    }

    private static final int F_GETFL = 3;
    private static final int F_SETFL = 4;
    /** Linux's O_NONBLOCK (asm-generic/fcntl.h: 04000 octal) on every architecture verbs4j builds for. */
    private static final int O_NONBLOCK = 0x800;

    /** {@code int fcntl(int fd, int cmd)}, errno captured. */
    private static final MethodHandle FCNTL_GET = Downcalls.errnoCapturing(Linker.nativeLinker().defaultLookup(), "fcntl",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    /** {@code int fcntl(int fd, int cmd, int arg)} (variadic after cmd), errno captured. */
    private static final MethodHandle FCNTL_SET = Downcalls.errnoCapturing(Linker.nativeLinker().defaultLookup(), "fcntl",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT), Linker.Option.firstVariadicArg(2));

    /**
     * Sets {@code O_NONBLOCK} on {@code fd}, keeping its other flags.
     *
     * @return 0, or the errno of the failed {@code fcntl} (EBADF for a closed fd)
     */
    public static int setNonBlocking(int fd) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            int flags = (int) FCNTL_GET.invokeExact(errno, fd, F_GETFL);
            if (flags < 0) {
                return Downcalls.errno(errno);
            }
            if ((flags & O_NONBLOCK) != 0) {
                return 0;
            }
            int rc = (int) FCNTL_SET.invokeExact(errno, fd, F_SETFL, flags | O_NONBLOCK);
            return rc < 0 ? Downcalls.errno(errno) : 0;
        } catch (Throwable t) {
            throw Downcalls.unexpected("fcntl", t);
        }
    }
}
