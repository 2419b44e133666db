package io.github.verbs4j.examples;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static io.github.verbs4j.examples.ToolRun.inProcess;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The perftest-style commands, server and client each in its own JVM: both exit 0 and the
 * client's table parses with the sizes and iterations asked for, positive numbers, ordered
 * percentiles, and bandwidth consistent with the message rate. No timing is asserted.
 */
class PerfToolTest {

    private static final String GID_INDEX = "1";

    private record Table(String header, List<double[]> rows) {
    }

    /** The rows after perftest's header line ("#bytes ..."), up to the closing separator. */
    private static Table table(Proc client) {
        List<String> lines = client.out().lines().toList();
        int h = -1;
        for (int i = 0; i < lines.size(); i++) {
            if (lines.get(i).trim().startsWith("#bytes")) {
                h = i;
            }
        }
        assertTrue(h >= 0, "no table header: " + client.describe());
        List<double[]> rows = new ArrayList<>();
        for (int i = h + 1; i < lines.size() && !lines.get(i).startsWith("---"); i++) {
            String[] f = lines.get(i).trim().split("\\s+");
            double[] v = new double[f.length];
            for (int k = 0; k < f.length; k++) {
                v[k] = Double.parseDouble(f[k]);
            }
            rows.add(v);
        }
        assertTrue(lines.get(lines.size() - 1).startsWith("---"), client.describe());
        return new Table(lines.get(h), rows);
    }

    private static void assertLatencyRow(double[] r, int size, int iters, String context) {
        assertEquals(9, r.length, context);
        assertEquals(size, (int) r[0], context);
        assertEquals(iters, (int) r[1], context);
        double min = r[2], max = r[3], typical = r[4], avg = r[5], stdev = r[6], p99 = r[7], p999 = r[8];
        assertTrue(min > 0, context);
        assertTrue(stdev >= 0, context);
        assertTrue(min <= typical && typical <= max, context);
        assertTrue(min <= avg && avg <= max, context);
        assertTrue(typical <= p99 && p99 <= p999 && p999 <= max, context);
    }

    private static void assertBandwidthRow(double[] r, int size, int iters, String context) {
        assertEquals(5, r.length, context);
        assertEquals(size, (int) r[0], context);
        assertEquals(iters, (int) r[1], context);
        double peak = r[2], avg = r[3], mpps = r[4];
        // tiny messages on softrdma print an average of 0.00 MiB/s; the message rate is always positive
        assertTrue(avg >= 0 && mpps > 0, context);
        assertTrue(peak >= avg, context);
        // average MiB/s and Mpps describe the same run: avg = size * rate / 2^20, up to the printed rounding
        double expected = size * mpps * 1e6 / (1 << 20);
        assertTrue(Math.abs(avg - expected) <= size * 0.5 / (1 << 20) + 0.011, context + ": " + avg + " vs " + expected);
    }

    private static Proc[] runPair(String command, List<String> clientArgs) {
        Proc server = Proc.serverOnFreePort(p -> Proc.tool(command, "-x", GID_INDEX, "-p", Integer.toString(p)), 60);
        String port = Integer.toString(server.port());
        List<String> a = new ArrayList<>(List.of(command, "-x", GID_INDEX, "-p", port));
        a.addAll(clientArgs);
        a.add("127.0.0.1");
        Proc client = Proc.tool(a.toArray(String[]::new));
        client.await(120);
        server.await(30);
        return new Proc[] {server, client};
    }

    @ParameterizedTest(name = "{0} {1}")
    @CsvSource(delimiter = '|', value = {
            "send-lat   | -s 64 -n 300",
            "write-lat  | -s 4096 -n 300",
            "read-lat   | -s 1 -n 300",
            "atomic-lat | -n 300",
            "send-lat   | -s 8 -n 100 -e",
            "send-bw    | -s 4096 -n 400",
            "write-bw   | -s 65536 -n 300",
            "read-bw    | -s 1024 -n 300 -e",
            // selective signaling: one completion in 7, 300 not a multiple (the last one is signaled too)
            "write-bw   | -s 64 -n 300 -Q 7",
            // inline SENDs, one completion in 16: the server still counts every message delivered
            "send-bw    | -s 32 -n 500 -Q 16 -I 64",
            "send-bw    | -s 4096 -n 200 -Q 128 -I 64",
            "send-lat   | -s 512 -n 200 -I 0",
            "write-lat  | -s 64 -n 200 -I 64",
            // the warm-up: none, and rounds of -n that do not divide it (4 unreported rounds of 300)
            "send-lat   | -s 64 -n 300 -w 0",
            "write-bw   | -s 4096 -n 300 -w 1000",
    })
    void clientAndServerAgreeAndTheNumbersAreSane(String command, String flags) {
        List<String> args = List.of(flags.trim().split(" "));
        int size = args.contains("-s") ? Integer.parseInt(args.get(args.indexOf("-s") + 1)) : 8;
        int iters = Integer.parseInt(args.get(args.indexOf("-n") + 1));
        Proc[] pair = runPair(command, args);
        try (Proc server = pair[0]; Proc client = pair[1]) {
            client.assertSuccess();
            server.assertSuccess();
            Table t = table(client);
            assertEquals(1, t.rows().size(), client.describe());
            if (command.endsWith("-lat")) {
                assertTrue(t.header().contains("t_typical[usec]") && t.header().contains("99.9% percentile[usec]"), t.header());
                assertLatencyRow(t.rows().getFirst(), size, iters, client.describe());
            } else {
                assertTrue(t.header().contains("BW average[MiB/sec]") && t.header().contains("MsgRate[Mpps]"), t.header());
                assertBandwidthRow(t.rows().getFirst(), size, iters, client.describe());
            }
            // both sides name each other's QP
            assertTrue(server.out().contains(" remote address: "), server.describe());
            // the warm-up ran as whole unreported rounds of -n (default 20000 iterations)
            int warmup = args.contains("-w") ? Integer.parseInt(args.get(args.indexOf("-w") + 1)) : 20_000;
            int rounds = (warmup + iters - 1) / iters;
            if (rounds > 0) {
                assertTrue(client.out().contains(" Warm-up: " + rounds + " rounds of " + iters + " iterations at " + size
                        + " bytes, not reported\n"), client.describe());
            } else {
                assertFalse(client.out().contains("Warm-up"), client.describe());
            }
        }
    }

    @Test
    void progressGoesToStderrOnlyWhenAskedFor() {
        // stderr is a file here, not a terminal: without --progress nothing; with it, the
        // "<test> <size> B: done/total" line (shown from the start by the test-only threshold 0)
        try (Proc server = Proc.serverOnFreePort(p -> Proc.tool(List.of("-Dverbs4j.progress.after.ms=0"), "send-lat",
                "-x", GID_INDEX, "-p", Integer.toString(p)), 60)) {
            String port = Integer.toString(server.port());
            try (Proc client = Proc.tool(List.of("-Dverbs4j.progress.after.ms=0"),
                    "send-lat", "--progress", "-x", GID_INDEX, "-p", port, "-s", "64", "-n", "600", "127.0.0.1")) {
                client.await(120).assertSuccess();
                server.await(30).assertSuccess();
                assertTrue(client.err().startsWith("\rsend-lat 64 B: 256/600 (42%), "), client.describe());
                assertTrue(client.err().endsWith(" s\n"), client.describe());
                assertEquals("", server.err(), server.describe());
                assertEquals(1, table(client).rows().size(), client.describe());
            }
        }
    }

    @Test
    void allSizesRunInOneConnection() {
        Proc[] pair = runPair("write-bw", List.of("-a", "-n", "8"));
        try (Proc server = pair[0]; Proc client = pair[1]) {
            client.assertSuccess();
            server.assertSuccess();
            List<double[]> rows = table(client).rows();
            assertEquals(23, rows.size(), client.describe());
            for (int i = 0; i < rows.size(); i++) {
                assertBandwidthRow(rows.get(i), 2 << i, 8, client.describe());
            }
        }
    }

    @Test
    void aServerOfAnotherTestRefusesTheClient() {
        try (Proc server = Proc.serverOnFreePort(p -> Proc.tool("read-lat", "-x", GID_INDEX, "-p", Integer.toString(p)), 60)) {
            String port = Integer.toString(server.port());
            try (Proc client = Proc.tool("write-bw", "-x", GID_INDEX, "-p", port, "-n", "10", "127.0.0.1")) {
                client.await(60);
                server.await(30);
                assertEquals(1, client.exitCode(), client.describe());
                assertEquals(1, server.exitCode(), server.describe());
                assertEquals("verbs4j: the server refused: this server runs read-lat, the client asked for write-bw\n", client.err());
                assertEquals("verbs4j: this server runs read-lat, the client asked for write-bw\n", server.err());
            }
        }
    }

    @Test
    void theServerNamesAClientThatSpeaksAnotherProtocol() {
        // rdma-core's ping-pong client opens with its 52-byte address message
        try (Proc server = Proc.serverOnFreePort(p -> Proc.tool("send-lat", "-x", GID_INDEX, "-p", Integer.toString(p)), 60)) {
            String port = Integer.toString(server.port());
            try (Proc stock = Proc.stock("ibv_rc_pingpong", "-g", GID_INDEX, "-p", port, "-n", "1", "127.0.0.1")) {
                server.await(60);
                stock.await(60);
                assertEquals(1, server.exitCode(), server.describe());
                server.assertNoStackTrace();
                assertTrue(server.err().matches("verbs4j: the client 127\\.0\\.0\\.1 speaks another protocol \\(it sent '0'"
                        + ", not a verbs4j perf handshake\\)\n"), server.err());
                assertTrue(stock.exitCode() != 0, stock.describe());
            }
        }
    }

    /** A fake server that answers the client's first line with {@code answer}, then waits for it to hang up. */
    private static ToolRun clientAgainst(String answer) throws Exception {
        try (ServerSocket fake = new ServerSocket(0)) {
            CompletableFuture<String> heard = CompletableFuture.supplyAsync(() -> {
                try (Socket s = fake.accept()) {
                    InputStream in = s.getInputStream();
                    StringBuilder line = new StringBuilder();
                    int b;
                    while ((b = in.read()) >= 0 && b != '\n') {
                        line.append((char) b);
                    }
                    OutputStream out = s.getOutputStream();
                    out.write(answer.getBytes(StandardCharsets.US_ASCII));
                    out.flush();
                    while (in.read() >= 0) {
                        // until the client closes
                    }
                    return line.toString();
                } catch (IOException e) {
                    return "failed: " + e;
                }
            });
            ToolRun run = inProcess("send-lat", "-x", GID_INDEX, "-p", Integer.toString(fake.getLocalPort()), "-n", "5", "127.0.0.1");
            String hello = heard.get(30, TimeUnit.SECONDS);
            assertTrue(hello.startsWith("VERBS4J-PERF 1 HELLO send-lat 5 2 "), hello);
            return run;
        }
    }

    @Test
    void theClientNamesAServerThatSpeaksAnotherProtocol() throws Exception {
        ToolRun run = clientAgainst("0000:000011:abcdef:00000000000000000000ffffc0000202\0");
        assertEquals(1, run.exitCode(), run.err());
        assertEquals("verbs4j: 127.0.0.1:" + run.err().replaceAll("(?s).*127\\.0\\.0\\.1:(\\d+).*", "$1")
                + " speaks another protocol (it sent '0', not a verbs4j perf handshake)\n", run.err());
    }

    @Test
    void theClientNamesAServerOfAnotherProtocolVersion() throws Exception {
        ToolRun run = clientAgainst("VERBS4J-PERF 2 OK whatever\n");
        assertEquals(1, run.exitCode(), run.err());
        assertTrue(run.err().matches("verbs4j: 127\\.0\\.0\\.1:\\d+ speaks verbs4j perf protocol version 2, this tool speaks"
                + " version 1: use the same verbs4j on both sides\n"), run.err());
    }

    @Test
    void theClientNamesAServerThatSendsAnUnusableAnswerInOneLine() throws Exception {
        ToolRun endpoint = clientAgainst("VERBS4J-PERF 1 OK zz 1:2:3\n");
        assertEquals(1, endpoint.exitCode(), endpoint.err());
        assertEquals("verbs4j: the server broke the verbs4j perf protocol: bad endpoint 'zz'\n", endpoint.err());
        ToolRun small = clientAgainst("VERBS4J-PERF 1 OK 0000:000011:abcdef:00000000000000000000ffff7f000001 1000:1:1\n");
        assertEquals(1, small.exitCode(), small.err());
        assertEquals("verbs4j: the server broke the verbs4j perf protocol: remote buffer of 1 bytes is smaller than the"
                + " largest size, 2\n", small.err());
    }

    @Test
    void badFlagsAreUsageErrors() {
        ToolRun both = inProcess("send-bw", "-a", "-s", "64", "localhost");
        assertEquals(2, both.exitCode(), both.err());
        assertTrue(both.err().contains("-a and -s exclude each other"), both.err());

        ToolRun events = inProcess("write-lat", "-e", "localhost");
        assertEquals(2, events.exitCode(), events.err());
        assertTrue(events.err().contains("write-lat spins on memory: -e does not apply"), events.err());

        ToolRun atomicSize = inProcess("atomic-lat", "-s", "16", "localhost");
        assertEquals(2, atomicSize.exitCode(), atomicSize.err());
        assertTrue(atomicSize.err().contains("atomics are 8 bytes"), atomicSize.err());

        ToolRun noCqMod = inProcess("write-bw", "-Q", "0", "localhost");
        assertEquals(2, noCqMod.exitCode(), noCqMod.err());
        assertTrue(noCqMod.err().contains("-Q: one completion per 1..128 messages, not 0"), noCqMod.err());
        ToolRun wideCqMod = inProcess("send-bw", "-Q", "129", "localhost");
        assertEquals(2, wideCqMod.exitCode(), wideCqMod.err());
        assertTrue(wideCqMod.err().contains("-Q: one completion per 1..128 messages, not 129"), wideCqMod.err());
        ToolRun readInline = inProcess("read-lat", "-I", "64", "localhost");
        assertEquals(2, readInline.exitCode(), readInline.err());
        assertTrue(readInline.err().contains("read-lat sends no data: -I does not apply"), readInline.err());

        ToolRun serverSize = inProcess("read-bw", "-s", "16");
        assertEquals(2, serverSize.exitCode(), serverSize.err());
        assertTrue(serverSize.err().contains("-s, -a, -n and -w are client options"), serverSize.err());
        ToolRun serverWarmup = inProcess("send-lat", "-w", "10");
        assertEquals(2, serverWarmup.exitCode(), serverWarmup.err());
        assertTrue(serverWarmup.err().contains("-s, -a, -n and -w are client options"), serverWarmup.err());
        ToolRun negativeWarmup = inProcess("send-lat", "-w", "-1", "localhost");
        assertEquals(2, negativeWarmup.exitCode(), negativeWarmup.err());
        assertTrue(negativeWarmup.err().contains("-w: the warm-up is 0 or more iterations, not -1"), negativeWarmup.err());
    }

    @Test
    void anUnreachableServerIsOneLineAndExit1() throws IOException {
        try (Socket reserved = Proc.reservedPort()) {
            String port = Integer.toString(reserved.getLocalPort());
            ToolRun run = inProcess("read-lat", "-x", GID_INDEX, "-p", port, "127.0.0.1");
            assertEquals(1, run.exitCode(), run.err());
            assertEquals("verbs4j: couldn't connect to 127.0.0.1:" + port + ": Connection refused\n", run.err());
        }
    }
}
