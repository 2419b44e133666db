package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_xrcd;
import io.github.verbs4j.ffi.verbs_context;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * XRC of rdma-core: {@code ibv_open_xrcd}, {@code ibv_close_xrcd}, {@code ibv_create_srq_ex},
 * {@code ibv_get_srq_num} and {@code ibv_open_qp} are static inline functions calling the
 * {@code verbs_context} members of the same names; these are the address-less handles to call
 * them (the function address first, then the errno segment), and the accessors that read the
 * members ({@code null} when the provider has none). Control path only. Also libc's
 * {@code open(2)} and {@code close(2)}, for the file an XRC domain is keyed on.
 */
public final class XrcOps {

    private XrcOps() {
    }

    private static final ValueLayout.OfInt I = ValueLayout.JAVA_INT;
    private static final java.lang.foreign.AddressLayout A = ValueLayout.ADDRESS;

    /** {@code sizeof(struct ibv_xrcd)}: verbs-core holds the domain as a handle and reads nothing of it. */
    public static final long XRCD_SIZE = ibv_xrcd.layout().byteSize();

    /** {@code T *(*)(struct ibv_context *, T_attr *)}: open_xrcd, create_srq_ex, open_qp; errno captured. */
    public static final MethodHandle CREATE = Downcalls.functionPointerCapturingErrno(FunctionDescriptor.of(A, A, A));
    /** {@code int (*close_xrcd)(struct ibv_xrcd *)}; errno captured. */
    public static final MethodHandle CLOSE = Downcalls.functionPointerCapturingErrno(FunctionDescriptor.of(I, A));
    /** {@code int (*get_srq_num)(struct ibv_srq *, uint32_t *)}; errno captured. */
    public static final MethodHandle GET_SRQ_NUM = Downcalls.functionPointerCapturingErrno(FunctionDescriptor.of(I, A, A));

    /** {@code verbs_context->open_xrcd}, or {@code null}. */
    public static MemorySegment openXrcd(MemorySegment context) {
        return ContextOps.extendedOp(context, verbs_context.open_xrcd$offset());
    }

    /** {@code verbs_context->close_xrcd}, or {@code null}. */
    public static MemorySegment closeXrcd(MemorySegment context) {
        return ContextOps.extendedOp(context, verbs_context.close_xrcd$offset());
    }

    /** {@code verbs_context->create_srq_ex}, or {@code null}. */
    public static MemorySegment createSrqEx(MemorySegment context) {
        return ContextOps.extendedOp(context, verbs_context.create_srq_ex$offset());
    }

    /** {@code verbs_context->get_srq_num}, or {@code null}. */
    public static MemorySegment getSrqNum(MemorySegment context) {
        return ContextOps.extendedOp(context, verbs_context.get_srq_num$offset());
    }

    /** {@code verbs_context->open_qp}, or {@code null}. */
    public static MemorySegment openQp(MemorySegment context) {
        return ContextOps.extendedOp(context, verbs_context.open_qp$offset());
    }
}
