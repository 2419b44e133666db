package io.github.verbs4j.examples.cm;

import io.github.verbs4j.examples.Verbs4jTool;
import org.junit.jupiter.api.Test;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * verbs4j udaddy on both ends: UD over rdma_cm, the client's address handle from the ESTABLISHED
 * event, every byte checked both ways (-V). (Against rdma-core's udaddy, whose port is fixed at
 * 7174, it runs in scripts/rxe-vm.d/interop-check, inside the VMs.)
 */
class UdaddyTest {

    record Run(int exitCode, String out, String err) {
    }

    static Run udaddy(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        String[] all = new String[args.length + 1];
        all[0] = "udaddy";
        System.arraycopy(args, 0, all, 1, args.length);
        int code = Verbs4jTool.execute(new PrintWriter(out, true), new PrintWriter(err, true), all);
        return new Run(code, out.toString(), err.toString());
    }

    @Test
    void datagramsBothWaysByteExact() throws Exception {
        String[] common = {"-V", "-C", "32", "-S", "512", "--timeout", "30"};
        while (true) {
            int port = RpingInteropTest.freePort();
            String p = Integer.toString(port);
            CompletableFuture<Run> server = CompletableFuture.supplyAsync(() -> udaddy(concat(
                    new String[] {"-b", "127.0.0.1", "--port", p}, common)));
            if (!RpingInteropTest.awaitListening(port, null, server::isDone, () -> server.join().err())) {
                continue;
            }
            Run client = udaddy(concat(new String[] {"-s", "127.0.0.1", "--port", p}, common));
            assertEquals(0, client.exitCode(), client.err() + client.out());
            assertTrue(client.out().contains("udaddy: 32 replies of 512 bytes validated"), client.out());
            assertTrue(client.out().matches("(?s).*udaddy: peer QP 0x[0-9a-f]+, Q_Key 0x1234567, GID .*"), client.out());
            assertTrue(client.out().endsWith("return status 0" + System.lineSeparator()), client.out());
            Run s = server.get(30, TimeUnit.SECONDS);
            assertEquals(0, s.exitCode(), s.err() + s.out());
            assertTrue(s.out().contains("udaddy: 32 datagrams of 512 bytes validated"), s.out());
            return;
        }
    }

    @Test
    void aClientWithNoServerTriesUntilItsTimeThenSaysItCannotConnect() throws Exception {
        // bound and never listening, without SO_REUSEADDR: nobody can listen there meanwhile
        try (java.net.Socket reserved = new java.net.Socket()) {
            reserved.bind(new java.net.InetSocketAddress("127.0.0.1", 0));
            Run client = udaddy("-s", "127.0.0.1", "--port", Integer.toString(reserved.getLocalPort()), "--timeout", "3");
            assertEquals(1, client.exitCode(), client.out());
            assertTrue(client.err().startsWith("udaddy: unable to connect to 127.0.0.1:" + reserved.getLocalPort() + " within 3 s: "),
                    client.err());
        }
    }

    @Test
    void badUsageIsRefused() {
        Run small = udaddy("-V", "-S", "3");
        assertEquals(2, small.exitCode());
        assertTrue(small.err().contains("-S must be at least 4 with -V, got 3"), small.err());
        Run none = udaddy("-C", "0");
        assertEquals(2, none.exitCode());
        assertTrue(none.err().contains("-C must be at least 1, got 0"), none.err());
    }

    @Test
    void theDatagramPatternIsNumberedAndShifted() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment m = arena.allocate(8);
            Udaddy.fill(m, 258);
            // be32 258, then letters from 'A' + (258 * 7 + j) % 58
            assertArrayEquals(new byte[] {0, 0, 1, 2, (byte) ('A' + (1806 + 4) % 58), (byte) ('A' + (1806 + 5) % 58),
                    (byte) ('A' + (1806 + 6) % 58), (byte) ('A' + (1806 + 7) % 58)}, m.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
        }
    }

    private static String[] concat(String[] a, String[] b) {
        String[] r = new String[a.length + b.length];
        System.arraycopy(a, 0, r, 0, a.length);
        System.arraycopy(b, 0, r, a.length, b.length);
        return r;
    }
}
