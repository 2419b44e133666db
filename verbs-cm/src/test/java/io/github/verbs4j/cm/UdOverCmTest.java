package io.github.verbs4j.cm;

import io.github.verbs4j.Access;
import io.github.verbs4j.Completions;
import io.github.verbs4j.QpState;
import io.github.verbs4j.ReceiveRequest;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.WcOpcode;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * UD over rdma_cm: the client's address handle is built from the ESTABLISHED event's
 * {@code ah_attr} (the CM's route: the peer's GID), and its datagrams carry the event's QP number
 * and Q_Key, so nothing here assumes both ends share a host.
 */
class UdOverCmTest {

    static final Duration T = CmInProcessTest.T;
    static final int GRH = 40;

    @BeforeAll
    static void softrdmaCm() {
        SoftrdmaCm.require();
    }

    @Test
    void aDatagramReachesThePeerThroughTheEventsAddress() throws Exception {
        Assumptions.assumeFalse(CmTestNet.iwarp(), "iWARP has no UD queue pairs (RC only)");
        byte[] text = "datagram over rdma_cm".getBytes(StandardCharsets.US_ASCII);
        try (EventChannel serverChannel = EventChannel.create(); EventChannel clientChannel = EventChannel.create();
             CmId listener = serverChannel.createId(PortSpace.UDP);
             CmId client = clientChannel.createId(PortSpace.UDP)) {
            listener.bind(new InetSocketAddress(CmInProcessTest.ADDR, 0));
            listener.listen(2);
            client.resolveAddress(null, new InetSocketAddress(CmInProcessTest.ADDR, listener.localAddress().getPort()), T);
            client.resolveRoute(T);
            var ctx = client.context();
            try (var pd = ctx.allocatePd(); var cq = ctx.createCq(8);
                 var buffer = pd.allocate(4096, Access.LOCAL_WRITE)) {
                var qp = client.createQueuePair(pd, cq, cq, QpInit.defaults());
                assertEquals(QpState.RTS, qp.state());
                CompletableFuture<String> server = CompletableFuture.supplyAsync(() -> {
                    CmEvent request = listener.getRequest(T);
                    CmId child = request.id();
                    var sctx = child.context();
                    try (var spd = sctx.allocatePd(); var scq = sctx.createCq(8);
                         var sbuf = spd.allocate(4096, Access.LOCAL_WRITE)) {
                        var sqp = child.createQueuePair(spd, scq, scq, QpInit.defaults());
                        // room for the GRH a UD receive starts with
                        sqp.postRecv(ReceiveRequest.create().id(7).local(sbuf, 0, 4096));
                        child.accept(ConnectParameters.defaults(), T);
                        Completions wcs = scq.completions(4);
                        long deadline = System.nanoTime() + T.toNanos();
                        while (scq.poll(wcs) == 0) {
                            if (System.nanoTime() > deadline) {
                                throw new AssertionError("no datagram within " + T);
                            }
                            Thread.onSpinWait();
                        }
                        var wc = wcs.get(0);
                        assertTrue(wc.ok(), wc.toString());
                        assertEquals(WcOpcode.RECV, wc.opcode());
                        assertEquals(7, wc.wrId());
                        assertEquals(qp.qpNumber(), wc.sourceQp());
                        int n = wc.byteLength() - GRH;
                        String got = new String(sbuf.segment().asSlice(GRH, n).toArray(ValueLayout.JAVA_BYTE),
                                StandardCharsets.US_ASCII);
                        child.close();
                        return got;
                    }
                });
                CmEvent established = client.connect(ConnectParameters.defaults(), T);
                UdAddress peer = established.udAddress();
                assertNotNull(peer, "a UDP ESTABLISHED event carries the peer's address (ah_attr)");
                assertEquals(established.remoteQpNum(), peer.qpNumber());
                assertEquals(established.remoteQkey(), peer.qkey());
                assertEquals(client.portNumber(), peer.port());
                assertNotNull(peer.dgid(), "rdma_cm routes by GID: the address has a GRH");
                MemorySegment.copy(text, 0, buffer.segment(), ValueLayout.JAVA_BYTE, 0, text.length);
                try (var ah = peer.createAh(pd)) {
                    qp.postSend(SendRequest.send().id(1).local(buffer, 0, text.length)
                            .ud(ah, peer.qpNumber(), peer.qkey()).signaled());
                    Completions wcs = cq.completions(4);
                    long deadline = System.nanoTime() + T.toNanos();
                    while (cq.poll(wcs) == 0) {
                        if (System.nanoTime() > deadline) {
                            throw new AssertionError("the send did not complete within " + T);
                        }
                        Thread.onSpinWait();
                    }
                    assertTrue(wcs.get(0).ok(), wcs.get(0).toString());
                    assertEquals(new String(text, StandardCharsets.US_ASCII),
                            server.get(CmInProcessTest.FUTURE_SECONDS, TimeUnit.SECONDS));
                }
                client.close();
            }
        }
    }
}
