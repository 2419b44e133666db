package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_pd;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.function.Supplier;

/**
 * rdma-core's shared-PD verbs (IBVERBS_1.10): {@code ibv_import_device} opens a second context
 * on the ucontext behind a (dup of a) context's command fd, {@code ibv_import_pd} and
 * {@code ibv_import_mr} name that ucontext's objects by their kernel handles, and
 * {@code ibv_unimport_pd}/{@code ibv_unimport_mr} drop an imported object without destroying
 * what it names. Also {@code ibv_pd.handle} (no other code reads a PD's fields; the context's
 * {@code cmd_fd} and a region's {@code handle} are in {@link ContextFields} and
 * {@link MrFields}) and libc's {@code dup(2)}.
 *
 * <p>A symbol the loaded libibverbs lacks leaves its handle {@code null}
 * ({@link VerbsFunctions#need} names it). A provider without import (every one of rdma-core's
 * but mlx5: rxe, siw) answers {@code ibv_import_device} with EOPNOTSUPP, and
 * {@code ibv_import_pd}/{@code ibv_import_mr} through libibverbs' dummy ops the same.
 */
public final class ImportOps {

    private ImportOps() {
    }

    private static final SymbolLookup LIB = NativeLibraries.verbs();

    /** {@code struct ibv_context *ibv_import_device(int cmd_fd)}; errno captured. */
    public static final MethodHandle IMPORT_DEVICE = bind("ibv_import_device", RdmaCore::ibv_import_device$descriptor);
    /** {@code struct ibv_pd *ibv_import_pd(struct ibv_context *, uint32_t pd_handle)}; errno captured. */
    public static final MethodHandle IMPORT_PD = bind("ibv_import_pd", RdmaCore::ibv_import_pd$descriptor);
    /** {@code void ibv_unimport_pd(struct ibv_pd *)}. */
    public static final MethodHandle UNIMPORT_PD = plain("ibv_unimport_pd", RdmaCore::ibv_unimport_pd$descriptor);
    /** {@code struct ibv_mr *ibv_import_mr(struct ibv_pd *, uint32_t mr_handle)}; errno captured. */
    public static final MethodHandle IMPORT_MR = bind("ibv_import_mr", RdmaCore::ibv_import_mr$descriptor);
    /** {@code void ibv_unimport_mr(struct ibv_mr *)}. */
    public static final MethodHandle UNIMPORT_MR = plain("ibv_unimport_mr", RdmaCore::ibv_unimport_mr$descriptor);

    /** {@code sizeof(struct ibv_pd)}. */
    private static final long PD_SIZE = ibv_pd.layout().byteSize();

    /** {@code pd->handle}: the kernel handle {@code ibv_import_pd} names the PD at {@code pd} by. */
    public static int pdHandle(MemorySegment pd) {
        return ibv_pd.handle(pd.reinterpret(PD_SIZE));
    }

    private static MethodHandle bind(String symbol, Supplier<FunctionDescriptor> descriptor) {
        return LIB.find(symbol).isPresent() ? Downcalls.errnoCapturing(LIB, symbol, descriptor.get()) : null;
    }

    private static MethodHandle plain(String symbol, Supplier<FunctionDescriptor> descriptor) {
        return LIB.find(symbol).isPresent() ? Downcalls.plain(LIB, symbol, descriptor.get()) : null;
    }
}
