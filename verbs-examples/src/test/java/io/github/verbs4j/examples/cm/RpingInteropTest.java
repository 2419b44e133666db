package io.github.verbs4j.examples.cm;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import io.github.verbs4j.examples.TcpListeners;
import picocli.CommandLine;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * verbs4j's rping against rdma-core's unmodified {@code rping} (Debian's rdmacm-utils), both
 * directions, over softrdma (surefire puts softrdma first in LD_LIBRARY_PATH, so the stock tool
 * loads softrdma's librdmacm.so.1 and libibverbs.so.1).
 */
class RpingInteropTest {

    static final int COUNT = 10;
    private final List<Process> started = new ArrayList<>();
    private final List<Path> logs = new ArrayList<>();

    @AfterEach
    void stopStockTools() throws Exception {
        for (Process p : started) {
            p.destroyForcibly();
            p.waitFor(10, TimeUnit.SECONDS);
        }
        // also after a failed assertion, which quotes the log it needs
        for (Path log : logs) {
            Files.deleteIfExists(log);
        }
    }

    private Path log(String name) throws IOException {
        Path log = Files.createTempFile(name, ".log");
        logs.add(log);
        return log;
    }

    record Run(int exitCode, String out, String err) {
    }

    static Run verbs4jRping(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        CommandLine cli = new CommandLine(new RpingCommand());
        cli.setOut(new PrintWriter(out, true));
        cli.setErr(new PrintWriter(err, true));
        cli.setExecutionExceptionHandler((e, c, p) -> {
            c.getErr().println("failed: " + e);
            return 1;
        });
        int code = cli.execute(args);
        return new Run(code, out.toString(), err.toString());
    }

    static Path stockRping() {
        for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(":")) {
            Path p = Path.of(dir, "rping");
            if (Files.isExecutable(p)) {
                return p;
            }
        }
        throw new AssertionError("rdma-core's rping is not installed (Debian/Ubuntu: apt-get install rdmacm-utils)");
    }

    private Process startStock(Path log, String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(stockRping().toString());
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        started.add(p);
        return p;
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    /**
     * Waits until the server listens on TCP {@code port} (softrdma's rdma_cm listeners do):
     * {@code owner} itself, or for an in-process server ({@code owner} null) this JVM. False when
     * the server ended because another program held the port (its {@code output} says so): the
     * caller tries another port, a collision is not the server's failure.
     */
    static boolean awaitListening(int port, ProcessHandle owner, java.util.function.BooleanSupplier ended,
                                  java.util.function.Supplier<String> output) throws Exception {
        ProcessHandle who = owner != null ? owner : ProcessHandle.current();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (System.nanoTime() < deadline) {
            if (TcpListeners.listening(port, who)) {
                return true;
            }
            if (ended.getAsBoolean()) {
                String said = output.get();
                if (said.matches("(?s).*(Address already in use|EADDRINUSE).*")) {
                    return false;
                }
                throw new AssertionError("the server ended before listening: " + said);
            }
            Thread.sleep(20);
        }
        throw new AssertionError("the server does not listen on port " + port + " after 20 s");
    }

    private static String read(Path log) {
        try {
            return Files.readString(log);
        } catch (IOException e) {
            return "(no log: " + e + ")";
        }
    }

    /** The lines rping -v prints for pings 0..count-1 with size 64 (its pattern, computed here independently). */
    static List<String> expectedPingData(int count, int size) {
        List<String> lines = new ArrayList<>();
        int start = 'A';
        for (int ping = 0; ping < count; ping++) {
            StringBuilder b = new StringBuilder("rdma-ping-" + ping + ": ");
            char c = (char) start;
            while (b.length() < size - 1) {
                b.append(c);
                c = c == 'z' ? 'A' : (char) (c + 1);
            }
            lines.add(b.toString());
            start = start == 'z' ? 'A' : start + 1;
        }
        return lines;
    }

    static List<String> linesWith(String text, String prefix) {
        List<String> found = new ArrayList<>();
        for (String line : text.split("\n")) {
            if (line.startsWith(prefix)) {
                found.add(line.substring(prefix.length()));
            }
        }
        return found;
    }

    @Test
    void theToolHasRpingWithRpingsFlagsAndRejectsBadUsage() {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int code = io.github.verbs4j.examples.Verbs4jTool.execute(new PrintWriter(out, true), new PrintWriter(err, true),
                "rping", "--help");
        assertEquals(0, code, err.toString());
        for (String flag : new String[] {"-s", "-c", "-a=addr", "-p=port", "-C=count", "-S=size", "-v", "-V", "-d"}) {
            assertTrue(out.toString().contains(flag), flag + " missing from:\n" + out);
        }
        StringWriter err2 = new StringWriter();
        assertEquals(2, io.github.verbs4j.examples.Verbs4jTool.execute(new PrintWriter(new StringWriter(), true),
                new PrintWriter(err2, true), "rping", "-a", "127.0.0.1"));
        assertTrue(err2.toString().contains("exactly one of -s (server) and -c (client)"), err2.toString());
        StringWriter err3 = new StringWriter();
        assertEquals(2, io.github.verbs4j.examples.Verbs4jTool.execute(new PrintWriter(new StringWriter(), true),
                new PrintWriter(err3, true), "rping", "-c", "-a", "127.0.0.1", "-S", "25"));
        assertTrue(err3.toString().contains("Invalid size 25 (valid range is 26 to 65535)"), err3.toString());
    }

    @Test
    void theClientFailsInOneLineWhenNobodyListens() throws Exception {
        // bound and never listening, without SO_REUSEADDR: nobody can listen there meanwhile
        java.net.Socket reserved = new java.net.Socket();
        reserved.bind(new java.net.InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
        int port = reserved.getLocalPort();
        try (reserved) {
            theClientFailsInOneLine(port);
        }
    }

    private static void theClientFailsInOneLine(int port) {
        StringWriter err = new StringWriter();
        long start = System.nanoTime();
        int code = io.github.verbs4j.examples.Verbs4jTool.execute(new PrintWriter(new StringWriter(), true),
                new PrintWriter(err, true), "rping", "-c", "-a", "127.0.0.1", "-p", Integer.toString(port), "-t", "10");
        assertEquals(1, code, err.toString());
        assertTrue(err.toString().startsWith("verbs4j: rdma_connect failed: REJECTED (status 8)"), err.toString());
        assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(10));
    }

    @Test
    void thePingPatternMatchesRpings() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buffer = arena.allocate(64);
            Rping.fillPing(buffer, 3, 'D');
            byte[] expected = (expectedPingData(4, 64).get(3) + "\0").getBytes(StandardCharsets.US_ASCII);
            assertArrayEquals(expected, buffer.toArray(ValueLayout.JAVA_BYTE));
            // wrap-around from 'z' to 'A'
            Rping.fillPing(buffer, 57, 'z');
            assertEquals("rdma-ping-57: zABC", Rping.cString(buffer).substring(0, 18));
        }
        byte[] info = Rping.info(0x0102030405060708L, 0x0a0b0c0d, 64);
        assertArrayEquals(new byte[] {1, 2, 3, 4, 5, 6, 7, 8, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 64}, info);
        assertEquals(new io.github.verbs4j.RemoteBuffer(0x0102030405060708L, 64, 0x0a0b0c0d), Rping.parseInfo(info));
    }

    @Test
    void stockServerWithVerbs4jClient() throws Exception {
        int port;
        Path log;
        Process server;
        while (true) {
            port = freePort();
            log = log("rping-server");
            Process s = startStock(log, "-s", "-a", "127.0.0.1", "-p", Integer.toString(port), "-v", "-V",
                    "-C", Integer.toString(COUNT));
            Path l = log;
            server = s;
            if (awaitListening(port, s.toHandle(), () -> !s.isAlive(), () -> read(l))) {
                break;
            }
        }
        Run client = verbs4jRping("-c", "-a", "127.0.0.1", "-p", Integer.toString(port), "-v", "-V",
                "-C", Integer.toString(COUNT));
        assertEquals(0, client.exitCode(), client.err());
        assertEquals(expectedPingData(COUNT, 64), linesWith(client.out(), "ping data: "));
        assertTrue(server.waitFor(20, TimeUnit.SECONDS), "stock rping -s did not exit");
        String serverLog = Files.readString(log);
        assertEquals(0, server.exitValue(), serverLog);
        assertEquals(expectedPingData(COUNT, 64), linesWith(serverLog, "server ping data: "), serverLog);
    }

    @Test
    void verbs4jServerWithStockClient() throws Exception {
        int size = 100;
        int port;
        CompletableFuture<Run> server;
        while (true) {
            port = freePort();
            String p = Integer.toString(port);
            CompletableFuture<Run> s = CompletableFuture.supplyAsync(() -> verbs4jRping("-s", "-a", "127.0.0.1",
                    "-p", p, "-v", "-V", "-S", Integer.toString(size), "-t", "30"));
            server = s;
            if (awaitListening(port, null, s::isDone, () -> s.join().err())) {
                break;
            }
        }
        Path log = log("rping-client");
        Process client = startStock(log, "-c", "-a", "127.0.0.1", "-p", Integer.toString(port), "-v", "-V",
                "-S", Integer.toString(size), "-C", Integer.toString(COUNT));
        assertTrue(client.waitFor(60, TimeUnit.SECONDS), "stock rping -c did not exit");
        String clientLog = Files.readString(log);
        assertEquals(0, client.exitValue(), clientLog);
        assertEquals(expectedPingData(COUNT, size), linesWith(clientLog, "ping data: "), clientLog);
        Run s = server.get(30, TimeUnit.SECONDS);
        assertEquals(0, s.exitCode(), s.err());
        assertEquals(expectedPingData(COUNT, size), linesWith(s.out(), "server ping data: "));
    }

    /**
     * softrdma's CM record (cm_internal.h's struct wire_msg, 240 bytes): a well-formed REQ from an
     * RC requester on 127.0.0.1.
     */
    private static byte[] softrdmaReq() {
        java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(240);
        b.putInt(0x53524d43).put((byte) 1).put((byte) 1).put((byte) 2).put((byte) 0);  // magic, REQ, v1, RC
        b.putInt(0x4242).putInt(0x1234).putInt(0);                                     // qpn, psn, qkey
        b.put(new byte[] {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (byte) 0xff, (byte) 0xff, 127, 0, 0, 1});
        b.put((byte) 1).put((byte) 1).put((byte) 7).put((byte) 7).put((byte) 0).put((byte) 0).put((byte) 3).put((byte) 0);
        return b.array();
    }

    @Test
    void theServerDropsAClientThatSendsGarbageAfterTheReplyAndServesTheNext() throws Exception {
        // the request is accepted, then the "client" sends garbage instead of the RTU: the CM must
        // end that connection at once (it used to drop the socket silently and leave rping -s
        // waiting for its ESTABLISHED for good, deaf to every later client)
        org.junit.jupiter.api.Assumptions.assumeTrue(System.getProperty("verbs4j.libibverbs", "").contains("softrdma"),
                "speaks softrdma's CM records over TCP");
        while (true) {
            int port = freePort();
            StringWriter out = new StringWriter();
            StringWriter err = new StringWriter();
            CompletableFuture<Integer> server = CompletableFuture.supplyAsync(() -> io.github.verbs4j.examples.Verbs4jTool.execute(
                    new PrintWriter(out, true), new PrintWriter(err, true),
                    "rping", "-s", "-a", "127.0.0.1", "-p", Integer.toString(port), "-v", "-t", "60"));
            if (!awaitListening(port, null, server::isDone, err::toString)) {
                continue;
            }
            try (java.net.Socket s = new java.net.Socket("127.0.0.1", port)) {
                s.getOutputStream().write(softrdmaReq());
                s.setSoTimeout(10_000);
                byte[] rep = s.getInputStream().readNBytes(240);
                assertEquals(240, rep.length, "no REP");
                assertEquals(2, rep[4], "not a REP");
                byte[] junk = new byte[240];
                java.util.Arrays.fill(junk, (byte) 0x5a);
                s.getOutputStream().write(junk);
                assertEquals(-1, s.getInputStream().read(), "the server kept the connection after garbage");
            }
            Run client = verbs4jRping("-c", "-a", "127.0.0.1", "-p", Integer.toString(port), "-v", "-C", "3", "-t", "20");
            assertEquals(0, client.exitCode(), client.err());
            assertEquals(0, (int) server.get(30, TimeUnit.SECONDS), err.toString());
            assertEquals(expectedPingData(3, 64), linesWith(out.toString(), "server ping data: "), out.toString());
            return;
        }
    }
}
