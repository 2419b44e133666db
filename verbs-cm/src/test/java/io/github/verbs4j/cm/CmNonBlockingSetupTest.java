package io.github.verbs4j.cm;

import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Errno;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QpState;
import io.github.verbs4j.VerbsException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * CmId's non-blocking starters (startResolveAddress, startResolveRoute, startConnect, startAccept):
 * one thread drives both ends of a connection through them, reading each step's event from the
 * event channels, as an event loop does. With a connect that waited for its ESTABLISHED, the
 * same thread could never take the request and accept it.
 */
class CmNonBlockingSetupTest {

    @BeforeAll
    static void softrdmaCm() {
        SoftrdmaCm.require();
    }

    private static final Duration T = CmInProcessTest.T;

    /** The next event on {@code channel}, which must be {@code type} for {@code id}. */
    private static CmEvent expect(EventChannel channel, CmEventType type, CmId id) {
        CmEvent e = channel.next(T);
        assertNotNull(e, "no " + type + " within " + T);
        assertEquals(type, e.type(), e::toString);
        assertSame(id, e.id());
        return e;
    }

    private static byte[] ascii(String s) {
        return s.getBytes(StandardCharsets.US_ASCII);
    }

    @Test
    void oneThreadConnectsAndAcceptsThroughTheStartersAndTheirEvents() {
        try (EventChannel serverEvents = EventChannel.create(); EventChannel clientEvents = EventChannel.create()) {
            CmId listener = serverEvents.createId(PortSpace.TCP);
            listener.bind(new InetSocketAddress(CmInProcessTest.ADDR, 0));
            listener.listen(1);
            CmId client = clientEvents.createId(PortSpace.TCP);
            client.startResolveAddress(null, listener.localAddress(), T);
            expect(clientEvents, CmEventType.ADDR_RESOLVED, client);
            client.startResolveRoute(T);
            expect(clientEvents, CmEventType.ROUTE_RESOLVED, client);
            var ctx = client.context();
            try (var pd = ctx.allocatePd(); var cq = ctx.createCq(8)) {
                client.createQueuePair(pd, cq, cq, QpInit.defaults());
                client.startConnect(ConnectParameters.defaults().withPrivateData(ascii("hello")));

                CmEvent request = serverEvents.next(T);
                assertNotNull(request, "no connection request");
                assertEquals(CmEventType.CONNECT_REQUEST, request.type());
                assertSame(listener, request.listenId());
                assertArrayEquals(ascii("hello"), Arrays.copyOf(request.privateData(), 5));
                CmId child = request.id();
                child.createQueuePair(pd, cq, cq, QpInit.defaults());
                child.startAccept(ConnectParameters.defaults().withPrivateData(ascii("welcome")));

                CmEvent established = expect(clientEvents, CmEventType.ESTABLISHED, client);
                assertArrayEquals(ascii("welcome"), Arrays.copyOf(established.privateData(), 7));
                expect(serverEvents, CmEventType.ESTABLISHED, child);
                assertEquals(QpState.RTS, CmTestNet.state(client.queuePair()));
                assertEquals(QpState.RTS, CmTestNet.state(child.queuePair()));

                client.disconnect();
                expect(serverEvents, CmEventType.DISCONNECTED, child);
                child.close();
                client.close();
            }
            listener.close();
        }
    }

    @Test
    void startConnectToAPortNobodyListensOnEndsInRejected() throws Exception {
        try (EventChannel events = EventChannel.create(); java.net.Socket reserved = CmInProcessTest.reservedPort()) {
            CmId client = events.createId(PortSpace.TCP);
            try {
                client.startResolveAddress(null, new InetSocketAddress(CmInProcessTest.ADDR, reserved.getLocalPort()), T);
                expect(events, CmEventType.ADDR_RESOLVED, client);
                client.startResolveRoute(T);
                expect(events, CmEventType.ROUTE_RESOLVED, client);
                if (CmTestNet.iwarp()) {
                    // iWARP connects over TCP, and only an id with its QP may connect (without one the
                    // kernel's iw_cm says EINVAL, seen on siw): rdma_connect itself then fails, with
                    // the refused TCP connection
                    try (ProtectionDomain pd = client.context().allocatePd();
                         CompletionQueue cq = client.context().createCq(4)) {
                        client.createQueuePair(pd, cq, cq, QpInit.defaults());
                        VerbsException refused = assertThrows(VerbsException.class,
                                () -> client.startConnect(ConnectParameters.defaults()));
                        assertEquals(Errno.ECONNREFUSED, refused.error(), refused.getMessage());
                        client.close(); // the id and its QP before the domain and the queue
                    }
                    return;
                }
                client.startConnect(ConnectParameters.defaults());
                CmEvent rejected = expect(events, CmEventType.REJECTED, client);
                assertEquals(CmEvent.REJECT_INVALID_SERVICE_ID, rejected.status(), rejected::toString);
            } finally {
                client.close();
            }
        }
    }

    @Test
    void startersRefuseAStepOutOfOrderAndAClosedId() {
        try (EventChannel events = EventChannel.create()) {
            CmId id = events.createId(PortSpace.TCP);
            VerbsException early = assertThrows(VerbsException.class, () -> id.startResolveRoute(T));
            assertEquals(Errno.EINVAL, early.error(), early.getMessage());
            assertTrue(early.getMessage().contains("rdma_resolve_route"), early.getMessage());
            VerbsException notRequest = assertThrows(VerbsException.class,
                    () -> id.startAccept(ConnectParameters.defaults()));
            assertEquals(Errno.EINVAL, notRequest.error(), notRequest.getMessage());
            // refused in Java: rdma-core's librdmacm reads the unbound id's device in these calls
            // and the JVM died of it on the kernel's siw (the CI run of a893517)
            VerbsException unbound = assertThrows(VerbsException.class, () -> id.startConnect(ConnectParameters.defaults()));
            assertEquals(Errno.EINVAL, unbound.error(), unbound.getMessage());
            assertTrue(unbound.getMessage().contains("rdma_connect"), unbound.getMessage());
            id.close();
            assertThrows(IllegalStateException.class,
                    () -> id.startResolveAddress(null, new InetSocketAddress(CmInProcessTest.ADDR, 1), T));
            assertThrows(IllegalStateException.class, () -> id.startConnect(ConnectParameters.defaults()));
        }
    }
}
