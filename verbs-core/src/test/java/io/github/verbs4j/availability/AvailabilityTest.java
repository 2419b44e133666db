package io.github.verbs4j.availability;

import io.github.verbs4j.Verbs;
import io.github.verbs4j.testsupport.PeerJvm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.File;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * What {@code Verbs.isAvailable()}/{@code unavailabilityCause()} say when RDMA cannot work, each
 * case in a fresh JVM (availability is decided once per JVM, and the library selection and
 * native-access flags are start-up settings).
 */
class AvailabilityTest {

    private static final Path KERNEL_VERBS = Path.of("/sys/class/infiniband_verbs");

    /** A JVM's answers: the report's key=value lines, its stderr and exit code. */
    private record Child(Map<String, String> report, String stderr, int exitCode) {
        String get(String key) {
            String v = report.get(key);
            if (v == null) {
                throw new AssertionError("the child JVM reported no " + key + "; report " + report + ", stderr:\n" + stderr);
            }
            return v;
        }
    }

    @Test
    void theSystemLibibverbsWithoutKernelRdmaSaysENOSYS() throws Exception {
        Child child = run(List.of("--enable-native-access=ALL-UNNAMED", "-Dverbs4j.libibverbs=system"));
        if (Files.exists(KERNEL_VERBS)) {
            // kernel RDMA (rxe, a NIC): ENOSYS cannot be observed; the system library must then work
            assertEquals(0, child.exitCode(), child.stderr());
            assertEquals("true", child.get("available"), () -> KERNEL_VERBS + " exists but the system libibverbs"
                    + " is not available: " + child.report());
            return;
        }

        assertEquals(0, child.exitCode(), child.stderr());
        assertEquals("false", child.get("available"));
        assertEquals("io.github.verbs4j.VerbsException", child.get("causeClass"));
        String cause = child.get("cause");
        assertTrue(cause.startsWith("ibv_get_device_list failed: ENOSYS (38, Function not implemented): no RDMA devices"), cause);
        assertTrue(cause.contains("the kernel has no RDMA support"), cause);
        // asking for the devices directly gives the same answer as an exception carrying verb and errno
        assertEquals("ibv_get_device_list", child.get("devicesVerb"));
        assertEquals("ENOSYS", child.get("devicesErrno"));
    }

    @Test
    void aLibraryPathNamingNoFileIsReportedWithTheProperty(@TempDir Path dir) throws Exception {
        Path missing = dir.resolve("no-such-dir").resolve("libibverbs.so.1");

        Child child = run(List.of("--enable-native-access=ALL-UNNAMED", "-Dverbs4j.libibverbs=" + missing));

        assertEquals(0, child.exitCode(), child.stderr());
        assertEquals("false", child.get("available"));
        assertEquals("java.lang.UnsatisfiedLinkError", child.get("causeClass"));
        assertEquals("verbs4j: verbs4j.libibverbs=" + missing + " names no file", child.get("cause"));
        assertEquals("java.lang.UnsatisfiedLinkError: verbs4j: verbs4j.libibverbs=" + missing + " names no file",
                child.get("devicesError"));
    }

    @Test
    void deniedNativeAccessNamesTheFlag() throws Exception {
        // --illegal-native-access exists from JDK 24 on; on 22 and 23 native access is only warned about
        assumeTrue(Runtime.version().feature() >= 24, "--illegal-native-access needs JDK 24+");

        Child child = run(List.of("--illegal-native-access=deny", "-Dverbs4j.libibverbs=system"));

        assertEquals(0, child.exitCode(), child.stderr());
        assertEquals("false", child.get("available"));
        assertEquals("java.lang.UnsatisfiedLinkError", child.get("causeClass"));
        String cause = child.get("cause");
        assertTrue(cause.contains("native access is not enabled for the class path")
                && cause.contains("--enable-native-access=ALL-UNNAMED")
                && cause.contains("Enable-Native-Access: ALL-UNNAMED"), cause);
    }

    @Test
    void missingNativeAccessIsWarnedAboutWithTheFlag() throws Exception {
        Child child = run(List.of("-Dverbs4j.libibverbs=system"));

        assertEquals(0, child.exitCode(), child.stderr());
        assertTrue(child.stderr().contains("verbs4j: native access is not enabled for the class path; start the JVM with"
                + " --enable-native-access=ALL-UNNAMED"), child.stderr());
    }

    @Test
    void thisJvmSeesWhatTheBuildSelected() {
        // the surefire JVM itself: with softrdma selected (the default build) RDMA is available;
        // with -Dverbs4j.substrate=system the answer must at least be explained
        String selected = System.getProperty("verbs4j.libibverbs", "system");
        if (!selected.equals("system") && Files.isRegularFile(Path.of(selected))) {
            assertTrue(Verbs.isAvailable(), () -> "softrdma selected (" + selected + ") but: " + Verbs.unavailabilityCause());
        }
        if (Verbs.isAvailable()) {
            // available means a device to open, and no cause
            assertTrue(Verbs.unavailabilityCause() == null, () -> "available, yet a cause: " + Verbs.unavailabilityCause());
            assertFalse(Verbs.devices().isEmpty(), "available, yet no devices");
        } else {
            assertTrue(Verbs.unavailabilityCause().getMessage() != null && !Verbs.unavailabilityCause().getMessage().isBlank());
        }
    }

    /** Runs {@link AvailabilityReport} in a fresh JVM with the given options and no LD_LIBRARY_PATH. */
    private static Child run(List<String> jvmOptions) throws IOException, InterruptedException, URISyntaxException {
        Path javaLauncher = Path.of(System.getProperty("java.home"), "bin", "java");
        String classPath = location(Verbs.class) + File.pathSeparator + location(io.github.verbs4j.raw.NativeLibraries.class)
                + File.pathSeparator + location(AvailabilityReport.class);
        List<String> command = new ArrayList<>();
        command.add(javaLauncher.toString());
        command.addAll(jvmOptions);
        command.addAll(List.of("-cp", classPath, AvailabilityReport.class.getName()));
        ProcessBuilder pb = new ProcessBuilder(command);
        // the build points LD_LIBRARY_PATH at softrdma; these cases are about the system library
        pb.environment().remove("LD_LIBRARY_PATH");
        PeerJvm.Ended child = PeerJvm.runToEnd(pb);
        Map<String, String> report = new LinkedHashMap<>();
        for (String line : child.stdout().lines().toList()) {
            int eq = line.indexOf('=');
            if (eq > 0) {
                report.put(line.substring(0, eq), line.substring(eq + 1));
            }
        }
        return new Child(report, child.stderr(), child.exitCode());
    }

    private static String location(Class<?> c) throws URISyntaxException {
        return Path.of(c.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
    }
}
