package io.github.verbs4j.netty;

import io.github.verbs4j.cm.CmEvent;
import io.github.verbs4j.cm.CmEventType;
import io.github.verbs4j.cm.CmId;
import io.github.verbs4j.cm.ConnectParameters;
import io.github.verbs4j.cm.EventChannel;
import io.github.verbs4j.cm.PortSpace;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The accepting side's setup on its loop, when the peer never completes the connection. */
@Timeout(120)
class RdmaAcceptSetupTest {

    @RegisterExtension
    static final RdmaLoops loops = new RdmaLoops();

    private static final Duration T = Duration.ofSeconds(10);

    @Test
    void anAcceptedChannelWhoseConnectionIsNeverEstablishedClosesWithoutGoingActive() throws Exception {
        CompletableFuture<Channel> child = new CompletableFuture<>();
        AtomicBoolean wentActive = new AtomicBoolean();
        Channel server = loops.serverBootstrap()
                .childOption(RdmaChannelOption.RDMA_WIRE_MODE, RdmaWireMode.SEND)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        child.complete(ch);
                        ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                            @Override
                            public void channelActive(ChannelHandlerContext ctx) {
                                wentActive.set(true);
                            }
                        });
                    }
                }).bind(RdmaLoops.LOCAL_ANY_PORT).syncUninterruptibly().channel();
        try (EventChannel events = EventChannel.create(); CmId client = events.createId(PortSpace.TCP)) {
            client.resolveAddress(null, (InetSocketAddress) server.localAddress(), T);
            client.resolveRoute(T);
            // an id without a queue pair gets the accept as CONNECT_RESPONSE and must complete the
            // connection itself (rdma_establish), which this one never does
            client.startConnect(ConnectParameters.defaults().withPrivateData(
                    new WireHandshake(8, 4096, RdmaWireMode.SEND, 0, 0, 0, 0, 0).encode()));
            CmEvent response = events.next(T);
            assertNotNull(response, "the server did not answer the connection request");
            assertEquals(CmEventType.CONNECT_RESPONSE, response.type(), response::toString);
            RdmaSocketChannel accepted = (RdmaSocketChannel) child.get(10, TimeUnit.SECONDS);
            assertTrue(accepted.eventLoop().submit(accepted::settingUp).get(5, TimeUnit.SECONDS),
                    "the accept waits for ESTABLISHED");
            client.close();
            // an error event for the id, or the accept's own limit of 10 s, ends the setup
            assertTrue(accepted.closeFuture().await(30, TimeUnit.SECONDS), "the accepted channel closes");
            assertFalse(wentActive.get(), "a connection never established never went active");
            assertFalse(accepted.eventLoop().submit(accepted::settingUp).get(5, TimeUnit.SECONDS));
        } finally {
            server.close().syncUninterruptibly();
        }
    }
}
