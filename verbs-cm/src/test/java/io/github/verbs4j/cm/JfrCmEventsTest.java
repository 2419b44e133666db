package io.github.verbs4j.cm;

import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** io.github.verbs4j.CmConnection: a refused connection, then an established one, as JFR records them. */
class JfrCmEventsTest {

    @TempDir
    Path dir;

    @BeforeAll
    static void softrdmaCm() {
        SoftrdmaCm.require();
    }

    @Test
    void connectionEventsAreRecorded() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeFalse(CmTestNet.iwarp(), "the recording starts with the IB CM's REJECTED"
                + " for a port nobody listens on; on iWARP rdma_connect fails with ECONNREFUSED and no CM event");
        Path file = dir.resolve("cm.jfr");
        // held open for the whole test: a port nothing can start listening on meanwhile
        java.net.Socket reserved = CmInProcessTest.reservedPort();
        int refusedPort = reserved.getLocalPort();
        int port;
        try (reserved; Recording recording = new Recording()) {
            recording.enable("io.github.verbs4j.CmConnection");
            recording.start();
            assertThrows(CmEventException.class,
                    () -> new RdmaClient().connect(CmInProcessTest.HOST, refusedPort, CmInProcessTest.T));
            try (RdmaServer server = RdmaServer.listen(new InetSocketAddress(CmInProcessTest.ADDR, 0))) {
                port = server.localAddress().getPort();
                CompletableFuture<RdmaConnection> accepted = CompletableFuture.supplyAsync(
                        () -> server.accept(CmInProcessTest.T));
                try (RdmaConnection client = new RdmaClient().connect(CmInProcessTest.HOST, port, CmInProcessTest.T);
                     RdmaConnection serverSide = accepted.get(CmInProcessTest.FUTURE_SECONDS, TimeUnit.SECONDS)) {
                    client.send(new byte[] {1}, CmInProcessTest.T);
                    assertEquals(1, serverSide.receive(CmInProcessTest.T)[0]);
                }
            }
            recording.stop();
            recording.dump(file);
        }
        List<RecordedEvent> events = RecordingFile.readAllEvents(file).stream()
                .filter(e -> e.getEventType().getName().equals("io.github.verbs4j.CmConnection")).toList();
        RecordedEvent rejected = events.stream().filter(e -> e.getString("event").equals("REJECTED"))
                .findFirst().orElseThrow(() -> new AssertionError("no REJECTED in " + events));
        assertEquals(CmEvent.REJECT_INVALID_SERVICE_ID, rejected.getInt("status"));
        assertTrue(rejected.getString("remote").endsWith(":" + refusedPort), rejected.getString("remote"));
        long established = events.stream().filter(e -> e.getString("event").equals("ESTABLISHED")
                && (e.getString("remote").endsWith(":" + port) || e.getString("local").endsWith(":" + port))).count();
        assertEquals(2, established, "an ESTABLISHED on each side: " + events);
        assertTrue(events.stream().allMatch(e -> e.getString("portSpace").equals("TCP")), events.toString());
    }
}
