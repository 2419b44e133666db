package io.github.verbs4j.examples;

import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Hostile clients against the perf server and the ping-pong server: malformed, truncated,
 * oversized and random handshakes (fixed seed, bounded count). Each server serves one client per
 * run, so each case is one server run, which must end with exit code 1 and exactly one
 * "verbs4j: ..." line on stderr (no stack trace) within seconds, and refuse sizes over its
 * --max-size before it allocates anything for them.
 */
class ToolHandshakeFuzzTest {

    private static final long SEED = 0x5eed_11L;
    private static final int RANDOM_CASES = 12;
    private static final String GID_INDEX = "1";
    private static final String ENDPOINT = "0000:000011:abcdef:00000000000000000000ffff7f000001";
    private static final String BUFFER = "7f0000001000:10000:1234";
    private static final String TAG = "VERBS4J-PERF 1 ";

    /** What the server said back, and how its run ended. */
    private record Outcome(String reply, ToolRun run) {
    }

    /**
     * Runs the server in this JVM on a free port, sends {@code hostile} and half-closes, then
     * collects the reply and the run. A port taken between picking and binding is retried.
     */
    private static Outcome serve(byte[] hostile, String... command) throws Exception {
        for (int attempt = 0; ; attempt++) {
            int port = Proc.freePort();
            List<String> args = new ArrayList<>(List.of(command));
            args.addAll(List.of("-p", Integer.toString(port)));
            CompletableFuture<ToolRun> server = CompletableFuture.supplyAsync(
                    () -> ToolRun.inProcess(args.toArray(String[]::new)), r -> Thread.ofPlatform().daemon().start(r));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!TcpListeners.listening(port) && !server.isDone() && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            if (server.isDone()) {
                ToolRun early = server.get();
                if (attempt < 5 && early.err().contains("couldn't listen to port")) {
                    continue;   // someone else took the port: not the server's failure
                }
                fail("the server ended before listening: " + early);
            }
            String reply;
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress("127.0.0.1", port), 10_000);
                s.setSoTimeout(20_000);
                try {
                    s.getOutputStream().write(hostile);
                    s.getOutputStream().flush();
                    s.shutdownOutput();
                } catch (IOException closedEarly) {
                    // the server may refuse before it has read everything
                }
                reply = readAll(s.getInputStream());
            }
            ToolRun run = server.get(30, TimeUnit.SECONDS);
            return new Outcome(reply, run);
        }
    }

    private static String readAll(InputStream in) {
        ByteArrayOutputStream got = new ByteArrayOutputStream();
        byte[] b = new byte[4096];
        try {
            int n;
            while ((n = in.read(b)) > 0 && got.size() < (1 << 20)) {
                got.write(b, 0, n);
            }
        } catch (SocketTimeoutException e) {
            fail("the server neither answered nor closed within 20 s; so far: " + got);
        } catch (IOException reset) {
            // a reset after the server gave up is an answer too
        }
        return got.toString(StandardCharsets.ISO_8859_1);
    }

    /** Exit 1, one "verbs4j: " line, no stack trace; returns that line. */
    private static String assertOneLineFailure(Outcome o, String context) {
        String err = o.run().err();
        assertEquals(1, o.run().exitCode(), context + ": " + o.run());
        assertFalse(err.contains("\tat ") || err.contains("Exception"), "a stack trace reached the user: " + context + ": " + err);
        assertTrue(err.startsWith("verbs4j: ") && err.endsWith("\n") && err.indexOf('\n') == err.length() - 1,
                "not one line: " + context + ": '" + err + "'");
        return err;
    }

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.ISO_8859_1);
    }

    private static String hello(String iters, String sizes, String endpoint, String buffer) {
        return TAG + "HELLO send-lat " + iters + " " + sizes + " " + endpoint + " " + buffer + "\n";
    }

    @Test
    void perfServerRefusesEveryMalformedHelloInOneLine() throws Exception {
        record Case(String line, String says) {
        }
        StringBuilder manySizes = new StringBuilder("2");
        for (int i = 0; i < 100; i++) {
            manySizes.append(",2");
        }
        List<Case> cases = List.of(
                // one line must not make the server allocate 4 GiB (or 2 x 1 GiB)
                new Case(hello("5", "4294967296", ENDPOINT, BUFFER), "size 4294967296 is too large"),
                new Case(hello("5", "1073741824", ENDPOINT, "0:40000000:1"), "size 1073741824 is outside 1..65536 bytes"),
                new Case(hello("5", "64,65537", ENDPOINT, BUFFER), "size 65537 is outside 1..65536 bytes"),
                new Case(hello("5", "0", ENDPOINT, BUFFER), "size 0 is outside"),
                new Case(hello("5", "-8", ENDPOINT, BUFFER), "bad size '-8'"),
                new Case(hello("5", ",", ENDPOINT, BUFFER), "bad size ''"),
                new Case(hello("5", manySizes.toString(), ENDPOINT, BUFFER), "more than 64 sizes"),
                new Case(hello("-1", "2", ENDPOINT, BUFFER), "bad iteration count '-1'"),
                new Case(hello("0", "2", ENDPOINT, BUFFER), "iteration count 0 is not positive"),
                new Case(hello("99999999999", "2", ENDPOINT, BUFFER), "bad iteration count"),
                new Case(hello("5", "2", "zz", BUFFER), "bad endpoint 'zz'"),
                new Case(hello("5", "2", "0000:1000000:000000:" + "0".repeat(32), BUFFER), "bad endpoint"),
                new Case(hello("5", "2", ENDPOINT, "1:2"), "bad remote buffer '1:2'"),
                new Case(hello("5", "4096", ENDPOINT, "1000:10:1"), "remote buffer of 16 bytes is smaller than the largest size, 4096"),
                new Case(TAG + "HELLO send-lat 5\n", "malformed HELLO"),
                new Case(TAG + "HEL", "malformed HELLO"),
                new Case(TAG + "HELLO send-lat 5 2 " + ENDPOINT + " " + BUFFER + " extra\n", "malformed HELLO"),
                new Case(TAG + "HELLO \u0001\u00ff 5 2 " + ENDPOINT + " " + BUFFER + "\n", "the client asked for ??"),
                new Case("VERBS4J-PERF 1" + " x".repeat(2000) + "\n", "speaks another protocol"),
                new Case("", "closed the connection without a word"));
        for (Case c : cases) {
            Outcome o = serve(ascii(c.line()), "send-lat", "-x", GID_INDEX, "--max-size", "65536");
            String err = assertOneLineFailure(o, c.line());
            assertTrue(err.contains(c.says()), "'" + c.line() + "': " + err);
            if (c.line().contains("HELLO ") && c.line().endsWith("\n")) {
                // refused in the handshake, before any device resource: the client is told why, in one line
                assertTrue(o.reply().startsWith(TAG + "ERROR ") && o.reply().indexOf('\n') == o.reply().length() - 1,
                        "'" + c.line() + "' got reply '" + o.reply() + "'");
            }
        }
    }

    @Test
    void perfServerRefusesAGoOfASizeItWasNotToldAbout() throws Exception {
        for (String go : List.of("GO 1048576", "GO x", "GO -1", "STOP")) {
            String talk = hello("5", "64", ENDPOINT, BUFFER) + go + "\n";
            Outcome o = serve(ascii(talk), "send-lat", "-x", GID_INDEX);
            String err = assertOneLineFailure(o, go);
            assertTrue(err.contains("the client broke the verbs4j perf protocol"), go + ": " + err);
            assertTrue(o.reply().startsWith(TAG + "OK "), o.reply());
        }
    }

    /**
     * A client that completes the handshake and then says nothing (no GO, no BYE, the connection
     * kept open) holds the server only for its --idle-timeout: exit 1, one line naming the wait.
     */
    @Test
    void perfServerGivesUpOnAClientThatFallsSilentAfterTheHandshake() throws Exception {
        for (int attempt = 0; ; attempt++) {
            int port = Proc.freePort();
            CompletableFuture<ToolRun> server = CompletableFuture.supplyAsync(
                    () -> ToolRun.inProcess("send-lat", "-x", GID_INDEX, "--idle-timeout", "2", "-p", Integer.toString(port)),
                    r -> Thread.ofPlatform().daemon().start(r));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!TcpListeners.listening(port) && !server.isDone() && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            if (server.isDone()) {
                ToolRun early = server.get();
                if (attempt < 5 && early.err().contains("couldn't listen to port")) {
                    continue;   // someone else took the port: not the server's failure
                }
                fail("the server ended before listening: " + early);
            }
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress("127.0.0.1", port), 10_000);
                s.setSoTimeout(20_000);
                s.getOutputStream().write(ascii(hello("5", "64", ENDPOINT, BUFFER)));
                s.getOutputStream().flush();
                StringBuilder reply = new StringBuilder();
                for (int b; (b = s.getInputStream().read()) >= 0 && b != '\n'; ) {
                    reply.append((char) b);
                }
                assertTrue(reply.toString().startsWith(TAG + "OK "), reply.toString());
                long silentSince = System.nanoTime();
                // now silent, connection open: the server must give up by itself
                ToolRun run = server.get(30, TimeUnit.SECONDS);
                long waitedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - silentSince);
                String err = assertOneLineFailure(new Outcome(reply.toString(), run), "silent client");
                assertTrue(err.contains("sent nothing for 2 s (expected GO or BYE): it stopped"), err);
                assertTrue(waitedMs >= 1_900, "gave up after " + waitedMs + " ms, before its 2 s");
            }
            return;
        }
    }

    @Test
    void perfServerSurvivesRandomHandshakes() throws Exception {
        Random rnd = new Random(SEED);
        String valid = hello("5", "64", ENDPOINT, BUFFER);
        for (int i = 0; i < RANDOM_CASES; i++) {
            byte[] b = ascii(valid);
            switch (i % 3) {
                case 0 -> {   // a few bytes of a valid HELLO overwritten (past the tag: the tag has its own tests)
                    for (int k = 0; k < 1 + rnd.nextInt(4); k++) {
                        b[TAG.length() + 6 + rnd.nextInt(b.length - TAG.length() - 7)] = (byte) (0x20 + rnd.nextInt(0x5f));
                    }
                }
                case 1 -> {   // cut short
                    b = java.util.Arrays.copyOf(b, TAG.length() + rnd.nextInt(b.length - TAG.length()));
                }
                default -> {  // random bytes after the tag
                    byte[] junk = new byte[1 + rnd.nextInt(300)];
                    rnd.nextBytes(junk);
                    byte[] all = java.util.Arrays.copyOf(ascii(TAG), TAG.length() + junk.length);
                    System.arraycopy(junk, 0, all, TAG.length(), junk.length);
                    b = all;
                }
            }
            Outcome o = serve(b, "send-lat", "-x", GID_INDEX, "--max-size", "65536");
            String shown = new String(b, StandardCharsets.ISO_8859_1);
            if (o.run().exitCode() == 0) {
                // a mutation that left a valid HELLO and then a clean end is not an error
                continue;
            }
            assertOneLineFailure(o, "case " + i + " '" + shown + "'");
        }
    }

    private static byte[] pingPongMessage(String text) {
        return java.util.Arrays.copyOf(ascii(text), PingPongWire.MESSAGE_BYTES);
    }

    @Test
    void pingPongServerRefusesMalformedAddressesInOneLine() throws Exception {
        String gid = "00000000000000000000ffff7f000001";
        List<byte[]> cases = new ArrayList<>(List.of(
                pingPongMessage("+001:000011:abcdef:" + gid),
                pingPongMessage("0000:-00011:abcdef:" + gid),
                pingPongMessage("0000:000011:abcdef:" + gid.substring(1) + "g"),
                pingPongMessage("0000:000011:abcdef"),
                pingPongMessage(""),
                ascii("0000:000011"),                                     // cut short, then closed
                new byte[0]));
        Random rnd = new Random(SEED);
        for (int i = 0; i < RANDOM_CASES; i++) {
            byte[] junk = new byte[PingPongWire.MESSAGE_BYTES];
            rnd.nextBytes(junk);
            cases.add(junk);
        }
        for (byte[] c : cases) {
            String shown = new String(c, StandardCharsets.ISO_8859_1);
            Outcome o = serve(c, "rc-pingpong", "-g", GID_INDEX, "-n", "1");
            String err = assertOneLineFailure(o, "'" + shown + "'");
            assertTrue(err.contains("not a ping-pong address message") || err.contains("connection closed after"),
                    "'" + shown + "': " + err);
            assertEquals("", o.reply(), "the server answered a bad address: " + shown);
        }
    }
}
