package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_qp;

import java.lang.foreign.MemorySegment;

/**
 * The fields of {@code struct ibv_qp} that verbs-core reads in place: the QP number and the
 * state the library last recorded ({@code ibv_query_qp} asks the device; this does not).
 */
public final class QpFields {

    private QpFields() {
    }

    /** {@code sizeof(struct ibv_qp)}. */
    public static final long SIZE = ibv_qp.layout().byteSize();

    /** {@code qp}, an address a create or open call returned, sized to the struct. */
    public static MemorySegment of(MemorySegment qp) {
        return qp.reinterpret(SIZE);
    }

    /** {@code qp->qp_num}. */
    public static int qpNum(MemorySegment qp) {
        return ibv_qp.qp_num(qp);
    }

    /** {@code qp->state} ({@code IBV_QPS_*}). */
    public static int state(MemorySegment qp) {
        return ibv_qp.state(qp);
    }
}
