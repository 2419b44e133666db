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
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Java calling the provider with nothing of verbs4j in between: {@code ops.post_send} and
 * {@code ops.poll_cq} of the C rig's QP and CQ through critical address-less downcall handles
 * (the same kind verbs4j uses), on a request {@code baseline.c} filled in. This is as fast as
 * Java can drive the provider through FFM; verbs4j minus this is the cost of verbs4j's own
 * checks, this minus C is the cost of FFM.
 */
@State(Scope.Thread)
public class RawRig {

    private static final Linker LINKER = Linker.nativeLinker();
    /** {@code int (*)(void *, void *, void **)}: ops.post_send. */
    private static final MethodHandle POST_SEND = LINKER.downcallHandle(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.ADDRESS), Linker.Option.critical(false));
    /** {@code int (*)(struct ibv_cq *, int, struct ibv_wc *)}: ops.poll_cq. */
    private static final MethodHandle POLL_CQ = LINKER.downcallHandle(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.ADDRESS, ValueLayout.JAVA_INT, ValueLayout.ADDRESS), Linker.Option.critical(false));

    private MemorySegment rig;
    private Arena arena;
    private MemorySegment qp;
    private MemorySegment cq;
    private MemorySegment postSendFn;
    private MemorySegment pollCqFn;
    private MemorySegment wr;
    private MemorySegment badWr;
    private MemorySegment wc;
    private long wrIdOffset;
    private long wcWrIdOffset;
    private long wcStatusOffset;
    private long wcByteLenOffset;
    private long id;

    @Setup(Level.Trial)
    public void setUp() throws Throwable {
        rig = Baseline.open();
        arena = Arena.ofConfined();
        try {
            qp = (MemorySegment) Baseline.QP_A.invokeExact(rig);
            cq = (MemorySegment) Baseline.CQ_A.invokeExact(rig);
            postSendFn = (MemorySegment) Baseline.POST_SEND_FN.invokeExact(rig);
            pollCqFn = (MemorySegment) Baseline.POLL_CQ_FN.invokeExact(rig);
            wr = arena.allocate(layout(0), 8);
            MemorySegment sge = arena.allocate(layout(1), 8);
            wc = arena.allocate(layout(2) * 16L, 8);
            badWr = arena.allocate(ValueLayout.ADDRESS);
            wrIdOffset = layout(3);
            wcWrIdOffset = layout(4);
            wcStatusOffset = layout(5);
            wcByteLenOffset = layout(6);
            Baseline.PREPARE_WRITE.invokeExact(rig, wr, sge);
        } catch (Throwable t) {
            tearDown();
            throw t;
        }
    }

    private static int layout(int which) throws Throwable {
        int v = (int) Baseline.LAYOUT.invokeExact(which);
        if (v < 0) {
            throw new IllegalStateException("bl_layout(" + which + ") unknown: stale " + Baseline.FILE + "?");
        }
        return v;
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        if (arena != null) {
            arena.close();
            arena = null;
        }
        if (rig != null) {
            Baseline.close(rig);
            rig = null;
        }
    }

    /** RDMA WRITE of 64 bytes, signaled, then poll: bl_write's body, from Java. */
    long write() throws Throwable {
        wr.set(ValueLayout.JAVA_LONG, wrIdOffset, id++);
        int rc = (int) POST_SEND.invokeExact(postSendFn, qp, wr, badWr);
        if (rc != 0) {
            throw new IllegalStateException("ops.post_send returned " + rc);
        }
        int n;
        while ((n = (int) POLL_CQ.invokeExact(pollCqFn, cq, 1, wc)) == 0) {
            // spin as the C loop does
        }
        if (n < 0) {
            throw new IllegalStateException("ops.poll_cq returned " + n);
        }
        int status = wc.get(ValueLayout.JAVA_INT, wcStatusOffset);
        if (status != 0) {
            throw new IllegalStateException("completion status " + status);
        }
        return wc.get(ValueLayout.JAVA_LONG, wcWrIdOffset) + wc.get(ValueLayout.JAVA_INT, wcByteLenOffset);
    }

    /** poll_cq for up to 16 completions on the (empty) CQ. */
    int pollEmpty() throws Throwable {
        return (int) POLL_CQ.invokeExact(pollCqFn, cq, 16, wc);
    }
}
