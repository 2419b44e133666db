package io.github.verbs4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoop;

import java.io.ByteArrayOutputStream;
import java.util.Arrays;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Rounds of echoes on one client connection, for tests that check a connection still carries
 * bytes after something happened to its loop (moved, suspended and resumed): each round writes a
 * patterned message and checks it came back byte-exact after what the rounds before got back.
 * The server side is {@link RdmaEchoTest#echoServer}; {@link RdmaEchoTest.Collector} waits for one
 * known length instead.
 */
final class EchoRounds {

    private EchoRounds() {
    }

    /** Keeps what the client reads, in order, across rounds. */
    static final class Collector extends ChannelInboundHandlerAdapter {
        final ByteArrayOutputStream bytes = new ByteArrayOutputStream();

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            byte[] b = new byte[buf.readableBytes()];
            buf.readBytes(b);
            buf.release();
            synchronized (bytes) {
                bytes.write(b, 0, b.length);
                bytes.notifyAll();
            }
        }

        /** What came so far, once there are {@code n} bytes or 20 s passed. */
        byte[] await(int n) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            synchronized (bytes) {
                while (bytes.size() < n && System.nanoTime() < deadline) {
                    bytes.wait(100);
                }
                return bytes.toByteArray();
            }
        }
    }

    /** {@code length} bytes of a pattern that differs by {@code seed}. */
    static byte[] message(int seed, int length) {
        byte[] b = new byte[length];
        for (int i = 0; i < length; i++) {
            b[i] = (byte) (seed * 31 + i * 7);
        }
        return b;
    }

    /** Writes {@code sent} on {@code client} and checks that {@code collector} got it back, byte-exact. */
    static void echoes(Channel client, Collector collector, byte[] sent) throws InterruptedException {
        int before;
        synchronized (collector.bytes) {
            before = collector.bytes.size();
        }
        client.writeAndFlush(Unpooled.wrappedBuffer(sent)).syncUninterruptibly();
        byte[] all = collector.await(before + sent.length);
        assertEquals(before + sent.length, all.length, "echoed bytes");
        assertArrayEquals(sent, Arrays.copyOfRange(all, before, all.length));
    }

    /** {@code task}'s result, run on {@code loop} (10 s at most). */
    static <T> T onLoop(EventLoop loop, Callable<T> task) throws Exception {
        return loop.submit(task).get(10, TimeUnit.SECONDS);
    }
}
