package io.github.verbs4j.examples;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/** {@code verbs4j transfer-bench} (server and client JVMs) and {@code verbs4j allreduce}, small sizes. */
class TransferToolsTest {

    @Test
    void transferBenchWritesAndReadsAndPrintsItsTable() throws Exception {
        try (Proc server = Proc.tool("transfer-bench", "-s", "4096", "-b", "8")) {
            String port = portOf(server);
            for (String op : new String[] {"WRITE", "READ"}) {
                try (Proc client = Proc.tool("transfer-bench", "127.0.0.1", "-p", port, "-s", "4096", "-b", "8",
                        "-c", "1024", "-q", "2", "-n", "20", "-o", op)) {
                    client.await(120).assertSuccess();
                    assertTrue(client.out().contains("verbs4j transfer-bench " + op), client.describe());
                    assertTrue(client.out().matches("(?s).*\\n 4096 +8 +20 +[0-9.]+ .*"), client.describe());
                }
            }
        }
    }

    /**
     * A client with three batches in flight (-w 3) runs its batches and prints its row, naming
     * the window, and the client thread's cost per chunk: 20 batches of 8 requests of 4096 bytes
     * in chunks of 1024, 640 chunks timed. With --same-range (every request at offset 0, as
     * perftest) the row says so.
     */
    @Test
    void transferBenchKeepsAWindowOfBatchesInFlightAndPrintsTheCostPerChunk() throws Exception {
        try (Proc server = Proc.tool("transfer-bench", "-s", "4096", "-b", "8")) {
            String port = portOf(server);
            for (String[] run : new String[][] {{"WRITE", "-w", "3"}, {"READ", "-w", "3"}, {"READ", "--same-range", "-w", "3"}}) {
                String op = run[0];
                boolean sameRange = run[1].equals("--same-range");
                try (Proc client = Proc.tool(concat(new String[] {"transfer-bench", "127.0.0.1", "-p", port, "-s", "4096",
                        "-b", "8", "-c", "1024", "-q", "2", "-n", "20", "-o"}, run))) {
                    client.await(120).assertSuccess();
                    assertTrue(client.out().contains("verbs4j transfer-bench " + op + ", 2 QPs, 16 chunks in flight per QP,"
                            + " chunk 1024 bytes, 3 batches in flight" + (sameRange ? ", one range\n" : "\n")),
                            client.describe());
                    assertTrue(client.out().matches("(?s).*\\n 4096 +8 +20 +[0-9.]+ .*"), client.describe());
                    assertTrue(client.out().matches("(?s).*\\n client thread per chunk: [0-9]+ ns CPU, [0-9.]+ B allocated"
                            + " \\(640 chunks, .*"), client.describe());
                }
            }
        }
    }

    @Test
    void verifiedTrafficIsCheckedOnBothEndsAndAOnceServerExitsWhenTheClientIsDone() throws Exception {
        // WRITE then READ on one connection: the client reads every WRITE batch back, then READs
        // what the last one left; the server checks its segment holds the last batch
        try (Proc server = Proc.tool("transfer-bench", "-s", "3000", "-b", "8", "-V", "--once")) {
            String port = portOf(server);
            try (Proc client = Proc.tool("transfer-bench", "127.0.0.1", "-p", port, "-s", "3000", "-b", "8",
                    "-c", "1024", "-q", "2", "-n", "5", "-o", "WRITE,READ", "-V")) {
                client.await(120).assertSuccess();
                assertTrue(client.out().contains("verified 48 WRITE requests of 3000 bytes (each written, read back and compared)"),
                        client.describe());
                assertTrue(client.out().contains("verified 48 READ requests of 3000 bytes (each read and compared"),
                        client.describe());
                assertTrue(client.out().contains("transfer-bench WRITE") && client.out().contains("transfer-bench READ"),
                        client.describe());
            }
            server.await(60).assertSuccess();
            assertTrue(server.out().contains("its last WRITE batch, every byte checked"), server.describe());
        }
        // READ: the client compares every request with the server's pattern
        try (Proc server = Proc.tool("transfer-bench", "-s", "3000", "-b", "8", "-V", "--once")) {
            String port = portOf(server);
            try (Proc client = Proc.tool("transfer-bench", "127.0.0.1", "-p", port, "-s", "3000", "-b", "8",
                    "-c", "1024", "-q", "2", "-n", "5", "-o", "READ", "-V")) {
                client.await(120).assertSuccess();
                assertTrue(client.out().contains("verified 48 READ requests of 3000 bytes (each read and compared"),
                        client.describe());
            }
            server.await(60).assertSuccess();
            assertTrue(server.out().contains("the server's pattern, unchanged"), server.describe());
        }
    }

    @Test
    void verificationFailsWhenTheDataIsNotWhatWasExpected() throws Exception {
        // a server without -V has no pattern: a verifying READ client must notice, not pass
        try (Proc server = Proc.tool("transfer-bench", "-s", "4096", "-b", "4", "--once")) {
            String port = portOf(server);
            try (Proc client = Proc.tool("transfer-bench", "127.0.0.1", "-p", port, "-s", "4096", "-b", "4",
                    "-n", "2", "-o", "READ", "-V")) {
                assertEquals(1, client.await(120).exitCode(), client.describe());
                assertTrue(client.out().contains("request 0 (4096 bytes at offset 0) read other bytes than the server's segment holds"),
                        client.describe());
                client.assertNoStackTrace();
            }
        }
        // a verifying server whose client wrote without -V (zeros, not a pattern) fails after the done word
        try (Proc server = Proc.tool("transfer-bench", "-s", "4096", "-b", "4", "-V", "--once")) {
            String port = portOf(server);
            try (Proc client = Proc.tool("transfer-bench", "127.0.0.1", "-p", port, "-s", "4096", "-b", "4",
                    "-n", "2", "-o", "WRITE")) {
                client.await(120).assertSuccess();
            }
            assertEquals(1, server.await(60).exitCode(), server.describe());
            assertTrue(server.out().contains("request 0 of its last batch"), server.describe());
        }
    }

    /** The port a transfer-bench server printed (it binds port 0: a free one). */
    private static String portOf(Proc server) throws InterruptedException {
        for (int i = 0; i < 600; i++) {
            for (String line : server.out().split("\n")) {
                if (line.startsWith("PORT ")) {
                    return line.substring(5).trim();
                }
            }
            Thread.sleep(100);
        }
        return fail("the server printed no port: " + server.describe());
    }

    @Test
    void allreduceOfThreeRanksChecksAndPrintsBusBandwidth() {
        try (Proc p = Proc.tool("allreduce", "-N", "3", "-s", "65536", "-n", "2")) {
            p.await(120).assertSuccess();
            assertTrue(p.out().contains("busbw[GB/s]"), p.describe());
            assertTrue(p.out().matches("(?s).*\\n 65536 +16384 +2 +[0-9.]+ .*"), p.describe());
        }
    }

    /**
     * {@code --workspace}: the allreduce in place in the ring's registered memory, every element
     * checked after the timed runs (a wrong sum fails the tool); the table says which form ran,
     * how the warm-up ended, and the mean, shortest and longest run (shortest <= mean <= longest).
     */
    @Test
    void allreduceInTheWorkspaceChecksAndPrintsTheWarmUpAndTheSpreadOfItsRuns() {
        try (Proc p = Proc.tool("allreduce", "-N", "2", "-s", "65536", "-n", "5", "--workspace")) {
            p.await(120).assertSuccess();
            assertTrue(p.out().contains("2 ranks, 2 threads on 127.0.0.1, in the ring's workspace (no copies)"), p.describe());
            assertTrue(p.out().matches("(?s).*\\n warm-up, not timed: [0-9]+ runs in [0-9.]+ s on rank [01] \\(.*"),
                    p.describe());
            java.util.regex.Matcher row = java.util.regex.Pattern
                    .compile("\\n 65536 +16384 +5 +([0-9.]+) +([0-9.]+) +([0-9.]+) +[0-9.]+ +[0-9.]+\\n").matcher(p.out());
            assertTrue(row.find(), p.describe());
            double mean = Double.parseDouble(row.group(1));
            double min = Double.parseDouble(row.group(2));
            double max = Double.parseDouble(row.group(3));
            assertTrue(min <= mean && mean <= max, "min " + min + ", mean " + mean + ", max " + max);
        }
    }

    @Test
    void reduceScatterAndAllGatherCheckAndPrintTheirBusBandwidth() {
        for (String op : new String[] {"reduce-scatter", "all-gather"}) {
            try (Proc p = Proc.tool("allreduce", "--op", op, "-N", "3", "-s", "65544", "-n", "2")) {
                p.await(120).assertSuccess();
                assertTrue(p.out().contains("verbs4j " + op + ": ring"), p.describe());
                assertTrue(p.out().matches("(?s).*\\n 65544 +16386 +2 +[0-9.]+ .*"), p.describe());
            }
        }
    }

    @Test
    void allreduceWithEveryRankInAJvmOfItsOwnChecksAndPrintsTheSlowestRank() {
        try (Proc p = Proc.tool("allreduce", "-N", "3", "-s", "65536", "-n", "2", "--processes")) {
            p.await(240).assertSuccess();
            assertTrue(p.out().contains("3 ranks, 3 processes on 127.0.0.1"), p.describe());
            assertTrue(p.out().matches("(?s).*\n 65536 +16384 +2 +[0-9.]+ .*"), p.describe());
        }
    }

    @Test
    void badArgumentsAreUsageErrors() {
        String[][] bad = {
            {"allreduce", "-N", "1"},
            {"allreduce", "--op", "all-gather", "-N", "3", "-s", "65536"},
            {"allreduce", "--op", "broadcast"},
            {"allreduce", "-N", "2", "--rank", "2", "--rendezvous", "127.0.0.1:1"},
            {"allreduce", "-N", "2", "--rank", "1"},
            {"allreduce", "-N", "2", "--rank", "1", "--rendezvous", "127.0.0.1"},
            {"allreduce", "-N", "2", "--rank", "1", "--rendezvous", "127.0.0.1:70000"},
            {"allreduce", "-N", "2", "--rendezvous", "127.0.0.1:1"},
            {"allreduce", "-N", "2", "--rank", "0", "--rendezvous", "127.0.0.1:0", "--processes"},
            {"allreduce", "--op", "reduce-scatter", "-N", "2", "-s", "65536", "--workspace"},
            {"transfer-bench", "127.0.0.1", "-p", "1", "-o", "SEND"},
            {"transfer-bench", "127.0.0.1", "-p", "1", "-o", "WRITE,SEND"},
            {"transfer-bench", "127.0.0.1", "-p", "x"},
            {"transfer-bench", "127.0.0.1", "-p", "1", "-q", "0"},
            {"transfer-bench", "127.0.0.1", "-p", "1", "-w", "0"},
            {"transfer-bench", "127.0.0.1", "-p", "1", "-w", "2", "-V"},
            {"transfer-bench", "127.0.0.1", "-p", "1", "--same-range", "-V"},
        };
        for (String[] args : bad) {
            try (Proc p = Proc.tool(args)) {
                assertTrue(p.await(60).exitCode() == 2, String.join(" ", args) + ": " + p.describe());
            }
        }
    }

    private static String[] concat(String[] a, String[] b) {
        String[] all = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, all, a.length, b.length);
        return all;
    }
}
