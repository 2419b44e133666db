package io.github.verbs4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.net.InetSocketAddress;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Echo over the transport on softrdma: every byte back, in order, for message sizes from 64 B to 1 MiB. */
@Timeout(120)
public class RdmaEchoTest {

    @RegisterExtension
    static final RdmaLoops loops = new RdmaLoops();

    /** Writes back what it reads. */
    static final class Echo extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }
    }

    public static Channel echoServer(EventLoopGroup group) {
        return RdmaLoops.serverBootstrap(group)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(new Echo());
                    }
                }).bind(RdmaLoops.LOCAL_ANY_PORT).syncUninterruptibly().channel();
    }

    /** Collects what the client reads until {@code expected} bytes came. */
    public static final class Collector extends ChannelInboundHandlerAdapter {
        final byte[] received;
        int count;
        final CompletableFuture<byte[]> done = new CompletableFuture<>();

        Collector(int expected) {
            received = new byte[expected];
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            try {
                int n = buf.readableBytes();
                if (count + n > received.length) {
                    done.completeExceptionally(new AssertionError("more bytes than sent: " + (count + n)));
                    return;
                }
                buf.readBytes(received, count, n);
                count += n;
                if (count == received.length) {
                    done.complete(received);
                }
            } finally {
                buf.release();
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.completeExceptionally(cause);
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            if (!done.isDone()) {
                done.completeExceptionally(new AssertionError("closed after " + count + " of " + received.length + " bytes"));
            }
        }
    }

    private static void echo(int size, int messages) throws Exception {
        Channel server = echoServer(loops.group());
        try {
            byte[] sent = new byte[size * messages];
            new Random(size).nextBytes(sent);
            Collector collector = new Collector(sent.length);
            Channel client = loops.clientBootstrap().handler(collector)
                    .connect(server.localAddress()).syncUninterruptibly().channel();
            try {
                for (int i = 0; i < messages; i++) {
                    client.write(Unpooled.wrappedBuffer(sent, i * size, size));
                    if (i % 8 == 7) {
                        client.flush();
                    }
                }
                client.flush();
                assertArrayEquals(sent, collector.done.get(60, TimeUnit.SECONDS));
            } finally {
                client.close().syncUninterruptibly();
            }
        } finally {
            server.close().syncUninterruptibly();
        }
    }

    @Test
    void echoes64Bytes() throws Exception {
        echo(64, 2000);
    }

    @Test
    void echoes4KiB() throws Exception {
        echo(4096, 500);
    }

    @Test
    void echoes64KiBAcrossSlotBoundaries() throws Exception {
        // a slot carries 64 KiB less the header: each message spans two sends
        echo(65536, 100);
    }

    @Test
    void echoes1MiB() throws Exception {
        echo(1 << 20, 8);
    }

    @Test
    void serverChannelIsBoundToAPort() {
        Channel server = echoServer(loops.group());
        try {
            assertTrue(((InetSocketAddress) server.localAddress()).getPort() > 0, "bound port " + server.localAddress());
        } finally {
            server.close().syncUninterruptibly();
        }
    }
}
