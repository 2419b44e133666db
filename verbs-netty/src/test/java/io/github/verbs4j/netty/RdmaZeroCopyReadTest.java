package io.github.verbs4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.AdaptiveRecvByteBufAllocator;
import io.netty.util.IllegalReferenceCountException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link RdmaChannelOption#RDMA_ZERO_COPY_READ}: messages delivered as their receive slots, each
 * slot reposted only when its buffer is released, at most half the ring held, the ring alive
 * until the last buffer is released.
 */
@Timeout(120)
public class RdmaZeroCopyReadTest {

    @RegisterExtension
    static final RdmaLoops loops = new RdmaLoops();

    /** Hands every buffer it reads to the test, unreleased, in order. */
    static final class Keeper extends ChannelInboundHandlerAdapter {
        final BlockingQueue<ByteBuf> buffers = new LinkedBlockingQueue<>();
        final BlockingQueue<String> events = new LinkedBlockingQueue<>();
        volatile ChannelHandlerContext ctx;

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            this.ctx = ctx;
            ctx.fireChannelActive();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            buffers.add((ByteBuf) msg);
            events.add("read");
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            events.add("complete");
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            events.add("exception " + cause);
        }
    }

    private static Channel server(ChannelHandler child, int ringSlots, boolean autoRead) {
        return loops.serverBootstrap()
                .childOption(RdmaChannelOption.RDMA_ZERO_COPY_READ, true)
                .childOption(RdmaChannelOption.RDMA_RING_SLOTS, ringSlots)
                .childOption(RdmaChannelOption.RDMA_SLOT_SIZE, 4096)
                .childOption(ChannelOption.AUTO_READ, autoRead)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(child);
                    }
                }).bind(RdmaLoops.LOCAL_ANY_PORT).syncUninterruptibly().channel();
    }

    private static Channel client(Channel server, ChannelHandler handler) {
        return loops.clientBootstrap().handler(handler)
                .option(RdmaChannelOption.RDMA_ZERO_COPY_READ, true)
                .connect(server.localAddress()).syncUninterruptibly().channel();
    }

    private static int slotsHeld(Channel ch) throws Exception {
        return ch.eventLoop().submit(() -> ((RdmaSocketChannel) ch).slotsHeld()).get(10, TimeUnit.SECONDS);
    }

    private static byte[] message(int i, int size) {
        byte[] b = new byte[size];
        new Random(i).nextBytes(b);
        return b;
    }

    /** Sizes that vary from message to message, up to the 4 KiB slot's payload. */
    private static int sizeOf(int i) {
        return 1 + (i * 397) % 4092;
    }

    private static byte[] bytes(ByteBuf buf) {
        byte[] b = new byte[buf.readableBytes()];
        buf.getBytes(buf.readerIndex(), b);
        return b;
    }

    private static ByteBuf next(Keeper keeper) throws InterruptedException {
        ByteBuf buf = keeper.buffers.poll(10, TimeUnit.SECONDS);
        assertNotNull(buf, "a message within 10 s");
        return buf;
    }

    @Test
    void optionIsOffByDefaultAndReportedBack() {
        RdmaSocketChannel ch = new RdmaSocketChannel();
        assertFalse(ch.config().getOption(RdmaChannelOption.RDMA_ZERO_COPY_READ));
        assertTrue(ch.config().setOption(RdmaChannelOption.RDMA_ZERO_COPY_READ, true));
        assertTrue(ch.config().getOption(RdmaChannelOption.RDMA_ZERO_COPY_READ));
        assertEquals(Boolean.TRUE, ch.config().getOptions().get(RdmaChannelOption.RDMA_ZERO_COPY_READ));
    }

    /** An echo both ways with zero copy on both sides: every byte back in order, every message a slot. */
    @Test
    void echoIsByteExactAcrossManyMessagesAndEveryReadIsASlot() throws Exception {
        int[] zeroCopy = new int[1];
        int[] copied = new int[1];
        Channel server = server(new RdmaEchoTest.Echo(), 8, true);
        int size = 3000;
        int messages = 1000;
        byte[] sent = new byte[size * messages];
        new Random(7).nextBytes(sent);
        RdmaEchoTest.Collector collector = new RdmaEchoTest.Collector(sent.length);
        ChannelInboundHandlerAdapter counting = new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                if (msg instanceof ReceiveSlotBuf) {
                    zeroCopy[0]++;
                } else {
                    copied[0]++;
                }
                ctx.fireChannelRead(msg);
            }
        };
        Channel client = loops.clientBootstrap()
                .option(RdmaChannelOption.RDMA_ZERO_COPY_READ, true)
                .handler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(counting, collector);
                    }
                }).connect(server.localAddress()).syncUninterruptibly().channel();
        try {
            for (int i = 0; i < messages; i++) {
                client.write(Unpooled.wrappedBuffer(sent, i * size, size));
                if (i % 16 == 15) {
                    client.flush();
                }
            }
            client.flush();
            assertArrayEquals(sent, collector.done.get(60, TimeUnit.SECONDS));
            int reads = client.eventLoop().submit(() -> zeroCopy[0] + copied[0]).get();
            assertEquals(messages, reads, "one read per message: each slot is delivered whole");
            assertEquals(0, client.eventLoop().submit(() -> copied[0]).get(),
                    "a reader that releases at once never holds half the ring: nothing is copied");
            assertEquals(0, slotsHeld(client), "every slot came back");
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    /**
     * A reader that holds everything it reads: the first half of the ring stays with it (those
     * slots are not reposted: their bytes survive all that arrives after them), the rest comes as
     * copies, so the peer never runs out of credits; once released late, from another thread,
     * the slots go back and reads are zero-copy again.
     */
    @Test
    void heldSlotsAreNotRepostedBeforeReleaseAndAHolderCannotStallThePeer() throws Exception {
        int ringSlots = 8;
        Keeper keeper = new Keeper();
        Channel server = server(keeper, ringSlots, true);
        Channel client = client(server, new ChannelInboundHandlerAdapter());
        try {
            int messages = 200; // far more than the ring: without the copies the peer would stall
            for (int i = 0; i < messages - 1; i++) {
                client.write(Unpooled.wrappedBuffer(message(i, sizeOf(i))));
            }
            client.writeAndFlush(Unpooled.wrappedBuffer(message(messages - 1, sizeOf(messages - 1))))
                    .syncUninterruptibly();
            // a copy may hand a message on over several reads (a buffer of the allocator's guess
            // smaller than it, as a stream socket's bytes are), a slot never: read by bytes
            java.io.ByteArrayOutputStream sent = new java.io.ByteArrayOutputStream();
            for (int i = 0; i < messages; i++) {
                sent.writeBytes(message(i, sizeOf(i)));
            }
            List<ByteBuf> held = new ArrayList<>();
            for (long got = 0; got < sent.size(); ) {
                ByteBuf buf = next(keeper);
                held.add(buf);
                got += buf.readableBytes();
            }
            Channel child = keeper.ctx.channel();
            assertEquals(ringSlots / 2, slotsHeld(child));
            int slots = 0;
            java.io.ByteArrayOutputStream received = new java.io.ByteArrayOutputStream();
            for (int j = 0; j < held.size(); j++) {
                ByteBuf buf = held.get(j);
                // read after all later messages arrived: a slot reposted early would have been overwritten
                byte[] bytes = bytes(buf);
                if (buf instanceof ReceiveSlotBuf) {
                    assertTrue(j < ringSlots / 2, "the held slots are the first messages, not read " + j);
                    assertArrayEquals(message(j, sizeOf(j)), bytes, "message " + j + ", whole in its slot");
                    slots++;
                }
                received.writeBytes(bytes);
            }
            assertArrayEquals(sent.toByteArray(), received.toByteArray(), "every byte of the 200 messages, in order");
            assertEquals(ringSlots / 2, slots);
            for (ByteBuf buf : held) {
                assertTrue(buf.release()); // on the test's thread: the slot goes back through the loop
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (slotsHeld(child) != 0 && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertEquals(0, slotsHeld(child));
            for (int i = 0; i < 3 * ringSlots; i++) {
                // slots that copies were taken from before, now wrapped, with messages longer than those
                int size = 4092 - i;
                client.writeAndFlush(Unpooled.wrappedBuffer(message(1000 + i, size))).syncUninterruptibly();
                ByteBuf buf = next(keeper);
                assertInstanceOf(ReceiveSlotBuf.class, buf, "zero copy again once the slots are back");
                assertArrayEquals(message(1000 + i, size), bytes(buf));
                buf.release();
            }
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    /**
     * Netty's read loop with zero copy: with autoRead off a read() hands over one message (as
     * Netty's handles stop a loop that autoRead does not continue); with autoRead on, at most
     * maxMessagesPerRead per loop, each loop ended by channelReadComplete.
     */
    @Test
    void readLoopHonoursAutoReadReadAndMaxMessagesPerRead() throws Exception {
        Keeper keeper = new Keeper();
        Channel server = server(keeper, 16, false);
        Channel client = client(server, new ChannelInboundHandlerAdapter());
        try {
            for (int i = 0; i < 4; i++) {
                client.write(Unpooled.wrappedBuffer(message(i, 100)));
            }
            client.writeAndFlush(Unpooled.wrappedBuffer(message(4, 100))).syncUninterruptibly();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (keeper.ctx == null && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            Channel child = keeper.ctx.channel();
            child.config().setRecvByteBufAllocator(new AdaptiveRecvByteBufAllocator().maxMessagesPerRead(2));
            Thread.sleep(100); // the messages arrive; nothing is delivered without read()
            assertNull(keeper.buffers.poll());
            child.read();
            // the read loop that read() asked for runs on a later pass of the loop: autoRead is
            // turned on only once it ended, or that loop would already see autoRead on
            List<String> seen = new ArrayList<>();
            for (String expected : List.of("read", "complete")) {
                String e = keeper.events.poll(10, TimeUnit.SECONDS);
                seen.add(e);
                assertEquals(expected, e, "events " + seen);
            }
            child.eventLoop().submit(() -> child.config().setAutoRead(true)).get(10, TimeUnit.SECONDS);
            for (String expected : List.of("read", "read", "complete", "read", "read", "complete")) {
                String e = keeper.events.poll(10, TimeUnit.SECONDS);
                seen.add(e);
                assertEquals(expected, e, "events " + seen);
            }
            for (int i = 0; i < 5; i++) {
                ByteBuf buf = next(keeper);
                assertInstanceOf(ReceiveSlotBuf.class, buf);
                assertArrayEquals(message(i, 100), bytes(buf));
                buf.release();
            }
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    /**
     * A released buffer refuses access until its slot carries the next message, which comes in
     * the same object, byte-exact: one buffer object per slot, recycled, not one per message
     * (TransportAllocationTest counts the allocation). A reference kept past its release then
     * reaches that next message, the hazard of recycled buffers that ReceiveSlotBuf documents,
     * as with Netty's pooled ones.
     */
    @Test
    void aSlotsBufferIsRecycledAndRefusesAccessUntilItsSlotCarriesTheNextMessage() throws Exception {
        int ringSlots = 4;
        Keeper keeper = new Keeper();
        Channel server = server(keeper, ringSlots, true);
        Channel client = client(server, new ChannelInboundHandlerAdapter());
        try {
            client.writeAndFlush(Unpooled.wrappedBuffer(message(0, 1000))).syncUninterruptibly();
            ReceiveSlotBuf first = assertInstanceOf(ReceiveSlotBuf.class, next(keeper));
            assertArrayEquals(message(0, 1000), bytes(first));
            int firstSlot = first.slot();
            assertTrue(first.release());
            assertEquals(0, first.refCnt());
            assertThrows(IllegalReferenceCountException.class, () -> first.getByte(0));
            assertThrows(IllegalReferenceCountException.class, () -> bytes(first));
            assertThrows(IllegalReferenceCountException.class, first::release);
            java.util.Map<Integer, ReceiveSlotBuf> perSlot = new java.util.HashMap<>();
            perSlot.put(firstSlot, first);
            int inItsSlot = 0;
            for (int i = 1; i <= 4 * ringSlots; i++) {
                int length = 1000 + i;
                client.writeAndFlush(Unpooled.wrappedBuffer(message(i, length))).syncUninterruptibly();
                ReceiveSlotBuf buf = assertInstanceOf(ReceiveSlotBuf.class, next(keeper));
                ReceiveSlotBuf before = perSlot.putIfAbsent(buf.slot(), buf);
                if (before != null) {
                    assertSame(before, buf, "message " + i + " comes in its slot's buffer object");
                }
                assertNotSame(buf, perSlot.get((buf.slot() + 1) % ringSlots), "each slot has a buffer of its own");
                assertEquals(1, buf.refCnt());
                assertEquals(length, buf.capacity(), "message " + i + ": the capacity is the message's length");
                assertEquals(length, buf.maxCapacity());
                assertArrayEquals(message(i, length), bytes(buf), "message " + i);
                assertThrows(IndexOutOfBoundsException.class, () -> buf.getByte(length), "bounded by this message");
                if (buf.slot() == firstSlot) {
                    inItsSlot++;
                }
                assertTrue(buf.release());
                assertThrows(IllegalReferenceCountException.class, () -> buf.getByte(0));
            }
            assertTrue(inItsSlot > 0, "the released slot carried later messages");
            assertTrue(perSlot.size() <= ringSlots, "at most one buffer object per slot: " + perSlot.size());
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    /**
     * A slot's buffer has a memory address (as the registered allocator's buffers do), the first
     * byte of its message in the ring: the transport echoes or copies it by that address, not
     * through an object made per write; after release the address is refused like every access.
     */
    @Test
    void aSlotsBufferHasTheAddressOfItsMessageInTheRing() throws Exception {
        Keeper keeper = new Keeper();
        Channel server = server(keeper, 4, true);
        Channel client = client(server, new ChannelInboundHandlerAdapter());
        try {
            for (int i = 0; i < 6; i++) {
                int length = 700 + 97 * i;
                client.writeAndFlush(Unpooled.wrappedBuffer(message(i, length))).syncUninterruptibly();
                ReceiveSlotBuf buf = assertInstanceOf(ReceiveSlotBuf.class, next(keeper));
                assertTrue(buf.hasMemoryAddress(), "message " + i);
                byte[] atAddress = java.lang.foreign.MemorySegment.ofAddress(buf.memoryAddress()).reinterpret(length)
                        .toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
                assertArrayEquals(message(i, length), atAddress, "message " + i + " read at the buffer's address");
                assertTrue(buf.release());
                assertThrows(IllegalReferenceCountException.class, buf::memoryAddress, "released: no address");
            }
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    /**
     * Buffers released inside the read loop (in {@code channelRead}, as a decoder or a sink
     * does) return their credits once, when the loop ends, as a copying read does: 16 messages
     * read in one loop of a 32-slot ring (a credit-only message once 8 are owed) are one
     * credit-only message of 16 credits, not one per 8 released.
     */
    @Test
    void buffersReleasedInTheReadLoopReturnTheirCreditsOnceAtItsEnd() throws Exception {
        int messages = 16;
        BlockingQueue<byte[]> read = new LinkedBlockingQueue<>();
        ChannelInboundHandlerAdapter releaser = new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                ByteBuf buf = assertInstanceOf(ReceiveSlotBuf.class, msg);
                read.add(bytes(buf));
                buf.release();
            }
        };
        Keeper keeper = new Keeper();
        Channel server = server(keeper, 32, false);
        Channel client = client(server, new ChannelInboundHandlerAdapter());
        try {
            waitFor(() -> keeper.ctx != null);
            Channel child = keeper.ctx.channel();
            RdmaSocketChannel ch = (RdmaSocketChannel) child;
            child.eventLoop().submit(() -> {
                child.pipeline().replace(keeper, "releaser", releaser);
            }).get(10, TimeUnit.SECONDS);
            for (int i = 0; i < messages; i++) {
                client.write(Unpooled.wrappedBuffer(message(i, 1000)));
            }
            client.flush();
            // all queued unread (autoRead off); autoRead on then starts one read loop, which
            // takes them all (maxMessagesPerRead is 16; with autoRead off a loop reads one)
            waitFor(() -> onLoop(child, () -> (long) ch.unreadMessages()) >= messages);
            long creditMessagesBefore = onLoop(child, () -> ch.creditOnlyMessages);
            long loopsBefore = onLoop(child, () -> ch.readLoops);
            child.config().setAutoRead(true);
            for (int i = 0; i < messages; i++) {
                byte[] got = read.poll(10, TimeUnit.SECONDS);
                assertNotNull(got, "message " + i + " within 10 s");
                assertArrayEquals(message(i, 1000), got, "message " + i);
            }
            assertEquals(loopsBefore + 1, onLoop(child, () -> ch.readLoops), "one read loop took the 16 messages");
            assertEquals(creditMessagesBefore + 1, onLoop(child, () -> ch.creditOnlyMessages),
                    "the 16 credits went back in one credit-only message");
            assertEquals(0, slotsHeld(child));
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    private static long onLoop(Channel ch, java.util.concurrent.Callable<Long> count) throws Exception {
        return ch.eventLoop().submit(count).get(10, TimeUnit.SECONDS);
    }

    private static void waitFor(java.util.concurrent.Callable<Boolean> condition) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!condition.call()) {
            assertTrue(System.nanoTime() < deadline, "the condition within 10 s");
            Thread.sleep(5);
        }
    }

    /**
     * A buffer kept past its channel's close still reads its bytes (the ring outlives the
     * channel), refuses access once released, and its release frees the ring.
     */
    @Test
    void aBufferHeldPastCloseStaysReadableAndItsReleaseFreesTheRing() throws Exception {
        Keeper keeper = new Keeper();
        Channel server = server(keeper, 8, true);
        Channel client = client(server, new ChannelInboundHandlerAdapter());
        byte[] first = message(1, 2000);
        byte[] second = message(2, 2000);
        client.write(Unpooled.wrappedBuffer(first));
        client.writeAndFlush(Unpooled.wrappedBuffer(second)).syncUninterruptibly();
        ReceiveSlotBuf a = assertInstanceOf(ReceiveSlotBuf.class, next(keeper));
        ReceiveSlotBuf b = assertInstanceOf(ReceiveSlotBuf.class, next(keeper));
        Channel child = keeper.ctx.channel();
        client.close().syncUninterruptibly();
        child.close().syncUninterruptibly();
        server.close().syncUninterruptibly();
        assertFalse(child.isOpen());
        // the close lingers at most 500 ms before it releases the connection
        Thread.sleep(700);
        assertArrayEquals(first, bytes(a));
        assertTrue(a.release());
        assertThrows(IllegalReferenceCountException.class, () -> a.getByte(0));
        assertArrayEquals(second, bytes(b));
        assertFalse(b.ringFreed(), "the ring stays while a buffer over it is held");
        assertTrue(b.release());
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!b.ringFreed() && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertTrue(b.ringFreed(), "the last release frees the ring");
        assertThrows(IllegalReferenceCountException.class, () -> b.getByte(0));
    }

    /** A buffer still held when the loop ends: released afterwards, on another thread, without the loop. */
    @Test
    void aBufferReleasedAfterItsLoopEndedFreesTheRing() throws Exception {
        EventLoopGroup own = RdmaLoops.newGroup(1);
        Keeper keeper = new Keeper();
        Channel server = RdmaLoops.serverBootstrap(own)
                .childOption(RdmaChannelOption.RDMA_ZERO_COPY_READ, true)
                .childHandler(keeper).bind(RdmaLoops.LOCAL_ANY_PORT).syncUninterruptibly().channel();
        Channel client = loops.clientBootstrap()
                .handler(new ChannelInboundHandlerAdapter())
                .connect(server.localAddress()).syncUninterruptibly().channel();
        byte[] sent = message(3, 500);
        client.writeAndFlush(Unpooled.wrappedBuffer(sent)).syncUninterruptibly();
        ReceiveSlotBuf held = assertInstanceOf(ReceiveSlotBuf.class, next(keeper));
        io.github.verbs4j.ProtectionDomain pd = held.ring().region.protectionDomain();
        client.close().syncUninterruptibly();
        RdmaLoops.shutdown(own);
        // the ended loop's protection domain waits for the ring's region, which the buffer holds
        assertFalse(pd.isClosed());
        assertArrayEquals(sent, bytes(held));
        assertTrue(held.release());
        assertTrue(held.ringFreed());
        // and closes with it: nothing of the ended loop is left open
        assertTrue(pd.isClosed());
    }
}
