package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_sge;
import io.github.verbs4j.ffi.verbs_context;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * On-demand paging's verbs, both static inline functions of {@code <infiniband/verbs.h>} that
 * call a member of {@code struct verbs_context}: {@code ibv_query_device_ex} (whose
 * {@code odp_caps} say what a device pages on demand) and {@code ibv_advise_mr} (prefetch).
 * As in {@link ContextOps}, the owner reads the function pointer once and calls it through an
 * address-less handle (the function address is the first argument). Neither is critical: a
 * provider may make a system call, and a prefetch may fault many pages in.
 */
public final class OdpOps {

    private OdpOps() {
    }

    /**
     * {@code int (*query_device_ex)(struct ibv_context *, const struct ibv_query_device_ex_input *,
     * struct ibv_device_attr_ex *, size_t attr_size)}: 0 or an errno value.
     */
    public static final MethodHandle QUERY_DEVICE_EX = Downcalls.functionPointer(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG), false);

    /**
     * {@code int (*advise_mr)(struct ibv_pd *, enum ibv_advise_mr_advice, uint32_t flags,
     * struct ibv_sge *sg_list, uint32_t num_sges)}: 0 or an errno value.
     */
    public static final MethodHandle ADVISE_MR = Downcalls.functionPointer(FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.ADDRESS, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT), false);

    /** {@code verbs_context->query_device_ex} of {@code context}, or {@code null} when the provider has none. */
    public static MemorySegment queryDeviceEx(MemorySegment context) {
        return ContextOps.extendedOp(context, verbs_context.query_device_ex$offset());
    }

    /** {@code verbs_context->advise_mr} of {@code context}, or {@code null} when the provider has none. */
    public static MemorySegment adviseMr(MemorySegment context) {
        return ContextOps.extendedOp(context, verbs_context.advise_mr$offset());
    }

    /**
     * The one-entry {@code struct ibv_sge} list that {@link #ADVISE_MR} takes: {@code length}
     * bytes from {@code address} in the region of {@code lkey}.
     */
    public static MemorySegment adviseRange(SegmentAllocator allocator, long address, int length, int lkey) {
        MemorySegment sge = allocator.allocate(ibv_sge.layout());
        sge.fill((byte) 0);
        ibv_sge.addr(sge, address);
        ibv_sge.length(sge, length);
        ibv_sge.lkey(sge, lkey);
        return sge;
    }
}
