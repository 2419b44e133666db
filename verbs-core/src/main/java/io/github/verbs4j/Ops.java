package io.github.verbs4j;

import io.github.verbs4j.ffi.ibv_context;
import io.github.verbs4j.ffi.ibv_context_ops;
import io.github.verbs4j.internal.Native;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The hot-path verbs. {@code ibv_post_send}, {@code ibv_post_recv}, {@code ibv_poll_cq},
 * {@code ibv_req_notify_cq} and {@code ibv_post_srq_recv} are {@code static inline} in verbs.h:
 * each calls a function pointer in {@code context->ops}. verbs4j reads each pointer once per
 * owner (held in a final field) and calls it through one of these address-less handles, which
 * are {@code critical} (no thread-state transition): these calls never block and never call back.
 */
final class Ops {

    private Ops() {
    }

    /** {@code int (*poll_cq)(struct ibv_cq *, int num_entries, struct ibv_wc *)}. */
    static final MethodHandle POLL_CQ = Native.functionPointer(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.ADDRESS, ValueLayout.JAVA_INT, ValueLayout.ADDRESS), true);
    /** {@code int (*req_notify_cq)(struct ibv_cq *, int solicited_only)}. */
    static final MethodHandle REQ_NOTIFY_CQ = Native.functionPointer(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.ADDRESS, ValueLayout.JAVA_INT), true);
    /** {@code int (*post_send)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **bad)}. */
    static final MethodHandle POST_SEND = Native.functionPointer(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.ADDRESS), true);
    /** {@code int (*post_recv)(struct ibv_qp *, struct ibv_recv_wr *, struct ibv_recv_wr **bad)}. */
    static final MethodHandle POST_RECV = POST_SEND;
    /** {@code int (*post_srq_recv)(struct ibv_srq *, struct ibv_recv_wr *, struct ibv_recv_wr **bad)}. */
    static final MethodHandle POST_SRQ_RECV = POST_SEND;

    static final long POLL_CQ_OFFSET = ibv_context_ops.poll_cq$offset();
    static final long REQ_NOTIFY_CQ_OFFSET = ibv_context_ops.req_notify_cq$offset();
    static final long POST_SEND_OFFSET = ibv_context_ops.post_send$offset();
    static final long POST_RECV_OFFSET = ibv_context_ops.post_recv$offset();
    static final long POST_SRQ_RECV_OFFSET = ibv_context_ops.post_srq_recv$offset();

    /**
     * The function pointer at {@code opOffset} in {@code context->ops}.
     *
     * @throws UnsupportedOperationException when the provider left it NULL (calling it would crash)
     */
    static MemorySegment function(MemorySegment context, long opOffset, String verb) {
        MemorySegment fn = context.get(ValueLayout.ADDRESS, ibv_context.ops$offset() + opOffset);
        if (fn.equals(MemorySegment.NULL)) {
            throw new UnsupportedOperationException(verb + ": the device's provider does not implement it"
                    + " (context->ops entry is NULL)");
        }
        return fn;
    }
}
