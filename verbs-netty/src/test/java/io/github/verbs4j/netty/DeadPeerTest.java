package io.github.verbs4j.netty;

import io.github.verbs4j.testsupport.PeerJvm;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** A peer process killed mid-connection: the channel goes inactive and later writes fail, within bounded time. */
@Timeout(120)
class DeadPeerTest {

    @Test
    void aKilledServerProcessClosesTheClientChannel() throws Exception {
        EventLoopGroup group = RdmaLoops.newGroup(1);
        try (PeerJvm peer = PeerJvm.start(PeerJvm.QUICK_START, EchoServerMain.class)) {
            int port = Integer.parseInt(peer.expect("port ").replaceAll("\\D", ""));
            byte[] sent = {1, 2, 3, 4, 5, 6, 7, 8};
            RdmaEchoTest.Collector collector = new RdmaEchoTest.Collector(sent.length);
            Channel client = RdmaLoops.clientBootstrap(group).handler(collector)
                    .connect(new InetSocketAddress("127.0.0.1", port)).syncUninterruptibly().channel();
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
