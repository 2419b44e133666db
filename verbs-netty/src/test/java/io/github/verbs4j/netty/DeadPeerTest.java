package io.github.verbs4j.netty;

import io.github.verbs4j.testsupport.PeerJvm;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFuture;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A peer process killed mid-connection: the channel goes inactive and later writes fail, within
 * bounded time. On both wires: the default ({@code AUTO}, WRITE_WITH_IMM on softrdma, a RoCE
 * device) and SEND, each side set to it (the peer by its argument).
 */
@Timeout(120)
class DeadPeerTest {

    @ParameterizedTest
    @EnumSource(value = RdmaWireMode.class, names = {"AUTO", "SEND"})
    void aKilledServerProcessClosesTheClientChannel(RdmaWireMode mode) throws Exception {
        EventLoopGroup group = RdmaLoops.newGroup(1);
        try (PeerJvm peer = PeerJvm.start(PeerJvm.QUICK_START, EchoServerMain.class, mode.name())) {
            String announced = peer.expect("port ");
            assertTrue(announced.endsWith(" wire mode " + mode), "the peer runs the wire asked for: " + announced);
            int port = Integer.parseInt(announced.substring(0, announced.indexOf(' ')));
            byte[] sent = {1, 2, 3, 4, 5, 6, 7, 8};
            RdmaEchoTest.Collector collector = new RdmaEchoTest.Collector(sent.length);
            RdmaSocketChannel client = (RdmaSocketChannel) RdmaLoops.clientBootstrap(group).handler(collector)
                    .option(RdmaChannelOption.RDMA_WIRE_MODE, mode)
                    .connect(new InetSocketAddress("127.0.0.1", port)).syncUninterruptibly().channel();
            assertEquals(mode == RdmaWireMode.SEND ? RdmaWireMode.SEND : RdmaWireMode.WRITE_WITH_IMM, client.wireMode());
            client.writeAndFlush(Unpooled.wrappedBuffer(sent)).syncUninterruptibly();
            assertArrayEquals(sent, collector.done.get(30, TimeUnit.SECONDS));

            peer.process().destroyForcibly();
            assertTrue(peer.process().waitFor(30, TimeUnit.SECONDS));
            assertTrue(client.closeFuture().awaitUninterruptibly(30, TimeUnit.SECONDS),
                    "the channel of a killed peer closes");
            assertFalse(client.isActive());
            ChannelFuture late = client.writeAndFlush(Unpooled.wrappedBuffer(sent)).awaitUninterruptibly();
            assertFalse(late.isSuccess(), "a write after the peer died fails");
        } finally {
            RdmaLoops.shutdown(group);
        }
    }
}
