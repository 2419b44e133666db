package io.github.verbs4j.jmh;

import io.github.verbs4j.Verbs;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The C baselines ({@code jmh/src/main/c/baseline.c}, built into
 * {@code jmh/target/lib/libverbs4j-baseline.so}): handles to its loops and to its no-op function.
 *
 * <p>The library is found through the system property {@value #PROPERTY}, else beside the
 * benchmarks jar ({@code target/lib/} next to {@code target/benchmarks.jar}). It names
 * {@code libibverbs.so.1} by soname, so verbs4j's library (softrdma, chosen with
 * {@code -Dverbs4j.libibverbs}) is loaded first: the dynamic loader then binds the baseline to
 * that same copy, and Java and C drive one provider.
 */
final class Baseline {

    static final String PROPERTY = "verbs4j.jmh.baseline";
    static final String FILE = "libverbs4j-baseline.so";

    private static final Linker LINKER = Linker.nativeLinker();
    private static final SymbolLookup LIB = load();

    /** {@code struct bl_rig *bl_open(char *err, int errlen)}. */
    static final MethodHandle OPEN = handle("bl_open",
            FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
    /** {@code void bl_close(struct bl_rig *)}. */
    static final MethodHandle CLOSE = handle("bl_close", FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
    /** {@code void bl_strerror(int64_t code, char *out, int outlen)}. */
    static final MethodHandle STRERROR = handle("bl_strerror",
            FunctionDescriptor.ofVoid(ValueLayout.JAVA_LONG, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));

    /** Every loop: {@code int64_t bl_x(struct bl_rig *, int64_t iterations)}. */
    private static final FunctionDescriptor LOOP = FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.ADDRESS,
            ValueLayout.JAVA_LONG);

    // The loops run for hundreds of microseconds: plain (non-critical) downcalls, whose 20-37 ns
    // transition (docs/performance.md, "The FFM floor") is then spread over the whole loop, and which let safepoints proceed meanwhile.
    static final MethodHandle SEND_RECV = handle("bl_send_recv", LOOP);
    static final MethodHandle WRITE = handle("bl_write", LOOP);
    static final MethodHandle READ = handle("bl_read", LOOP);
    static final MethodHandle FETCH_ADD = handle("bl_fetch_add", LOOP);
    static final MethodHandle WRITE_CHAIN16 = handle("bl_write_chain16", LOOP);
    static final MethodHandle POLL_EMPTY = handle("bl_poll_empty", LOOP);
    static final MethodHandle NOP_LOOP = handle("bl_nop_loop", LOOP);

    /** {@code int bl_nop(void *, void *, void **)}: the shape of {@code ops.post_send}. */
    private static final FunctionDescriptor NOP = FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS,
            ValueLayout.ADDRESS, ValueLayout.ADDRESS);
    static final MethodHandle NOP_CRITICAL = handle("bl_nop", NOP, Linker.Option.critical(false));
    static final MethodHandle NOP_PLAIN = handle("bl_nop", NOP);
    /** {@code bl_nop} with every pointer a {@code long}, as verbs4j's hot path passes them (ContextOps.POST_ADDRESSES). */
    static final MethodHandle NOP_CRITICAL_BY_ADDRESS = handle("bl_nop", FunctionDescriptor.of(ValueLayout.JAVA_INT,
            ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG), Linker.Option.critical(false));

    // the raw-FFM benchmarks' accessors (see RawRig)
    static final MethodHandle QP_A = handle("bl_qp_a", FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS));
    static final MethodHandle CQ_A = handle("bl_cq_a", FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS));
    static final MethodHandle POST_SEND_FN = handle("bl_post_send_fn",
            FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS));
    static final MethodHandle POLL_CQ_FN = handle("bl_poll_cq_fn",
            FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS));
    // the raw-FFM and JNI rigs' request block (bl_prepare_all) and B's side of the rig
    static final MethodHandle QP_B = handle("bl_qp_b", FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS));
    static final MethodHandle CQ_B = handle("bl_cq_b", FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS));
    static final MethodHandle POST_RECV_FN = handle("bl_post_recv_fn",
            FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS));
    static final MethodHandle PREPARE_ALL = handle("bl_prepare_all",
            FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.ADDRESS));
    static final MethodHandle LAYOUT = handle("bl_layout", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));

    private Baseline() {
    }

    private static SymbolLookup load() {
        // bind libibverbs.so.1 (softrdma) before the baseline needs it: see the class comment
        Verbs.ensureAvailability();
        Path path = locate();
        if (!Files.isRegularFile(path)) {
            throw new IllegalStateException("the C baselines are missing: " + path + " (build them with"
                    + " `./mvnw -pl jmh -am package`, or point -D" + PROPERTY + " at " + FILE + ")");
        }
        return SymbolLookup.libraryLookup(path, Arena.global());
    }

    private static Path locate() {
        return locate(PROPERTY, FILE);
    }

    /**
     * Where one of the module's native libraries is: the system property {@code property}, else
     * {@code file} in {@code lib/} beside the benchmarks jar.
     */
    static Path locate(String property, String file) {
        String configured = System.getProperty(property);
        if (configured != null && !configured.isBlank()) {
            return Path.of(configured).toAbsolutePath();
        }
        try {
            Path jar = Path.of(Baseline.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            // target/benchmarks.jar, or target/classes when run from an IDE
            return jar.getParent().resolve("lib").resolve(file);
        } catch (URISyntaxException | SecurityException | NullPointerException e) {
            throw new IllegalStateException("cannot tell where the benchmarks jar is: set -D" + property, e);
        }
    }

    static MethodHandle handle(String name, FunctionDescriptor descriptor, Linker.Option... options) {
        MemorySegment symbol = LIB.find(name)
                .orElseThrow(() -> new IllegalStateException(FILE + " has no symbol " + name + " (stale build?)"));
        return LINKER.downcallHandle(symbol, descriptor, options);
    }

    /** {@code bl_layout(which)}: a size or offset from the C compiler; throws for a stale library. */
    static int layout(int which) {
        int v;
        try {
            v = (int) LAYOUT.invokeExact(which);
        } catch (Throwable t) {
            throw new IllegalStateException("bl_layout", t);
        }
        if (v < 0) {
            throw new IllegalStateException("bl_layout(" + which + ") unknown: stale " + FILE + "?");
        }
        return v;
    }

    /** Opens the C rig (device, PD, CQs, connected RC QPs, regions). */
    static MemorySegment open() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment err = arena.allocate(256);
            MemorySegment rig = (MemorySegment) OPEN.invokeExact(err, 256);
            if (rig.equals(MemorySegment.NULL)) {
                throw new IllegalStateException("C baseline setup failed: " + err.getString(0));
            }
            return rig;
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("bl_open", t);
        }
    }

    static void close(MemorySegment rig) {
        try {
            CLOSE.invokeExact(rig);
        } catch (Throwable t) {
            throw new IllegalStateException("bl_close", t);
        }
    }

    /** Throws, with bl_strerror's explanation, when a loop returned a negative code. */
    static long check(String loop, long result) {
        if (result >= 0) {
            return result;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(128);
            STRERROR.invokeExact(result, out, 128);
            throw new IllegalStateException(loop + " failed: " + out.getString(0) + " (code " + result + ")");
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("bl_strerror", t);
        }
    }
}
