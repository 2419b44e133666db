package io.github.verbs4j.cm;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A server whose 64 connections share one protection domain, one completion queue and one SRQ. */
class SharedQueuesTest {

    static final Duration T = CmInProcessTest.T;
    static final int CONNECTIONS = 64;

    @BeforeAll
    static void softrdmaCm() {
        SoftrdmaCm.require();
    }

    private static byte[] payload(int connection, int message) {
        byte[] b = new byte[100 + connection];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) (connection * 31 + message * 7 + i);
        }
        return b;
    }

    @Test
    void sixtyFourConnectionsShareOneSrqAndOneCq() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeFalse(CmTestNet.iwarp(), "in the siw tier, siw0 refused a client's"
                + " ibv_create_cq with ENOENT partway through the 64 connections (each client end has its own CQ) after"
                + " two minutes under emulation; the sharing itself is checked on softrdma and rxe0");
        EndpointOptions serverOptions = EndpointOptions.defaults().withMessageSize(512).withReceiveSlots(256)
                .withCompletionQueueSize(CONNECTIONS * 16 + 256);
        EndpointOptions clientOptions = EndpointOptions.defaults().withMessageSize(512).withReceiveSlots(4);
        List<RdmaConnection> clients = new ArrayList<>();
        List<RdmaConnection> accepted = new ArrayList<>();
        try (RdmaServer server = RdmaServer.builder(new InetSocketAddress(CmInProcessTest.ADDR, 0))
                .options(serverOptions).sharedQueues(true).backlog(CONNECTIONS).listen()) {
            assertTrue(server.sharesQueues());
            int port = server.localAddress().getPort();
            CompletableFuture<Void> accepting = CompletableFuture.runAsync(() -> {
                for (int i = 0; i < CONNECTIONS; i++) {
                    accepted.add(server.accept(T));
                }
            });
            try {
                for (int i = 0; i < CONNECTIONS; i++) {
                    clients.add(new RdmaClient(clientOptions.withPrivateData(new byte[] {(byte) i}))
                            .connect(CmInProcessTest.HOST, port, T));
                }
                accepting.get(CmInProcessTest.FUTURE_SECONDS * 3, TimeUnit.SECONDS);
                RdmaConnection first = accepted.getFirst();
                var srq = first.queuePair();
                assertNotNull(srq);
                for (RdmaConnection c : accepted) {
                    assertSame(first.completionQueue(), c.completionQueue(), "one CQ for all");
                    assertSame(first.protectionDomain(), c.protectionDomain(), "one PD for all");
                    // a QP that receives from an SRQ refuses receives of its own
                    IllegalStateException e = assertThrows(IllegalStateException.class, () -> c.queuePair()
                            .postRecv(io.github.verbs4j.ReceiveRequest.create().local(c.sendBuffer(), 0, 1)));
                    assertTrue(e.getMessage().contains("receives from"), e.getMessage());
                }
                // two messages from every client; the server finds each on its own connection
                for (int m = 0; m < 2; m++) {
                    for (int i = 0; i < CONNECTIONS; i++) {
                        clients.get(i).send(payload(i, m), T);
                    }
                }
                for (RdmaConnection c : accepted) {
                    int i = c.peerPrivateData()[0];
                    for (int m = 0; m < 2; m++) {
                        assertArrayEquals(payload(i, m), c.receive(T), "connection " + i + " message " + m);
                    }
                    c.send(("reply " + i).getBytes(StandardCharsets.US_ASCII), T);
                }
                for (int i = 0; i < CONNECTIONS; i++) {
                    assertEquals("reply " + i, new String(clients.get(i).receive(T), StandardCharsets.US_ASCII));
                }
                // one-sided traffic on the shared domain: each client READs its server side's buffer
                for (RdmaConnection c : accepted) {
                    c.rdmaBuffer().segment().fill((byte) c.peerPrivateData()[0]);
                }
                for (RdmaConnection c : accepted) {
                    c.send(java.nio.ByteBuffer.allocate(16).putLong(c.remote().address()).putInt(c.remote().rkey())
                            .array(), T);
                }
                for (int i = 0; i < CONNECTIONS; i++) {
                    var b = java.nio.ByteBuffer.wrap(clients.get(i).receive(T));
                    var remote = new io.github.verbs4j.RemoteBuffer(b.getLong(), 4096, b.getInt());
                    clients.get(i).read(0, remote, 4096, T);
                    byte want = (byte) i;
                    assertEquals(-1L, clients.get(i).rdmaBuffer().segment().asSlice(0, 4096)
                            .mismatch(java.lang.foreign.MemorySegment.ofArray(filled(4096, want))), "connection " + i);
                }
            } finally {
                accepting.exceptionally(t -> null).get(CmInProcessTest.FUTURE_SECONDS * 3, TimeUnit.SECONDS);
                for (RdmaConnection c : clients) {
                    c.close();
                }
                for (RdmaConnection c : accepted) {
                    c.close();
                }
            }
        }
    }

    @Test
    void anAcceptThatCouldOverflowTheSharedQueueSaysSo() throws Exception {
        // 8 receive slots + 16 send requests: room for one connection only
        EndpointOptions options = EndpointOptions.defaults().withReceiveSlots(8).withSendQueueDepth(16)
                .withCompletionQueueSize(24);
        try (RdmaServer server = RdmaServer.builder(new InetSocketAddress(CmInProcessTest.ADDR, 0))
                .options(options).sharedQueues(true).listen()) {
            int port = server.localAddress().getPort();
            CompletableFuture<RdmaConnection> first = CompletableFuture.supplyAsync(() -> server.accept(T));
            try (RdmaConnection client = new RdmaClient().connect(CmInProcessTest.HOST, port, T);
                 RdmaConnection accepted = first.get(CmInProcessTest.FUTURE_SECONDS, TimeUnit.SECONDS)) {
                CompletableFuture<Throwable> second = CompletableFuture.supplyAsync(() -> {
                    try (RdmaConnection c = new RdmaClient().connect(CmInProcessTest.HOST, port, T)) {
                        return null;
                    } catch (RuntimeException e) {
                        return e;
                    }
                });
                IllegalStateException e = assertThrows(IllegalStateException.class, () -> server.accept(T));
                assertTrue(e.getMessage().startsWith("the shared completion queue holds"), e.getMessage());
                assertTrue(e.getMessage().contains("completionQueueSize"), e.getMessage());
                assertTrue(second.get(CmInProcessTest.FUTURE_SECONDS, TimeUnit.SECONDS) instanceof
                        io.github.verbs4j.VerbsException, "the refused client's connect fails");
                // the first connection still works
                client.send(new byte[] {9}, T);
                assertArrayEquals(new byte[] {9}, accepted.receive(T));
            }
        }
    }

    private static byte[] filled(int n, byte value) {
        byte[] b = new byte[n];
        java.util.Arrays.fill(b, value);
        return b;
    }
}
