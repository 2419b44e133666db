package io.github.verbs4j.jmh;

import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Why the raw FFM twin trailed the JNI twin: one RDMA WRITE or READ + poll (the C rig's QPs and
 * requests, as {@link RawRig} and {@link JniRig} post them), driven six ways that change one thing
 * at a time, all on the same request block (so every variant reads and writes the same memory):
 * <ul>
 * <li>{@code arena}: {@link RawRig}'s way: address-less critical handles, every pointer a segment,
 * the request block a slice of a confined arena (the linker acquires its session per argument);</li>
 * <li>{@code global}: the same, the block's segments global (no session to acquire);</li>
 * <li>{@code bound}: handles bound to the provider's functions (static final), global segments;</li>
 * <li>{@code long}: address-less critical handles whose pointer arguments are {@code long}s
 * ({@code JAVA_LONG}), the function pointer the only segment;</li>
 * <li>{@code jniShape}: the JNI twin's own C functions ({@code jni_twin.c}) through critical
 * FFM handles with {@code long} arguments: the JNI twin's native work, FFM's call;</li>
 * <li>{@code jni}: the JNI twin ({@link JniVerbs}).</li>
 * </ul>
 * Every variant counts its polls; the trial prints polls per operation (1.0 for all: the provider
 * completes inside post_send, so no variant spins on an empty CQ more than another).
 * {@link FfmGap} runs the variants as JMH benchmarks, {@link GapProbe} interleaved in one JVM.
 */
@State(Scope.Thread)
public class GapRig {

    private static final Linker LINKER = Linker.nativeLinker();
    private static final FunctionDescriptor POST_D = FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.ADDRESS);
    private static final FunctionDescriptor POLL_D = FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.ADDRESS, ValueLayout.JAVA_INT, ValueLayout.ADDRESS);
    private static final MethodHandle POST = LINKER.downcallHandle(POST_D, Linker.Option.critical(false));
    private static final MethodHandle POLL_CQ = LINKER.downcallHandle(POLL_D, Linker.Option.critical(false));
    /** {@link #POST} and {@link #POLL_CQ} with every pointer argument a {@code long} instead of a segment. */
    private static final MethodHandle POST_LONG = LINKER.downcallHandle(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG), Linker.Option.critical(false));
    private static final MethodHandle POLL_LONG = LINKER.downcallHandle(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG), Linker.Option.critical(false));

    /** The provider's functions for {@link Bound}: the same in every rig of one process (softrdma's). */
    private static volatile MemorySegment postSendTarget;
    private static volatile MemorySegment pollCqTarget;

    /** Handles bound to the provider's functions, static final (constant to the JIT); made on first use. */
    private static final class Bound {
        static final MethodHandle POST = LINKER.downcallHandle(postSendTarget, POST_D, Linker.Option.critical(false));
        static final MethodHandle POLL = LINKER.downcallHandle(pollCqTarget, POLL_D, Linker.Option.critical(false));
    }

    /** The JNI twin's C functions called through FFM (their JNIEnv and jclass arguments are unused: 0). */
    private static final class JniShape {
        private static final SymbolLookup LIB = SymbolLookup.libraryLookup(
                Baseline.locate(JniVerbs.PROPERTY, JniVerbs.FILE), Arena.global());
        static final MethodHandle POST = LINKER.downcallHandle(
                LIB.find("Java_io_github_verbs4j_jmh_JniVerbs_postSend").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG,
                        ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG),
                Linker.Option.critical(false));
        static final MethodHandle POLL = LINKER.downcallHandle(
                LIB.find("Java_io_github_verbs4j_jmh_JniVerbs_pollCq").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG,
                        ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG),
                Linker.Option.critical(false));
    }

    private MemorySegment rig;
    private Arena arena;
    private Requests layout;
    private MemorySegment qpA;
    private MemorySegment cqA;
    private MemorySegment postSendFn;
    private MemorySegment pollCqFn;
    private long qpAddress;
    private long cqAddress;
    private long base;
    /** The block as a global segment of its size (no session). */
    private MemorySegment global;
    /** Confined-arena slices: WRITE, READ, bad_wr, wc. */
    private MemorySegment arenaWrite;
    private MemorySegment arenaRead;
    private MemorySegment arenaBad;
    private MemorySegment arenaWc;
    /** The same memory as global slices. */
    private MemorySegment globalWrite;
    private MemorySegment globalRead;
    private MemorySegment globalBad;
    private MemorySegment globalWc;
    private long id;
    private long polls;
    private long ops;

    /** Opens the C rig, fills the request block, makes the handles. */
    @Setup(Level.Trial)
    public void setUp() throws Throwable {
        rig = Baseline.open();
        arena = Arena.ofConfined();
        try {
            layout = new Requests();
            qpA = (MemorySegment) Baseline.QP_A.invokeExact(rig);
            cqA = (MemorySegment) Baseline.CQ_A.invokeExact(rig);
            postSendFn = (MemorySegment) Baseline.POST_SEND_FN.invokeExact(rig);
            pollCqFn = (MemorySegment) Baseline.POLL_CQ_FN.invokeExact(rig);
            qpAddress = qpA.address();
            cqAddress = cqA.address();
            MemorySegment block = arena.allocate(layout.size, 64);
            Baseline.PREPARE_ALL.invokeExact(rig, block);
            base = block.address();
            arenaWrite = block.asSlice(layout.write);
            arenaRead = block.asSlice(layout.read);
            arenaBad = block.asSlice(layout.badSend);
            arenaWc = block.asSlice(layout.wc);
            global = MemorySegment.ofAddress(base).reinterpret(layout.size);
            globalWrite = global.asSlice(layout.write);
            globalRead = global.asSlice(layout.read);
            globalBad = global.asSlice(layout.badSend);
            globalWc = global.asSlice(layout.wc);
            postSendTarget = postSendFn;
            pollCqTarget = pollCqFn;
            // load the natives now, not in the first measured call
            if (JniVerbs.nop(qpAddress, base) != 0) {
                throw new IllegalStateException("JniVerbs.nop");
            }
        } catch (Throwable t) {
            tearDown();
            throw t;
        }
    }

    /** Prints polls per operation; closes the rig. */
    @TearDown(Level.Trial)
    public void tearDown() {
        if (ops > 0) {
            System.out.printf("%n[gap] polls per operation: %.4f (%d operations)%n", (double) polls / ops, ops);
        }
        if (arena != null) {
            arena.close();
            arena = null;
        }
        if (rig != null) {
            Baseline.close(rig);
            rig = null;
        }
    }

    long writeArena() throws Throwable {
        return viaSegments(arenaWrite, arenaBad, arenaWc);
    }

    long readArena() throws Throwable {
        return viaSegments(arenaRead, arenaBad, arenaWc);
    }

    long writeGlobal() throws Throwable {
        return viaSegments(globalWrite, globalBad, globalWc);
    }

    long readGlobal() throws Throwable {
        return viaSegments(globalRead, globalBad, globalWc);
    }

    private long viaSegments(MemorySegment wr, MemorySegment bad, MemorySegment wc) throws Throwable {
        ops++;
        wr.set(ValueLayout.JAVA_LONG, layout.sendWrId, id++);
        check((int) POST.invokeExact(postSendFn, qpA, wr, bad));
        int n;
        do {
            polls++;
        } while ((n = (int) POLL_CQ.invokeExact(pollCqFn, cqA, 1, wc)) == 0);
        return completion(n, wc);
    }

    long writeBound() throws Throwable {
        return viaBound(globalWrite);
    }

    long readBound() throws Throwable {
        return viaBound(globalRead);
    }

    private long viaBound(MemorySegment wr) throws Throwable {
        ops++;
        wr.set(ValueLayout.JAVA_LONG, layout.sendWrId, id++);
        check((int) Bound.POST.invokeExact(qpA, wr, globalBad));
        int n;
        do {
            polls++;
        } while ((n = (int) Bound.POLL.invokeExact(cqA, 1, globalWc)) == 0);
        return completion(n, globalWc);
    }

    long writeLong() throws Throwable {
        return viaLongs(layout.write);
    }

    long readLong() throws Throwable {
        return viaLongs(layout.read);
    }

    private long viaLongs(long request) throws Throwable {
        ops++;
        global.set(ValueLayout.JAVA_LONG, request + layout.sendWrId, id++);
        check((int) POST_LONG.invokeExact(postSendFn, qpAddress, base + request, base + layout.badSend));
        int n;
        do {
            polls++;
        } while ((n = (int) POLL_LONG.invokeExact(pollCqFn, cqAddress, 1, base + layout.wc)) == 0);
        return completion(n, globalWc);
    }

    long writeJniShape() throws Throwable {
        return viaJniShape(layout.write);
    }

    long readJniShape() throws Throwable {
        return viaJniShape(layout.read);
    }

    private long viaJniShape(long request) throws Throwable {
        ops++;
        global.set(ValueLayout.JAVA_LONG, request + layout.sendWrId, id++);
        check((int) JniShape.POST.invokeExact(0L, 0L, qpAddress, base + request));
        int n;
        do {
            polls++;
        } while ((n = (int) JniShape.POLL.invokeExact(0L, 0L, cqAddress, 1, base + layout.wc)) == 0);
        return completion(n, globalWc);
    }

    long writeJni() {
        return viaJni(layout.write);
    }

    long readJni() {
        return viaJni(layout.read);
    }

    private long viaJni(long request) {
        ops++;
        global.set(ValueLayout.JAVA_LONG, request + layout.sendWrId, id++);
        check(JniVerbs.postSend(qpAddress, base + request));
        int n;
        do {
            polls++;
        } while ((n = JniVerbs.pollCq(cqAddress, 1, base + layout.wc)) == 0);
        return completion(n, globalWc);
    }

    private static void check(int rc) {
        if (rc != 0) {
            throw new IllegalStateException("ops.post_send returned " + rc);
        }
    }

    /** After a poll that returned {@code n}: wr_id + byte_len of the completion in {@code wc}, as the C loops' await_one. */
    private long completion(int n, MemorySegment wc) {
        if (n < 0) {
            throw new IllegalStateException("ops.poll_cq returned " + n);
        }
        int status = wc.get(ValueLayout.JAVA_INT, layout.wcStatus);
        if (status != 0) {
            throw new IllegalStateException("completion status " + status);
        }
        return wc.get(ValueLayout.JAVA_LONG, layout.wcWrId) + wc.get(ValueLayout.JAVA_INT, layout.wcByteLen);
    }
}
