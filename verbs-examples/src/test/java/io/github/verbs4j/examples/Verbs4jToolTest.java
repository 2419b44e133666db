package io.github.verbs4j.examples;

import io.github.verbs4j.Device;
import io.github.verbs4j.Verbs;
import org.junit.jupiter.api.Test;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

class Verbs4jToolTest {

    private record Run(int exitCode, String out, String err) {
    }

    private static Run runInProcess(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int code = Verbs4jTool.execute(new PrintWriter(out, true), new PrintWriter(err, true), args);
        return new Run(code, out.toString(), err.toString());
    }

    @Test
    void devicesPrintsTheIbvDevicesTableForTheSelectedLibrary() {
        Run run = runInProcess("devices");
        if (Verbs.isAvailable()) {
            // the default build selects softrdma, which always has a device
            List<Device> devices = Verbs.devices();
            StringBuilder expected = new StringBuilder()
                    .append("    device          \t   node GUID\n")
                    .append("    ------          \t----------------\n");
            for (Device d : devices) {
                expected.append(String.format("    %-16s\t%016x%n", d.name(), d.guid()));
            }
            assertEquals(0, run.exitCode(), run.err());
            assertEquals(expected.toString(), run.out());
            assertEquals("", run.err());
        } else {
            assertEquals(1, run.exitCode());
            // one line, the library's own "verbs4j: " prefix not repeated
            String cause = Verbs.unavailabilityCause().getMessage().replaceFirst("^verbs4j: ", "");
            assertEquals("verbs4j: " + cause + System.lineSeparator(), run.err());
        }
    }

    @Test
    void devicesPrintsExactlyWhatIbvDevicesPrints() throws Exception {
        // rdma-core's ibv_devices on the same library: the build exports LD_LIBRARY_PATH so that
        // child processes load softrdma too (with -Dverbs4j.substrate=system, the system's)
        ProcessBuilder pb = new ProcessBuilder("ibv_devices");
        Process p;
        try {
            p = pb.start();
        } catch (java.io.IOException e) {
            throw new AssertionError("ibv_devices is not installed (Debian/Ubuntu: apt-get install ibverbs-utils)", e);
        }
        p.getOutputStream().close();
        String stock = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        String stockErr = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "ibv_devices did not finish");

        Run ours = runInProcess("devices");
        if (Verbs.isAvailable()) {
            assertEquals(0, p.exitValue(), stockErr);
            assertEquals(stock, ours.out());
            assertEquals(0, ours.exitCode());
        } else {
            // both fail, and both say why on stderr
            assertEquals(1, p.exitValue(), stock);
            assertEquals(1, ours.exitCode());
            assertFalse(stockErr.isBlank());
        }
    }

    @Test
    void usageErrorsExitWith2() {
        Run unknown = runInProcess("no-such-command");
        assertEquals(2, unknown.exitCode());
        assertTrue(unknown.err().contains("Unmatched argument at index 0: 'no-such-command'"), unknown.err());

        Run none = runInProcess();
        assertEquals(2, none.exitCode());
        assertTrue(none.err().contains("name a command"), none.err());

        Run badOption = runInProcess("devices", "--bogus");
        assertEquals(2, badOption.exitCode());
        assertTrue(badOption.err().contains("Unknown option: '--bogus'"), badOption.err());

        // one line: the command, the complaint, where the help is
        Run badValue = runInProcess("rc-pingpong", "-m", "7");
        assertEquals(2, badValue.exitCode());
        assertEquals("verbs4j rc-pingpong: -m: the path MTU is 256, 512, 1024, 2048 or 4096, not 7"
                + " (see 'verbs4j rc-pingpong --help')\n", badValue.err());
        Run typo = runInProcess("devinf");
        assertEquals(2, typo.exitCode());
        assertTrue(typo.err().startsWith("verbs4j: Unmatched argument at index 0: 'devinf' (did you mean "), typo.err());
        assertEquals(1, typo.err().lines().count(), typo.err());
    }

    @Test
    void helpListsTheCommands() {
        Run help = runInProcess("--help");
        assertEquals(0, help.exitCode());
        assertTrue(help.out().contains("devices") && help.out().contains("like ibv_devices"), help.out());
    }

    @Test
    void withoutRdmaTheToolSaysWhyInOneLineAndExits1() throws Exception {
        assumeFalse(Files.exists(Path.of("/sys/class/infiniband_verbs")),
                "/sys/class/infiniband_verbs exists: kernel RDMA present, the system library may list devices");
        // a fresh JVM on the system libibverbs, the way a user without softrdma runs the tool
        Run run = fork(List.of("-Dverbs4j.libibverbs=system"), "devices");
        assertEquals(1, run.exitCode(), run.err());
        assertEquals("", run.out());
        assertEquals("verbs4j: ibv_get_device_list failed: ENOSYS (38, Function not implemented): no RDMA devices:"
                + " the kernel has no RDMA support (no /sys/class/infiniband_verbs) and no user-space RDMA device"
                + " such as softrdma is loaded\n", run.err());
    }

    @Test
    void aMissingLibraryIsOneLineToo() throws Exception {
        Run run = fork(List.of("-Dverbs4j.libibverbs=/nonexistent/libibverbs.so.1"), "devices");
        assertEquals(1, run.exitCode(), run.err());
        assertEquals("verbs4j: verbs4j.libibverbs=/nonexistent/libibverbs.so.1 names no file\n", run.err());
    }

    private static Run fork(List<String> jvmOptions, String... args) throws Exception {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("--enable-native-access=ALL-UNNAMED");
        command.addAll(jvmOptions);
        command.add("-cp");
        // the test's own class path: every subcommand's classes (verbs-cm's for rping too) load
        // when picocli builds the command tree
        command.add(System.getProperty("java.class.path"));
        command.add(Verbs4jTool.class.getName());
        command.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(command);
        pb.environment().remove("LD_LIBRARY_PATH");
        Path err = Files.createTempFile("verbs4j-tool", ".stderr");
        try {
            pb.redirectError(err.toFile());
            Process p = pb.start();
            p.getOutputStream().close();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(60, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new AssertionError("the tool did not finish within 60 s: " + command);
            }
            String stderr = Files.readString(err);
            assertFalse(stderr.contains("\tat "), "a stack trace reached the user:\n" + stderr);
            return new Run(p.exitValue(), out, stderr);
        } finally {
            Files.deleteIfExists(err);
        }
    }

}
