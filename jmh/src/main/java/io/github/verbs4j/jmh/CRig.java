package io.github.verbs4j.jmh;

import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

/**
 * The C side of every benchmark pair: the rig {@code baseline.c}'s {@code bl_open} builds in C
 * (the same objects as {@link JavaRig}'s), and one downcall per invocation into a C loop that
 * runs the verb sequence {@code iterations} times.
 */
@State(Scope.Thread)
public class CRig {

    private MemorySegment rig;

    @Setup(Level.Trial)
    public void setUp() {
        rig = Baseline.open();
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        if (rig != null) {
            Baseline.close(rig);
            rig = null;
        }
    }

    /** Runs {@code loop} (an {@code int64_t bl_x(struct bl_rig *, int64_t)}) and checks its result. */
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
