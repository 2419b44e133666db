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
 * {@code baseline.c}'s {@code bl_prepare_all} built (the C loops' requests). This is as fast as
 * Java can drive the provider through FFM; verbs4j minus this is the cost of verbs4j's own
 * checks, this minus C is the cost of FFM.
 */
@State(Scope.Thread)
public class RawRig {

    private static final Linker LINKER = Linker.nativeLinker();
    /** {@code int (*)(void *, void *, void **)}: ops.post_send and ops.post_recv. */
    private static final MethodHandle POST = LINKER.downcallHandle(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.ADDRESS), Linker.Option.critical(false));
    /** {@code int (*)(struct ibv_cq *, int, struct ibv_wc *)}: ops.poll_cq. */
    private static final MethodHandle POLL_CQ = LINKER.downcallHandle(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.ADDRESS, ValueLayout.JAVA_INT, ValueLayout.ADDRESS), Linker.Option.critical(false));

    private MemorySegment rig;
    private Arena arena;
    private MemorySegment qpA;
    private MemorySegment qpB;
    private MemorySegment cqA;
    private MemorySegment cqB;
    private MemorySegment postSendFn;
    private MemorySegment postRecvFn;
    private MemorySegment pollCqFn;
    private Requests layout;
    private MemorySegment block;
    private MemorySegment write;
    private MemorySegment read;
    private MemorySegment send;
    private MemorySegment chain;
    private MemorySegment recv;
    private MemorySegment badSend;
    private MemorySegment badRecv;
    private MemorySegment wc;
    private long id;

    @Setup(Level.Trial)
    public void setUp() throws Throwable {
        rig = Baseline.open();
        arena = Arena.ofConfined();
        try {
            qpA = (MemorySegment) Baseline.QP_A.invokeExact(rig);
            qpB = (MemorySegment) Baseline.QP_B.invokeExact(rig);
            cqA = (MemorySegment) Baseline.CQ_A.invokeExact(rig);
            cqB = (MemorySegment) Baseline.CQ_B.invokeExact(rig);
            postSendFn = (MemorySegment) Baseline.POST_SEND_FN.invokeExact(rig);
            postRecvFn = (MemorySegment) Baseline.POST_RECV_FN.invokeExact(rig);
            pollCqFn = (MemorySegment) Baseline.POLL_CQ_FN.invokeExact(rig);
            layout = new Requests();
            block = arena.allocate(layout.size, 64);
            Baseline.PREPARE_ALL.invokeExact(rig, block);
            write = block.asSlice(layout.write);
            read = block.asSlice(layout.read);
            send = block.asSlice(layout.send);
            chain = block.asSlice(layout.chain);
            recv = block.asSlice(layout.recv);
            badSend = block.asSlice(layout.badSend);
            badRecv = block.asSlice(layout.badRecv);
            wc = block.asSlice(layout.wc);
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

    private void postSend(MemorySegment wr) throws Throwable {
        int rc = (int) POST.invokeExact(postSendFn, qpA, wr, badSend);
        if (rc != 0) {
            throw new IllegalStateException("ops.post_send returned " + rc);
        }
    }

    /** Spins until one completion arrives on {@code cq}; returns wr_id + byte_len, as the C loops' await_one. */
    private long awaitOne(MemorySegment cq) throws Throwable {
        int n;
        while ((n = (int) POLL_CQ.invokeExact(pollCqFn, cq, 1, wc)) == 0) {
            // spin as the C loop does
        }
        if (n < 0) {
            throw new IllegalStateException("ops.poll_cq returned " + n);
        }
        int status = wc.get(ValueLayout.JAVA_INT, layout.wcStatus);
        if (status != 0) {
            throw new IllegalStateException("completion status " + status);
        }
        return wc.get(ValueLayout.JAVA_LONG, layout.wcWrId) + wc.get(ValueLayout.JAVA_INT, layout.wcByteLen);
    }

    /** RDMA WRITE of 64 bytes, signaled, then poll: bl_write's body, from Java. */
    long write() throws Throwable {
        write.set(ValueLayout.JAVA_LONG, layout.sendWrId, id++);
        postSend(write);
        return awaitOne(cqA);
    }

    /** RDMA READ of 64 bytes, signaled, then poll. */
    long read() throws Throwable {
        read.set(ValueLayout.JAVA_LONG, layout.sendWrId, id++);
        postSend(read);
        return awaitOne(cqA);
    }

    /** SEND + RECV ping: post_recv on B, post_send on A, poll A's CQ, poll B's CQ. */
    long sendRecv() throws Throwable {
        long i = id++;
        recv.set(ValueLayout.JAVA_LONG, layout.recvWrId, i);
        int rc = (int) POST.invokeExact(postRecvFn, qpB, recv, badRecv);
        if (rc != 0) {
            throw new IllegalStateException("ops.post_recv returned " + rc);
        }
        send.set(ValueLayout.JAVA_LONG, layout.sendWrId, i);
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
