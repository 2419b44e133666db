package io.github.verbs4j.channel;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Sets {@code O_NONBLOCK} on the group's CM event channel fd ({@code fcntl}), so that
 * {@code rdma_get_cm_event} answers EAGAIN instead of blocking when the event that made the fd
 * readable went away with its id (closed by another thread between the poll and the read). The
 * group's CM thread then polls again, and can always be stopped.
 */
final class NonBlocking {

    private static final int F_GETFL = 3;
    private static final int F_SETFL = 4;
    private static final int O_NONBLOCK = 04000;
    private static final MethodHandle FCNTL_GET;
    private static final MethodHandle FCNTL_SET;

    static {
        Linker linker = Linker.nativeLinker();
        var fcntl = linker.defaultLookup().find("fcntl").orElseThrow();
        FCNTL_GET = linker.downcallHandle(fcntl, FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
        FCNTL_SET = linker.downcallHandle(fcntl, FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT,
                ValueLayout.JAVA_INT, ValueLayout.JAVA_INT), Linker.Option.firstVariadicArg(2));
    }

    private NonBlocking() {
    }

    static void set(int fd) {
        try {
            int flags = (int) FCNTL_GET.invokeExact(fd, F_GETFL);
            if (flags < 0 || (int) FCNTL_SET.invokeExact(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
                throw new IllegalStateException("fcntl(" + fd + ", O_NONBLOCK) failed");
            }
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("fcntl(" + fd + ") failed", t);
        }
    }
}
