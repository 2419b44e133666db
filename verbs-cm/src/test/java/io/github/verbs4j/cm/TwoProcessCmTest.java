package io.github.verbs4j.cm;

import io.github.verbs4j.QpState;
import io.github.verbs4j.RemoteBuffer;
import io.github.verbs4j.VerbsException;
import io.github.verbs4j.testsupport.PeerJvm;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The server in this JVM, each client a separate JVM ({@link CmPeer}), over rdma_cm (softrdma's, or the kernel's on rxe). */
class TwoProcessCmTest {

    @BeforeAll
    static void softrdmaCm() {
        SoftrdmaCm.require();
    }

    static final Duration T = CmTestNet.scaled(Duration.ofSeconds(20));
    private final List<Process> peers = new ArrayList<>();

    /** A peer JVM with this JVM's class path and library choice. */
    private Peer start(String mode, int port) throws Exception {
        List<String> cmd = PeerJvm.command(List.of(), CmPeer.class, mode, Integer.toString(port));
        Process process = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        peers.add(process);
        return new Peer(process);
    }

    record Peer(Process process, BufferedReader in, PrintStream out) {
        Peer(Process process) {
            this(process, new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8)),
                    new PrintStream(process.getOutputStream(), true, StandardCharsets.UTF_8));
        }

        String expect(String prefix) throws Exception {
            return PeerJvm.expect(in, prefix, Duration.ofSeconds(CmTestNet.scaledSeconds(30)));
        }
    }

    @AfterEach
    void killPeers() throws Exception {
        for (Process p : peers) {
            p.destroyForcibly();
            p.waitFor(CmTestNet.scaledSeconds(10), TimeUnit.SECONDS);
        }
    }

    private static RdmaServer listen() {
        return RdmaServer.listen(new InetSocketAddress(CmTestNet.INET_ADDRESS, 0),
                EndpointOptions.defaults().withPrivateData("server-hello".getBytes(StandardCharsets.US_ASCII)), 8);
    }

    @Test
    void connectAcceptExchangeAndDisconnectBetweenTwoJvms() throws Exception {
        HexFormat hex = HexFormat.of();
        try (RdmaServer server = listen()) {
            Peer peer = start("exchange", server.localAddress().getPort());
            try (RdmaConnection c = server.accept(T)) {
                assertEquals("peer-hello", new String(c.peerPrivateData(), 0, 10, StandardCharsets.US_ASCII));
                byte[] serverData = hex.parseHex(peer.expect("CONNECTED "));
                assertArrayEquals("server-hello".getBytes(StandardCharsets.US_ASCII), Arrays.copyOf(serverData, 12));
                assertEquals(QpState.RTS, CmTestNet.state(c.queuePair()));

                byte[] message = new byte[777];
                for (int i = 0; i < message.length; i++) {
                    message[i] = (byte) (i ^ 0x3c);
                }
                c.send(message, T);
                assertArrayEquals(message, hex.parseHex(peer.expect("GOT ")));
                byte[] back = c.receive(T);
                for (int i = 0; i < message.length; i++) {
                    assertEquals(message[message.length - 1 - i], back[i], "reversed byte " + i);
                }
                RemoteBuffer target = c.remote().slice(1024, CmPeer.WRITE_LENGTH);
                c.send(target.toBytes(), T);
                assertArrayEquals("written".getBytes(StandardCharsets.US_ASCII), c.receive(T));
                for (int i = 0; i < CmPeer.WRITE_LENGTH; i++) {
                    assertEquals(CmPeer.pattern(i), c.rdmaBuffer().segment().get(ValueLayout.JAVA_BYTE, 1024 + i), "byte " + i);
                }
                assertEquals(0, c.rdmaBuffer().segment().get(ValueLayout.JAVA_BYTE, 1023), "before the written range");
                c.disconnect();
                c.awaitDisconnect(T);
                peer.expect("DISCONNECTED");
            }
            assertTrue(peer.process().waitFor(CmTestNet.scaledSeconds(30), TimeUnit.SECONDS));
            assertEquals(0, peer.process().exitValue());
        }
    }

    @Test
    void serverSurvivesClientsKilledMidConnectionAndAcceptsTheNext() throws Exception {
        try (RdmaServer server = listen()) {
            int port = server.localAddress().getPort();

            // 1. killed after its request arrived, before the server accepted it
            Peer early = start("hang", port);
            ConnectionRequest request = server.nextRequest(T);
            early.process().destroyForcibly();
            assertTrue(early.process().waitFor(CmTestNet.scaledSeconds(10), TimeUnit.SECONDS));
            VerbsException gone = assertThrows(VerbsException.class, () -> request.accept(T));
            if (CmTestNet.onSoftrdma()) {
                assertEquals(CmEventType.UNREACHABLE, assertInstanceOf(CmEventException.class, gone).event().type(),
                        gone.getMessage());
            } else if (gone instanceof CmEventException event) {
                // the kernel's CM: the REJ sent as the dead process's id was destroyed raced the REP
                assertTrue(Set.of(CmEventType.UNREACHABLE, CmEventType.REJECTED).contains(event.event().type()),
                        gone.getMessage());
            } else if (CmTestNet.iwarp()) {
                // iWARP: the dead process's TCP connection was reset, and rdma_accept says so
                assertEquals("rdma_accept", gone.verb(), gone.getMessage());
                assertEquals("ECONNRESET", gone.errnoName(), gone.getMessage());
            } else {
                // the kernel's CM took that REJ before the accept: the id has left REQ_RCVD, so the
                // QP's attributes cannot be had from it and rdma_create_qp fails with EINVAL
                assertEquals("rdma_create_qp", gone.verb(), gone.getMessage());
                assertEquals("EINVAL", gone.errnoName(), gone.getMessage());
            }

            // 2. killed once connected: the server's connection sees DISCONNECTED
            Peer connected = start("hang", port);
            try (RdmaConnection c = server.accept(T)) {
                connected.expect("CONNECTED ");
                connected.process().destroyForcibly();
                assertTrue(connected.process().waitFor(CmTestNet.scaledSeconds(10), TimeUnit.SECONDS));
                c.awaitDisconnect(T); // throws when no DISCONNECTED came after the client process died
            }

            // 3. the next client is served normally
            Peer next = start("exchange", port);
            try (RdmaConnection c = server.accept(T)) {
                next.expect("CONNECTED ");
                byte[] message = "still serving".getBytes(StandardCharsets.US_ASCII);
                c.send(message, T);
                assertArrayEquals(message, HexFormat.of().parseHex(next.expect("GOT ")));
                byte[] back = c.receive(T);
                assertEquals("gnivres llits", new String(back, StandardCharsets.US_ASCII));
                c.send(c.remote().slice(0, CmPeer.WRITE_LENGTH).toBytes(), T);
                assertArrayEquals("written".getBytes(StandardCharsets.US_ASCII), c.receive(T));
                assertEquals(CmPeer.pattern(CmPeer.WRITE_LENGTH - 1),
                        c.rdmaBuffer().segment().get(ValueLayout.JAVA_BYTE, CmPeer.WRITE_LENGTH - 1));
                c.disconnect();
                next.expect("DISCONNECTED");
            }
            assertTrue(next.process().waitFor(CmTestNet.scaledSeconds(30), TimeUnit.SECONDS));
            assertEquals(0, next.process().exitValue());
        }
    }
}
