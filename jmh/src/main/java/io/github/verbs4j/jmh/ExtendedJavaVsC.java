package io.github.verbs4j.jmh;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;

import java.util.concurrent.TimeUnit;

/**
 * The extended QP and CQ (post-send API over {@code ibv_qp_ex}, polling over {@code ibv_cq_ex})
 * against the same verbs from C, beside the classic path ({@code ibv_post_send} +
 * {@code ibv_poll_cq}) in the same run: {@code writeClassic*} are {@link JavaVsC}'s
 * {@code write*} again, so that the four WRITE numbers come from one run. As in
 * {@link JavaVsC}, a C benchmark is one downcall into a loop of {@value JavaVsC#C_ITERATIONS}
 * sequences; times are per sequence (one signaled 64-byte WRITE posted and its completion
 * polled), on softrdma, where in-process operations complete inside the post.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class ExtendedJavaVsC {

    // ---- RDMA WRITE of 64 bytes, signaled, poll: classic and extended, Java and C

    @Benchmark
    public long writeClassicJava(JavaRig rig) {
        return rig.write();
    }

    @Benchmark
    @OperationsPerInvocation(JavaVsC.C_ITERATIONS)
    public long writeClassicC(CRig rig) {
        return rig.run("bl_write", Baseline.WRITE, JavaVsC.C_ITERATIONS);
    }

    @Benchmark
    public long writeExtendedJava(ExtendedRig rig) {
        return rig.write();
    }

    @Benchmark
    @OperationsPerInvocation(JavaVsC.C_ITERATIONS)
    public long writeExtendedC(ExtendedCRig rig) {
        return rig.run("blx_write", ExtendedCRig.WRITE, JavaVsC.C_ITERATIONS);
    }

    // ---- an empty extended CQ: start_poll answering ENOENT

    @Benchmark
    public boolean pollEmptyExtendedJava(ExtendedRig rig) {
        return rig.pollEmpty();
    }

    @Benchmark
    @OperationsPerInvocation(JavaVsC.C_ITERATIONS)
    public long pollEmptyExtendedC(ExtendedCRig rig) {
        return rig.run("blx_poll_empty", ExtendedCRig.POLL_EMPTY, JavaVsC.C_ITERATIONS);
    }
}
