package io.github.verbs4j.raw;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Locale;
import java.util.Optional;

/**
 * Linux's {@code membarrier(2)} with {@code MEMBARRIER_CMD_PRIVATE_EXPEDITED}: one call makes
 * every thread of this process that is running on a CPU execute a full memory barrier before the
 * call returns (threads not running passed one when they were switched out). It is the heavy side
 * of an asymmetric fence: threads on a hot path order a store before a load with a compiler
 * barrier only, and the rare side that needs the order calls {@link #barrier} (the scheme of
 * userspace RCU's membarrier flavour).
 *
 * <p>Available on Linux 4.14 and later on x86-64, AArch64 and RISC-V (the syscall is made
 * through libc's {@code syscall(2)}, as glibc has no wrapper); {@link #register} says whether it
 * works here, seccomp filters and other architectures included.
 */
public final class Membarrier {

    private static final long CMD_QUERY = 0;
    private static final long CMD_PRIVATE_EXPEDITED = 1 << 3;
    private static final long CMD_REGISTER_PRIVATE_EXPEDITED = 1 << 4;

    /** {@code __NR_membarrier}: 324 on x86-64, 283 in the generic table (AArch64, RISC-V 64); -1 elsewhere. */
    private static final long NUMBER = switch (System.getProperty("os.arch", "").toLowerCase(Locale.ROOT)) {
        case "amd64", "x86_64" -> 324;
        case "aarch64", "riscv64" -> 283;
        default -> -1;
    };

    /** {@code long syscall(long number, ...)} with three {@code long} variadic arguments; null where unusable. */
    private static final MethodHandle SYSCALL = syscallHandle();

    private Membarrier() {
    }

    private static MethodHandle syscallHandle() {
        if (NUMBER < 0 || !System.getProperty("os.name", "").startsWith("Linux")) {
            return null;
        }
        Linker linker = Linker.nativeLinker();
        Optional<MemorySegment> address = linker.defaultLookup().find("syscall");
        return address.map(a -> linker.downcallHandle(a, FunctionDescriptor.of(ValueLayout.JAVA_LONG,
                ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG),
                Linker.Option.firstVariadicArg(1))).orElse(null);
    }

    private static long call(long command) {
        try {
            return (long) SYSCALL.invokeExact(NUMBER, command, 0L, 0L);
        } catch (Throwable t) {
            throw Downcalls.unexpected("membarrier", t);
        }
    }

    /**
     * Registers this process for {@link #barrier} ({@code MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED})
     * and makes one barrier to check that it works.
     *
     * @return whether {@link #barrier} may be used: false on another OS or architecture, on a
     *         kernel without the command, or where a seccomp filter refuses the syscall
     */
    public static boolean register() {
        if (SYSCALL == null) {
            return false;
        }
        long supported = call(CMD_QUERY);
        if (supported < 0 || (supported & CMD_PRIVATE_EXPEDITED) == 0
                || (supported & CMD_REGISTER_PRIVATE_EXPEDITED) == 0) {
            return false;
        }
        return call(CMD_REGISTER_PRIVATE_EXPEDITED) == 0 && call(CMD_PRIVATE_EXPEDITED) == 0;
    }

    /**
     * A full memory barrier on every running thread of this process, after {@link #register}
     * returned true (about 1 µs with a few threads; it interrupts only the CPUs running this
     * process's threads).
     *
     * @throws IllegalStateException when the kernel refuses (it cannot once registered)
     */
    public static void barrier() {
        long rc = call(CMD_PRIVATE_EXPEDITED);
        if (rc != 0) {
            throw new IllegalStateException("verbs4j: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) returned " + rc);
        }
    }
}
