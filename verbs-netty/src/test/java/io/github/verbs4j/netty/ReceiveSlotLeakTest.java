package io.github.verbs4j.netty;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.util.ResourceLeakDetector;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.slf4j.LoggerFactory;

import java.lang.ref.WeakReference;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A receive slot wrapped as a buffer ({@link RdmaChannelOption#RDMA_ZERO_COPY_READ}) that the
 * application drops without releasing is reported by Netty's {@code ResourceLeakDetector}, with
 * Netty's usual LEAK error, once it is collected; the slots that were released are not.
 */
@Timeout(120)
public class ReceiveSlotLeakTest {

    @RegisterExtension
    static final RdmaLoops loops = new RdmaLoops();

    /** Drops the first buffer it reads (neither released nor passed on), releases the others; answers each with one byte. */
    static final class DropsTheFirst extends ChannelInboundHandlerAdapter {
        final AtomicInteger reads = new AtomicInteger();
        volatile WeakReference<Object> dropped;
        volatile Channel channel;

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            channel = ctx.channel();
            ctx.fireChannelActive();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            if (reads.getAndIncrement() == 0) {
                dropped = new WeakReference<>(msg); // the leak: the only strong reference goes here
            } else {
                ((ByteBuf) msg).release();
            }
            ctx.writeAndFlush(Unpooled.wrappedBuffer(new byte[] {1}));
        }
    }

    @Test
    void aSlotBufferDroppedUnreleasedIsReportedAsNettysLeak() throws Exception {
        ResourceLeakDetector.Level before = ResourceLeakDetector.getLevel();
        List<String> reports = new CopyOnWriteArrayList<>();
        // Netty logs its leaks through SLF4J (logback in these tests): the LEAK line itself is captured
        Logger nettyLeakLog = (Logger) LoggerFactory.getLogger(ResourceLeakDetector.class);
        ListAppender<ILoggingEvent> logged = new ListAppender<>();
        logged.start();
        nettyLeakLog.addAppender(logged);
        ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.PARANOID);
        ReceiveSlotBuf.LEAKS.setLeakListener((type, records) -> reports.add(type + "\n" + records));
        DropsTheFirst server = new DropsTheFirst();
        Channel listener = loops.serverBootstrap()
                .childOption(RdmaChannelOption.RDMA_ZERO_COPY_READ, true)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(server);
                    }
                }).bind(RdmaLoops.LOCAL_ANY_PORT).syncUninterruptibly().channel();
        Channel client = null;
        try {
            AtomicInteger answers = new AtomicInteger();
            client = loops.clientBootstrap().handler(new ChannelInboundHandlerAdapter() {
                @Override
                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                    answers.addAndGet(((ByteBuf) msg).readableBytes());
                    ((ByteBuf) msg).release();
                }
            }).option(ChannelOption.AUTO_READ, true).connect(listener.localAddress()).syncUninterruptibly().channel();
            // each message makes a new slot buffer on the server, and Netty's detector looks for
            // collected, unreleased ones whenever it tracks a new one
            int sent = 0;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (reports.isEmpty() && System.nanoTime() - deadline < 0) {
                client.writeAndFlush(Unpooled.wrappedBuffer(new byte[] {(byte) sent, 2, 3})).sync();
                int want = ++sent;
                waitFor(() -> answers.get() >= want, 10);
                System.gc();
                Thread.sleep(10);
            }
            assertEquals(1, reports.size(), "one leak reported, for the one buffer dropped: " + reports);
            String report = reports.get(0);
            assertTrue(report.startsWith("ReceiveSlotBuf\n"), report);
            // PARANOID records where the buffer was made: the read path that wrapped the slot
            assertTrue(report.contains("Created at:") && report.contains("RdmaSocketChannel.deliver"), report);
            assertNull(server.dropped.get(), "the dropped buffer was collected");
            List<String> leakLines = logged.list.stream().map(ILoggingEvent::getFormattedMessage)
                    .filter(m -> m.startsWith("LEAK: ")).toList();
            assertEquals(1, leakLines.size(), "Netty logged one LEAK error: " + leakLines);
            assertTrue(leakLines.get(0).startsWith("LEAK: ReceiveSlotBuf.release() was not called before it's garbage-collected."),
                    leakLines.get(0));
            // the leaked slot never came back; every released one did
            Channel child = server.channel;
            assertEquals(1, (int) child.eventLoop().submit(() -> ((RdmaSocketChannel) child).slotsHeld()).get(10, TimeUnit.SECONDS));
            // released buffers are never reported, however often the detector looks
            for (int i = 0; i < 20; i++) {
                client.writeAndFlush(Unpooled.wrappedBuffer(new byte[] {4})).sync();
                int want = sent + i + 1;
                waitFor(() -> answers.get() >= want, 10);
                System.gc();
            }
            assertEquals(1, reports.size(), "no report for released buffers: " + reports);
        } finally {
            ReceiveSlotBuf.LEAKS.setLeakListener(null);
            ResourceLeakDetector.setLevel(before);
            nettyLeakLog.detachAppender(logged);
            if (client != null) {
                client.close().syncUninterruptibly();
            }
            listener.close().syncUninterruptibly();
        }
    }

    private static void waitFor(java.util.function.BooleanSupplier condition, int seconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("not within " + seconds + " s");
            }
            Thread.sleep(1);
        }
    }
}
