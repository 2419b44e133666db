package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_qp_cap;

import java.lang.foreign.MemorySegment;

/**
 * {@code struct ibv_qp_cap} as Java values: the queue sizes a queue pair is created with, and
 * the sizes the device granted (it writes them back into the same struct, possibly larger).
 * Embedded in {@code ibv_qp_init_attr}, {@code ibv_qp_init_attr_ex} and {@code ibv_qp_attr}.
 */
public record QpCap(int maxSendWr, int maxRecvWr, int maxSendSge, int maxRecvSge, int maxInlineData) {

    /** Reads the struct at {@code cap}. */
    static QpCap read(MemorySegment cap) {
        return new QpCap(ibv_qp_cap.max_send_wr(cap), ibv_qp_cap.max_recv_wr(cap), ibv_qp_cap.max_send_sge(cap),
                ibv_qp_cap.max_recv_sge(cap), ibv_qp_cap.max_inline_data(cap));
    }

    /** Writes these sizes into the struct at {@code cap}. */
    void write(MemorySegment cap) {
        ibv_qp_cap.max_send_wr(cap, maxSendWr);
        ibv_qp_cap.max_recv_wr(cap, maxRecvWr);
        ibv_qp_cap.max_send_sge(cap, maxSendSge);
        ibv_qp_cap.max_recv_sge(cap, maxRecvSge);
        ibv_qp_cap.max_inline_data(cap, maxInlineData);
    }

    /** These sizes without a receive queue of the QP's own (it receives from an SRQ, or nothing). */
    QpCap withoutReceiveQueue() {
        return new QpCap(maxSendWr, 0, maxSendSge, 0, maxInlineData);
    }
}
