package io.github.verbs4j.examples;

import org.junit.jupiter.api.Test;

import java.util.Arrays;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * {@code verbs4j channel-bench}, over the channel and {@code --raw} on bare verbs: server and
 * client JVMs, a few hundred messages. The server checks every message's length and sequence
 * and prints the count only when all arrived; the client's row appears only after the server
 * confirmed the count.
 */
class ChannelBenchToolTest {

    private static final Pattern PORT = Pattern.compile("\\(port (\\d+)\\)");
    /** size, messages, connections, six numbers (B/msg measured: not NaN). */
    private static final String ROW = "(?s).*\\n %d +%d +1 +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ *\\n.*";

    @Test
    void rawModeCarriesCheckedMessagesAndPrintsItsRow() throws Exception {
        run("--raw", "256", "300");
    }

    @Test
    void channelModeCarriesCheckedMessagesAndPrintsItsRow() throws Exception {
        String client = run(null, "1024", "300");
        assertTrue(client.contains("Send form      : Channel.send(MemorySegment)"), client);
        assertTrue(client.matches("(?s).*CPU per message: [0-9.]+ us on the sending thread.*"), client);
    }

    /**
     * By default the server checks each message's length and sequence numbers, as the raw
     * server checks its first 8 bytes; {@code --check-every-byte} compares every byte. Both
     * sides say which, the client from the server's answer.
     */
    @Test
    void theServerSaysWhatItChecked() throws Exception {
        String[] sides = run(null, null, "4096", "300");
        assertTrue(sides[0].contains("Server check   : each checked by its length and sequence numbers"), sides[0]);
        assertTrue(sides[1].contains("each checked by its length and sequence numbers"), sides[1]);
        sides = run(null, "--check-every-byte", "4096", "300");
        assertTrue(sides[0].contains("Server check   : every byte checked"), sides[0]);
        assertTrue(sides[1].contains("on 1 connections, every byte checked"), sides[1]);
    }

    /**
     * The server counts the CPU time its receiving thread (connection 0) and its polling thread
     * spent per timed message, as the client does for its sending and polling threads: on
     * softrdma the thread that polls also drains the same-host rings, so these say which
     * thread copied the stream out. Comparing every byte is a pass over each message on the
     * receiving thread: its figure is above zero either way.
     */
    @Test
    void theServerCountsItsThreadsCpuPerMessage() throws Exception {
        String[] sides = run(null, null, "4096", "300");
        Matcher cpu = Pattern.compile("server CPU per message: ([0-9.]+) us on the receiving thread \\(connection 0\\), "
                + "([0-9.]+) us on the polling thread, timed stream only").matcher(sides[1]);
        assertTrue(cpu.find(), sides[1]);
        assertTrue(Double.parseDouble(cpu.group(1)) > 0, sides[1]);
        // application polling has no polling thread: its column says so
        sides = run("--app-poll", "--check-every-byte", "1024", "300");
        assertTrue(sides[1].matches("(?s).*server CPU per message: [0-9.]+ us on the receiving thread \\(connection 0\\), "
                + "- on the polling thread.*"), sides[1]);
    }

    @Test
    void applicationPollingModeCarriesCheckedMessagesAndPrintsItsRow() throws Exception {
        run("--app-poll", "1024", "300");
    }

    /**
     * The client writes its messages in place (the server checks every byte): the body
     * goes in once per staging position, and both sides say the stream was timed after a warm-up.
     */
    @Test
    void inPlaceSendingCarriesCheckedMessagesAndSaysSo() throws Exception {
        String client = run("--in-place", "1024", "300");
        assertTrue(client.contains("Send form      : in place"), client);
        Matcher bodies = Pattern.compile("Bodies written : (\\d+) of (\\d+) messages").matcher(client);
        assertTrue(bodies.find(), client);
        long written = Long.parseLong(bodies.group(1));
        assertTrue(written >= 1 && written < Long.parseLong(bodies.group(2)), client);
        assertTrue(client.contains("Stream warm-up : "), client);
    }

    /** Both sides notify by a SEND after each plain RDMA WRITE, the channel's mode on iWARP. */
    @Test
    void notificationBySendCarriesCheckedMessagesAndPrintsItsRow() throws Exception {
        String client = run("--notify=SEND", "1024", "300");
        assertTrue(client.contains("messages over RDMA WRITE, each followed by a SEND"), client);
    }

    /**
     * Runs a server and a client; returns the client's output. The channel's server compares
     * every byte ({@code --check-every-byte}): the tests keep checking every byte, the in-place
     * writer's reuse of staged bodies above all.
     */
    private static String run(String mode, String size, String count) throws Exception {
        return run(mode, "--raw".equals(mode) ? null : "--check-every-byte", size, count)[0];
    }

    /** Runs a server (with {@code serverOption} when not null) and a client; returns the client's output and the server's. */
    private static String[] run(String mode, String serverOption, String size, String count) throws Exception {
        String[] serverArgs = mode == null || mode.equals("--in-place")
                ? new String[] {"channel-bench", "-s", "-a", "127.0.0.1", "-p", "0"}
                : new String[] {"channel-bench", "-s", mode, "-a", "127.0.0.1", "-p", "0", "--slots", "16"};
        if (serverOption != null) {
            serverArgs = Arrays.copyOf(serverArgs, serverArgs.length + 1);
            serverArgs[serverArgs.length - 1] = serverOption;
        }
        try (Proc server = Proc.tool(serverArgs)) {
            String port = null;
            for (int i = 0; i < 600 && port == null; i++) {
                Matcher m = PORT.matcher(server.out());
                if (m.find()) {
                    port = m.group(1);
                } else {
                    Thread.sleep(100);
                }
            }
            if (port == null) {
                fail("the server printed no port: " + server.describe());
            }
            String[] clientArgs = mode == null
                    ? new String[] {"channel-bench", "-c", "-a", "127.0.0.1", "-p", port, "-S", size, "-n", count,
                        "--pings", "50", "--warmup", "50", "-t", "30"}
                    : new String[] {"channel-bench", "-c", mode, "-a", "127.0.0.1", "-p", port, "-S", size, "-n", count,
                        "--pings", "50", "--warmup", "50", "-t", "30"};
            String clientOut;
            try (Proc client = Proc.tool(clientArgs)) {
                client.await(120).assertSuccess();
                clientOut = client.out();
                assertTrue(clientOut.contains("B/msg[snd]  B/msg[rcv]"), client.describe());
                assertTrue(clientOut.matches(String.format(ROW, Integer.parseInt(size), Integer.parseInt(count))),
                        client.describe());
                assertTrue(clientOut.contains("Stream warm-up : "), client.describe());
            }
            server.await(60).assertSuccess();
            assertTrue(server.out().contains("received " + count + " messages of " + size + " bytes on 1 connection"),
                    server.describe());
            // the warm-up's messages were checked as such, apart from the timed ones
            assertTrue(server.out().matches("(?s).*\\(and \\d+ of untimed warm-up before them\\).*"), server.describe());
            return new String[] {clientOut, server.out()};
        }
    }

    @Test
    void rawModeRefusesSeveralConnectionsAndATooSmallRing() {
        String[][] bad = {
            {"channel-bench", "-c", "--raw", "-a", "127.0.0.1", "-p", "1", "-C", "2"},
            {"channel-bench", "-s", "--raw", "--slots", "2"},
            {"channel-bench", "-c", "--raw", "-a", "127.0.0.1", "-p", "1", "-w", "0"},
            {"channel-bench", "-c", "--raw", "--app-poll", "-a", "127.0.0.1", "-p", "1"},
            {"channel-bench", "-c", "--raw", "--notify", "SEND", "-a", "127.0.0.1", "-p", "1"},
            {"channel-bench", "-c", "--notify", "NONE", "-a", "127.0.0.1", "-p", "1"},
            {"channel-bench", "-c", "--raw", "--in-place", "-a", "127.0.0.1", "-p", "1"},
            {"channel-bench", "-s", "--raw", "--check-every-byte"},
            {"channel-bench", "-c", "--stream-warmup", "-1", "-a", "127.0.0.1", "-p", "1"},
        };
        for (String[] args : bad) {
            try (Proc p = Proc.tool(args)) {
                assertEquals(2, p.await(60).exitCode(), String.join(" ", args) + ": " + p.describe());
            }
        }
    }
}
