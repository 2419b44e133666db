package io.github.verbs4j.netty;

import io.github.verbs4j.TransportType;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.net.ConnectException;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Which wire a connection uses: WRITE_WITH_IMM by default on softrdma (a RoCE device), SEND when
 * both sides ask for it, a connection of two different modes refused, WRITE_WITH_IMM refused on
 * iWARP; the mode is read from the channels and from their completions, so that a default that
 * silently stayed SEND fails here.
 */
@Timeout(120)
class RdmaWireModeTest {

    @RegisterExtension
    static final RdmaLoops loops = new RdmaLoops();

    /** What an echo over one connection saw on each side. */
    record Seen(RdmaWireMode client, RdmaWireMode server, long clientImmediates, long serverImmediates) {
    }

    private static Seen echo(RdmaWireMode clientMode, RdmaWireMode serverMode) throws Exception {
        CompletableFuture<RdmaSocketChannel> accepted = new CompletableFuture<>();
        ServerBootstrap sb = loops.serverBootstrap().childHandler(new ChannelInitializer<Channel>() {
            @Override
            protected void initChannel(Channel ch) {
                accepted.complete((RdmaSocketChannel) ch);
                ch.pipeline().addLast(new RdmaEchoTest.Echo());
            }
        });
        if (serverMode != null) {
            sb.childOption(RdmaChannelOption.RDMA_WIRE_MODE, serverMode);
        }
        Channel server = sb.bind(RdmaLoops.LOCAL_ANY_PORT).syncUninterruptibly().channel();
        try {
            // more bytes than one slot, more messages than the ring: credits and slots go round
            byte[] sent = new byte[40 * 3000];
            new Random(24).nextBytes(sent);
            RdmaEchoTest.Collector collector = new RdmaEchoTest.Collector(sent.length);
            Bootstrap cb = loops.clientBootstrap().handler(collector)
                    .option(RdmaChannelOption.RDMA_RING_SLOTS, 8).option(RdmaChannelOption.RDMA_SLOT_SIZE, 1024);
            if (clientMode != null) {
                cb.option(RdmaChannelOption.RDMA_WIRE_MODE, clientMode);
            }
            RdmaSocketChannel client = (RdmaSocketChannel) cb.connect(server.localAddress()).syncUninterruptibly()
                    .channel();
            try {
                for (int i = 0; i < 40; i++) {
                    client.writeAndFlush(Unpooled.wrappedBuffer(sent, i * 3000, 3000));
                }
                assertArrayEquals(sent, collector.done.get(60, TimeUnit.SECONDS));
                RdmaSocketChannel child = accepted.get(10, TimeUnit.SECONDS);
                long clientImm = client.eventLoop().submit(() -> client.receivedWithImmediate).get();
                long serverImm = child.eventLoop().submit(() -> child.receivedWithImmediate).get();
                return new Seen(client.wireMode(), child.wireMode(), clientImm, serverImm);
            } finally {
                client.close().syncUninterruptibly();
            }
        } finally {
            server.close().syncUninterruptibly();
        }
    }

    @Test
    void theDefaultOnARoceDeviceIsWriteWithImmediate() throws Exception {
        Seen seen = echo(null, null);
        assertEquals(RdmaWireMode.WRITE_WITH_IMM, seen.client());
        assertEquals(RdmaWireMode.WRITE_WITH_IMM, seen.server());
        // every message came as a WRITE with immediate: the server's 40 of 3,000 B into its slots of
        // 64 KiB, the echo into the client's slots of 1 KiB, three each
        assertTrue(seen.serverImmediates() >= 40, "server took " + seen.serverImmediates() + " immediates");
        assertTrue(seen.clientImmediates() >= 120, "client took " + seen.clientImmediates() + " immediates");
    }

    @Test
    void writeWithImmediateAskedOnBothSides() throws Exception {
        Seen seen = echo(RdmaWireMode.WRITE_WITH_IMM, RdmaWireMode.WRITE_WITH_IMM);
        assertEquals(RdmaWireMode.WRITE_WITH_IMM, seen.client());
        assertEquals(RdmaWireMode.WRITE_WITH_IMM, seen.server());
        assertTrue(seen.serverImmediates() >= 40 && seen.clientImmediates() >= 120, seen.toString());
    }

    @Test
    void sendAskedOnBothSidesUsesSend() throws Exception {
        Seen seen = echo(RdmaWireMode.SEND, RdmaWireMode.SEND);
        assertEquals(RdmaWireMode.SEND, seen.client());
        assertEquals(RdmaWireMode.SEND, seen.server());
        assertEquals(0, seen.clientImmediates());
        assertEquals(0, seen.serverImmediates());
    }

    /**
     * Releases zero-copy reads at once, except every 12th, which it keeps until 10 more arrived
     * and only then copies out: slots come free out of ring order, and a sender that went round
     * the ring in order would write into the kept slot meanwhile. It must write only into the
     * slots the receiver handed back through its slot queue.
     */
    static final class OutOfOrderReleaser extends ChannelInboundHandlerAdapter {
        final byte[][] got;
        final ArrayDeque<ByteBuf> kept = new ArrayDeque<>();
        final ArrayDeque<Integer> keptIndex = new ArrayDeque<>();
        final CompletableFuture<byte[][]> done = new CompletableFuture<>();
        int count;
        int slotBuffers;

        OutOfOrderReleaser(int messages) {
            got = new byte[messages][];
        }

        private void copyAndRelease(int index, ByteBuf buf) {
            got[index] = ByteBufUtil.getBytes(buf);
            buf.release();
        }

        final CompletableFuture<Channel> ctxChannel = new CompletableFuture<>();

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            ctxChannel.complete(ctx.channel());
            ctx.fireChannelActive();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            slotBuffers += buf instanceof ReceiveSlotBuf ? 1 : 0;
            int index = count++;
            if (index % 12 == 0) {
                kept.addLast(buf);
                keptIndex.addLast(index);
            } else {
                copyAndRelease(index, buf);
            }
            while (!kept.isEmpty() && (keptIndex.peekFirst() + 10 <= index || count == got.length)) {
                copyAndRelease(keptIndex.pollFirst(), kept.pollFirst());
            }
            if (count == got.length) {
                done.complete(got);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.completeExceptionally(cause);
        }
    }

    @Test
    void zeroCopySlotsReleasedOutOfOrderAreReusedOnlyOnceReleased() throws Exception {
        int messages = 300;
        int size = 200;
        OutOfOrderReleaser releaser = new OutOfOrderReleaser(messages);
        Channel server = loops.serverBootstrap().childOption(RdmaChannelOption.RDMA_ZERO_COPY_READ, true)
                .childOption(RdmaChannelOption.RDMA_RING_SLOTS, 8).childOption(RdmaChannelOption.RDMA_SLOT_SIZE, 256)
                .childHandler(releaser).bind(RdmaLoops.LOCAL_ANY_PORT).syncUninterruptibly().channel();
        try {
            RdmaSocketChannel client = (RdmaSocketChannel) loops.clientBootstrap()
                    .handler(new ChannelInboundHandlerAdapter()).connect(server.localAddress())
                    .syncUninterruptibly().channel();
            try {
                byte[] sent = new byte[messages * size];
                new Random(7).nextBytes(sent);
                for (int i = 0; i < messages; i++) {
                    client.writeAndFlush(Unpooled.wrappedBuffer(sent, i * size, size));
                }
                byte[][] got = releaser.done.get(60, TimeUnit.SECONDS);
                for (int i = 0; i < messages; i++) {
                    assertArrayEquals(Arrays.copyOfRange(sent, i * size, (i + 1) * size), got[i], "message " + i);
                }
                assertEquals(RdmaWireMode.WRITE_WITH_IMM, client.wireMode());
                // (written before done completed, so seen here)
                assertEquals(messages, releaser.slotBuffers, "every read was its slot (at most 1 of 8 kept at once)");
                // slots freed out of ring order change the client's queue: those entries were written
                RdmaSocketChannel child = (RdmaSocketChannel) releaser.ctxChannel.get(10, TimeUnit.SECONDS);
                long writes = child.eventLoop().submit(() -> child.slotQueueWritesPosted).get();
                assertTrue(writes > 0, "the server returned out-of-order slots without writing the client's queue");
            } finally {
                client.close().syncUninterruptibly();
            }
        } finally {
            server.close().syncUninterruptibly();
        }
    }

    /**
     * Sends a message, waits for its echo whole, checks it byte for byte and sends the next: one
     * message in flight, as a request and its response.
     */
    static final class PingPong extends ChannelInboundHandlerAdapter {
        final int rounds;
        final int size;
        final Random random = new Random(11);
        final CompletableFuture<Integer> done = new CompletableFuture<>();
        byte[] sent;
        ByteBuf got;
        int round;

        PingPong(int rounds, int size) {
            this.rounds = rounds;
            this.size = size;
        }

        private void send(ChannelHandlerContext ctx) {
            sent = new byte[size];
            random.nextBytes(sent);
            ctx.writeAndFlush(Unpooled.wrappedBuffer(sent));
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            got = ctx.alloc().buffer(size);
            send(ctx);
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            got.writeBytes(buf);
            buf.release();
            if (got.readableBytes() < size) {
                return;
            }
            byte[] echoed = ByteBufUtil.getBytes(got);
            got.clear();
            if (!Arrays.equals(sent, echoed)) {
                done.completeExceptionally(new AssertionError("round " + round + ": the echo differs"));
                return;
            }
            if (++round == rounds) {
                got.release();
                done.complete(round);
            } else {
                send(ctx);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.completeExceptionally(cause);
        }
    }

    @Test
    void aPingPongReturnsItsCreditsWithoutWritingTheSlotQueues() throws Exception {
        // rings of 8 slots: 200 round trips go round the accepting side's queue (8 entries) 25
        // times; each message returns the one slot its receiver freed, in ring order, which the
        // peer's queue holds at that position already
        CompletableFuture<RdmaSocketChannel> accepted = new CompletableFuture<>();
        Channel server = loops.serverBootstrap().childOption(RdmaChannelOption.RDMA_RING_SLOTS, 8)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        accepted.complete((RdmaSocketChannel) ch);
                        ch.pipeline().addLast(new RdmaEchoTest.Echo());
                    }
                }).bind(RdmaLoops.LOCAL_ANY_PORT).syncUninterruptibly().channel();
        try {
            PingPong pingPong = new PingPong(200, 100);
            RdmaSocketChannel client = (RdmaSocketChannel) loops.clientBootstrap().handler(pingPong)
                    .option(RdmaChannelOption.RDMA_RING_SLOTS, 8).connect(server.localAddress())
                    .syncUninterruptibly().channel();
            try {
                assertEquals(200, pingPong.done.get(60, TimeUnit.SECONDS));
                RdmaSocketChannel child = accepted.get(10, TimeUnit.SECONDS);
                assertEquals(RdmaWireMode.WRITE_WITH_IMM, client.wireMode());
                assertEquals(200, (long) client.eventLoop().submit(() -> client.receivedWithImmediate).get());
                assertEquals(0, (long) client.eventLoop().submit(() -> client.slotQueueWritesPosted).get(),
                        "the client wrote entries the server's queue held already");
                assertEquals(0, (long) child.eventLoop().submit(() -> child.slotQueueWritesPosted).get(),
                        "the server wrote entries the client's queue held already");
            } finally {
                client.close().syncUninterruptibly();
            }
        } finally {
            server.close().syncUninterruptibly();
        }
    }

    @Test
    void aSlotQueueIsUsedModuloAMultipleOfTheRing() {
        assertEquals(65504, WireHandshake.usedQueueEntries(65535, 32));
        assertEquals(65534, WireHandshake.usedQueueEntries(65535, 7));
        assertEquals(65535, WireHandshake.usedQueueEntries(65535, 65535));
        assertEquals(8, WireHandshake.usedQueueEntries(8, 8));
        // a ring larger than the queue: the queue whole (credits are bounded by it)
        assertEquals(4, WireHandshake.usedQueueEntries(4, 8));
    }

    @Test
    void theOptionReadsBackAndDefaultsToAuto() {
        RdmaSocketChannel ch = new RdmaSocketChannel();
        assertEquals(RdmaWireMode.AUTO, ch.config().getOption(RdmaChannelOption.RDMA_WIRE_MODE));
        assertTrue(ch.config().setOption(RdmaChannelOption.RDMA_WIRE_MODE, RdmaWireMode.SEND));
        assertEquals(RdmaWireMode.SEND, ch.config().getOptions().get(RdmaChannelOption.RDMA_WIRE_MODE));
        assertThrows(NullPointerException.class, () -> ch.config().setOption(RdmaChannelOption.RDMA_WIRE_MODE, null));
    }

    private static void assertRefused(RdmaWireMode clientMode, RdmaWireMode serverMode, String peerMode,
                                      String ownMode) {
        Channel server = loops.serverBootstrap().childOption(RdmaChannelOption.RDMA_WIRE_MODE, serverMode)
                .childHandler(new RdmaEchoTest.Echo()).bind(RdmaLoops.LOCAL_ANY_PORT).syncUninterruptibly().channel();
        try {
            ChannelFuture f = loops.clientBootstrap().handler(new RdmaEchoTest.Echo())
                    .option(RdmaChannelOption.RDMA_WIRE_MODE, clientMode)
                    .connect(server.localAddress()).awaitUninterruptibly();
            assertFalse(f.isSuccess());
            ConnectException e = assertInstanceOf(ConnectException.class, f.cause());
            assertTrue(e.getMessage().contains("Connection refused")
                    && e.getMessage().contains("the peer's wire mode is " + peerMode + ", this side's " + ownMode),
                    e.getMessage());
            assertFalse(f.channel().isOpen());
        } finally {
            server.close().syncUninterruptibly();
        }
    }

    @Test
    void aSendClientIsRefusedByAWriteWithImmediateServer() {
        assertRefused(RdmaWireMode.SEND, RdmaWireMode.AUTO, "WRITE_WITH_IMM", "SEND");
    }

    @Test
    void aWriteWithImmediateClientIsRefusedByASendServer() {
        assertRefused(RdmaWireMode.AUTO, RdmaWireMode.SEND, "SEND", "WRITE_WITH_IMM");
    }

    @Test
    void theModeFollowsTheTransport() {
        assertEquals(RdmaWireMode.WRITE_WITH_IMM, WireHandshake.resolve(RdmaWireMode.AUTO, TransportType.IB, "rxe0"));
        assertEquals(RdmaWireMode.SEND, WireHandshake.resolve(RdmaWireMode.AUTO, TransportType.IWARP, "siw0"));
        assertEquals(RdmaWireMode.SEND, WireHandshake.resolve(RdmaWireMode.SEND, TransportType.IB, "rxe0"));
        assertEquals(RdmaWireMode.SEND, WireHandshake.resolve(RdmaWireMode.SEND, TransportType.IWARP, "siw0"));
        UnsupportedOperationException e = assertThrows(UnsupportedOperationException.class,
                () -> WireHandshake.resolve(RdmaWireMode.WRITE_WITH_IMM, TransportType.IWARP, "siw0"));
        assertTrue(e.getMessage().contains("siw0") && e.getMessage().contains("iWARP has no immediate data on RDMA WRITE"),
                e.getMessage());
    }

    @Test
    void theHandshakeReadsBackAndRefusesWhatIsNone() {
        WireHandshake h = new WireHandshake(32, 65536, RdmaWireMode.WRITE_WITH_IMM, 32, 0x7f0012340000L, 0x1234,
                0x7f0056780000L, 0x5678);
        byte[] wire = h.encode();
        assertEquals(WireHandshake.LENGTH, wire.length);
        assertTrue(wire.length <= 56, "within rdma_cm's private data of an RC connect");
        assertEquals(h, WireHandshake.decode(wire));
        // rdma_cm pads private data with zeros: a longer buffer reads the same
        assertEquals(h, WireHandshake.decode(ByteBuffer.allocate(56).put(wire).array()));
        // WRITE_WITH_IMM of the format before (code 2, its slot queues used whole) is refused,
        // not misread: the two would disagree on where an entry of the slot queue goes
        byte[] before = ByteBuffer.wrap(wire.clone()).putInt(8, 2).array();
        assertNull(WireHandshake.modeOf(before));
        assertThrows(IllegalStateException.class, () -> WireHandshake.decode(before));
        // the SEND wire's header before this format (slots, slot size), padded: no mode
        byte[] old = ByteBuffer.allocate(56).putInt(32).putInt(65536).array();
        assertNull(WireHandshake.modeOf(old));
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> WireHandshake.decode(old));
        assertTrue(e.getMessage().contains("not an RDMA Netty channel"), e.getMessage());
        byte[] bad = new WireHandshake(2, 65536, RdmaWireMode.SEND, 0, 0, 0, 0, 0).encode();
        assertThrows(IllegalStateException.class, () -> WireHandshake.decode(bad));
        byte[] noRing = new WireHandshake(32, 65536, RdmaWireMode.WRITE_WITH_IMM, 32, 0, 0, 0, 0).encode();
        assertThrows(IllegalStateException.class, () -> WireHandshake.decode(noRing));
    }
}
