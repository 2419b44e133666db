package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_context;
import io.github.verbs4j.ffi.ibv_context_ops;
import io.github.verbs4j.ffi.verbs_context;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The verbs that rdma-core's headers implement as {@code static inline} functions calling a
 * function pointer of the device's provider, which jextract therefore does not generate.
 *
 * <p>The hot path: {@code ibv_post_send}, {@code ibv_post_recv}, {@code ibv_poll_cq},
 * {@code ibv_req_notify_cq} and {@code ibv_post_srq_recv} each call a pointer in
 * {@code context->ops}. An owner reads its pointer once (a final field) and calls it through one
 * of these address-less handles, which are {@code critical} (no thread-state transition): these
 * calls never block and never call back.
 *
 * <p>The extended ops: {@code struct verbs_context} lies just before {@code struct ibv_context}
 * and holds the newer ops ({@code query_port} taking a size, ...); a pointer there may be used
 * only when {@code abi_compat} says the context is a {@code verbs_context} and its {@code sz}
 * covers the member. Offsets come from the generated layouts.
 */
public final class ContextOps {

    private ContextOps() {
    }

    /**
     * {@code int (*post_send)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **bad)},
     * and {@code post_recv} and {@code post_srq_recv} of the same shape, with every pointer an
     * address ({@code long}), the owner's ({@code struct ibv_qp *} or {@code struct ibv_srq *})
     * included: the linker then does no session handling at all (a segment argument costs the
     * linker's checks and its session's acquire and release around the call, measured at about
     * 10 ns per verb: docs/measurements/performance.md, "Why raw FFM trailed the JNI twin"). The caller
     * guarantees that the owner outlives the call (verbs-core's {@code NativeHandle.enter}/{@code
     * exit}, which a close waits for) and keeps the request's memory reachable.
     */
    public static final MethodHandle POST_ADDRESSES = Downcalls.functionPointer(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG), true);
    /**
     * {@code int (*poll_cq)(struct ibv_cq *, int num_entries, struct ibv_wc *)} with the CQ and
     * the completion array as addresses; as {@link #POST_ADDRESSES}.
     */
    public static final MethodHandle POLL_CQ_ADDRESSES = Downcalls.functionPointer(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG), true);
    /** {@code int (*req_notify_cq)(struct ibv_cq *, int solicited_only)} with the CQ as an address; as {@link #POST_ADDRESSES}. */
    public static final MethodHandle REQ_NOTIFY_CQ_ADDRESS = Downcalls.functionPointer(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT), true);

    public static final long POLL_CQ_OFFSET = ibv_context_ops.poll_cq$offset();
    public static final long REQ_NOTIFY_CQ_OFFSET = ibv_context_ops.req_notify_cq$offset();
    public static final long POST_SEND_OFFSET = ibv_context_ops.post_send$offset();
    public static final long POST_RECV_OFFSET = ibv_context_ops.post_recv$offset();
    public static final long POST_SRQ_RECV_OFFSET = ibv_context_ops.post_srq_recv$offset();

    /**
     * {@code struct ibv_mw *(*alloc_mw)(struct ibv_pd *, enum ibv_mw_type)}, which the inline
     * {@code ibv_alloc_mw} calls; the function address, then the errno segment, then its arguments.
     */
    public static final MethodHandle ALLOC_MW = Downcalls.functionPointerCapturingErrno(FunctionDescriptor.of(ValueLayout.ADDRESS,
            ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
    /** {@code int (*dealloc_mw)(struct ibv_mw *)} ({@code ibv_dealloc_mw}); the function address, then the errno segment. */
    public static final MethodHandle DEALLOC_MW = Downcalls.functionPointerCapturingErrno(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.ADDRESS));
    /**
     * {@code int (*bind_mw)(struct ibv_qp *, struct ibv_mw *, struct ibv_mw_bind *)}
     * ({@code ibv_bind_mw}); the function address, then the errno segment.
     */
    public static final MethodHandle BIND_MW = Downcalls.functionPointerCapturingErrno(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.ADDRESS));
    public static final long ALLOC_MW_OFFSET = ibv_context_ops.alloc_mw$offset();
    public static final long DEALLOC_MW_OFFSET = ibv_context_ops.dealloc_mw$offset();
    public static final long BIND_MW_OFFSET = ibv_context_ops.bind_mw$offset();

    /**
     * {@code int (*query_port)(struct ibv_context *, uint8_t port, struct ibv_port_attr *, size_t)}
     * of {@code verbs_context}. Not critical: a provider may make a system call.
     */
    public static final MethodHandle QUERY_PORT_EX = Downcalls.functionPointer(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.ADDRESS, ValueLayout.JAVA_BYTE, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG), false);

    /** Where {@code struct ibv_context} lies inside {@code struct verbs_context}. */
    static final long CONTEXT_IN_VERBS_CONTEXT = verbs_context.context$offset();

    /**
     * The function pointer at {@code opOffset} in {@code context->ops}.
     *
     * @throws UnsupportedOperationException when the provider left it NULL (calling it would crash)
     */
    public static MemorySegment function(MemorySegment context, long opOffset, String verb) {
        MemorySegment fn = context.get(ValueLayout.ADDRESS, ibv_context.ops$offset() + opOffset);
        if (fn.equals(MemorySegment.NULL)) {
            throw new UnsupportedOperationException(verb + ": the device's provider does not implement it"
                    + " (context->ops entry is NULL)");
        }
        return fn;
    }

    /**
     * {@code verbs_context->query_port} of {@code context} ({@code verbs_get_ctx_op}), or
     * {@code null} when the context is not a {@code verbs_context}, is one too old to have the
     * member, or the provider left it NULL.
     */
    public static MemorySegment extendedQueryPort(MemorySegment context) {
        return extendedOp(context, verbs_context.query_port$offset());
    }

    static MemorySegment extendedOp(MemorySegment context, long memberOffset) {
        // only a context whose abi_compat is UINTPTR_MAX is embedded in a verbs_context
        long abiCompat = context.get(ValueLayout.JAVA_LONG, ibv_context.abi_compat$offset());
        if (abiCompat != -1L) {
            return null;
        }
        long size = verbs_context.layout().byteSize();
        MemorySegment vctx = MemorySegment.ofAddress(context.address() - CONTEXT_IN_VERBS_CONTEXT).reinterpret(size);
        // sz counts from the member to the end of the structure the provider allocated
        long sz = verbs_context.sz(vctx);
        if (sz < size - memberOffset) {
            return null;
        }
        MemorySegment fn = vctx.get(ValueLayout.ADDRESS, memberOffset);
        return Downcalls.isNull(fn) ? null : fn;
    }
}
