package io.github.verbs4j.jmh;

import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The JNI twin: the C rig's QPs and CQs driven through {@link JniVerbs}, as a JNI binding such as
 * DiSNI drives libibverbs. The requests are serialized into native memory once (a direct
 * {@link ByteBuffer} that {@code bl_prepare_all} fills: the C loops' requests); a post changes
 * {@code wr_id} through the buffer and makes one JNI call with the QP's and the request's
 * addresses; a poll makes one JNI call and reads the completion back through the buffer. No FFM
 * on the measured path (FFM only builds the rig, once).
 */
@State(Scope.Thread)
public class JniRig {

    private MemorySegment rig;
    private Requests layout;
    private ByteBuffer block;
    private long base;
    private long qpA;
    private long qpB;
    private long cqA;
    private long cqB;
    private long id;

    @Setup(Level.Trial)
    public void setUp() throws Throwable {
        rig = Baseline.open();
        try {
            layout = new Requests();
            block = ByteBuffer.allocateDirect((int) layout.size + 64).alignedSlice(64).order(ByteOrder.nativeOrder());
            MemorySegment segment = MemorySegment.ofBuffer(block);
            base = segment.address();
            Baseline.PREPARE_ALL.invokeExact(rig, segment);
            qpA = ((MemorySegment) Baseline.QP_A.invokeExact(rig)).address();
            qpB = ((MemorySegment) Baseline.QP_B.invokeExact(rig)).address();
            cqA = ((MemorySegment) Baseline.CQ_A.invokeExact(rig)).address();
            cqB = ((MemorySegment) Baseline.CQ_B.invokeExact(rig)).address();
            // load the natives now, not in the first measured call
            if (JniVerbs.nop(qpA, base) != 0) {
                throw new IllegalStateException("JniVerbs.nop");
            }
        } catch (Throwable t) {
            tearDown();
            throw t;
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        if (rig != null) {
            Baseline.close(rig);
            rig = null;
        }
    }

    private void postSend(long offset) {
        int rc = JniVerbs.postSend(qpA, base + offset);
        if (rc != 0) {
            throw new IllegalStateException("ibv_post_send returned " + rc);
        }
    }

    /** Spins until one completion arrives on {@code cq}; returns wr_id + byte_len, as the C loops' await_one. */
    private long awaitOne(long cq) {
        int n;
        while ((n = JniVerbs.pollCq(cq, 1, base + layout.wc)) == 0) {
            // spin as the C loop does
        }
        if (n < 0) {
            throw new IllegalStateException("ibv_poll_cq returned " + n);
        }
        int status = block.getInt((int) (layout.wc + layout.wcStatus));
        if (status != 0) {
            throw new IllegalStateException("completion status " + status);
        }
        return block.getLong((int) (layout.wc + layout.wcWrId)) + block.getInt((int) (layout.wc + layout.wcByteLen));
    }

    /** RDMA WRITE of 64 bytes, signaled, then poll. */
    long write() {
        block.putLong((int) (layout.write + layout.sendWrId), id++);
        postSend(layout.write);
        return awaitOne(cqA);
    }

    /** RDMA READ of 64 bytes, signaled, then poll. */
    long read() {
        block.putLong((int) (layout.read + layout.sendWrId), id++);
        postSend(layout.read);
        return awaitOne(cqA);
    }

    /** SEND + RECV ping: post_recv on B, post_send on A, poll A's CQ, poll B's CQ. */
    long sendRecv() {
        long i = id++;
        block.putLong((int) (layout.recv + layout.recvWrId), i);
        int rc = JniVerbs.postRecv(qpB, base + layout.recv);
        if (rc != 0) {
            throw new IllegalStateException("ibv_post_recv returned " + rc);
        }
        block.putLong((int) (layout.send + layout.sendWrId), i);
        postSend(layout.send);
        return awaitOne(cqA) + awaitOne(cqB);
    }

    /** 16 chained RDMA WRITEs in one post_send, the last one signaled; one completion polled. */
    long chain16Write() {
        block.putLong((int) layout.chainTailId, id++);
        postSend(layout.chain);
        return awaitOne(cqA);
    }

    /** poll_cq for up to 16 completions on the (empty) CQ. */
    int pollEmpty() {
        return JniVerbs.pollCq(cqA, 16, base + layout.wc);
    }

    /** The JNI floor: one call to a native shaped like postSend that does nothing. */
    int nop() {
        return JniVerbs.nop(qpA, base);
    }
}
