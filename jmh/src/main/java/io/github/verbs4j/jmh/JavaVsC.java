package io.github.verbs4j.jmh;

import io.github.verbs4j.internal.InFlight;
import io.github.verbs4j.internal.NativeHandle;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;

/**
 * verbs4j's hot path against the same verbs called from C, on the same provider (softrdma, where
 * two QPs of one process complete inside {@code post_send}: no syscall, no thread hop), so the
 * difference within a pair is the per-verb overhead of Java over C.
 *
 * <p>Every verb is measured four ways, named {@code <verb>C} (a C loop, {@link CRig}),
 * {@code <verb>Java} (verbs4j, {@link JavaRig}), {@code <verb>JavaRawFfm} (the provider's
 * function pointers through critical downcalls with no verbs4j code, {@link RawRig}) and
 * {@code <verb>Jni} (a JNI shim driven as DiSNI drives libibverbs, {@link JniRig}): JMH runs
 * benchmarks in name order, so the twins run one after the other, under the same conditions.
 * A new verb adds its method to each rig and four benchmarks here, and a row to
 * {@code jmh/report.py}'s {@code PAIRS}. A Java benchmark does its sequence
 * once per invocation; a C benchmark makes one downcall into a loop of {@value #C_ITERATIONS}
 * sequences, and {@link OperationsPerInvocation} divides by the loop count (the one downcall
 * then costs under 0.1 ns per operation). Times are per operation: per sequence, or per WRITE
 * for the chains of 16. {@code writeJavaRawFfm} and {@code pollEmptyJavaRawFfm} ({@link RawRig})
 * split the Java-C difference into FFM's share and verbs4j's own.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(value = 1, jvmArgsAppend = "--enable-native-access=ALL-UNNAMED")
public class JavaVsC {

    static final int C_ITERATIONS = 1024;
    static final int NOP_ITERATIONS = 1 << 16;

    // ---- SEND + RECV ping: post_recv on B, post_send signaled on A, poll both CQs

    @Benchmark
    public long sendRecvJava(JavaRig rig) {
        return rig.sendRecv();
    }

    @Benchmark
    @OperationsPerInvocation(C_ITERATIONS)
    public long sendRecvC(CRig rig) {
        return rig.run("bl_send_recv", Baseline.SEND_RECV, C_ITERATIONS);
    }

    @Benchmark
    public long sendRecvJavaRawFfm(RawRig rig) throws Throwable {
        return rig.sendRecv();
    }

    @Benchmark
    public long sendRecvJni(JniRig rig) {
        return rig.sendRecv();
    }

    // ---- RDMA WRITE of 64 bytes, signaled, poll

    @Benchmark
    public long writeJava(JavaRig rig) {
        return rig.write();
    }

    @Benchmark
    @OperationsPerInvocation(C_ITERATIONS)
    public long writeC(CRig rig) {
        return rig.run("bl_write", Baseline.WRITE, C_ITERATIONS);
    }

    /** The same WRITE + poll from Java with no verbs4j code: raw critical downcalls to the provider. */
    @Benchmark
    public long writeJavaRawFfm(RawRig rig) throws Throwable {
        return rig.write();
    }

    /** The same WRITE + poll through JNI natives, the request serialized once into native memory. */
    @Benchmark
    public long writeJni(JniRig rig) {
        return rig.write();
    }

    // ---- 16 chained RDMA WRITEs per post_send, last one signaled, one poll: time per WRITE

    @Benchmark
    @OperationsPerInvocation(JavaRig.CHAIN)
    public long chain16WriteJava(JavaRig rig) {
        return rig.chain16Write();
    }

    @Benchmark
    @OperationsPerInvocation(C_ITERATIONS * JavaRig.CHAIN)
    public long chain16WriteC(CRig rig) {
        return rig.run("bl_write_chain16", Baseline.WRITE_CHAIN16, C_ITERATIONS);
    }

    @Benchmark
    @OperationsPerInvocation(JavaRig.CHAIN)
    public long chain16WriteJavaRawFfm(RawRig rig) throws Throwable {
        return rig.chain16Write();
    }

    @Benchmark
    @OperationsPerInvocation(JavaRig.CHAIN)
    public long chain16WriteJni(JniRig rig) {
        return rig.chain16Write();
    }

    // ---- RDMA READ of 64 bytes, signaled, poll

    @Benchmark
    public long readJava(JavaRig rig) {
        return rig.read();
    }

    @Benchmark
    @OperationsPerInvocation(C_ITERATIONS)
    public long readC(CRig rig) {
        return rig.run("bl_read", Baseline.READ, C_ITERATIONS);
    }

    @Benchmark
    public long readJavaRawFfm(RawRig rig) throws Throwable {
        return rig.read();
    }

    @Benchmark
    public long readJni(JniRig rig) {
        return rig.read();
    }

    // ---- 64-bit FETCH_AND_ADD, signaled, poll

    @Benchmark
    public long fetchAddJava(JavaRig rig) {
        return rig.fetchAdd();
    }

    @Benchmark
    @OperationsPerInvocation(C_ITERATIONS)
    public long fetchAddC(CRig rig) {
        return rig.run("bl_fetch_add", Baseline.FETCH_ADD, C_ITERATIONS);
    }

    // ---- the verbs4j rows on confined QPs and CQs (QueuePair.confine(), CompletionQueue.confine())

    /** {@link #sendRecvJava} with the QPs and CQs confined to the benchmark thread: no close-guard mark. */
    @Benchmark
    public long sendRecvJavaConfined(ConfinedJavaRig rig) {
        return rig.sendRecv();
    }

    /** {@link #writeJava}, confined. */
    @Benchmark
    public long writeJavaConfined(ConfinedJavaRig rig) {
        return rig.write();
    }

    /** {@link #readJava}, confined. */
    @Benchmark
    public long readJavaConfined(ConfinedJavaRig rig) {
        return rig.read();
    }

    /** {@link #chain16WriteJava}, confined. */
    @Benchmark
    @OperationsPerInvocation(JavaRig.CHAIN)
    public long chain16WriteJavaConfined(ConfinedJavaRig rig) {
        return rig.chain16Write();
    }

    /** {@link #pollEmptyJava}, confined. */
    @Benchmark
    public int pollEmptyJavaConfined(ConfinedJavaRig rig) {
        return rig.pollEmpty();
    }

    // ---- poll_cq (up to 16) on an empty CQ

    @Benchmark
    public int pollEmptyJava(JavaRig rig) {
        return rig.pollEmpty();
    }

    @Benchmark
    @OperationsPerInvocation(C_ITERATIONS)
    public long pollEmptyC(CRig rig) {
        return rig.run("bl_poll_empty", Baseline.POLL_EMPTY, C_ITERATIONS);
    }

    /** The same poll from Java with no verbs4j code. */
    @Benchmark
    public int pollEmptyJavaRawFfm(RawRig rig) throws Throwable {
        return rig.pollEmpty();
    }

    /** The same poll through a JNI native. */
    @Benchmark
    public int pollEmptyJni(JniRig rig) {
        return rig.pollEmpty();
    }

    // ---- the floor: a no-op function shaped like ops.post_send (bl_nop)

    /** Through a critical downcall handle, as verbs4j's hot path calls the provider. */
    @Benchmark
    public int nopJavaCritical(NopArgument arg) throws Throwable {
        return (int) Baseline.NOP_CRITICAL.invokeExact(arg.segment, arg.segment, arg.segment);
    }

    /** As {@link #nopJavaCritical}, every pointer a {@code long}: the form verbs4j's hot path calls. */
    @Benchmark
    public int nopJavaCriticalByAddress(NopArgument arg) throws Throwable {
        return (int) Baseline.NOP_CRITICAL_BY_ADDRESS.invokeExact(arg.address, arg.address, arg.address);
    }

    /**
     * {@link #nopJavaCriticalByAddress} inside verbs4j's close guard with the thread's record looked
     * up per call (a {@code ThreadLocal}), as {@code requestNotify} calls the provider (and posts and
     * polls did before their request and batch objects cached the record):
     * {@code NativeHandle.enter} (the thread's mark, then the handle's retired state: plain stores
     * and loads, no atomic update), the call with the owner's address, the mark's {@code exit}.
     */
    @Benchmark
    public int nopJavaCriticalGuarded(NopArgument arg) throws Throwable {
        InFlight mark = arg.handle.enter(arg, "bl_nop");
        try {
            return (int) Baseline.NOP_CRITICAL_BY_ADDRESS.invokeExact(arg.handle.address(), arg.address, arg.address);
        } finally {
            mark.exit();
        }
    }

    /**
     * {@link #nopJavaCriticalGuarded} exactly as a post or a poll calls the provider: the record
     * cached in the request or batch object ({@link NopArgument#mark}), taken when its owner is the
     * calling thread. The difference to {@code nopJavaCriticalByAddress} is the guard's cost per
     * post and per poll.
     */
    @Benchmark
    public int nopJavaCriticalGuardedCached(NopArgument arg) throws Throwable {
        InFlight cached = arg.mark;
        InFlight mark = arg.handle.enter(cached, arg, "bl_nop");
        if (mark != cached) {
            arg.mark = mark;
        }
        try {
            return (int) Baseline.NOP_CRITICAL_BY_ADDRESS.invokeExact(arg.handle.address(), arg.address, arg.address);
        } finally {
            mark.exit();
        }
    }

    /**
     * As {@link #nopJavaCritical}, the first argument a segment of a shared arena, as verbs4j
     * guarded its owners before the marks (and still does on the control path): the linker
     * acquires and releases the arena around the call, two atomic updates of a line every caller
     * shares. The difference to {@code nopJavaCritical} is that guard's cost.
     */
    @Benchmark
    public int nopJavaCriticalArenaGuarded(NopArgument arg) throws Throwable {
        return (int) Baseline.NOP_CRITICAL.invokeExact(arg.guarded, arg.segment, arg.segment);
    }

    /** Through a plain downcall handle: the thread goes to native and back, as for calls that may block. */
    @Benchmark
    public int nopJavaPlain(NopArgument arg) throws Throwable {
        return (int) Baseline.NOP_PLAIN.invokeExact(arg.segment, arg.segment, arg.segment);
    }

    /** Through a JNI static native of the same shape, as a JNI binding calls libibverbs. */
    @Benchmark
    public int nopJni(JniRig rig) {
        return rig.nop();
    }

    /** From a C loop through a function pointer. */
    @Benchmark
    @OperationsPerInvocation(NOP_ITERATIONS)
    public long nopC(NopArgument arg) throws Throwable {
        return (long) Baseline.NOP_LOOP.invokeExact(arg.segment, (long) NOP_ITERATIONS);
    }

    /** An argument the no-op ignores; non-NULL so that nothing special-cases NULL. */
    @State(Scope.Thread)
    public static class NopArgument {
        final MemorySegment segment = MemorySegment.ofAddress(0x1000);
        final MemorySegment guarded = MemorySegment.ofAddress(0x1000).reinterpret(64, java.lang.foreign.Arena.ofShared(), null);
        final long address = 0x1000;
        final NativeHandle handle = new NativeHandle(MemorySegment.ofAddress(0x1000), 64);
        /** The record a request object caches, as {@code SendRequest.mark}. */
        InFlight mark;
    }
}
