package io.github.verbs4j.cm;

import io.github.verbs4j.RemoteBuffer;
import io.github.verbs4j.VerbsException;
import io.github.verbs4j.WcStatus;
import io.github.verbs4j.WorkCompletionException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** What the CM path says when something goes wrong: the words a user reads first. */
class CmMessagesTest {

    @BeforeAll
    static void softrdmaCm() {
        SoftrdmaCm.require();
    }

    @Test
    void connectingWhereNobodyListensSaysSo() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeFalse(CmTestNet.iwarp(), "the IB CM's REJECTED status 8 and its wording:"
                + " on iWARP rdma_connect itself fails with ECONNREFUSED, before any CM event (CmInProcessTest checks that)");
        CmEventException e;
        try (java.net.Socket reserved = CmInProcessTest.reservedPort()) {
            int port = reserved.getLocalPort();
            e = assertThrows(CmEventException.class,
                    () -> new RdmaClient().connect(CmInProcessTest.HOST, port, CmInProcessTest.T));
        }
        assertEquals(CmEvent.REJECT_INVALID_SERVICE_ID, e.event().status(), e.getMessage());
        assertTrue(e.getMessage().startsWith("rdma_connect failed: REJECTED (status 8): nobody listens on that port"),
                e.getMessage());
    }

    @Test
    void connectTimeoutNamesTheCallersTimeout() throws Exception {
        try (RdmaServer server = RdmaServer.listen(new InetSocketAddress(CmInProcessTest.ADDR, 0))) {
            int port = server.localAddress().getPort();
            CompletableFuture<ConnectionRequest> held = CompletableFuture.supplyAsync(
                    () -> server.nextRequest(CmInProcessTest.T));
            VerbsException e = assertThrows(VerbsException.class,
                    () -> new RdmaClient().connect(CmInProcessTest.HOST, port, Duration.ofMillis(1500)));
            // the steps before rdma_connect used part of the 1500 ms; the message names the 1500
            assertTrue(e.getMessage().startsWith("timed out after 1500 ms waiting for a connection to "), e.getMessage());
            assertTrue(e.getMessage().endsWith("(rdma_connect: ETIMEDOUT)"), e.getMessage());
            assertEquals("rdma_connect", e.verb());
            ConnectionRequest request = held.get(CmInProcessTest.FUTURE_SECONDS, TimeUnit.SECONDS);
            if (CmTestNet.onSoftrdma()) {
                request.reject(new byte[0]);
            } else {
                // as in CmInProcessTest: the client destroyed its id at its deadline, so on the
                // kernel's CM the request has left REQ_RCVD and rdma_reject answers EINVAL (iWARP:
                // the client's TCP connection was reset, ECONNRESET); the id is released either way
                try {
                    request.reject(new byte[0]);
                } catch (VerbsException late) {
                    assertEquals("rdma_reject", late.verb(), late.getMessage());
                    assertEquals(CmTestNet.iwarp() ? "ECONNRESET" : "EINVAL", late.errnoName(), late.getMessage());
                }
            }
        }
    }

    @Test
    void receiveTimeoutAndFailedReadSpeakPlainly() throws Exception {
        try (RdmaServer server = RdmaServer.listen(new InetSocketAddress(CmInProcessTest.ADDR, 0))) {
            int port = server.localAddress().getPort();
            CompletableFuture<RdmaConnection> accepted = CompletableFuture.supplyAsync(
                    () -> server.accept(CmInProcessTest.T));
            try (RdmaConnection client = new RdmaClient().connect(CmInProcessTest.HOST, port, CmInProcessTest.T);
                 RdmaConnection serverSide = accepted.get(CmInProcessTest.FUTURE_SECONDS, TimeUnit.SECONDS)) {
                VerbsException timeout = assertThrows(VerbsException.class, () -> client.receive(Duration.ofMillis(300)));
                assertTrue(timeout.getMessage().startsWith("timed out after 300 ms waiting for a message on RdmaConnection"),
                        timeout.getMessage());
                assertFalse(timeout.getMessage().contains("failed"), timeout.getMessage());
                assertEquals("ETIMEDOUT", timeout.errnoName());

                org.junit.jupiter.api.Assumptions.assumeFalse(CmTestNet.iwarp(), "a READ with a wrong rkey is a"
                        + " completion error on IB/RoCE; iWARP terminates the connection on it instead");
                RemoteBuffer good = serverSide.remote();
                RemoteBuffer badKey = new RemoteBuffer(good.address(), good.length(), good.rkey() ^ 0x5a5a);
                WorkCompletionException failed = assertThrows(WorkCompletionException.class,
                        () -> client.read(0, badKey, 64, CmInProcessTest.T));
                assertEquals(WcStatus.REMOTE_ACCESS_ERROR, failed.status());
                assertTrue(failed.getMessage().startsWith("RDMA READ #1 on RdmaConnection"), failed.getMessage());
            }
        }
    }
}
