package io.github.verbs4j.raw;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * Factories for the hand-written downcall handles that jextract cannot emit: control-path calls
 * with {@code errno} captured ({@link Linker.Option#captureCallState}), and address-less handles
 * for C function pointers (the hot-path ops of {@code ibv_context_ops}, {@code verbs_context}).
 *
 * <p>Control-path pattern:
 * <pre>{@code
 * static final MethodHandle IBV_ALLOC_PD = Downcalls.errnoCapturing(NativeLibraries.verbs(), "ibv_alloc_pd",
 *         FunctionDescriptor.of(ADDRESS, ADDRESS));
 * try (Arena arena = Arena.ofConfined()) {
 *     MemorySegment errno = Downcalls.errnoSegment(arena);
 *     MemorySegment pd = (MemorySegment) IBV_ALLOC_PD.invokeExact(errno, context);
 *     if (pd.equals(MemorySegment.NULL)) throw VerbsException.of("ibv_alloc_pd", Downcalls.errno(errno));
 * }
 * }</pre>
 * The captured-state segment is the first argument of such a handle.
 */
public final class Downcalls {

    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout CAPTURE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE_LAYOUT.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final Linker.Option CAPTURE_ERRNO = Linker.Option.captureCallState("errno");

    private Downcalls() {
    }

    /**
     * A handle for {@code symbol} in {@code lookup} that captures {@code errno} into a segment
     * passed as its first argument (see {@link #errnoSegment}).
     *
     * @throws UnsatisfiedLinkError when the library has no such symbol
     */
    public static MethodHandle errnoCapturing(SymbolLookup lookup, String symbol, FunctionDescriptor descriptor) {
        return errnoCapturing(lookup, symbol, descriptor, new Linker.Option[0]);
    }

    /**
     * As {@link #errnoCapturing(SymbolLookup, String, FunctionDescriptor)}, with further linker
     * options (such as {@link Linker.Option#firstVariadicArg} for a variadic function).
     *
     * @throws UnsatisfiedLinkError when the library has no such symbol
     */
    public static MethodHandle errnoCapturing(SymbolLookup lookup, String symbol, FunctionDescriptor descriptor,
            Linker.Option... options) {
        MemorySegment address = lookup.find(symbol)
                .orElseThrow(() -> new UnsatisfiedLinkError("verbs4j: the loaded library has no symbol " + symbol));
        Linker.Option[] all = java.util.Arrays.copyOf(options, options.length + 1);
        all[options.length] = CAPTURE_ERRNO;
        return LINKER.downcallHandle(address, descriptor, all);
    }

    /**
     * An address-less handle for a C function pointer of the given shape: the function address
     * is the first argument. With {@code critical} the call skips the thread-state transition
     * (15 to 30 ns saved per call: 3.4-8.9 ns against 20.5-37.0 ns for a no-op call in
     * docs/performance.md): only for calls that never block and never call back into Java.
     */
    public static MethodHandle functionPointer(FunctionDescriptor descriptor, boolean critical) {
        return critical
                ? LINKER.downcallHandle(descriptor, Linker.Option.critical(false))
                : LINKER.downcallHandle(descriptor);
    }

    /**
     * An address-less handle for a C function pointer that sets {@code errno}: the function
     * address is the first argument, the captured-state segment ({@link #errnoSegment}) the
     * second. Not critical (control path).
     */
    public static MethodHandle functionPointerCapturingErrno(FunctionDescriptor descriptor) {
        return LINKER.downcallHandle(descriptor, CAPTURE_ERRNO);
    }

    /** A plain handle for {@code symbol} (no errno), for verbs that return their error. */
    public static MethodHandle plain(SymbolLookup lookup, String symbol, FunctionDescriptor descriptor) {
        MemorySegment address = lookup.find(symbol)
                .orElseThrow(() -> new UnsatisfiedLinkError("verbs4j: the loaded library has no symbol " + symbol));
        return LINKER.downcallHandle(address, descriptor);
    }

    /** A segment to receive the captured {@code errno} of one call. */
    public static MemorySegment errnoSegment(SegmentAllocator allocator) {
        return allocator.allocate(CAPTURE_LAYOUT);
    }

    /** The {@code errno} captured in {@code state} by the last call that used it. */
    public static int errno(MemorySegment state) {
        return (int) ERRNO.get(state, 0L);
    }

    /**
     * The error of a verb that returns it: a positive return value is the errno itself
     * (rdma-core's destroy and modify verbs), anything else means "look at errno".
     */
    public static int errnoOf(int rc, MemorySegment state) {
        return rc > 0 ? rc : errno(state);
    }

    /** {@code MemorySegment.NULL}-safe check of a returned pointer. */
    public static boolean isNull(MemorySegment pointer) {
        return pointer.equals(MemorySegment.NULL);
    }

    /**
     * Wraps a {@link Throwable} thrown by {@code invokeExact} that is not an error of the verb
     * itself (a linkage or argument problem inside verbs4j).
     */
    public static RuntimeException unexpected(String verb, Throwable t) {
        if (t instanceof RuntimeException re) {
            return re;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new IllegalStateException("verbs4j: unexpected failure calling " + verb, t);
    }
}
