package io.github.verbs4j;

import io.github.verbs4j.ffi.IbVerbs;
import io.github.verbs4j.internal.Errno;
import io.github.verbs4j.internal.Native;
import io.github.verbs4j.internal.NativeLibraries;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.function.Supplier;

/**
 * The control-path verbs, bound with {@code errno} captured (the captured-state segment is each
 * handle's first argument). Descriptors come from the generated bindings, so the C signatures
 * have one source. A symbol the loaded library lacks leaves its handle {@code null}; the caller
 * then throws {@link UnsupportedOperationException} naming it ({@link #need}).
 */
final class Lib {

    private Lib() {
    }

    private static final SymbolLookup LIB = NativeLibraries.verbs();

    static final MethodHandle OPEN_DEVICE = bind("ibv_open_device", IbVerbs::ibv_open_device$descriptor);
    static final MethodHandle CLOSE_DEVICE = bind("ibv_close_device", IbVerbs::ibv_close_device$descriptor);
    static final MethodHandle QUERY_DEVICE = bind("ibv_query_device", IbVerbs::ibv_query_device$descriptor);
    static final MethodHandle QUERY_PORT = bind("ibv_query_port", IbVerbs::ibv_query_port$descriptor);
    static final MethodHandle QUERY_GID = bind("ibv_query_gid", IbVerbs::ibv_query_gid$descriptor);
    static final MethodHandle QUERY_GID_EX = bind("_ibv_query_gid_ex", IbVerbs::_ibv_query_gid_ex$descriptor);
    /** Private (IBVERBS_PRIVATE_*): {@code int (ctx, uint8_t port, unsigned index, enum ibv_gid_type_sysfs *)}. */
    static final MethodHandle QUERY_GID_TYPE = bind("ibv_query_gid_type", FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.ADDRESS, ValueLayout.JAVA_BYTE, ValueLayout.JAVA_INT, ValueLayout.ADDRESS));
    static final MethodHandle QUERY_PKEY = bind("ibv_query_pkey", IbVerbs::ibv_query_pkey$descriptor);
    static final MethodHandle GET_ASYNC_EVENT = bind("ibv_get_async_event", IbVerbs::ibv_get_async_event$descriptor);
    static final MethodHandle ACK_ASYNC_EVENT = bind("ibv_ack_async_event", IbVerbs::ibv_ack_async_event$descriptor);

    static final MethodHandle ALLOC_PD = bind("ibv_alloc_pd", IbVerbs::ibv_alloc_pd$descriptor);
    static final MethodHandle DEALLOC_PD = bind("ibv_dealloc_pd", IbVerbs::ibv_dealloc_pd$descriptor);
    static final MethodHandle REG_MR_IOVA2 = bind("ibv_reg_mr_iova2", IbVerbs::ibv_reg_mr_iova2$descriptor);
    static final MethodHandle REG_MR = bind("ibv_reg_mr", IbVerbs::ibv_reg_mr$descriptor);
    static final MethodHandle REG_DMABUF_MR = bind("ibv_reg_dmabuf_mr", IbVerbs::ibv_reg_dmabuf_mr$descriptor);
    static final MethodHandle DEREG_MR = bind("ibv_dereg_mr", IbVerbs::ibv_dereg_mr$descriptor);

    static final MethodHandle CREATE_COMP_CHANNEL = bind("ibv_create_comp_channel", IbVerbs::ibv_create_comp_channel$descriptor);
    static final MethodHandle DESTROY_COMP_CHANNEL = bind("ibv_destroy_comp_channel", IbVerbs::ibv_destroy_comp_channel$descriptor);
    static final MethodHandle CREATE_CQ = bind("ibv_create_cq", IbVerbs::ibv_create_cq$descriptor);
    static final MethodHandle RESIZE_CQ = bind("ibv_resize_cq", IbVerbs::ibv_resize_cq$descriptor);
    static final MethodHandle DESTROY_CQ = bind("ibv_destroy_cq", IbVerbs::ibv_destroy_cq$descriptor);
    static final MethodHandle GET_CQ_EVENT = bind("ibv_get_cq_event", IbVerbs::ibv_get_cq_event$descriptor);
    static final MethodHandle ACK_CQ_EVENTS = bind("ibv_ack_cq_events", IbVerbs::ibv_ack_cq_events$descriptor);

    static final MethodHandle CREATE_SRQ = bind("ibv_create_srq", IbVerbs::ibv_create_srq$descriptor);
    static final MethodHandle MODIFY_SRQ = bind("ibv_modify_srq", IbVerbs::ibv_modify_srq$descriptor);
    static final MethodHandle QUERY_SRQ = bind("ibv_query_srq", IbVerbs::ibv_query_srq$descriptor);
    static final MethodHandle DESTROY_SRQ = bind("ibv_destroy_srq", IbVerbs::ibv_destroy_srq$descriptor);

    static final MethodHandle CREATE_QP = bind("ibv_create_qp", IbVerbs::ibv_create_qp$descriptor);
    static final MethodHandle MODIFY_QP = bind("ibv_modify_qp", IbVerbs::ibv_modify_qp$descriptor);
    static final MethodHandle QUERY_QP = bind("ibv_query_qp", IbVerbs::ibv_query_qp$descriptor);
    static final MethodHandle DESTROY_QP = bind("ibv_destroy_qp", IbVerbs::ibv_destroy_qp$descriptor);

    static final MethodHandle CREATE_AH = bind("ibv_create_ah", IbVerbs::ibv_create_ah$descriptor);
    static final MethodHandle CREATE_AH_FROM_WC = bind("ibv_create_ah_from_wc", IbVerbs::ibv_create_ah_from_wc$descriptor);
    static final MethodHandle DESTROY_AH = bind("ibv_destroy_ah", IbVerbs::ibv_destroy_ah$descriptor);

    /** libc {@code int poll(struct pollfd *fds, nfds_t nfds, int timeout)}: blocking, so never critical. */
    static final MethodHandle POLL = Linker.nativeLinker().defaultLookup().find("poll")
            .map(a -> Linker.nativeLinker().downcallHandle(a, FunctionDescriptor.of(ValueLayout.JAVA_INT,
                    ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT),
                    Linker.Option.captureCallState("errno")))
            .orElseThrow(() -> new UnsatisfiedLinkError("libc has no poll"));

    private static MethodHandle bind(String symbol, FunctionDescriptor descriptor) {
        return LIB.find(symbol).isPresent() ? Native.errnoCapturing(LIB, symbol, descriptor) : null;
    }

    /**
     * As {@link #bind(String, FunctionDescriptor)}, the descriptor taken from the generated
     * bindings only when the symbol exists: their accessor initialises a holder class that
     * throws {@link UnsatisfiedLinkError} for a symbol the library lacks.
     */
    private static MethodHandle bind(String symbol, Supplier<FunctionDescriptor> descriptor) {
        return LIB.find(symbol).isPresent() ? Native.errnoCapturing(LIB, symbol, descriptor.get()) : null;
    }

    /** Returns {@code handle}, or throws when the loaded libibverbs lacks {@code verb}. */
    static MethodHandle need(MethodHandle handle, String verb) {
        if (handle == null) {
            throw new UnsupportedOperationException(verb + " is not exported by the loaded libibverbs ("
                    + NativeLibraries.verbsPath().map(Object::toString).orElse("system") + ")");
        }
        return handle;
    }

    /**
     * Waits until {@code fd} is readable ({@code poll(2)} with POLLIN), at most
     * {@code timeoutMillis} (negative: forever). Retries on EINTR with the remaining time.
     *
     * @return whether the fd became readable before the timeout
     */
    static boolean awaitReadable(int fd, long timeoutMillis, String what) {
        long deadline = timeoutMillis < 0 ? Long.MAX_VALUE : System.nanoTime() + timeoutMillis * 1_000_000L;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Native.errnoSegment(arena);
            MemorySegment pollfd = arena.allocate(POLLFD_SIZE, 4);
            while (true) {
                pollfd.set(ValueLayout.JAVA_INT, POLLFD_FD, fd);
                pollfd.set(ValueLayout.JAVA_SHORT, POLLFD_EVENTS, POLLIN);
                pollfd.set(ValueLayout.JAVA_SHORT, POLLFD_REVENTS, (short) 0);
                int wait;
                if (timeoutMillis < 0) {
                    wait = -1;
                } else {
                    long left = Math.max(0, (deadline - System.nanoTime() + 999_999) / 1_000_000);
                    wait = (int) Math.min(Integer.MAX_VALUE, left);
                }
                int n = (int) POLL.invokeExact(errno, pollfd, 1L, wait);
                if (n < 0) {
                    int e = Native.errno(errno);
                    if (e == Errno.EINTR) {
                        continue;
                    }
                    throw new VerbsException("poll", e, "waiting for " + what + " (fd " + fd + ")");
                }
                if (n == 0) {
                    return false;
                }
                short revents = pollfd.get(ValueLayout.JAVA_SHORT, POLLFD_REVENTS);
                if ((revents & POLLNVAL) != 0) {
                    throw new VerbsException("poll", Errno.EBADF, what + ": fd " + fd + " is not open");
                }
                return true;
            }
        } catch (Throwable t) {
            throw Native.unexpected("poll", t);
        }
    }

    /** {@code struct pollfd { int fd; short events; short revents; }} (checked against the C header by a test). */
    static final long POLLFD_SIZE = 8;
    static final long POLLFD_FD = 0;
    static final long POLLFD_EVENTS = 4;
    static final long POLLFD_REVENTS = 6;
    private static final short POLLIN = 0x1;
    private static final short POLLNVAL = 0x20;

    /** {@code MemorySegment.NULL}-safe check of a returned pointer. */
    static boolean isNull(MemorySegment pointer) {
        return pointer.equals(MemorySegment.NULL);
    }
}
