package io.github.verbs4j.examples;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/** {@code verbs4j transfer-bench} (server and client JVMs) and {@code verbs4j allreduce}, small sizes. */
class TransferToolsTest {

    @Test
    void transferBenchWritesAndReadsAndPrintsItsTable() throws Exception {
        try (Proc server = Proc.tool("transfer-bench", "-s", "4096", "-b", "8")) {
            String port = null;
            for (int i = 0; i < 600 && port == null; i++) {
                for (String line : server.out().split("\n")) {
                    if (line.startsWith("PORT ")) {
                        port = line.substring(5).trim();
                    }
                }
                if (port == null) {
                    Thread.sleep(100);
                }
            }
            if (port == null) {
                fail("the server printed no port: " + server.describe());
            }
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

    @Test
    void allreduceOfThreeRanksChecksAndPrintsBusBandwidth() {
        try (Proc p = Proc.tool("allreduce", "-N", "3", "-s", "65536", "-n", "2")) {
            p.await(120).assertSuccess();
            assertTrue(p.out().contains("busbw[GB/s]"), p.describe());
            assertTrue(p.out().matches("(?s).*\\n 65536 +16384 +2 +[0-9.]+ .*"), p.describe());
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
            {"allreduce", "-N", "2", "--rank", "2", "--rendezvous", "127.0.0.1:1"},
            {"allreduce", "-N", "2", "--rank", "1"},
            {"allreduce", "-N", "2", "--rank", "1", "--rendezvous", "127.0.0.1"},
            {"allreduce", "-N", "2", "--rank", "1", "--rendezvous", "127.0.0.1:70000"},
            {"allreduce", "-N", "2", "--rendezvous", "127.0.0.1:1"},
            {"allreduce", "-N", "2", "--rank", "0", "--rendezvous", "127.0.0.1:0", "--processes"},
            {"transfer-bench", "127.0.0.1", "-p", "1", "-o", "SEND"},
            {"transfer-bench", "127.0.0.1", "-p", "x"},
            {"transfer-bench", "127.0.0.1", "-p", "1", "-q", "0"},
        };
        for (String[] args : bad) {
            try (Proc p = Proc.tool(args)) {
                assertTrue(p.await(60).exitCode() == 2, String.join(" ", args) + ": " + p.describe());
            }
        }
    }
}
