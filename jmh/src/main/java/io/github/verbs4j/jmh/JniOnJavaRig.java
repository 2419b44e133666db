package io.github.verbs4j.jmh;

import io.github.verbs4j.raw.WorkCompletionLayout;
import io.github.verbs4j.raw.WorkRequestLayout;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * {@link JniRig}'s work on a {@link JavaRig}'s own provider objects: the JNI twin's natives
 * ({@link JniVerbs}, the same C) posting verbs4j's requests on verbs4j's QPs and polling verbs4j's
 * CQs into verbs4j's completion batches, the addresses {@link RawOnJavaRig} reached. Each row does
 * what {@link JniRig}'s does: {@code wr_id} changed through a direct {@link ByteBuffer} over the
 * request, one JNI call per post and per poll with the objects as {@code long}s, the completion
 * read back through a buffer. {@link JniRig} drives the C rig's objects, which land elsewhere in
 * the process (in some JVM runs one rig's set costs 6 to 14 ns more per work request than
 * another's, docs/performance.md), so verbs4j over {@link JniRig} compares two placements;
 * verbs4j over this compares one.
 *
 * <p>The requests are the same shape as the C rig's ({@code bl_prepare_all}): one 64-byte SGE
 * each, the WRITE, READ and SEND signaled, the receive into B's region at 1024, the 16 chained
 * WRITEs to consecutive slots with only the last signaled, no {@code IBV_SEND_INLINE}.
 *
 * <p>The buffers are made by the twin's C ({@link JniVerbs#wrap}, {@code NewDirectByteBuffer}), as
 * a JNI binding wraps memory it did not allocate: like {@link JniRig}'s
 * {@link ByteBuffer#allocateDirect} buffer they have no memory session, so an access checks none.
 * Views made through {@link MemorySegment#asByteBuffer} would check their segment's session on
 * every access: on 2026-11-29 (loaded machine, three alternated pairs) that made this rig's WRITE
 * and READ minima 3 to 8 ns above {@link JniRig}'s, and the empty poll, which reads no buffer,
 * equal. The buffers do not keep verbs4j's memory alive; the {@link JavaRig} does, and must stay
 * set up while this is used.
 *
 * <p>For {@link VerbRowsProbe} only: it shares the verbs4j rig's queues, so the two must not run
 * at once (the probe runs one batch at a time, each consuming every completion it causes).
 */
final class JniOnJavaRig {

    private final long qpA;
    private final long qpB;
    private final long cqA;
    private final long cqB;
    private final Posted write;
    private final Posted read;
    private final Posted send;
    private final Posted recv;
    private final Posted chainHead;
    private final Posted chainTail;
    private final ByteBuffer wcA;
    private final ByteBuffer wcB;
    private final long wcAAddress;
    private final long wcBAddress;
    private final long wc16Address;
    private long id;

    /** A request as the twin posts it: a buffer over its {@code ibv_*_wr} (to change {@code wr_id}) and its address. */
    private record Posted(ByteBuffer wr, long address) {
        static Posted of(RawOnJavaRig.Request r) {
            return new Posted(view(r.wr()), r.wrAddress());
        }
    }

    /** Reaches the objects {@code same} reached; its {@link JavaRig} must be set up. */
    JniOnJavaRig(RawOnJavaRig same) {
        qpA = same.qpA;
        qpB = same.qpB;
        cqA = same.cqA;
        cqB = same.cqB;
        write = Posted.of(same.write);
        read = Posted.of(same.read);
        send = Posted.of(same.send);
        recv = Posted.of(same.recv);
        chainHead = Posted.of(same.chainHead);
        chainTail = Posted.of(same.chainTail);
        wcA = view(same.wcA);
        wcB = view(same.wcB);
        wcAAddress = same.wcA.address();
        wcBAddress = same.wcB.address();
        wc16Address = same.wc16.address();
        // load the natives now, not in the first measured call
        if (JniVerbs.nop(qpA, write.address) != 0) {
            throw new IllegalStateException("JniVerbs.nop");
        }
    }

    /** A session-less direct buffer over {@code memory} ({@link JniVerbs#wrap}), in native order. */
    private static ByteBuffer view(MemorySegment memory) {
        ByteBuffer b = JniVerbs.wrap(memory.address(), memory.byteSize());
        if (b == null) {
            throw new IllegalStateException("the JVM made no direct buffer from JNI (NewDirectByteBuffer)");
        }
        return b.order(ByteOrder.nativeOrder());
    }

    private void postSend(Posted r) {
        int rc = JniVerbs.postSend(qpA, r.address);
        if (rc != 0) {
            throw new IllegalStateException("ibv_post_send returned " + rc);
        }
    }

    /** As {@link JniRig}'s: spins until one completion arrives on {@code cq}; returns wr_id + byte_len. */
    private static long awaitOne(long cq, ByteBuffer wc, long wcAddress) {
        int n;
        while ((n = JniVerbs.pollCq(cq, 1, wcAddress)) == 0) {
            // spin as the C loop does
        }
        if (n < 0) {
            throw new IllegalStateException("ibv_poll_cq returned " + n);
        }
        int status = wc.getInt((int) WorkCompletionLayout.WC_STATUS);
        if (status != 0) {
            throw new IllegalStateException("completion status " + status);
        }
        return wc.getLong((int) WorkCompletionLayout.WC_WR_ID) + wc.getInt((int) WorkCompletionLayout.WC_BYTE_LEN);
    }

    /** RDMA WRITE of 64 bytes, signaled, then poll. */
    long write() {
        write.wr.putLong((int) WorkRequestLayout.SEND_WR_ID, id++);
        postSend(write);
        return awaitOne(cqA, wcA, wcAAddress);
    }

    /** RDMA READ of 64 bytes, signaled, then poll. */
    long read() {
        read.wr.putLong((int) WorkRequestLayout.SEND_WR_ID, id++);
        postSend(read);
        return awaitOne(cqA, wcA, wcAAddress);
    }

    /** SEND + RECV ping: post_recv on B, post_send on A, poll A's CQ, poll B's CQ. */
    long sendRecv() {
        long i = id++;
        recv.wr.putLong((int) WorkRequestLayout.RECV_WR_ID, i);
        int rc = JniVerbs.postRecv(qpB, recv.address);
        if (rc != 0) {
            throw new IllegalStateException("ibv_post_recv returned " + rc);
        }
        send.wr.putLong((int) WorkRequestLayout.SEND_WR_ID, i);
        postSend(send);
        return awaitOne(cqA, wcA, wcAAddress) + awaitOne(cqB, wcB, wcBAddress);
    }

    /** 16 chained RDMA WRITEs in one post_send, the last one signaled; one completion polled. */
    long chain16Write() {
        chainTail.wr.putLong((int) WorkRequestLayout.SEND_WR_ID, id++);
        postSend(chainHead);
        return awaitOne(cqA, wcA, wcAAddress);
    }

    /** poll_cq for up to 16 completions on the (empty) CQ. */
    int pollEmpty() {
        return JniVerbs.pollCq(cqA, 16, wc16Address);
    }
}
