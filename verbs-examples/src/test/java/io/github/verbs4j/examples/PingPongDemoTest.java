package io.github.verbs4j.examples;

import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The README's main job, scripts/pingpong-demo, as a user runs it: the script starts a server
 * and a client through scripts/verbs4j on softrdma and prints both results. The tool runs from
 * this build's classes (VERBS4J_CLASSPATH) because the jar does not exist yet at test time.
 */
class PingPongDemoTest {

    @Test
    void theDemoRunsBothSidesAndPrintsBothResults() throws Exception {
        Path top = Path.of(System.getProperty("user.dir")).toAbsolutePath().getParent();
        Path demo = top.resolve("scripts/pingpong-demo");
        assertTrue(Files.isExecutable(demo), demo + " is missing or not executable");

        String out;
        for (int attempt = 1; ; attempt++) {
            try (Proc p = Proc.script(top, Map.of(
                    "VERBS4J_CLASSPATH", System.getProperty("java.class.path"),
                    "JAVA_HOME", System.getProperty("java.home"),
                    "PINGPONG_DEMO_PORT", Integer.toString(Proc.freePort())),
                    "bash", demo.toString(), "-s", "1024", "-n", "100", "-c")) {
                p.await(120);
                // the demo prints both sides' output on stdout and its own complaints on stderr
                out = p.out() + p.err();
                // another program took the port in between: a collision, not the demo's failure
                boolean portTaken = out.contains("is already in use") || out.contains("couldn't listen to port");
                if (p.exitCode() != 0 && portTaken && attempt < 5) {
                    continue;
                }
                assertEquals(0, p.exitCode(), out);
                break;
            }
        }

        int server = out.indexOf("--- server\n");
        int client = out.indexOf("--- client\n");
        assertTrue(server >= 0 && client > server, out);
        String serverPart = out.substring(server, client);
        String clientPart = out.substring(client);
        for (String side : new String[] {serverPart, clientPart}) {
            assertTrue(side.contains("204800 bytes in "), out);
            assertTrue(side.contains("100 iters in "), out);
            assertTrue(!side.contains("invalid data"), out);
        }
        // each side names the other's queue pair
        assertEquals(qpn("local", serverPart), qpn("remote", clientPart), out);
        assertEquals(qpn("local", clientPart), qpn("remote", serverPart), out);
    }

    private static String qpn(String which, String text) {
        Matcher m = Pattern.compile("  " + which + " address: +LID 0x[0-9a-f]{4}, QPN (0x[0-9a-f]{6}),").matcher(text);
        assertTrue(m.find(), which + " address missing:\n" + text);
        return m.group(1);
    }
}
