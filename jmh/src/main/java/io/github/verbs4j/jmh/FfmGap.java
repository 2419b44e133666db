package io.github.verbs4j.jmh;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;

import java.util.concurrent.TimeUnit;

/**
 * {@link GapRig}'s variants of one WRITE or READ + poll as JMH benchmarks: what separates the raw
 * FFM twin from the JNI twin, one change at a time. Each benchmark runs in its own fork, so its
 * number also carries that fork's luck (code and memory placement); {@link GapProbe} runs the same
 * variants interleaved in one JVM, which a loaded machine needs. docs/measurements/performance.md ("Why raw FFM
 * trailed the JNI twin") has the runs.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class FfmGap {

    /** {@link RawRig}'s way: address-less handles, segments of a confined arena. */
    @Benchmark
    public long writeArena(GapRig rig) throws Throwable {
        return rig.writeArena();
    }

    /** As {@link #writeArena}, global segments. */
    @Benchmark
    public long writeGlobal(GapRig rig) throws Throwable {
        return rig.writeGlobal();
    }

    /** Handles bound to the provider's functions, global segments. */
    @Benchmark
    public long writeBound(GapRig rig) throws Throwable {
        return rig.writeBound();
    }

    /** Address-less handles, pointers as {@code long}s. */
    @Benchmark
    public long writeLong(GapRig rig) throws Throwable {
        return rig.writeLong();
    }

    /** The JNI twin's C functions through FFM. */
    @Benchmark
    public long writeJniShape(GapRig rig) throws Throwable {
        return rig.writeJniShape();
    }

    /** The JNI twin. */
    @Benchmark
    public long writeJni(GapRig rig) {
        return rig.writeJni();
    }

    /** {@link RawRig}'s way: address-less handles, segments of a confined arena. */
    @Benchmark
    public long readArena(GapRig rig) throws Throwable {
        return rig.readArena();
    }

    /** As {@link #readArena}, global segments. */
    @Benchmark
    public long readGlobal(GapRig rig) throws Throwable {
        return rig.readGlobal();
    }

    /** Handles bound to the provider's functions, global segments. */
    @Benchmark
    public long readBound(GapRig rig) throws Throwable {
        return rig.readBound();
    }

    /** Address-less handles, pointers as {@code long}s. */
    @Benchmark
    public long readLong(GapRig rig) throws Throwable {
        return rig.readLong();
    }

    /** The JNI twin's C functions through FFM. */
    @Benchmark
    public long readJniShape(GapRig rig) throws Throwable {
        return rig.readJniShape();
    }

    /** The JNI twin. */
    @Benchmark
    public long readJni(GapRig rig) {
        return rig.readJni();
    }
}
