package io.github.verbs4j.examples;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static io.github.verbs4j.examples.ToolRun.inProcess;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * verbs4j's rc-pingpong/ud-pingpong against rdma-core's ibv_rc_pingpong/ibv_ud_pingpong, each
 * side as server and as client: both exit 0, each reports the other's QPN/PSN/GID, the byte and
 * iteration counts, and with -c the server finds the client's page pattern.
 */
class PingPongInteropTest {

    private static final Pattern LOCAL = Pattern.compile(
            "^  local address:  LID 0x([0-9a-f]{4}), QPN 0x([0-9a-f]{6}), PSN 0x([0-9a-f]{6})[,:] GID (\\S+)$", Pattern.MULTILINE);
    private static final Pattern REMOTE = Pattern.compile(
            "^  remote address: LID 0x([0-9a-f]{4}), QPN 0x([0-9a-f]{6}), PSN 0x([0-9a-f]{6}), GID (\\S+)$", Pattern.MULTILINE);
    private static final Pattern BYTES = Pattern.compile(
            "^(\\d+) bytes in (\\d+\\.\\d\\d) seconds = (\\d+\\.\\d\\d) Mbit/sec$", Pattern.MULTILINE);
    private static final Pattern ITERS = Pattern.compile(
            "^(\\d+) iters in (\\d+\\.\\d\\d) seconds = (\\d+\\.\\d\\d) usec/iter$", Pattern.MULTILINE);

    /** RoCE on softrdma and rxe: the ::ffff:IPv4 GID. */
    private static final String GID_INDEX = "1";

    private record Address(String lid, String qpn, String psn, String gid) {
    }

    private static Address address(Pattern p, Proc proc) {
        Matcher m = p.matcher(proc.out());
        assertTrue(m.find(), "no " + p.pattern() + " line: " + proc.describe());
        return new Address(m.group(1), m.group(2), m.group(3), m.group(4));
    }

    private static void assertResults(Proc proc, int size, int iters) {
        Matcher bytes = BYTES.matcher(proc.out());
        assertTrue(bytes.find(), "no bytes line: " + proc.describe());
        assertEquals((long) size * iters * 2, Long.parseLong(bytes.group(1)), proc.describe());
        assertTrue(Double.parseDouble(bytes.group(3)) > 0, proc.describe());
        Matcher it = ITERS.matcher(proc.out());
        assertTrue(it.find(), "no iters line: " + proc.describe());
        assertEquals(iters, Integer.parseInt(it.group(1)), proc.describe());
        assertTrue(Double.parseDouble(it.group(3)) > 0, proc.describe());
        assertFalse(proc.out().contains("invalid data"), proc.describe());
    }

    private static List<String> args(String port, int size, int iters, boolean check, boolean events) {
        List<String> a = new ArrayList<>(List.of("-g", GID_INDEX, "-p", port, "-s", Integer.toString(size), "-n", Integer.toString(iters)));
        if (check) {
            a.add("-c");
        }
        if (events) {
            a.add("-e");
        }
        return a;
    }

    private static Proc start(boolean verbs4j, String command, List<String> args, String host) {
        List<String> all = new ArrayList<>(args);
        if (host != null) {
            all.add(host);
        }
        if (verbs4j) {
            return Proc.tool(prepend(command, all));
        }
        return Proc.stock(prepend(command.equals("rc-pingpong") ? "ibv_rc_pingpong" : "ibv_ud_pingpong", all));
    }

    private static String[] prepend(String first, List<String> rest) {
        List<String> all = new ArrayList<>();
        all.add(first);
        all.addAll(rest);
        return all.toArray(String[]::new);
    }

    /** {@code -N} on both ends: the SENDs go through the post-send API (ibv_qp_ex) on each side. */
    @ParameterizedTest(name = "rc-pingpong -N: verbs4j server={0}, -e={1}")
    @CsvSource({"true, false", "false, true"})
    void newSendApiInteroperatesWithTheStockTool(boolean verbs4jServer, boolean events) {
        int size = 4096;
        int iters = 200;
        try (Proc server = Proc.serverOnFreePort(p -> {
            List<String> a = args(Integer.toString(p), size, iters, true, events);
            a.add("-N");
            return start(verbs4jServer, "rc-pingpong", a, null);
        }, 60)) {
            List<String> a = args(Integer.toString(server.port()), size, iters, true, events);
            a.add("-N");
            try (Proc client = start(!verbs4jServer, "rc-pingpong", a, "127.0.0.1")) {
                client.await(90).assertSuccess();
                server.await(30).assertSuccess();
                assertEquals(address(LOCAL, client), address(REMOTE, server), server.describe());
                assertResults(server, size, iters);
                assertResults(client, size, iters);
            }
        }
    }

    /** On-demand paging (-o explicit, -O implicit, -P prefetch) on both ends, one side the stock tool. */
    @ParameterizedTest(name = "rc-pingpong {0}: verbs4j server={1}")
    @CsvSource({"-o, true", "-o -P, false", "-O -P, true", "-O, false"})
    void onDemandPagingInteroperatesWithTheStockTool(String flags, boolean verbs4jServer) {
        int size = 4096;
        int iters = 100;
        try (Proc server = Proc.serverOnFreePort(p -> {
            List<String> a = args(Integer.toString(p), size, iters, true, false);
            a.addAll(List.of(flags.split(" ")));
            return start(verbs4jServer, "rc-pingpong", a, null);
        }, 60)) {
            List<String> a = args(Integer.toString(server.port()), size, iters, true, false);
            a.addAll(List.of(flags.split(" ")));
            try (Proc client = start(!verbs4jServer, "rc-pingpong", a, "127.0.0.1")) {
                client.await(90).assertSuccess();
                server.await(30).assertSuccess();
                assertResults(server, size, iters);
                assertResults(client, size, iters);
            }
        }
    }

    @ParameterizedTest(name = "{0}: verbs4j server={1}, -s {2} -n {3}, -c={4}, -e={5}")
    @CsvSource({
            "rc-pingpong, true,  1,     200, true,  false",
            "rc-pingpong, true,  4096,  200, true,  true",
            "rc-pingpong, true,  65536, 30,  true,  false",
            "rc-pingpong, false, 1,     200, true,  true",
            "rc-pingpong, false, 4096,  200, true,  false",
            "rc-pingpong, false, 65536, 30,  false, false",
            "ud-pingpong, true,  1024,  200, true,  false",
            "ud-pingpong, false, 512,   200, true,  true",
    })
    void interoperatesWithTheStockTool(String command, boolean verbs4jServer, int size, int iters, boolean check,
                                       boolean events) {
        try (Proc server = Proc.serverOnFreePort(
                p -> start(verbs4jServer, command, args(Integer.toString(p), size, iters, check, events), null), 60)) {
            List<String> a = args(Integer.toString(server.port()), size, iters, check, events);
            try (Proc client = start(!verbs4jServer, command, a, "127.0.0.1")) {
                client.await(90).assertSuccess();
                server.await(30).assertSuccess();

                // each side reports the other's address exactly as the other printed it
                Address serverLocal = address(LOCAL, server);
                Address clientLocal = address(LOCAL, client);
                assertEquals(clientLocal, address(REMOTE, server), server.describe());
                assertEquals(serverLocal, address(REMOTE, client), client.describe());
                assertTrue(serverLocal.gid().contains(":"), serverLocal.toString());
                assertResults(server, size, iters);
                assertResults(client, size, iters);
            }
        }
    }

    @Test
    void theServersCheckFailsWhenTheClientDidNotWriteThePattern() {
        // -c on the verbs4j server only: the stock client sends its 0x7b fill without the zeroed
        // page starts, so the check must find page 0 (and every other page) invalid and exit 1
        int size = 3 * 4096;
        try (Proc server = Proc.serverOnFreePort(
                p -> Proc.tool(prepend("rc-pingpong", args(Integer.toString(p), size, 20, true, false))), 60)) {
            String port = Integer.toString(server.port());
            List<String> clientArgs = args(port, size, 20, false, false);
            clientArgs.add("127.0.0.1");
            try (Proc client = Proc.stock(prepend("ibv_rc_pingpong", clientArgs))) {
                client.await(60);
                assertEquals(0, client.exitCode(), client.describe());
            }
            server.await(30);
            assertEquals(1, server.exitCode(), server.describe());
            assertTrue(server.out().contains("invalid data in page 0\ninvalid data in page 1\ninvalid data in page 2\n"),
                    server.describe());
        }
    }

    @Test
    void badFlagsAreUsageErrors() {
        ToolRun mtu = inProcess("rc-pingpong", "-m", "1000");
        assertEquals(2, mtu.exitCode(), mtu.err());
        assertTrue(mtu.err().contains("-m: the path MTU is 256, 512, 1024, 2048 or 4096, not 1000"), mtu.err());

        ToolRun size = inProcess("ud-pingpong", "-s", "0");
        assertEquals(2, size.exitCode(), size.err());
        assertTrue(size.err().contains("-s: the message size must be at least 1 byte, not 0"), size.err());

        // numbers as strtoul(..., 0) reads them, like the stock tools: hex and octal too
        ToolRun hex = inProcess("rc-pingpong", "-s", "0x0", "-g", GID_INDEX);
        assertEquals(2, hex.exitCode(), hex.err());
        assertTrue(hex.err().contains("-s: the message size must be at least 1 byte, not 0"), hex.err());
        ToolRun octal = inProcess("ud-pingpong", "-l", "020", "-g", GID_INDEX);
        assertEquals(2, octal.exitCode(), octal.err());
        assertTrue(octal.err().contains("-l: a service level is 0..15, not 16"), octal.err());

        ToolRun notANumber = inProcess("rc-pingpong", "-n", "many");
        assertEquals(2, notANumber.exitCode(), notANumber.err());
        assertTrue(notANumber.err().contains("'many' is not an int"), notANumber.err());
    }

    @Test
    void unsupportedAndImpossibleRequestsFailInOneLine() {
        ToolRun prefetch = inProcess("rc-pingpong", "-g", GID_INDEX, "-P");
        assertEquals(2, prefetch.exitCode(), prefetch.err());
        assertTrue(prefetch.err().contains("-P: prefetch applies to an on-demand buffer (-o or -O)"), prefetch.err());

        ToolRun tooBig = inProcess("ud-pingpong", "-g", GID_INDEX, "-s", "1000000");
        assertEquals(1, tooBig.exitCode(), tooBig.err());
        assertTrue(tooBig.err().matches("verbs4j: requested size 1000000 is larger than the port's active MTU \\(\\d+\\).*\n"),
                tooBig.err());

        ToolRun noDevice = inProcess("rc-pingpong", "-d", "nosuchdev0");
        assertEquals(1, noDevice.exitCode(), noDevice.err());
        assertTrue(noDevice.err().startsWith("verbs4j: RDMA device nosuchdev0 not found (have: "), noDevice.err());
    }

    @Test
    void anUnreachablePeerIsOneLineAndExit1() throws java.io.IOException {
        try (java.net.Socket reserved = Proc.reservedPort()) {
            String port = Integer.toString(reserved.getLocalPort());
            ToolRun run = inProcess("rc-pingpong", "-g", GID_INDEX, "-p", port, "127.0.0.1");
            assertEquals(1, run.exitCode(), run.err());
            assertTrue(run.out().startsWith("  local address:  LID "), run.out());
            assertEquals("verbs4j: couldn't connect to 127.0.0.1:" + port + ": Connection refused\n", run.err());
        }
    }
}
