package io.github.verbs4j.jmh;

/**
 * The layout of {@code baseline.c}'s request block ({@code struct bl_requests}, filled by
 * {@code bl_prepare_all}): every request the C loops post, built once in native memory, which
 * {@link RawRig} (FFM) and {@link JniRig} (JNI) post by address. Offsets come from the C
 * compiler ({@code bl_layout}), never written twice.
 */
final class Requests {

    /** {@code sizeof(struct bl_requests)}. */
    final long size = Baseline.layout(16);
    /** The RDMA WRITE, READ and SEND requests, the first of the 16 chained WRITEs, the receive. */
    final long write = Baseline.layout(7);
    final long read = Baseline.layout(8);
    final long send = Baseline.layout(9);
    final long chain = Baseline.layout(10);
    final long recv = Baseline.layout(11);
    /** The {@code bad_wr} slots. */
    final long badSend = Baseline.layout(12);
    final long badRecv = Baseline.layout(13);
    /** {@code struct ibv_wc wc[16]}. */
    final long wc = Baseline.layout(14);
    /** {@code wr_id} of the last (signaled) chained WRITE. */
    final long chainTailId = Baseline.layout(15);
    /** Field offsets inside a request and a completion. */
    final long sendWrId = Baseline.layout(3);
    final long recvWrId = Baseline.layout(17);
    final long wcWrId = Baseline.layout(4);
    final long wcStatus = Baseline.layout(5);
    final long wcByteLen = Baseline.layout(6);
}
