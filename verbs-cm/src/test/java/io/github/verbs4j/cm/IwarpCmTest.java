package io.github.verbs4j.cm;

import io.github.verbs4j.QueuePair;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.TransportType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * On a device that reports the iWARP transport (the kernel's siw0), a queue pair connected
 * through rdma_cm moves data, and verbs4j refuses atomic and immediate-data opcodes on it before
 * the provider is asked. Skipped, with the device's transport as the reason, elsewhere.
 */
class IwarpCmTest {

    private static final Duration T = CmTestNet.scaled(Duration.ofSeconds(10));

    @BeforeAll
    static void softrdmaCm() {
        SoftrdmaCm.require();
    }

    @Test
    void atomicsAndImmediateDataAreRefusedOnACmConnectedIwarpQueuePair() throws Exception {
        try (RdmaServer server = RdmaServer.listen(new InetSocketAddress(CmTestNet.INET_ADDRESS, 0))) {
            int port = server.localAddress().getPort();
            CompletableFuture<RdmaConnection> accepted = CompletableFuture.supplyAsync(() -> server.accept(T));
            try (RdmaConnection client = new RdmaClient().connect(CmTestNet.ADDRESS, port, T);
                 RdmaConnection serverSide = accepted.get(CmTestNet.scaledSeconds(20), TimeUnit.SECONDS)) {
                var device = client.queuePair().protectionDomain().context().device();
                assumeTrue(device.transport() == TransportType.IWARP, () -> device.name() + " reports transport "
                        + device.transport() + ", not iWARP: the iWARP refusals do not apply");
                QueuePair qp = client.queuePair();
                var mr = client.rdmaBuffer();
                SendRequest[] refused = {
                    SendRequest.fetchAndAdd(1).id(1).local(mr, 0, 8).remote(serverSide.remote()),
                    SendRequest.sendWithImm(7).id(2).local(mr, 0, 8),
                    SendRequest.rdmaWriteWithImm(7).id(3).local(mr, 0, 8).remote(serverSide.remote()),
                };
                for (SendRequest wr : refused) {
                    UnsupportedOperationException e = assertThrows(UnsupportedOperationException.class,
                            () -> qp.postSend(wr));
                    assertTrue(e.getMessage().contains("iWARP devices (" + device.name() + ") have no "),
                            e.getMessage());
                }
                // what iWARP does carry still works on the same connection
                mr.segment().set(java.lang.foreign.ValueLayout.JAVA_LONG, 0, 0x1122334455667788L);
                client.write(0, serverSide.remote(), 8, T);
                assertEquals(0x1122334455667788L,
                        serverSide.rdmaBuffer().segment().get(java.lang.foreign.ValueLayout.JAVA_LONG, 0));
            }
        }
    }
}
