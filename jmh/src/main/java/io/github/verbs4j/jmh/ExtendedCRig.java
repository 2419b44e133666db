package io.github.verbs4j.jmh;

import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/** The C side of {@link ExtendedJavaVsC}: {@code extended.c}'s rig and loops. */
@State(Scope.Thread)
public class ExtendedCRig {

    private static final FunctionDescriptor LOOP = FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.ADDRESS,
            ValueLayout.JAVA_LONG);
    static final MethodHandle OPEN = Baseline.handle("blx_open",
            FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
    static final MethodHandle CLOSE = Baseline.handle("blx_close", FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
    static final MethodHandle WRITE = Baseline.handle("blx_write", LOOP);
    static final MethodHandle POLL_EMPTY = Baseline.handle("blx_poll_empty", LOOP);

    private MemorySegment rig;

    @Setup(Level.Trial)
    public void setUp() throws Throwable {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment err = arena.allocate(256);
            rig = (MemorySegment) OPEN.invokeExact(err, 256);
            if (rig.equals(MemorySegment.NULL)) {
                throw new IllegalStateException("C extended rig setup failed: " + err.getString(0));
            }
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Throwable {
        if (rig != null) {
            CLOSE.invokeExact(rig);
            rig = null;
        }
    }

    long run(String name, MethodHandle loop, long iterations) {
        long result;
        try {
            result = (long) loop.invokeExact(rig, iterations);
        } catch (Throwable t) {
            throw new IllegalStateException(name, t);
        }
        return Baseline.check(name, result);
    }
}
