package io.github.verbs4j.cm;

import io.github.verbs4j.Access;
import io.github.verbs4j.Completions;
import io.github.verbs4j.QpState;
import io.github.verbs4j.QpType;
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
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * rdma_cm with queue pairs the application made with verbs-core: the id moves them through
 * INIT, RTR and RTS with {@code rdma_init_qp_attr}'s attributes, as librdmacm expects of an id
 * without a QP of its own.
 */
class UserQueuePairTest {

    static final Duration T = CmInProcessTest.T;

    @BeforeAll
    static void softrdmaCm() {
        SoftrdmaCm.require();
    }

    private static void await(io.github.verbs4j.CompletionQueue cq, Completions wcs) {
        long deadline = System.nanoTime() + T.toNanos();
        while (cq.poll(wcs) == 0) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("no completion within " + T);
            }
            Thread.onSpinWait();
        }
        assertTrue(wcs.get(0).ok(), wcs.get(0).toString());
    }

    @Test
    void connectAndAcceptWithTheApplicationsQueuePairs() throws Exception {
        Assumptions.assumeFalse(CmTestNet.iwarp(), "on iWARP the kernel's iw_cm moves the QP itself; verbs4j refuses"
                + " toRtr there, so an application-made QP cannot be moved by hand");
        byte[] text = "through a user QP".getBytes(StandardCharsets.US_ASCII);
        try (EventChannel serverChannel = EventChannel.create(); EventChannel clientChannel = EventChannel.create();
             CmId listener = serverChannel.createId(PortSpace.TCP);
             CmId client = clientChannel.createId(PortSpace.TCP)) {
            listener.bind(new InetSocketAddress(CmInProcessTest.ADDR, 0));
            listener.listen(2);
            client.resolveAddress(null, new InetSocketAddress(CmInProcessTest.ADDR, listener.localAddress().getPort()), T);
            client.resolveRoute(T);
            var ctx = client.context();
            try (var pd = ctx.allocatePd(); var cq = ctx.createCq(16);
                 var buffer = pd.allocate(4096, Access.LOCAL_WRITE);
                 var qp = pd.queuePair(QpType.RC).cq(cq).build()) {
                CompletableFuture<String> server = CompletableFuture.supplyAsync(() -> {
                    CmEvent request = listener.getRequest(T);
                    CmId child = request.id();
                    var sctx = child.context();
                    try (var spd = sctx.allocatePd(); var scq = sctx.createCq(16);
                         var sbuf = spd.allocate(4096, Access.LOCAL_WRITE);
                         var sqp = spd.queuePair(QpType.RC).cq(scq).build()) {
                        sqp.toInit(child.qpAttributes(QpState.INIT)); // by hand, or left to accept
                        sqp.postRecv(ReceiveRequest.create().id(5).local(sbuf, 0, 4096));
                        CmEvent established = child.accept(sqp, ConnectParameters.defaults(), T);
                        assertEquals(CmEventType.ESTABLISHED, established.type());
                        assertEquals(QpState.RTS, sqp.state());
                        assertNull(child.queuePair(), "the QP stays the application's");
                        Completions wcs = scq.completions(4);
                        await(scq, wcs);
                        assertEquals(WcOpcode.RECV, wcs.get(0).opcode());
                        String got = new String(sbuf.segment().asSlice(0, wcs.get(0).byteLength())
                                .toArray(ValueLayout.JAVA_BYTE), StandardCharsets.US_ASCII);
                        child.disconnect();
                        child.close();
                        assertFalse(sqp.isClosed(), "closing the id leaves the application's QP open");
                        return got;
                    }
                });
                CmEvent response = client.connect(qp, ConnectParameters.defaults(), T);
                assertEquals(CmEventType.CONNECT_RESPONSE, response.type());
                assertEquals(QpState.RTS, qp.state());
                MemorySegment.copy(text, 0, buffer.segment(), ValueLayout.JAVA_BYTE, 0, text.length);
                qp.postSend(SendRequest.send().id(1).local(buffer, 0, text.length).signaled());
                Completions wcs = cq.completions(4);
                await(cq, wcs);
                assertEquals(new String(text, StandardCharsets.US_ASCII),
                        server.get(CmInProcessTest.FUTURE_SECONDS, TimeUnit.SECONDS));
                client.close();
            }
        }
    }

    @Test
    void aQueuePairOfAnotherKindIsRefused() throws Exception {
        try (EventChannel channel = EventChannel.create(); CmId id = channel.createId(PortSpace.TCP)) {
            id.bind(new InetSocketAddress(CmInProcessTest.ADDR, 0));
            var ctx = id.context();
            Assumptions.assumeTrue(ctx != null, "the id is bound to a device");
            Assumptions.assumeFalse(CmTestNet.iwarp(), "iWARP has no UD queue pairs");
            try (var pd = ctx.allocatePd(); var cq = ctx.createCq(4); var ud = pd.queuePair(QpType.UD).cq(cq).build()) {
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> id.connect(ud, ConnectParameters.defaults(), T));
                assertTrue(e.getMessage().contains("takes an RC queue pair"), e.getMessage());
            }
        }
    }
}
