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
 * Java calling the provider with nothing of verbs4j in between: {@code ops.post_send},
 * {@code ops.post_recv} and {@code ops.poll_cq} of the C rig's QPs and CQs through critical
 * address-less downcall handles (the same kind verbs4j uses), on the requests
 * {@code baseline.c}'s {@code bl_prepare_all} built (the C loops' requests). Every pointer but the
 * function's is passed as a {@code long} ({@code JAVA_LONG}): a segment argument costs the
 * linker's checks and session handling around each call, about 10 ns per verb on a provider call
 * ({@link GapRig}, docs/performance.md). This is as fast as Java can drive the provider through
 * FFM; verbs4j minus this is the cost of verbs4j's own checks and of the one segment it keeps per
 * call (the owner's, whose arena guards against a concurrent close), this minus C is the cost of
 * FFM.
 */
@State(Scope.Thread)
public class RawRig {

    private static final Linker LINKER = Linker.nativeLinker();
    /** {@code int (*)(void *, void *, void **)}: ops.post_send and ops.post_recv. */
    private static final MethodHandle POST = LINKER.downcallHandle(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG), Linker.Option.critical(false));
    /** {@code int (*)(struct ibv_cq *, int, struct ibv_wc *)}: ops.poll_cq. */
    private static final MethodHandle POLL_CQ = LINKER.downcallHandle(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG), Linker.Option.critical(false));

    private MemorySegment rig;
    private Arena arena;
    private long qpA;
    private long qpB;
    private long cqA;
    private long cqB;
    private MemorySegment postSendFn;
    private MemorySegment postRecvFn;
    private MemorySegment pollCqFn;
    private Requests layout;
    private MemorySegment block;
    private long base;
    private long write;
    private long read;
    private long send;
    private long chain;
    private long recv;
    private long badSend;
    private long badRecv;
    private long wc;
    private long id;

    @Setup(Level.Trial)
    public void setUp() throws Throwable {
        rig = Baseline.open();
        arena = Arena.ofConfined();
        try {
            qpA = ((MemorySegment) Baseline.QP_A.invokeExact(rig)).address();
            qpB = ((MemorySegment) Baseline.QP_B.invokeExact(rig)).address();
            cqA = ((MemorySegment) Baseline.CQ_A.invokeExact(rig)).address();
            cqB = ((MemorySegment) Baseline.CQ_B.invokeExact(rig)).address();
            postSendFn = (MemorySegment) Baseline.POST_SEND_FN.invokeExact(rig);
            postRecvFn = (MemorySegment) Baseline.POST_RECV_FN.invokeExact(rig);
            pollCqFn = (MemorySegment) Baseline.POLL_CQ_FN.invokeExact(rig);
            layout = new Requests();
            block = arena.allocate(layout.size, 64);
            Baseline.PREPARE_ALL.invokeExact(rig, block);
            base = block.address();
            write = base + layout.write;
            read = base + layout.read;
            send = base + layout.send;
            chain = base + layout.chain;
            recv = base + layout.recv;
            badSend = base + layout.badSend;
            badRecv = base + layout.badRecv;
            wc = base + layout.wc;
        } catch (Throwable t) {
            tearDown();
            throw t;
        }
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

    private void postSend(long wr) throws Throwable {
        int rc = (int) POST.invokeExact(postSendFn, qpA, wr, badSend);
        if (rc != 0) {
            throw new IllegalStateException("ops.post_send returned " + rc);
        }
    }

    /** Spins until one completion arrives on {@code cq}; returns wr_id + byte_len, as the C loops' await_one. */
    private long awaitOne(long cq) throws Throwable {
        int n;
        while ((n = (int) POLL_CQ.invokeExact(pollCqFn, cq, 1, wc)) == 0) {
            // spin as the C loop does
        }
        if (n < 0) {
            throw new IllegalStateException("ops.poll_cq returned " + n);
        }
        int status = block.get(ValueLayout.JAVA_INT, layout.wc + layout.wcStatus);
        if (status != 0) {
            throw new IllegalStateException("completion status " + status);
        }
        return block.get(ValueLayout.JAVA_LONG, layout.wc + layout.wcWrId)
                + block.get(ValueLayout.JAVA_INT, layout.wc + layout.wcByteLen);
    }

    /** RDMA WRITE of 64 bytes, signaled, then poll: bl_write's body, from Java. */
    long write() throws Throwable {
        block.set(ValueLayout.JAVA_LONG, layout.write + layout.sendWrId, id++);
        postSend(write);
        return awaitOne(cqA);
    }

    /** RDMA READ of 64 bytes, signaled, then poll. */
    long read() throws Throwable {
        block.set(ValueLayout.JAVA_LONG, layout.read + layout.sendWrId, id++);
        postSend(read);
        return awaitOne(cqA);
    }

    /** SEND + RECV ping: post_recv on B, post_send on A, poll A's CQ, poll B's CQ. */
    long sendRecv() throws Throwable {
        long i = id++;
        block.set(ValueLayout.JAVA_LONG, layout.recv + layout.recvWrId, i);
        int rc = (int) POST.invokeExact(postRecvFn, qpB, recv, badRecv);
        if (rc != 0) {
            throw new IllegalStateException("ops.post_recv returned " + rc);
        }
        block.set(ValueLayout.JAVA_LONG, layout.send + layout.sendWrId, i);
        postSend(send);
        return awaitOne(cqA) + awaitOne(cqB);
    }

    /** 16 chained RDMA WRITEs in one post_send, the last one signaled; one completion polled. */
    long chain16Write() throws Throwable {
        block.set(ValueLayout.JAVA_LONG, layout.chainTailId, id++);
        postSend(chain);
        return awaitOne(cqA);
    }

    /** poll_cq for up to 16 completions on the (empty) CQ. */
    int pollEmpty() throws Throwable {
        return (int) POLL_CQ.invokeExact(pollCqFn, cqA, 16, wc);
    }
}
