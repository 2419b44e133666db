package io.github.verbs4j.examples;

import io.github.verbs4j.Device;
import io.github.verbs4j.Verbs;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static io.github.verbs4j.examples.ToolRun.inProcess;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

class Verbs4jToolTest {

    @Test
    void versionIsTheBuildsVersion() {
        ToolRun run = inProcess("--version");
        assertEquals(0, run.exitCode(), run.err());
        // written by the build into version.properties (the POM's version), never a literal
        assertTrue(run.out().strip().matches("verbs4j \\d+\\.\\d+\\.\\d+(-SNAPSHOT)?"), run.out());
    }

    @Test
    void devicesPrintsTheIbvDevicesTableForTheSelectedLibrary() {
        ToolRun run = inProcess("devices");
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
    void devicesPrintsExactlyWhatIbvDevicesPrints() {
        // rdma-core's ibv_devices on the same library: the build exports LD_LIBRARY_PATH so that
        // child processes load softrdma too (with -Dverbs4j.substrate=system, the system's)
        ToolRun stock;
        try (Proc p = Proc.stock("ibv_devices")) {
            stock = ToolRun.of(p.await(30));
        }

        ToolRun ours = inProcess("devices");
        if (Verbs.isAvailable()) {
            assertEquals(0, stock.exitCode(), stock.err());
            assertEquals(stock.out(), ours.out());
            assertEquals(0, ours.exitCode());
        } else {
            // both fail, and both say why on stderr
            assertEquals(1, stock.exitCode(), stock.out());
            assertEquals(1, ours.exitCode());
            assertFalse(stock.err().isBlank());
        }
    }

    @Test
    void usageErrorsExitWith2() {
        ToolRun unknown = inProcess("no-such-command");
        assertEquals(2, unknown.exitCode());
        assertTrue(unknown.err().contains("Unmatched argument at index 0: 'no-such-command'"), unknown.err());

        ToolRun none = inProcess();
        assertEquals(2, none.exitCode());
        assertTrue(none.err().contains("name a command"), none.err());

        ToolRun badOption = inProcess("devices", "--bogus");
        assertEquals(2, badOption.exitCode());
        assertTrue(badOption.err().contains("Unknown option: '--bogus'"), badOption.err());

        // one line: the command, the complaint, where the help is
        ToolRun badValue = inProcess("rc-pingpong", "-m", "7");
        assertEquals(2, badValue.exitCode());
        assertEquals("verbs4j rc-pingpong: -m: the path MTU is 256, 512, 1024, 2048 or 4096, not 7"
                + " (see 'verbs4j rc-pingpong --help')\n", badValue.err());
        ToolRun typo = inProcess("devinf");
        assertEquals(2, typo.exitCode());
        assertTrue(typo.err().startsWith("verbs4j: Unmatched argument at index 0: 'devinf' (did you mean "), typo.err());
        assertEquals(1, typo.err().lines().count(), typo.err());
    }

    @Test
    void theWarmUpIsAnOptionOfThePingPongs() {
        for (String command : List.of("rc-pingpong", "ud-pingpong")) {
            ToolRun negative = inProcess(command, "--warmup", "-1");
            assertEquals(2, negative.exitCode(), negative.err());
            assertEquals("verbs4j " + command + ": -w: the warm-up is 0 or more round trips, not -1"
                    + " (see 'verbs4j " + command + " --help')\n", negative.err());
            ToolRun notANumber = inProcess(command, "-w", "many");
            assertEquals(2, notANumber.exitCode(), notANumber.err());
            assertTrue(notANumber.err().contains("'many' is not an int"), notANumber.err());
            ToolRun help = inProcess(command, "--help");
            assertEquals(0, help.exitCode(), help.err());
            assertTrue(help.out().contains("-w, --warmup=<n>") && help.out().contains("(default "
                    + PingPongCommand.DEFAULT_WARMUP + "; 0: none)"), help.out());
        }
    }

    @Test
    void helpListsTheCommands() {
        ToolRun help = inProcess("--help");
        assertEquals(0, help.exitCode());
        assertTrue(help.out().contains("devices") && help.out().contains("like ibv_devices"), help.out());
    }

    @Test
    void withoutRdmaTheToolSaysWhyInOneLineAndExits1() throws Exception {
        assumeFalse(Files.exists(Path.of("/sys/class/infiniband_verbs")),
                "/sys/class/infiniband_verbs exists: kernel RDMA present, the system library may list devices");
        // a fresh JVM on the system libibverbs, the way a user without softrdma runs the tool
        ToolRun run = fork("system", "devices");
        assertEquals(1, run.exitCode(), run.err());
        assertEquals("", run.out());
        assertEquals("verbs4j: ibv_get_device_list failed: ENOSYS (38, Function not implemented): no RDMA devices:"
                + " the kernel has no RDMA support (no /sys/class/infiniband_verbs) and no user-space RDMA device"
                + " such as softrdma is loaded\n", run.err());
    }

    @Test
    void aMissingLibraryIsOneLineToo() throws Exception {
        ToolRun run = fork("/nonexistent/libibverbs.so.1", "devices");
        assertEquals(1, run.exitCode(), run.err());
        assertEquals("verbs4j: verbs4j.libibverbs=/nonexistent/libibverbs.so.1 names no file\n", run.err());
    }

    /** The tool in a fresh JVM on the library {@code libibverbs} names, outside the build's environment. */
    private static ToolRun fork(String libibverbs, String... args) {
        try (Proc p = Proc.toolOutsideTheBuild(libibverbs, args)) {
            p.await(60).assertNoStackTrace();
            return ToolRun.of(p);
        }
    }

}
