package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_cq_ex;
import io.github.verbs4j.ffi.ibv_qp_ex;
import io.github.verbs4j.ffi.verbs_context;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The extended QP and CQ of rdma-core: {@code ibv_create_qp_ex} and {@code ibv_create_cq_ex}
 * (static inline functions calling {@code verbs_context->create_qp_ex} / {@code create_cq_ex}),
 * the post-send API ({@code ibv_wr_start}, {@code ibv_wr_send}, ..., {@code ibv_wr_complete}:
 * inline calls of the function pointers stored in {@code struct ibv_qp_ex}) and the polling
 * API of {@code struct ibv_cq_ex} ({@code ibv_start_poll}, {@code ibv_next_poll},
 * {@code ibv_end_poll}, {@code ibv_wc_read_*}).
 *
 * <p>As in {@link ContextOps}, an owner reads each function pointer once and calls it through
 * one of these address-less handles (the function address is the first argument). The
 * data-path handles are {@code critical}: the provider's builders, {@code wr_complete} and the
 * polling functions never block (at most a short internal lock) and never call back. A pointer
 * the provider left NULL (an opcode not asked for at creation, a completion field not asked
 * for) must never be called: owners check it once, at creation. Offsets come from the
 * generated layouts.
 *
 * <p><b>By address.</b> Each data-path handle ({@code _BY_ADDRESS}) takes every pointer but the
 * function's ({@code struct ibv_qp_ex *}, {@code struct ibv_cq_ex *}, lists, buffers, the
 * address handle) as a {@code long} ({@code JAVA_LONG}): each segment argument costs the
 * linker's checks and, for a segment of a shared arena, its session's acquire and release
 * around every call (docs/measurements/performance.md, "Why raw FFM trailed the JNI twin"), and a post
 * through {@code ibv_qp_ex} makes three or more calls. The caller must keep every object behind
 * those addresses alive until the calls return: verbs-core's sessions pin the QP or CQ for the
 * sequence of calls, and keep their own buffers reachable.
 */
public final class ExtendedOps {

    private ExtendedOps() {
    }

    private static final ValueLayout.OfInt I = ValueLayout.JAVA_INT;
    private static final ValueLayout.OfLong L = ValueLayout.JAVA_LONG;
    private static final ValueLayout.OfByte B = ValueLayout.JAVA_BYTE;
    private static final java.lang.foreign.AddressLayout A = ValueLayout.ADDRESS;

    // ---------------------------------------------------------------- creation (control path)

    /** {@code struct ibv_qp *(*create_qp_ex)(struct ibv_context *, struct ibv_qp_init_attr_ex *)}, errno captured. */
    public static final MethodHandle CREATE_QP_EX = Downcalls.functionPointerCapturingErrno(FunctionDescriptor.of(A, A, A));
    /** {@code struct ibv_cq_ex *(*create_cq_ex)(struct ibv_context *, struct ibv_cq_init_attr_ex *)}, errno captured. */
    public static final MethodHandle CREATE_CQ_EX = CREATE_QP_EX;

    /**
     * {@code struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *)} (exported, no errno), bound on
     * first use: a libibverbs older than rdma-core's ABI 1.6 lacks the symbol.
     */
    public static MethodHandle qpToQpEx() {
        return QpToQpEx.HANDLE;
    }

    private static final class QpToQpEx {
        static final MethodHandle HANDLE = Downcalls.plain(NativeLibraries.verbs(), "ibv_qp_to_qp_ex",
                RdmaCore.ibv_qp_to_qp_ex$descriptor());
    }

    /** {@code verbs_context->create_qp_ex} of {@code context}, or {@code null} when the provider has none. */
    public static MemorySegment createQpEx(MemorySegment context) {
        return ContextOps.extendedOp(context, verbs_context.create_qp_ex$offset());
    }

    /** {@code verbs_context->create_cq_ex} of {@code context}, or {@code null} when the provider has none. */
    public static MemorySegment createCqEx(MemorySegment context) {
        return ContextOps.extendedOp(context, verbs_context.create_cq_ex$offset());
    }

    // ---------------------------------------------------------------- struct ibv_qp_ex

    /** {@code void (*)(struct ibv_qp_ex *)}: wr_start, wr_abort, wr_send, by address: {@code (long qp_ex)}. */
    public static final MethodHandle QP_VOID_BY_ADDRESS = Downcalls.functionPointer(FunctionDescriptor.ofVoid(L), true);
    /** {@code int (*wr_complete)(struct ibv_qp_ex *)}, by address: {@code (long qp_ex)}. */
    public static final MethodHandle QP_COMPLETE_BY_ADDRESS = Downcalls.functionPointer(FunctionDescriptor.of(I, L), true);
    /** {@code void (*)(struct ibv_qp_ex *, uint32_t)}: wr_send_imm (__be32), wr_send_inv, wr_local_inv, by address: {@code (long qp_ex, int)}; also wr_set_xrc_srqn. */
    public static final MethodHandle QP_INT_BY_ADDRESS = Downcalls.functionPointer(FunctionDescriptor.ofVoid(L, I), true);
    /** {@code void (*)(struct ibv_qp_ex *, uint32_t rkey, uint64_t remote_addr)}: wr_rdma_read, wr_rdma_write, by address: {@code (long qp_ex, int rkey, long remote_addr)}. */
    public static final MethodHandle QP_RDMA_BY_ADDRESS = Downcalls.functionPointer(FunctionDescriptor.ofVoid(L, I, L), true);
    /** {@code void (*wr_rdma_write_imm)(struct ibv_qp_ex *, uint32_t rkey, uint64_t remote_addr, __be32 imm)}, by address: {@code (long qp_ex, int rkey, long remote_addr, int imm)}. */
    public static final MethodHandle QP_RDMA_IMM_BY_ADDRESS = Downcalls.functionPointer(FunctionDescriptor.ofVoid(L, I, L, I), true);
    /** {@code void (*wr_atomic_cmp_swp)(struct ibv_qp_ex *, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap)}, by address: {@code (long qp_ex, int rkey, long addr, long compare, long swap)}. */
    public static final MethodHandle QP_CMP_SWP_BY_ADDRESS = Downcalls.functionPointer(FunctionDescriptor.ofVoid(L, I, L, L, L), true);
    /** {@code void (*wr_atomic_fetch_add)(struct ibv_qp_ex *, uint32_t rkey, uint64_t addr, uint64_t add)}, by address: {@code (long qp_ex, int rkey, long addr, long add)}. */
    public static final MethodHandle QP_FETCH_ADD_BY_ADDRESS = Downcalls.functionPointer(FunctionDescriptor.ofVoid(L, I, L, L), true);
    /** {@code void (*wr_set_sge)(struct ibv_qp_ex *, uint32_t lkey, uint64_t addr, uint32_t length)}, by address: {@code (long qp_ex, int lkey, long addr, int length)}. */
    public static final MethodHandle QP_SET_SGE_BY_ADDRESS = Downcalls.functionPointer(FunctionDescriptor.ofVoid(L, I, L, I), true);
    /** {@code void (*)(struct ibv_qp_ex *, size_t n, const T *list)}: wr_set_sge_list, wr_set_inline_data_list, by address: {@code (long qp_ex, long n, long list)}. */
    public static final MethodHandle QP_SET_LIST_BY_ADDRESS = Downcalls.functionPointer(FunctionDescriptor.ofVoid(L, L, L), true);
    /** {@code void (*wr_set_inline_data)(struct ibv_qp_ex *, void *addr, size_t length)}, by address: {@code (long qp_ex, long addr, long length)}. */
    public static final MethodHandle QP_SET_INLINE_BY_ADDRESS = QP_SET_LIST_BY_ADDRESS;
    /** {@code void (*wr_set_ud_addr)(struct ibv_qp_ex *, struct ibv_ah *, uint32_t remote_qpn, uint32_t remote_qkey)}, by address: {@code (long qp_ex, long ah, int remote_qpn, int remote_qkey)}. */
    public static final MethodHandle QP_SET_UD_ADDR_BY_ADDRESS = Downcalls.functionPointer(FunctionDescriptor.ofVoid(L, L, I, I), true);

    public static final long QP_WR_ID = ibv_qp_ex.wr_id$offset();
    public static final long QP_WR_FLAGS = ibv_qp_ex.wr_flags$offset();
    public static final long WR_START = ibv_qp_ex.wr_start$offset();
    public static final long WR_COMPLETE = ibv_qp_ex.wr_complete$offset();
    public static final long WR_ABORT = ibv_qp_ex.wr_abort$offset();
    public static final long WR_SEND = ibv_qp_ex.wr_send$offset();
    public static final long WR_SEND_IMM = ibv_qp_ex.wr_send_imm$offset();
    public static final long WR_SEND_INV = ibv_qp_ex.wr_send_inv$offset();
    public static final long WR_LOCAL_INV = ibv_qp_ex.wr_local_inv$offset();
    public static final long WR_RDMA_READ = ibv_qp_ex.wr_rdma_read$offset();
    public static final long WR_RDMA_WRITE = ibv_qp_ex.wr_rdma_write$offset();
    public static final long WR_RDMA_WRITE_IMM = ibv_qp_ex.wr_rdma_write_imm$offset();
    public static final long WR_ATOMIC_CMP_SWP = ibv_qp_ex.wr_atomic_cmp_swp$offset();
    public static final long WR_ATOMIC_FETCH_ADD = ibv_qp_ex.wr_atomic_fetch_add$offset();
    public static final long WR_SET_SGE = ibv_qp_ex.wr_set_sge$offset();
    public static final long WR_SET_SGE_LIST = ibv_qp_ex.wr_set_sge_list$offset();
    public static final long WR_SET_INLINE_DATA = ibv_qp_ex.wr_set_inline_data$offset();
    public static final long WR_SET_UD_ADDR = ibv_qp_ex.wr_set_ud_addr$offset();
    public static final long WR_SET_XRC_SRQN = ibv_qp_ex.wr_set_xrc_srqn$offset();
    /** The size of {@code struct ibv_qp_ex}. */
    public static final long QP_EX_SIZE = ibv_qp_ex.layout().byteSize();

    // ---------------------------------------------------------------- struct ibv_cq_ex

    /** {@code int (*start_poll)(struct ibv_cq_ex *, struct ibv_poll_cq_attr *)}, by address: {@code (long cq_ex, long attr)}. */
    public static final MethodHandle CQ_START_POLL_BY_ADDRESS = Downcalls.functionPointer(FunctionDescriptor.of(I, L, L), true);
    /** {@code int (*next_poll)(struct ibv_cq_ex *)}, and the {@code uint32_t}/enum {@code read_*} accessors, by address: {@code (long cq_ex)}. */
    public static final MethodHandle CQ_INT_BY_ADDRESS = Downcalls.functionPointer(FunctionDescriptor.of(I, L), true);
    /** {@code void (*end_poll)(struct ibv_cq_ex *)}, by address: {@code (long cq_ex)}. */
    public static final MethodHandle CQ_VOID_BY_ADDRESS = QP_VOID_BY_ADDRESS;
    /** The {@code uint8_t read_*} accessors ({@code read_sl}, {@code read_dlid_path_bits}), by address: {@code (long cq_ex)}. */
    public static final MethodHandle CQ_BYTE_BY_ADDRESS = Downcalls.functionPointer(FunctionDescriptor.of(B, L), true);
    /** {@code uint64_t (*read_completion_ts)(struct ibv_cq_ex *)}, by address: {@code (long cq_ex)}. */
    public static final MethodHandle CQ_LONG_BY_ADDRESS = Downcalls.functionPointer(FunctionDescriptor.of(L, L), true);

    public static final long CQ_STATUS = ibv_cq_ex.status$offset();
    public static final long CQ_WR_ID = ibv_cq_ex.wr_id$offset();
    public static final long START_POLL = ibv_cq_ex.start_poll$offset();
    public static final long NEXT_POLL = ibv_cq_ex.next_poll$offset();
    public static final long END_POLL = ibv_cq_ex.end_poll$offset();
    public static final long READ_OPCODE = ibv_cq_ex.read_opcode$offset();
    public static final long READ_VENDOR_ERR = ibv_cq_ex.read_vendor_err$offset();
    public static final long READ_BYTE_LEN = ibv_cq_ex.read_byte_len$offset();
    public static final long READ_IMM_DATA = ibv_cq_ex.read_imm_data$offset();
    public static final long READ_QP_NUM = ibv_cq_ex.read_qp_num$offset();
    public static final long READ_SRC_QP = ibv_cq_ex.read_src_qp$offset();
    public static final long READ_WC_FLAGS = ibv_cq_ex.read_wc_flags$offset();
    public static final long READ_SLID = ibv_cq_ex.read_slid$offset();
    public static final long READ_SL = ibv_cq_ex.read_sl$offset();
    public static final long READ_DLID_PATH_BITS = ibv_cq_ex.read_dlid_path_bits$offset();
    public static final long READ_COMPLETION_TS = ibv_cq_ex.read_completion_ts$offset();
    /** The size of {@code struct ibv_cq_ex}. */
    public static final long CQ_EX_SIZE = ibv_cq_ex.layout().byteSize();
}
