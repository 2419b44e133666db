package io.github.verbs4j.cm;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The event channel's fd is non-blocking: an event that a poll saw may be gone when
 * {@code rdma_get_cm_event} runs (its id destroyed by another thread meanwhile), and a blocking
 * read would then wait without a bound. With the fd non-blocking the read answers EAGAIN and
 * {@link EventChannel#next} keeps to its timeout.
 */
class EventChannelTest {

    private static final int F_GETFL = 3;
    private static final int O_NONBLOCK = 0x800;

    @BeforeAll
    static void softrdmaCm() {
        SoftrdmaCm.require();
    }

    @Test
    void theFdIsNonBlocking() throws Throwable {
        Linker linker = Linker.nativeLinker();
        MethodHandle fcntl = linker.downcallHandle(linker.defaultLookup().find("fcntl").orElseThrow(),
                FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
        try (EventChannel channel = EventChannel.create()) {
            int flags = (int) fcntl.invokeExact(channel.fd(), F_GETFL);
            assertTrue(flags >= 0, "fcntl(F_GETFL) failed");
            assertNotEquals(0, flags & O_NONBLOCK, "the CM event channel's fd is blocking");
        }
    }
}
