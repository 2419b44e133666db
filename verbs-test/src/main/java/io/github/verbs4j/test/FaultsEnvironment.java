package io.github.verbs4j.test;

import io.github.verbs4j.raw.NativeLibraries;
import org.junit.jupiter.api.extension.ExtensionConfigurationException;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * {@code SOFTRDMA_FAULTS} in this process's environment: softrdma reads it once, when its packet
 * path starts, so it is set with {@code setenv(3)} before softrdma is loaded and never changed
 * after.
 */
final class FaultsEnvironment {

    static final String VARIABLE = "SOFTRDMA_FAULTS";
    /** The value the JVM started with: what a class without {@link Faults} runs with. */
    static final String STARTUP = blankToNull(System.getenv(VARIABLE));

    private static String effective = STARTUP;

    private FaultsEnvironment() {
    }

    static synchronized String effective() {
        return effective;
    }

    /** The {@code SOFTRDMA_FAULTS} value of an annotation ({@code null}: no faults). */
    static String spec(Faults f) {
        boolean knobs = f.drop() != 0 || f.dup() != 0 || f.reorder() != 0 || f.delay() != 0
                || !f.delayTime().equals("2ms") || f.seed() != 42;
        if (!f.value().isBlank()) {
            if (knobs) {
                throw new ExtensionConfigurationException("@Faults: give either value() or the knobs, not both");
            }
            return f.value().strip();
        }
        List<String> parts = new ArrayList<>();
        parts.add("seed=" + f.seed());
        knob(parts, "drop", f.drop());
        knob(parts, "dup", f.dup());
        knob(parts, "reorder", f.reorder());
        if (f.delay() != 0) {
            check("delay", f.delay());
            if (!f.delayTime().matches("[0-9]+(\\.[0-9]+)?(us|ms)?")) {
                throw new ExtensionConfigurationException("@Faults: delayTime \"" + f.delayTime()
                        + "\" is not a number with us, ms or no unit (seconds)");
            }
            parts.add("delay=" + f.delay() + ":" + f.delayTime());
        }
        return parts.size() == 1 ? null : String.join(",", parts);
    }

    private static void knob(List<String> parts, String name, double p) {
        if (p != 0) {
            check(name, p);
            parts.add(name + "=" + p);
        }
    }

    private static void check(String name, double p) {
        if (!(p >= 0 && p <= 1)) {
            throw new ExtensionConfigurationException("@Faults: " + name + " = " + p + " is not a probability (0 to 1)");
        }
    }

    /** Makes {@code spec} the faults of this JVM's softrdma, or fails saying why it cannot. */
    static synchronized void apply(String spec, Class<?> testClass) {
        if (Objects.equals(spec, effective)) {
            return;
        }
        if (NativeLibraries.verbsPath().isPresent()) {
            throw new ExtensionConfigurationException(testClass.getName() + " needs softrdma with "
                    + describe(spec) + ", but this JVM's softrdma already runs with " + describe(effective)
                    + ": softrdma reads " + VARIABLE + " once per process. Run test classes with different"
                    + " @Faults in separate JVMs (Maven Surefire: <reuseForks>false</reuseForks>)");
        }
        set(spec);
        effective = spec;
    }

    private static String describe(String spec) {
        return spec == null ? "no faults" : VARIABLE + "=" + spec;
    }

    /** {@code setenv(3)} / {@code unsetenv(3)}: the native environment softrdma's {@code getenv} reads. */
    private static void set(String spec) {
        Linker linker = Linker.nativeLinker();
        try (Arena arena = Arena.ofConfined()) {
            int rc;
            if (spec == null) {
                MethodHandle unsetenv = linker.downcallHandle(linker.defaultLookup().find("unsetenv").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS));
                rc = (int) unsetenv.invokeExact(arena.allocateFrom(VARIABLE));
            } else {
                MethodHandle setenv = linker.downcallHandle(linker.defaultLookup().find("setenv").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS,
                                ValueLayout.JAVA_INT));
                rc = (int) setenv.invokeExact(arena.allocateFrom(VARIABLE), arena.allocateFrom(spec), 1);
            }
            if (rc != 0) {
                throw new ExtensionConfigurationException("@Faults: setenv(" + VARIABLE + ") failed");
            }
        } catch (IllegalCallerException e) {
            throw new ExtensionConfigurationException("@Faults needs native access: run with "
                    + "--enable-native-access=ALL-UNNAMED (or =io.github.verbs4j.test on the module path)", e);
        } catch (ExtensionConfigurationException e) {
            throw e;
        } catch (Throwable t) {
            throw new ExtensionConfigurationException("@Faults: setenv failed: " + t, t);
        }
    }

    private static String blankToNull(String s) {
        return s == null || s.isBlank() ? null : s.strip();
    }
}
