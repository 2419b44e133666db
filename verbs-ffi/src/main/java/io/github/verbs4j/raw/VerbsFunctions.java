package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.function.Supplier;

/**
 * The libibverbs control-path verbs, bound with {@code errno} captured (the captured-state segment is each
 * handle's first argument). Descriptors come from the generated bindings, so the C signatures
 * have one source. A symbol the loaded library lacks leaves its handle {@code null}; the caller
 * then throws {@link UnsupportedOperationException} naming it ({@link #need}).
 */
public final class VerbsFunctions {

    private VerbsFunctions() {
    }

    private static final SymbolLookup LIB = NativeLibraries.verbs();

    public static final MethodHandle OPEN_DEVICE = bind("ibv_open_device", RdmaCore::ibv_open_device$descriptor);
    public static final MethodHandle CLOSE_DEVICE = bind("ibv_close_device", RdmaCore::ibv_close_device$descriptor);
    public static final MethodHandle QUERY_DEVICE = bind("ibv_query_device", RdmaCore::ibv_query_device$descriptor);
    public static final MethodHandle QUERY_PORT = bind("ibv_query_port", RdmaCore::ibv_query_port$descriptor);
    public static final MethodHandle QUERY_GID = bind("ibv_query_gid", RdmaCore::ibv_query_gid$descriptor);
    public static final MethodHandle QUERY_GID_EX = bind("_ibv_query_gid_ex", RdmaCore::_ibv_query_gid_ex$descriptor);
    public static final MethodHandle QUERY_GID_TABLE = bind("_ibv_query_gid_table", RdmaCore::_ibv_query_gid_table$descriptor);
    /** Private (IBVERBS_PRIVATE_*): {@code int (ctx, uint8_t port, unsigned index, enum ibv_gid_type_sysfs *)}. */
    public static final MethodHandle QUERY_GID_TYPE = bind("ibv_query_gid_type", FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.ADDRESS, ValueLayout.JAVA_BYTE, ValueLayout.JAVA_INT, ValueLayout.ADDRESS));
    public static final MethodHandle QUERY_PKEY = bind("ibv_query_pkey", RdmaCore::ibv_query_pkey$descriptor);
    public static final MethodHandle GET_ASYNC_EVENT = bind("ibv_get_async_event", RdmaCore::ibv_get_async_event$descriptor);
    public static final MethodHandle ACK_ASYNC_EVENT = bind("ibv_ack_async_event", RdmaCore::ibv_ack_async_event$descriptor);

    public static final MethodHandle ALLOC_PD = bind("ibv_alloc_pd", RdmaCore::ibv_alloc_pd$descriptor);
    public static final MethodHandle DEALLOC_PD = bind("ibv_dealloc_pd", RdmaCore::ibv_dealloc_pd$descriptor);
    public static final MethodHandle REG_MR_IOVA2 = bind("ibv_reg_mr_iova2", RdmaCore::ibv_reg_mr_iova2$descriptor);
    public static final MethodHandle REG_MR = bind("ibv_reg_mr", RdmaCore::ibv_reg_mr$descriptor);
    public static final MethodHandle REG_DMABUF_MR = bind("ibv_reg_dmabuf_mr", RdmaCore::ibv_reg_dmabuf_mr$descriptor);
    public static final MethodHandle DEREG_MR = bind("ibv_dereg_mr", RdmaCore::ibv_dereg_mr$descriptor);
    public static final MethodHandle REREG_MR = bind("ibv_rereg_mr", RdmaCore::ibv_rereg_mr$descriptor);

    public static final MethodHandle CREATE_COMP_CHANNEL = bind("ibv_create_comp_channel", RdmaCore::ibv_create_comp_channel$descriptor);
    public static final MethodHandle DESTROY_COMP_CHANNEL = bind("ibv_destroy_comp_channel", RdmaCore::ibv_destroy_comp_channel$descriptor);
    public static final MethodHandle CREATE_CQ = bind("ibv_create_cq", RdmaCore::ibv_create_cq$descriptor);
    public static final MethodHandle RESIZE_CQ = bind("ibv_resize_cq", RdmaCore::ibv_resize_cq$descriptor);
    public static final MethodHandle DESTROY_CQ = bind("ibv_destroy_cq", RdmaCore::ibv_destroy_cq$descriptor);
    public static final MethodHandle GET_CQ_EVENT = bind("ibv_get_cq_event", RdmaCore::ibv_get_cq_event$descriptor);
    public static final MethodHandle ACK_CQ_EVENTS = bind("ibv_ack_cq_events", RdmaCore::ibv_ack_cq_events$descriptor);

    public static final MethodHandle CREATE_SRQ = bind("ibv_create_srq", RdmaCore::ibv_create_srq$descriptor);
    public static final MethodHandle MODIFY_SRQ = bind("ibv_modify_srq", RdmaCore::ibv_modify_srq$descriptor);
    public static final MethodHandle QUERY_SRQ = bind("ibv_query_srq", RdmaCore::ibv_query_srq$descriptor);
    public static final MethodHandle DESTROY_SRQ = bind("ibv_destroy_srq", RdmaCore::ibv_destroy_srq$descriptor);

    public static final MethodHandle CREATE_QP = bind("ibv_create_qp", RdmaCore::ibv_create_qp$descriptor);
    public static final MethodHandle MODIFY_QP = bind("ibv_modify_qp", RdmaCore::ibv_modify_qp$descriptor);
    public static final MethodHandle QUERY_QP = bind("ibv_query_qp", RdmaCore::ibv_query_qp$descriptor);
    public static final MethodHandle DESTROY_QP = bind("ibv_destroy_qp", RdmaCore::ibv_destroy_qp$descriptor);

    public static final MethodHandle CREATE_AH = bind("ibv_create_ah", RdmaCore::ibv_create_ah$descriptor);
    public static final MethodHandle CREATE_AH_FROM_WC = bind("ibv_create_ah_from_wc", RdmaCore::ibv_create_ah_from_wc$descriptor);
    public static final MethodHandle DESTROY_AH = bind("ibv_destroy_ah", RdmaCore::ibv_destroy_ah$descriptor);

    /** The device list: listing, freeing, and a device's name and GUID ({@code __be64}). */
    public static final MethodHandle GET_DEVICE_LIST = bind("ibv_get_device_list", RdmaCore::ibv_get_device_list$descriptor);
    public static final MethodHandle FREE_DEVICE_LIST = plain("ibv_free_device_list", RdmaCore::ibv_free_device_list$descriptor);
    public static final MethodHandle GET_DEVICE_NAME = plain("ibv_get_device_name", RdmaCore::ibv_get_device_name$descriptor);
    public static final MethodHandle GET_DEVICE_GUID = plain("ibv_get_device_guid", RdmaCore::ibv_get_device_guid$descriptor);

    private static MethodHandle bind(String symbol, FunctionDescriptor descriptor) {
        return LIB.find(symbol).isPresent() ? Downcalls.errnoCapturing(LIB, symbol, descriptor) : null;
    }

    /**
     * As {@link #bind(String, FunctionDescriptor)}, the descriptor taken from the generated
     * bindings only when the symbol exists: their accessor initialises a holder class that
     * throws {@link UnsatisfiedLinkError} for a symbol the library lacks.
     */
    private static MethodHandle bind(String symbol, Supplier<FunctionDescriptor> descriptor) {
        return LIB.find(symbol).isPresent() ? Downcalls.errnoCapturing(LIB, symbol, descriptor.get()) : null;
    }

    /** A handle without errno capture, for functions that cannot fail ({@code null} when absent). */
    private static MethodHandle plain(String symbol, Supplier<FunctionDescriptor> descriptor) {
        return LIB.find(symbol).isPresent() ? Downcalls.plain(LIB, symbol, descriptor.get()) : null;
    }

    /** Returns {@code handle}, or throws when the loaded libibverbs lacks {@code verb}. */
    public static MethodHandle need(MethodHandle handle, String verb) {
        if (handle == null) {
            throw new UnsupportedOperationException(verb + " is not exported by the loaded libibverbs ("
                    + NativeLibraries.verbsPath().map(Object::toString).orElse("system") + ")");
        }
        return handle;
    }
}
