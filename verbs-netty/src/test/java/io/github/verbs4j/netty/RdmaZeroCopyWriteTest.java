package io.github.verbs4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Writes from {@link RdmaByteBufAllocator}: posted in place (no copy into the send ring), each
 * buffer released once its send completed; other buffers copied, in the same order.
 */
@Timeout(120)
public class RdmaZeroCopyWriteTest {

    @RegisterExtension
    static final RdmaLoops loops = new RdmaLoops();

    /**
     * Where the tests' written buffers come from: an allocator no channel here uses by default.
     * A released buffer object is the next one its size class hands out, and the channels'
     * default allocator (DEFAULT) serves their reads, so a written buffer checked for its release
     * could meanwhile hold a read of the echo server.
     */
    private static final RdmaByteBufAllocator OWN = new RdmaByteBufAllocator(4 << 20);

    /** RDMA_INLINE_SIZE's default: payloads up to it are copied into the request, not sent in place. */
    private static final int INLINE = 64;

    private static <T> T onLoop(Channel ch, java.util.concurrent.Callable<T> task) throws Exception {
        return ch.eventLoop().submit(task).get(10, TimeUnit.SECONDS);
    }

    private static void awaitReleased(Channel ch, List<ByteBuf> written) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (onLoop(ch, () -> ((RdmaSocketChannel) ch).sentInPlaceHeld()) > 0 && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertEquals(0, onLoop(ch, () -> ((RdmaSocketChannel) ch).sentInPlaceHeld()), "every send in place completed");
        for (int i = 0; i < written.size(); i++) {
            assertEquals(0, written.get(i).refCnt(), "buffer " + i + " released after its send completed");
        }
    }

    @Test
    void allocatorBuffersAreDirectAndReleaseIntoTheirChunk() {
        RdmaByteBufAllocator alloc = new RdmaByteBufAllocator(4096);
        ByteBuf a = alloc.directBuffer(1000);
        ByteBuf big = alloc.directBuffer(10_000); // larger than a chunk: a chunk of its own
        assertTrue(a.isDirect());
        assertSame(alloc, a.alloc());
        assertEquals(0, a.writerIndex());
        a.writeBytes(new byte[1000]);
        big.writeBytes(new byte[10_000]);
        assertTrue(a.release());
        assertTrue(big.release());
        assertThrows(io.netty.util.IllegalReferenceCountException.class, () -> a.getByte(0));
        assertThrows(IllegalArgumentException.class, () -> new RdmaByteBufAllocator(100));
    }

    /** The registered allocator is the channels' default, accepted channels' too; ALLOCATOR sets another. */
    @Test
    void theRegisteredAllocatorIsTheDefault() throws Exception {
        assertSame(RdmaByteBufAllocator.DEFAULT, new RdmaSocketChannel().config().getAllocator());
        CompletableFuture<ByteBufAllocator> accepted = new CompletableFuture<>();
        Channel server = RdmaLoops.serverBootstrap(loops.group())
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        accepted.complete(ch.alloc()); // the first accepted channel's
                    }
                }).bind(RdmaLoops.LOCAL_ANY_PORT).syncUninterruptibly().channel();
        Channel client = loops.clientBootstrap().handler(new ChannelInboundHandlerAdapter())
                .connect(server.localAddress()).syncUninterruptibly().channel();
        Channel other = loops.clientBootstrap().handler(new ChannelInboundHandlerAdapter())
                .option(ChannelOption.ALLOCATOR, PooledByteBufAllocator.DEFAULT)
                .connect(server.localAddress()).syncUninterruptibly().channel();
        try {
            assertSame(RdmaByteBufAllocator.DEFAULT, client.alloc());
            assertSame(RdmaByteBufAllocator.DEFAULT, accepted.get(10, TimeUnit.SECONDS));
            assertSame(PooledByteBufAllocator.DEFAULT, other.alloc(), "the opt-out");
        } finally {
            client.close().syncUninterruptibly();
            other.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    /**
     * The channel's allocator is a registered one: what it writes from it (sizes past the
     * slot too, split over several sends) arrives byte-exact, went without copy, and every
     * buffer is released once its sends completed.
     */
    @Test
    void writesFromTheAllocatorAreSentInPlaceAndReleasedAfterCompletion() throws Exception {
        Channel server = RdmaEchoTest.echoServer(loops.group());
        int[] sizes = {100, 4096, 65532, 65536, 200_000}; // above the inline size (below: inlineSizedWritesAreCopied...)
        int rounds = 20;
        ByteArrayOutputStream expected = new ByteArrayOutputStream();
        Random random = new Random(11);
        List<byte[]> payloads = new ArrayList<>();
        for (int r = 0; r < rounds; r++) {
            for (int size : sizes) {
                byte[] b = new byte[size];
                random.nextBytes(b);
                payloads.add(b);
                expected.writeBytes(b);
            }
        }
        RdmaEchoTest.Collector collector = new RdmaEchoTest.Collector(expected.size());
        Channel client = loops.clientBootstrap()
                .option(ChannelOption.ALLOCATOR, OWN)
                .handler(collector).connect(server.localAddress()).syncUninterruptibly().channel();
        try {
            List<ByteBuf> written = new ArrayList<>();
            for (int i = 0; i < payloads.size(); i++) {
                ByteBuf buf = client.alloc().directBuffer(payloads.get(i).length);
                assertInstanceOf(RdmaByteBufAllocator.class, buf.alloc());
                buf.writeBytes(payloads.get(i));
                written.add(buf);
                client.write(buf);
                if (i % 4 == 3) {
                    client.flush();
                }
            }
            client.flush();
            assertArrayEquals(expected.toByteArray(), collector.done.get(60, TimeUnit.SECONDS));
            long inPlace = onLoop(client, () -> ((RdmaSocketChannel) client).sentWithoutCopy);
            assertTrue(inPlace >= payloads.size(), "every write went in place: " + inPlace + " sends");
            awaitReleased(client, written);
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    /**
     * One registered buffer, filled once and written again and again as {@code retainedDuplicate()}s
     * (what the benchmark's {@code stream-65536B-resent} row does, as perftest posts its one
     * buffer): every write goes in place from the same memory, the bytes arrive exact each time,
     * and once the sends completed every duplicate's reference is given back, the writer's own
     * left.
     */
    @Test
    void oneBufferWrittenAgainAsDuplicatesGoesInPlaceEachTime() throws Exception {
        Channel server = RdmaEchoTest.echoServer(loops.group());
        int size = 65536, writes = 40;
        byte[] payload = new byte[size];
        new Random(13).nextBytes(payload);
        ByteArrayOutputStream expected = new ByteArrayOutputStream();
        for (int i = 0; i < writes; i++) {
            expected.writeBytes(payload);
        }
        RdmaEchoTest.Collector collector = new RdmaEchoTest.Collector(expected.size());
        Channel client = loops.clientBootstrap()
                .option(ChannelOption.ALLOCATOR, OWN)
                .handler(collector).connect(server.localAddress()).syncUninterruptibly().channel();
        ByteBuf once = client.alloc().directBuffer(size).writeBytes(payload);
        try {
            long before = onLoop(client, () -> ((RdmaSocketChannel) client).sentWithoutCopy);
            for (int i = 0; i < writes; i++) {
                client.write(once.retainedDuplicate());
                if (i % 4 == 3) {
                    client.flush();
                }
            }
            client.flush();
            assertArrayEquals(expected.toByteArray(), collector.done.get(60, TimeUnit.SECONDS));
            long inPlace = onLoop(client, () -> ((RdmaSocketChannel) client).sentWithoutCopy) - before;
            assertTrue(inPlace >= writes, "every write went in place: " + inPlace + " sends for " + writes);
            awaitReleased(client, List.of());
            assertEquals(1, once.refCnt(), "every duplicate's reference given back once its send completed");
            assertEquals(size, once.readableBytes(), "the writes moved only their duplicates' indexes");
        } finally {
            once.release();
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    /**
     * A write posted in place is done for Netty (its promise succeeded) while its buffer is still
     * held: checked inside one task of the loop, so that no completion can be taken in between;
     * the buffer is released once the completion came.
     */
    @Test
    void aBufferSentInPlaceIsHeldUntilItsSendCompleted() throws Exception {
        Channel server = RdmaEchoTest.echoServer(loops.group());
        byte[] payload = new byte[512];
        new Random(13).nextBytes(payload);
        RdmaEchoTest.Collector collector = new RdmaEchoTest.Collector(payload.length);
        Channel client = loops.clientBootstrap()
                .handler(collector).connect(server.localAddress()).syncUninterruptibly().channel();
        try {
            ByteBuf buf = OWN.directBuffer(payload.length).writeBytes(payload);
            int[] seen = onLoop(client, () -> {
                ChannelFuture f = client.writeAndFlush(buf);
                return new int[] {f.isSuccess() ? 1 : 0, buf.refCnt(), ((RdmaSocketChannel) client).sentInPlaceHeld()};
            });
            assertArrayEquals(new int[] {1, 1, 1}, seen, "posted, out of the outbound buffer, still held by its send");
            assertArrayEquals(payload, collector.done.get(30, TimeUnit.SECONDS));
            awaitReleased(client, List.of(buf));
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    /** Registered and unregistered buffers alternating in one flush: in order, byte-exact, each released. */
    @Test
    void mixedRegisteredAndCopiedWritesInOneFlushKeepTheirOrder() throws Exception {
        Channel server = RdmaEchoTest.echoServer(loops.group());
        int messages = 300;
        ByteArrayOutputStream expected = new ByteArrayOutputStream();
        Random random = new Random(12);
        List<ByteBuf> buffers = new ArrayList<>();
        for (int i = 0; i < messages; i++) {
            byte[] b = new byte[INLINE + 1 + random.nextInt(3000)]; // not inline: the registered ones go in place
            random.nextBytes(b);
            expected.writeBytes(b);
            ByteBuf buf = switch (i % 3) {
                case 0 -> OWN.directBuffer(b.length).writeBytes(b);
                case 1 -> Unpooled.wrappedBuffer(b);
                default -> Unpooled.directBuffer(b.length).writeBytes(b);
            };
            buffers.add(buf);
        }
        RdmaEchoTest.Collector collector = new RdmaEchoTest.Collector(expected.size());
        Channel client = loops.clientBootstrap()
                .handler(collector).connect(server.localAddress()).syncUninterruptibly().channel();
        try {
            long before = onLoop(client, () -> ((RdmaSocketChannel) client).sentWithoutCopy);
            ChannelFuture last = null;
            for (ByteBuf buf : buffers) {
                last = client.write(buf);
            }
            client.flush();
            last.syncUninterruptibly();
            assertArrayEquals(expected.toByteArray(), collector.done.get(60, TimeUnit.SECONDS));
            long inPlace = onLoop(client, () -> ((RdmaSocketChannel) client).sentWithoutCopy) - before;
            assertEquals(messages / 3, inPlace, "the registered third went in place, the rest was copied");
            awaitReleased(client, buffers);
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    /**
     * A registered buffer whose payload fits inline ({@code RDMA_INLINE_SIZE}, 64 B by default)
     * is copied into the request, as any buffer that small: byte-exact, no send in place, and
     * the buffer released as soon as its write is done.
     */
    @Test
    void inlineSizedWritesAreCopiedNotSentInPlace() throws Exception {
        Channel server = RdmaEchoTest.echoServer(loops.group());
        int messages = 200;
        ByteArrayOutputStream expected = new ByteArrayOutputStream();
        List<ByteBuf> buffers = new ArrayList<>();
        for (int i = 0; i < messages; i++) {
            byte[] b = new byte[1 + i % 60]; // at most 60: inline on both wires (the SEND wire's 4-byte header too)
            new Random(i).nextBytes(b);
            expected.writeBytes(b);
            buffers.add(OWN.directBuffer(b.length).writeBytes(b));
        }
        RdmaEchoTest.Collector collector = new RdmaEchoTest.Collector(expected.size());
        Channel client = loops.clientBootstrap()
                .handler(collector).connect(server.localAddress()).syncUninterruptibly().channel();
        try {
            assertTrue(onLoop(client, () -> ((RdmaSocketChannel) client).maxInline()) >= INLINE,
                    "the device grants the default inline size");
            long before = onLoop(client, () -> ((RdmaSocketChannel) client).sentWithoutCopy);
            ChannelFuture last = null;
            for (ByteBuf buf : buffers) {
                last = client.write(buf);
            }
            client.flush();
            last.syncUninterruptibly();
            for (int i = 0; i < messages; i++) {
                assertEquals(0, buffers.get(i).refCnt(), "buffer " + i + " released once written: it was copied");
            }
            assertArrayEquals(expected.toByteArray(), collector.done.get(60, TimeUnit.SECONDS));
            assertEquals(0, onLoop(client, () -> ((RdmaSocketChannel) client).sentWithoutCopy) - before);
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    /** A registered buffer whose channel closes before the send completed: released with the connection. */
    @Test
    void writesInFlightAreReleasedWhenTheChannelCloses() throws Exception {
        Channel server = RdmaEchoTest.echoServer(loops.group());
        RdmaEchoTest.Collector collector = new RdmaEchoTest.Collector(1 << 20);
        Channel client = loops.clientBootstrap()
                .handler(collector).connect(server.localAddress()).syncUninterruptibly().channel();
        List<ByteBuf> written = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            ByteBuf buf = OWN.directBuffer(8192).writeZero(8192);
            written.add(buf);
            client.write(buf);
        }
        client.flush();
        client.close().syncUninterruptibly();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (written.stream().anyMatch(b -> b.refCnt() > 0) && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        for (ByteBuf b : written) {
            assertEquals(0, b.refCnt());
        }
        server.close().syncUninterruptibly();
    }
}
