package io.github.verbs4j.examples;

import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * {@code scripts/channel-ring-ab}, the ring-size A/B of docs/channel.md ("The ring's size by
 * counts"), as the lead runs it on a quiet machine, here one short round: every slot count gets
 * a rate, both sides' CPU per message and softrdma's ring counters, and the round a rate of
 * {@code ib_write_bw}. The counters are checked for what the docs read from them: no packet
 * found the peer's shared-memory ring full, and the server's ring never held more than one QP's
 * RC window (256 packets) and an acknowledgement.
 */
class ChannelRingAbScriptTest {

    private static final Pattern COUNTERS = Pattern.compile(
            "softrdma client: shm_full (\\d+) shm_fill_max (\\d+) ; server: shm_full (\\d+) shm_fill_max (\\d+)");

    @Test
    void oneRoundPrintsEveryRingsRateCpuAndRingCounters() throws Exception {
        Path top = Path.of(System.getProperty("user.dir")).toAbsolutePath().getParent();
        Path script = top.resolve("scripts/channel-ring-ab");
        assertTrue(Files.isExecutable(script), script + " is missing or not executable");
        assumeTrue(onPath("ib_write_bw"), "perftest's ib_write_bw is not installed");
        String out;
        try (Proc p = Proc.script(top, Map.of(
                "VERBS4J_CLASSPATH", System.getProperty("java.class.path"),
                "JAVA_HOME", System.getProperty("java.home"),
                "CHANNEL_RING_AB_SLOTS", "16 8",
                "CHANNEL_RING_AB_MESSAGES", "3000",
                "CHANNEL_RING_AB_WARMUP", "0"), "bash", script.toString(), "1")) {
            p.await(300);
            out = p.out() + p.err();
            assertEquals(0, p.exitCode(), out);
        }
        // ib_write_bw's server takes a port nobody listened on a moment before: when another
        // program took it in between, the round's ib_write_bw says FAILED, and only that
        assertTrue(out.matches("(?s).*round 1 \\(order 16 8\\): ib_write_bw -t 8 ([0-9]+|FAILED) MB/s\\n.*"), out);
        for (int slots : new int[] {16, 8}) {
            String part = out.substring(out.indexOf("  " + slots + " slots: "));
            assertTrue(part.matches("(?s)  " + slots + " slots: [0-9.]+ MB/s, x ib_write_bw ([0-9.]+|-)\\n"
                    + "     CPU per message: [0-9.]+ us on the sending thread .*\\n"
                    + "    server CPU per message: [0-9.]+ us on the receiving thread .*"), out);
            Matcher m = COUNTERS.matcher(part);
            assertTrue(m.find(), out);
            assertEquals("0", m.group(1), "client puts that found the server's ring full\n" + out);
            assertEquals("0", m.group(3), "server puts that found the client's ring full\n" + out);
            int serverFill = Integer.parseInt(m.group(4));
            assertTrue(serverFill >= 1 && serverFill <= 257, "the server's ring held " + serverFill + " packets\n" + out);
        }
    }

    private static boolean onPath(String program) {
        for (String dir : System.getenv().getOrDefault("PATH", "").split(":")) {
            if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, program))) {
                return true;
            }
        }
        return false;
    }
}
