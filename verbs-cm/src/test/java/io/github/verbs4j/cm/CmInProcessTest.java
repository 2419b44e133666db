package io.github.verbs4j.cm;

import io.github.verbs4j.Errno;
import io.github.verbs4j.QpState;
import io.github.verbs4j.RdmaTimeoutException;
import io.github.verbs4j.RemoteBuffer;
import io.github.verbs4j.TransportType;
import io.github.verbs4j.VerbsException;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Both ends in this JVM (softrdma's CM runs over loopback TCP between ids of one process too; rxe uses its netdev's address). */
class CmInProcessTest {

    @BeforeAll
    static void softrdmaCm() {
        SoftrdmaCm.require();
    }

    /** The address both ends use (loopback on softrdma, the rxe netdev's address in the VM). */
    static final InetAddress ADDR = CmTestNet.INET_ADDRESS;
    static final String HOST = CmTestNet.ADDRESS;
    static final Duration T = CmTestNet.scaled(Duration.ofSeconds(10));
    static final long FUTURE_SECONDS = CmTestNet.scaledSeconds(20);

    /**
     * A port nothing listens on while the socket stays open: bound, never listening, and without
     * SO_REUSEADDR, so no other program can start listening there during the test.
     */
    static java.net.Socket reservedPort() throws Exception {
        java.net.Socket s = new java.net.Socket();
        s.bind(new java.net.InetSocketAddress(ADDR, 0));
        return s;
    }

    @Test
    void everyEventTypeMapsToItsOwnValue() {
        Set<Integer> values = new HashSet<>();
        for (CmEventType t : CmEventType.values()) {
            assertTrue(values.add(t.value()), "duplicate value " + t.value());
            assertEquals(t, CmEventType.of(t.value()));
        }
        assertEquals(16, values.size());
        assertEquals(4, CmEventType.CONNECT_REQUEST.value());
        assertEquals(15, CmEventType.TIMEWAIT_EXIT.value());
        assertThrows(IllegalArgumentException.class, () -> CmEventType.of(16));
    }

    @Test
    void connectAcceptExchangeDisconnect() throws Exception {
        try (RdmaServer server = RdmaServer.listen(new InetSocketAddress(ADDR, 0),
                EndpointOptions.defaults().withPrivateData("from-server".getBytes(StandardCharsets.US_ASCII)), 4)) {
            int port = server.localAddress().getPort();
            assertTrue(port > 0);
            CompletableFuture<RdmaConnection> accepted = CompletableFuture.supplyAsync(() -> server.accept(T));
            try (RdmaConnection client = new RdmaClient(EndpointOptions.defaults()
                    .withPrivateData("from-client".getBytes(StandardCharsets.US_ASCII))).connect(HOST, port, T);
                 RdmaConnection serverSide = accepted.get(FUTURE_SECONDS, TimeUnit.SECONDS)) {
                assertEquals(QpState.RTS, client.queuePair().trackedState());
                assertEquals(QpState.RTS, CmTestNet.state(client.queuePair()));
                assertEquals(QpState.RTS, CmTestNet.state(serverSide.queuePair()));
                assertEquals("from-client", new String(serverSide.peerPrivateData(), 0, 11, StandardCharsets.US_ASCII));
                assertEquals("from-server", new String(client.peerPrivateData(), 0, 11, StandardCharsets.US_ASCII));
                assertEquals(port, client.remoteAddress().getPort());

                byte[] hello = "hello over rdma_cm".getBytes(StandardCharsets.US_ASCII);
                client.send(hello, T);
                assertArrayEquals(hello, serverSide.receive(T));
                byte[] big = new byte[4096];
                Arrays.fill(big, (byte) 0x5a);
                serverSide.send(big, T);
                assertArrayEquals(big, client.receive(T));

                // one-sided: client writes into the server's RDMA buffer, then reads it back
                RemoteBuffer remote = serverSide.remote();
                for (int i = 0; i < 1000; i++) {
                    client.rdmaBuffer().segment().set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i * 31));
                }
                client.write(0, remote, 1000, T);
                for (int i = 0; i < 1000; i++) {
                    assertEquals((byte) (i * 31), serverSide.rdmaBuffer().segment().get(java.lang.foreign.ValueLayout.JAVA_BYTE, i));
                }
                client.read(2000, remote.slice(0, 1000), 1000, T);
                assertArrayEquals(client.rdmaBuffer().segment().asSlice(0, 1000).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE),
                        client.rdmaBuffer().segment().asSlice(2000, 1000).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));

                client.disconnect();
                serverSide.awaitDisconnect(T);
                // the kernel's CM gives the disconnecting side its DISCONNECTED when the peer answers
                // the DREQ, which it does as its id is destroyed (softrdma answers at once)
                serverSide.close();
                client.awaitDisconnect(T);
                assertEquals(QpState.ERR, CmTestNet.state(client.queuePair()));
            }
        }
    }

    @Test
    void thePeerAnsweringADisconnectCompletesItBeforeClosing() throws Exception {
        try (RdmaServer server = RdmaServer.listen(new InetSocketAddress(ADDR, 0))) {
            int port = server.localAddress().getPort();
            CompletableFuture<RdmaConnection> accepted = CompletableFuture.supplyAsync(() -> server.accept(T));
            try (RdmaConnection client = new RdmaClient(EndpointOptions.defaults()).connect(HOST, port, T);
                 RdmaConnection serverSide = accepted.get(FUTURE_SECONDS, TimeUnit.SECONDS)) {
                // while both stay connected a wait for the peer's disconnect runs out, and says so
                RdmaTimeoutException none = assertThrows(RdmaTimeoutException.class,
                        () -> serverSide.awaitDisconnect(Duration.ofMillis(100)));
                assertEquals("rdma_get_cm_event", none.verb());
                assertTrue(none.is(Errno.ETIMEDOUT));
                assertEquals(Duration.ofMillis(100), none.timeout());
                assertEquals(QpState.RTS, CmTestNet.state(serverSide.queuePair()), "a timed-out wait changed the connection");
                client.disconnect();
                serverSide.awaitDisconnect(T);
                // the passive side answers (rdma_disconnect after DISCONNECTED: the kernel CM's DREP)
                serverSide.disconnect();
                client.awaitDisconnect(T); // throws when the disconnecting side heard nothing while its peer stayed open
                assertEquals(QpState.ERR, CmTestNet.state(client.queuePair()));
                assertEquals(QpState.ERR, CmTestNet.state(serverSide.queuePair()));
            }
        }
    }

    @Test
    void rejectCarriesPrivateData() throws Exception {
        byte[] reason = "go away: server full".getBytes(StandardCharsets.US_ASCII);
        try (RdmaServer server = RdmaServer.listen(new InetSocketAddress(ADDR, 0))) {
            int port = server.localAddress().getPort();
            CompletableFuture<byte[]> rejected = CompletableFuture.supplyAsync(() -> {
                ConnectionRequest request = server.nextRequest(T);
                byte[] asked = request.privateData();
                request.reject(reason);
                return asked;
            });
            CmEventException e = assertThrows(CmEventException.class, () -> new RdmaClient(EndpointOptions.defaults()
                    .withPrivateData(new byte[] {1, 2, 3})).connect(HOST, port, T));
            assertEquals(CmEventType.REJECTED, e.event().type());
            // InfiniBand's CM reports the REJ's reason; iWARP's a negative errno (siw: -ECONNRESET,
            // the MPA reject ends the TCP connection)
            assertEquals(CmTestNet.iwarp() ? -104 : CmEvent.REJECT_CONSUMER, e.event().status());
            assertEquals("rdma_connect", e.verb());
            byte[] got = e.event().privateData();
            assertTrue(got.length >= reason.length, "private data of " + got.length + " bytes");
            assertArrayEquals(reason, Arrays.copyOf(got, reason.length));
            for (int i = reason.length; i < got.length; i++) {
                assertEquals(0, got[i], "padding byte " + i);
            }
            byte[] asked = rejected.get(FUTURE_SECONDS, TimeUnit.SECONDS);
            assertArrayEquals(new byte[] {1, 2, 3}, Arrays.copyOf(asked, 3));
        }
    }

    @Test
    void connectToAPortNobodyListensOnFailsWithinItsTimeout() throws Exception {
        long start;
        CmEventException e;
        try (java.net.Socket reserved = reservedPort()) {
            int port = reserved.getLocalPort();
            start = System.nanoTime();
            if (CmTestNet.iwarp()) {
                // iWARP connects over TCP: rdma_connect itself fails, with the refused TCP connection
                VerbsException refused = assertThrows(VerbsException.class, () -> new RdmaClient().connect(HOST, port, T));
                assertEquals(io.github.verbs4j.Errno.ECONNREFUSED, refused.error(), refused.getMessage());
                assertTrue((System.nanoTime() - start) / 1_000_000 < T.toMillis(), refused.getMessage());
                return;
            }
            e = assertThrows(CmEventException.class, () -> new RdmaClient().connect(HOST, port, T));
        }
        long ms = (System.nanoTime() - start) / 1_000_000;
        // the answer (not the timeout) ended it: a REJ "invalid service ID", as the kernel's CM sends
        assertEquals(CmEventType.REJECTED, e.event().type(), e.getMessage());
        assertEquals(CmEvent.REJECT_INVALID_SERVICE_ID, e.event().status());
        assertTrue(ms < T.toMillis(), "took " + ms + " ms");
    }

    @Test
    void connectToADeadAddressFailsWithinItsTimeout() {
        // nothing answers there; depending on the routes this ends in ADDR_ERROR, UNREACHABLE or
        // the timeout, but never later than the timeout (plus scheduling slack, wider in the VM)
        Duration timeout = Duration.ofSeconds(2);
        long start = System.nanoTime();
        VerbsException e = assertThrows(VerbsException.class,
                () -> new RdmaClient().connect(CmTestNet.DEAD_ADDRESS, 7174, timeout));
        long ms = (System.nanoTime() - start) / 1_000_000;
        assertTrue(ms < timeout.toMillis() + 1_000L * CmTestNet.SLOWDOWN, "took " + ms + " ms: " + e.getMessage());
        assertTrue(e instanceof CmEventException || e.errnoName().equals("ETIMEDOUT"), e.getMessage());
    }

    @Test
    void connectToAPeerThatNeverAnswersTimesOut() throws Exception {
        Assumptions.assumeTrue(CmTestNet.onSoftrdma(), "softrdma-specific: a plain TCP listener stands in for a "
                + "silent CM peer because softrdma's CM runs over TCP on the same port number; the kernel's CM does not");
        // a TCP listener that accepts and stays silent: the CM request is never answered
        try (ServerSocket silent = new ServerSocket(0, 50, ADDR)) {
            CompletableFuture<Socket> held = CompletableFuture.supplyAsync(() -> {
                try {
                    return silent.accept();
                } catch (Exception e) {
                    return null;
                }
            });
            long start = System.nanoTime();
            VerbsException e = assertThrows(VerbsException.class,
                    () -> new RdmaClient().connect(HOST, silent.getLocalPort(), Duration.ofMillis(1500)));
            long ms = (System.nanoTime() - start) / 1_000_000;
            assertEquals("ETIMEDOUT", e.errnoName(), e.getMessage());
            assertEquals("rdma_connect", e.verb());
            assertTrue(ms >= 1400 && ms < 4000L * CmTestNet.SLOWDOWN, "took " + ms + " ms");
            Socket s = held.get(5, TimeUnit.SECONDS);
            if (s != null) {
                s.close();
            }
        }
    }

    @Test
    void connectToAListenerThatHoldsTheRequestTimesOut() throws Exception {
        // the request reaches the server, which neither accepts nor rejects it: the client's own
        // deadline ends the connect (on either substrate; the CM's retries would take far longer)
        try (RdmaServer server = RdmaServer.listen(new InetSocketAddress(ADDR, 0))) {
            int port = server.localAddress().getPort();
            CompletableFuture<ConnectionRequest> held = CompletableFuture.supplyAsync(() -> server.nextRequest(T));
            long start = System.nanoTime();
            VerbsException e = assertThrows(VerbsException.class,
                    () -> new RdmaClient().connect(HOST, port, Duration.ofMillis(1500)));
            long ms = (System.nanoTime() - start) / 1_000_000;
            assertEquals("ETIMEDOUT", e.errnoName(), e.getMessage());
            assertEquals("rdma_connect", e.verb());
            assertTrue(ms >= 1400 && ms < 4000L * CmTestNet.SLOWDOWN, "took " + ms + " ms");
            ConnectionRequest request = held.get(FUTURE_SECONDS, TimeUnit.SECONDS);
            assertEquals(ADDR, request.remoteAddress().getAddress());
            if (CmTestNet.onSoftrdma()) {
                request.close();
            } else {
                // the client destroyed its id at its deadline, so the kernel's CM sent a REJ; once that
                // arrived the request has left REQ_RCVD and rdma_reject answers EINVAL (the id is
                // released either way). iWARP: the client's TCP connection was reset: ECONNRESET.
                try {
                    request.close();
                } catch (VerbsException late) {
                    assertEquals("rdma_reject", late.verb(), late.getMessage());
                    assertEquals(CmTestNet.iwarp() ? "ECONNRESET" : "EINVAL", late.errnoName(), late.getMessage());
                }
            }
        }
    }

    @Test
    void udpPortSpaceExchangesQpNumberAndQkey() throws Exception {
        try (EventChannel serverChannel = EventChannel.create(); EventChannel clientChannel = EventChannel.create();
             CmId listener = serverChannel.createId(PortSpace.UDP);
             CmId client = clientChannel.createId(PortSpace.UDP)) {
            listener.bind(new InetSocketAddress(ADDR, 0));
            listener.listen(2);
            client.resolveAddress(null, new InetSocketAddress(ADDR, listener.localAddress().getPort()), T);
            client.resolveRoute(T);
            var ctx = client.context();
            Assumptions.assumeFalse(ctx.device().transport() == TransportType.IWARP, () -> ctx.device().name()
                    + " reports the iWARP transport, which has no UD queue pairs (RC only)");
            try (var pd = ctx.allocatePd(); var cq = ctx.createCq(8)) {
                var clientQp = client.createQueuePair(pd, cq, cq, QpInit.defaults());
                assertEquals(io.github.verbs4j.QpType.UD, clientQp.type());
                assertEquals(QpState.RTS, clientQp.state(), "rdma_create_qp moves UD QPs to RTS");
                CompletableFuture<Integer> serverQpNum = CompletableFuture.supplyAsync(() -> {
                    CmEvent request = listener.getRequest(T);
                    assertEquals(CmEventType.CONNECT_REQUEST, request.type());
                    assertArrayEquals("sidr".getBytes(StandardCharsets.US_ASCII), Arrays.copyOf(request.privateData(), 4));
                    CmId child = request.id();
                    assertEquals(PortSpace.UDP, child.portSpace());
                    var sctx = child.context();
                    var spd = sctx.allocatePd();
                    var scq = sctx.createCq(8);
                    var qp = child.createQueuePair(spd, scq, scq, QpInit.defaults());
                    assertNull(child.accept(ConnectParameters.defaults().withPrivateData("ok".getBytes(StandardCharsets.US_ASCII)), T),
                            "a UD accept has no ESTABLISHED");
                    int qpn = qp.qpNumber();
                    child.close();
                    assertTrue(qp.isClosed(), "the id destroys its QP");
                    scq.close();
                    spd.close();
                    return qpn;
                });
                CmEvent established = client.connect(ConnectParameters.defaults()
                        .withPrivateData("sidr".getBytes(StandardCharsets.US_ASCII)), T);
                assertEquals(CmEventType.ESTABLISHED, established.type());
                assertEquals(serverQpNum.get(FUTURE_SECONDS, TimeUnit.SECONDS), established.remoteQpNum());
                assertEquals(0x01234567, established.remoteQkey(), "RDMA_UDP_QKEY");
                assertArrayEquals("ok".getBytes(StandardCharsets.US_ASCII), Arrays.copyOf(established.privateData(), 2));
                client.close();
                assertTrue(clientQp.isClosed());
            }
        }
    }

    @Test
    void twoThreadsShareOneChannelAndNextDeliversTheRest() throws Exception {
        try (EventChannel channel = EventChannel.create(); EventChannel other = EventChannel.create()) {
            CmId listener = channel.createId(PortSpace.TCP);
            listener.bind(new InetSocketAddress(ADDR, 0));
            listener.listen(1);
            CmId client = channel.createId(PortSpace.TCP);
            client.resolveAddress(null, listener.localAddress(), T);
            client.resolveRoute(T);
            var ctx = client.context();
            try (var pd = ctx.allocatePd(); var cq = ctx.createCq(8)) {
                client.createQueuePair(pd, cq, cq, QpInit.defaults());
                // the server thread waits for the request on the same channel the client waits on
                CompletableFuture<CmId> server = CompletableFuture.supplyAsync(() -> {
                    CmEvent request = listener.getRequest(T);
                    assertEquals(listener, request.listenId());
                    CmId child = request.id();
                    child.migrate(other);
                    assertEquals(other, child.channel());
                    child.createQueuePair(pd, cq, cq, QpInit.defaults());
                    assertEquals(CmEventType.ESTABLISHED, child.accept(ConnectParameters.defaults(), T).type());
                    return child;
                });
                assertEquals(CmEventType.ESTABLISHED, client.connect(ConnectParameters.defaults(), T).type());
                CmId child = server.get(FUTURE_SECONDS, TimeUnit.SECONDS);
                assertEquals(QpState.RTS, CmTestNet.state(child.queuePair()));

                client.disconnect();
                // raw events: the child's DISCONNECTED on the other channel, the client's on this one;
                // the kernel's CM sends the client's only once the child answers the DREQ, which
                // destroying the child does (softrdma answers at once)
                CmEvent theirs = other.next(T);
                assertNotNull(theirs);
                assertEquals(CmEventType.DISCONNECTED, theirs.type());
                assertEquals(child, theirs.id());
                child.close();
                CmEvent mine = channel.next(T);
                assertNotNull(mine);
                assertEquals(CmEventType.DISCONNECTED, mine.type());
                assertEquals(client, mine.id());
                assertNull(channel.next(Duration.ofMillis(100)));
                client.close();
            }
            listener.close();
        }
    }

    @Test
    void lowLevelIdsEventsAndLifecycle() throws Exception {
        try (EventChannel channel = EventChannel.create()) {
            assertTrue(channel.fd() >= 0);
            assertNull(channel.next(Duration.ofMillis(50)));
            CmId listener = channel.createId(PortSpace.TCP);
            listener.bind(new InetSocketAddress(ADDR, 0));
            assertNotNull(listener.context(), "bound to a local address: that address's device");
            listener.listen(1);
            IllegalStateException busy = assertThrows(IllegalStateException.class, channel::close);
            assertTrue(busy.getMessage().contains(listener.toString()), busy.getMessage());
            VerbsException inUse = assertThrows(VerbsException.class, () -> {
                try (EventChannel other = EventChannel.create(); CmId second = other.createId(PortSpace.TCP)) {
                    second.bind(listener.localAddress());
                }
            });
            assertEquals("rdma_bind_addr", inUse.verb());
            assertEquals("EADDRINUSE", inUse.errnoName());

            CmId active = channel.createId(PortSpace.TCP);
            assertNull(active.context());
            try (var pd = listener.context().allocatePd(); var cq = listener.context().createCq(4)) {
                IllegalStateException unbound = assertThrows(IllegalStateException.class,
                        () -> active.createQueuePair(pd, cq, cq, QpInit.defaults()));
                assertTrue(unbound.getMessage().contains("not bound to a device"), unbound.getMessage());
            }
            assertThrows(IllegalArgumentException.class, () -> new QpInit(0, 1, 1, 1, 0, false));
            assertThrows(IllegalArgumentException.class, () -> new ConnectParameters(1, 1, 8, 7, null));
            active.close();
            active.close();
            assertTrue(active.isClosed());
            assertThrows(IllegalStateException.class, () -> active.listen(1));
            listener.close();
            assertFalse(channel.isClosed());
        }
    }
}
