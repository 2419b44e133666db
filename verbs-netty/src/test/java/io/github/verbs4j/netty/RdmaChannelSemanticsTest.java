package io.github.verbs4j.netty;

import io.github.verbs4j.cm.CmId;
import io.github.verbs4j.cm.EventChannel;
import io.github.verbs4j.cm.PortSpace;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.ConnectTimeoutException;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.DuplexChannel;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.nio.channels.ClosedChannelException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

/** Netty's channel semantics on the transport: half-close, connect failures, timeouts and cancellation, close with writes pending, reading on request, an idle loop. */
@Timeout(120)
class RdmaChannelSemanticsTest {

    @RegisterExtension
    static final RdmaLoops loops = new RdmaLoops();

    private static ByteBuf text(String s) {
        return Unpooled.copiedBuffer(s, StandardCharsets.UTF_8);
    }

    /** Records what a channel reads (as strings) and its user events. */
    static final class Recorder extends ChannelInboundHandlerAdapter {
        final BlockingQueue<Object> seen = new LinkedBlockingQueue<>();
        final CountDownLatch inactive = new CountDownLatch(1);
        volatile ChannelHandlerContext ctx;

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            this.ctx = ctx;
            ctx.fireChannelActive();
        }

        @Override
        public void handlerAdded(ChannelHandlerContext ctx) {
            this.ctx = ctx;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            seen.add(buf.toString(StandardCharsets.UTF_8));
            buf.release();
        }

        @Override
        public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
            seen.add(evt);
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            inactive.countDown();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            seen.add(cause);
        }
    }

    private static Channel server(Recorder childRecorder, boolean halfClosure, boolean autoRead, int ringSlots, int slotSize) {
        return loops.serverBootstrap()
                .childOption(ChannelOption.ALLOW_HALF_CLOSURE, halfClosure)
                .childOption(ChannelOption.AUTO_READ, autoRead)
                .childOption(RdmaChannelOption.RDMA_RING_SLOTS, ringSlots)
                .childOption(RdmaChannelOption.RDMA_SLOT_SIZE, slotSize)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(childRecorder);
                    }
                }).bind(RdmaLoops.LOCAL_ANY_PORT).syncUninterruptibly().channel();
    }

    /** The text {@code recorder} saw until {@code length} characters arrived; fails when a read took over 10 s. */
    private static String receive(Recorder recorder, int length) throws InterruptedException {
        StringBuilder received = new StringBuilder();
        while (received.length() < length) {
            Object seen = recorder.seen.poll(10, TimeUnit.SECONDS);
            assertInstanceOf(String.class, seen, "received " + received.length() + " of " + length);
            received.append((String) seen);
        }
        return received.toString();
    }

    private static Channel client(Channel server, Object handler) {
        return loops.clientBootstrap()
                .handler((io.netty.channel.ChannelHandler) handler)
                .connect(server.localAddress()).syncUninterruptibly().channel();
    }

    @Test
    void shutdownOutputGivesThePeerAnInputShutdownEventAndTheReverseDirectionKeepsWorking() throws Exception {
        Recorder serverSide = new Recorder();
        Channel server = server(serverSide, true, true, 32, 4096);
        Recorder clientSide = new Recorder();
        Channel client = client(server, clientSide);
        try {
            client.writeAndFlush(text("hello")).syncUninterruptibly();
            ((DuplexChannel) client).shutdownOutput().syncUninterruptibly();
            assertTrue(((DuplexChannel) client).isOutputShutdown());
            assertEquals("hello", serverSide.seen.poll(10, TimeUnit.SECONDS));
            assertEquals(ChannelInputShutdownEvent.INSTANCE, serverSide.seen.poll(10, TimeUnit.SECONDS));
            DuplexChannel child = (DuplexChannel) serverSide.ctx.channel();
            assertTrue(child.isInputShutdown());
            assertTrue(child.isActive(), "a half-closed channel stays open when ALLOW_HALF_CLOSURE is set");
            child.writeAndFlush(text("bye")).syncUninterruptibly();
            // the client saw its own ChannelOutputShutdownEvent first
            assertEquals(io.netty.channel.socket.ChannelOutputShutdownEvent.INSTANCE, clientSide.seen.poll(10, TimeUnit.SECONDS));
            assertEquals("bye", clientSide.seen.poll(10, TimeUnit.SECONDS));
            child.close().syncUninterruptibly();
            assertTrue(clientSide.inactive.await(10, TimeUnit.SECONDS), "the client sees the close");
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    @Test
    void withoutHalfClosureThePeersShutdownOutputClosesTheChannel() throws Exception {
        Recorder serverSide = new Recorder();
        Channel server = server(serverSide, false, true, 32, 4096);
        Channel client = client(server, new Recorder());
        try {
            client.writeAndFlush(text("x")).syncUninterruptibly();
            ((DuplexChannel) client).shutdownOutput().syncUninterruptibly();
            assertEquals("x", serverSide.seen.poll(10, TimeUnit.SECONDS));
            assertTrue(serverSide.inactive.await(10, TimeUnit.SECONDS));
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    @Test
    void connectToAPortWithoutListenerIsRefused() throws Exception {
        Channel server = server(new Recorder(), false, true, 32, 4096);
        InetSocketAddress address = (InetSocketAddress) server.localAddress();
        server.close().syncUninterruptibly();
        ChannelFuture f = loops.clientBootstrap()
                .handler(new Recorder()).connect(address).awaitUninterruptibly();
        assertFalse(f.isSuccess());
        assertInstanceOf(ConnectException.class, f.cause(), () -> String.valueOf(f.cause()));
        // the CM event that ended the setup, and its status (softrdma's REJ: no listener there)
        assertTrue(f.cause().getMessage().contains("Connection refused: " + address + " (REJECTED (status "
                + io.github.verbs4j.cm.CmEvent.REJECT_INVALID_SERVICE_ID + "))"), f.cause().getMessage());
        assertFalse(f.channel().isOpen(), "a failed connect closes the channel");
        assertSetupEndsAtOnce(f.channel());
    }

    /** The channel's setup already ended (it ended on the loop, with the connect's failure). */
    private static void assertSetupEndsAtOnce(Channel channel) throws Exception {
        RdmaSocketChannel ch = (RdmaSocketChannel) channel;
        assertFalse(ch.eventLoop().submit(ch::settingUp).get(5, TimeUnit.SECONDS));
    }

    @Test
    void manyConnectsAtOnceOnOneLoopEachSetUpByItsEventsAndEchoed() throws Exception {
        // one loop for all the clients and one for the server and all its children: the setups
        // run side by side on each, every CM event advancing its own channel's setup
        int clients = 12;
        EventLoopGroup clientLoop = RdmaLoops.newGroup(1);
        EventLoopGroup serverLoop = RdmaLoops.newGroup(1);
        try {
            Channel server = RdmaEchoTest.echoServer(serverLoop);
            try {
                List<ChannelFuture> connects = new ArrayList<>();
                List<RdmaEchoTest.Collector> collectors = new ArrayList<>();
                for (int i = 0; i < clients; i++) {
                    RdmaEchoTest.Collector c = new RdmaEchoTest.Collector(3);
                    collectors.add(c);
                    connects.add(RdmaLoops.clientBootstrap(clientLoop).handler(c).connect(server.localAddress()));
                }
                for (int i = 0; i < clients; i++) {
                    Channel ch = connects.get(i).syncUninterruptibly().channel();
                    assertTrue(ch.isActive());
                    assertFalse(ch.eventLoop().submit(((RdmaSocketChannel) ch)::settingUp).get(5, TimeUnit.SECONDS));
                    ch.writeAndFlush(Unpooled.wrappedBuffer(new byte[] {(byte) i, (byte) (i * 7), (byte) -i}));
                }
                for (int i = 0; i < clients; i++) {
                    assertArrayEquals(new byte[] {(byte) i, (byte) (i * 7), (byte) -i},
                            collectors.get(i).done.get(30, TimeUnit.SECONDS), "client " + i);
                }
                for (ChannelFuture f : connects) {
                    f.channel().close().syncUninterruptibly();
                }
            } finally {
                server.close().syncUninterruptibly();
            }
        } finally {
            RdmaLoops.shutdown(clientLoop);
            RdmaLoops.shutdown(serverLoop);
        }
    }

    @Test
    void connectThatNobodyAnswersTimesOutWithConnectTimeoutException() {
        // a listener that never takes its connection requests: the connect waits for an answer
        try (EventChannel events = EventChannel.create(); CmId listener = events.createId(PortSpace.TCP)) {
            listener.bind(RdmaLoops.LOCAL_ANY_PORT);
            listener.listen(4);
            long start = System.nanoTime();
            ChannelFuture f = loops.clientBootstrap()
                    .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, 300)
                    .handler(new Recorder()).connect(listener.localAddress()).awaitUninterruptibly();
            assertFalse(f.isSuccess());
            assertInstanceOf(ConnectTimeoutException.class, f.cause(), () -> String.valueOf(f.cause()));
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(30));
            assertFalse(f.channel().isOpen());
        }
    }

    /**
     * A connect to an address of another host, where no softrdma device answers: it stays pending,
     * as with the kernel's rdma_cm (docs/softrdma-cm.md). Aborts the test on a host without a
     * route there (the connect then fails at once with ADDR_ERROR).
     */
    private static ChannelFuture pendingConnect(int connectTimeoutMillis) throws InterruptedException {
        ChannelFuture f = loops.clientBootstrap()
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, connectTimeoutMillis)
                .handler(new Recorder()).connect(new InetSocketAddress("198.51.100.254", 65535));
        if (f.await(300)) {
            Throwable cause = f.cause();
            assumeFalse(cause != null && String.valueOf(cause.getMessage()).contains("ADDR_ERROR"),
                    "this host has no route to 198.51.100.254: " + cause);
            fail("the connect did not stay pending: " + (cause == null ? "connected" : cause));
        }
        return f;
    }

    /** Waits until the channel's connection setup ended on its loop; fails after {@code millis}. */
    private static void assertSetupEnds(Channel channel, long millis) throws Exception {
        RdmaSocketChannel ch = (RdmaSocketChannel) channel;
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        while (ch.eventLoop().submit(ch::settingUp).get(5, TimeUnit.SECONDS)) {
            assertTrue(System.nanoTime() < deadline, "the connection setup still runs after " + millis + " ms");
            Thread.sleep(10);
        }
    }

    @Test
    void cancellingAPendingConnectClosesTheChannelAndEndsTheSetup() throws Exception {
        ChannelFuture f = pendingConnect(20_000);
        assertTrue(f.cancel(true), "a pending connect can be cancelled");
        assertTrue(f.channel().closeFuture().await(500), "the cancelled connect's channel closes");
        assertTrue(f.isCancelled());
        // the close destroyed the id on the loop, which cancels the pending rdma_cm connect
        assertSetupEnds(f.channel(), 2000);
    }

    @Test
    void closingAChannelWhoseConnectIsPendingFailsTheConnectAndEndsTheSetup() throws Exception {
        ChannelFuture f = pendingConnect(20_000);
        f.channel().close().syncUninterruptibly();
        assertTrue(f.await(500));
        assertInstanceOf(ClosedChannelException.class, f.cause(), () -> String.valueOf(f.cause()));
        assertSetupEnds(f.channel(), 2000);
    }

    @Test
    void aPendingConnectTimesOutWithConnectTimeoutExceptionAfterConnectTimeoutMillis() throws Exception {
        long start = System.nanoTime();
        ChannelFuture f = pendingConnect(1000);
        assertTrue(f.await(10, TimeUnit.SECONDS));
        long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertInstanceOf(ConnectTimeoutException.class, f.cause(), () -> String.valueOf(f.cause()));
        assertTrue(tookMillis >= 900, "timed out after " + tookMillis + " ms, before CONNECT_TIMEOUT_MILLIS");
        assertFalse(f.channel().isOpen());
        assertSetupEnds(f.channel(), 2000);
    }

    @Test
    void closeFailsTheWritesThatWaitForCreditsWithClosedChannelException() throws Exception {
        // the server reads nothing, so the client runs out of credits after a handful of messages
        Recorder serverSide = new Recorder();
        Channel server = server(serverSide, false, false, 4, 256);
        Channel client = client(server, new Recorder());
        try {
            List<ChannelFuture> writes = new ArrayList<>();
            for (int i = 0; i < 50; i++) {
                writes.add(client.write(Unpooled.wrappedBuffer(new byte[200])));
            }
            client.flush();
            ChannelFuture last = writes.get(writes.size() - 1);
            assertNull(last.awaitUninterruptibly(300, TimeUnit.MILLISECONDS) ? last.cause() : null,
                    "the last write must still be pending");
            assertFalse(last.isDone(), "the last write waits for credits");
            assertFalse(client.isWritable() && writes.size() * 200 > client.config().getWriteBufferHighWaterMark(),
                    "writability follows the water marks");
            client.close().syncUninterruptibly();
            assertTrue(last.awaitUninterruptibly(10, TimeUnit.SECONDS));
            assertInstanceOf(ClosedChannelException.class, last.cause(), () -> String.valueOf(last.cause()));
            assertTrue(writes.get(0).isSuccess(), "the first write went out before the credits ran out");
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    @Test
    void oneFlushPostsTheMessagesItCanSendAsOneChainAndTheirPromisesCompleteAfterward() throws Exception {
        Recorder serverSide = new Recorder();
        Channel server = server(serverSide, false, true, 128, 256);
        Channel client = loops.clientBootstrap()
                .option(RdmaChannelOption.RDMA_SEND_DEPTH, 128)
                .handler(new Recorder())
                .connect(server.localAddress()).syncUninterruptibly().channel();
        try {
            int messages = 64;
            StringBuilder expected = new StringBuilder();
            List<ChannelFuture> writes = new ArrayList<>();
            // all on the loop, so that no completion is handled (and no credit returned) between
            // the writes and the flush: the count is that flush's alone
            long chains = client.eventLoop().submit(() -> {
                RdmaSocketChannel ch = (RdmaSocketChannel) client;
                long before = ch.chainsPosted;
                List<ChannelFuture> done = new ArrayList<>();
                for (int i = 0; i < messages; i++) {
                    String s = String.format("message %05d;", i);
                    expected.append(s);
                    writes.add(ch.write(text(s)));
                }
                for (ChannelFuture w : writes) {
                    if (w.isDone()) {
                        done.add(w);
                    }
                }
                assertTrue(done.isEmpty(), "nothing is sent before the flush");
                ch.flush();
                return ch.chainsPosted - before;
            }).get(10, TimeUnit.SECONDS);
            assertEquals(1, chains, "64 small messages with credits and send slots for all: one post");
            for (ChannelFuture w : writes) {
                assertTrue(w.awaitUninterruptibly(10, TimeUnit.SECONDS) && w.isSuccess(), () -> String.valueOf(w.cause()));
            }
            String received = receive(serverSide, expected.length());
            assertEquals(expected.toString(), received);
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    @Test
    void aFlushBeyondTheCreditsPostsWhatTheyAllowAndTheRestAsCreditsReturn() throws Exception {
        // 8 slots at the server: 7 messages per chain at most (one credit is kept back)
        Recorder serverSide = new Recorder();
        Channel server = server(serverSide, false, true, 8, 256);
        Channel client = client(server, new Recorder());
        try {
            StringBuilder expected = new StringBuilder();
            ChannelFuture last = null;
            for (int i = 0; i < 100; i++) {
                String s = String.format("m%03d;", i);
                expected.append(s);
                last = client.write(text(s));
            }
            client.flush();
            assertTrue(last.awaitUninterruptibly(10, TimeUnit.SECONDS) && last.isSuccess(), () -> "last write: "
                    + client.isActive());
            String received = receive(serverSide, expected.length());
            assertEquals(expected.toString(), received);
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    @Test
    void aConnectionsQueuesAreConfinedToItsLoopAndOtherThreadsWritesStillArrive() throws Exception {
        Recorder serverSide = new Recorder();
        Channel server = server(serverSide, false, true, 64, 4096);
        Channel client = client(server, new Recorder());
        RdmaSocketChannel ch = (RdmaSocketChannel) client;
        try {
            Thread loop = client.eventLoop().submit(Thread::currentThread).get(10, TimeUnit.SECONDS);
            io.github.verbs4j.QueuePair qp = client.eventLoop().submit(ch::queuePair).get(10, TimeUnit.SECONDS);
            io.github.verbs4j.CompletionQueue cq = client.eventLoop().submit(ch::completionQueue).get(10, TimeUnit.SECONDS);
            assertEquals(java.util.Optional.of(loop), qp.confinedTo());
            assertEquals(java.util.Optional.of(loop), cq.confinedTo());
            // the test's thread may not poll the loop's queue nor close it: refused, nothing changed
            io.github.verbs4j.Completions wcs = cq.completions(4);
            assertInstanceOf(WrongThreadException.class, catchThrowable(() -> cq.poll(wcs)));
            assertInstanceOf(WrongThreadException.class, catchThrowable(() -> qp.close()));
            // a write from this thread is a task on the loop: it arrives
            assertTrue(client.writeAndFlush(text("written off the loop")).awaitUninterruptibly(10, TimeUnit.SECONDS));
            assertEquals("written off the loop", receive(serverSide, "written off the loop".length()));
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    private static Throwable catchThrowable(Runnable action) {
        try {
            action.run();
            return null;
        } catch (Throwable t) {
            return t;
        }
    }

    @Test
    void closeReturnsAtOnceAndReleasesTheConnectionOnceTheSendsBeforeItWereAcknowledged() throws Exception {
        Recorder serverSide = new Recorder();
        Channel server = server(serverSide, false, true, 64, 4096);
        Channel client = client(server, new Recorder());
        RdmaSocketChannel ch = (RdmaSocketChannel) client;
        try {
            StringBuilder expected = new StringBuilder();
            // on the loop: the flush posts, close follows before any completion can be polled,
            // so the close must leave the sends' acknowledgement to the loop instead of waiting
            boolean[] state = client.eventLoop().submit(() -> {
                for (int i = 0; i < 32; i++) {
                    String s = String.format("%04d", i).repeat(250);
                    expected.append(s);
                    ch.write(text(s));
                }
                ch.flush();
                ChannelFuture closed = ch.close();
                return new boolean[] {closed.isSuccess(), ch.closeFuture().isDone(), ch.isOpen(), ch.isActive(),
                        ch.releasePending()};
            }).get(10, TimeUnit.SECONDS);
            assertTrue(state[0], "the close promise succeeds as close returns");
            assertTrue(state[1], "the closeFuture is done as close returns");
            assertFalse(state[2], "closed");
            assertFalse(state[3], "inactive");
            assertTrue(state[4], "the release waits for the sends before CLOSE, on the loop");
            String received = receive(serverSide, expected.length());
            assertEquals(expected.toString(), received, "what was written before close reached the peer");
            assertTrue(serverSide.inactive.await(10, TimeUnit.SECONDS), "the peer saw the CLOSE");
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (client.eventLoop().submit(ch::releasePending).get(10, TimeUnit.SECONDS)) {
                assertTrue(System.nanoTime() - deadline < 0, "the lingering close was never released");
                Thread.sleep(10);
            }
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    @Test
    void withAutoReadOffEachReadDeliversOneMessage() throws Exception {
        Recorder serverSide = new Recorder();
        Channel server = server(serverSide, false, false, 32, 4096);
        Channel client = client(server, new Recorder());
        try {
            for (String s : new String[] {"one", "two", "three"}) {
                client.writeAndFlush(text(s)).syncUninterruptibly();
            }
            assertNull(serverSide.seen.poll(300, TimeUnit.MILLISECONDS), "nothing is read before read()");
            Channel child = serverSide.ctx.channel();
            child.read();
            assertEquals("one", serverSide.seen.poll(10, TimeUnit.SECONDS));
            assertNull(serverSide.seen.poll(200, TimeUnit.MILLISECONDS), "one read() reads one message");
            child.read();
            assertEquals("two", serverSide.seen.poll(10, TimeUnit.SECONDS));
            child.config().setAutoRead(true);
            assertEquals("three", serverSide.seen.poll(10, TimeUnit.SECONDS));
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    @Test
    void anIdleLoopBlocksAndATaskWakesIt() throws Exception {
        Recorder serverSide = new Recorder();
        Channel server = server(serverSide, false, true, 32, 4096);
        Channel client = client(server, new Recorder());
        try {
            client.writeAndFlush(text("warm")).syncUninterruptibly();
            assertEquals("warm", serverSide.seen.poll(10, TimeUnit.SECONDS));
            ThreadMXBean threads = ManagementFactory.getThreadMXBean();
            List<Thread> loopThreads = new ArrayList<>();
            for (var executor : loops.group()) {
                loopThreads.add(((EventLoop) executor).submit(Thread::currentThread).get(10, TimeUnit.SECONDS));
            }
            Thread.sleep(100);
            long[] before = new long[loopThreads.size()];
            for (int i = 0; i < loopThreads.size(); i++) {
                before[i] = threads.getThreadCpuTime(loopThreads.get(i).threadId());
            }
            long waitsBefore = RdmaIoHandler.blockingWaits();
            long cmChecksBefore = RdmaIoHandler.cmChecks();
            Thread.sleep(1000);
            for (int i = 0; i < loopThreads.size(); i++) {
                long used = threads.getThreadCpuTime(loopThreads.get(i).threadId()) - before[i];
                // a spinning loop would use close to the whole second
                assertTrue(used < TimeUnit.MILLISECONDS.toNanos(200), loopThreads.get(i) + " used " + used / 1_000_000
                        + " ms of CPU in an idle second");
            }
            // and it sat in one poll(2): a busy loop looks at its CM channels every 500 us (2,000
            // in a second), and one that kept waking would count a blocking wait per wake-up
            long waits = RdmaIoHandler.blockingWaits() - waitsBefore;
            long cmChecks = RdmaIoHandler.cmChecks() - cmChecksBefore;
            assertTrue(waits < 50 && cmChecks < 20, waits + " blocking waits and " + cmChecks
                    + " busy CM looks in an idle second");
            // a task the loop gives itself needs no wake-up: the loop looks at its queue before it blocks
            long writesBefore = RdmaIoHandler.wakeupWrites();
            client.eventLoop().submit(() -> {
                for (int i = 0; i < 1000; i++) {
                    client.eventLoop().execute(() -> { });
                }
            }).get(10, TimeUnit.SECONDS);
            long writes = RdmaIoHandler.wakeupWrites() - writesBefore;
            assertTrue(writes < 100, "1,000 tasks queued on the loop by itself wrote its eventfd " + writes + " times");
            CompletableFuture<Boolean> ran = new CompletableFuture<>();
            client.eventLoop().execute(() -> ran.complete(true));
            assertTrue(ran.get(5, TimeUnit.SECONDS), "a task from another thread wakes the blocked loop");
            client.writeAndFlush(text("after")).syncUninterruptibly();
            assertEquals("after", serverSide.seen.poll(10, TimeUnit.SECONDS), "completions wake a blocked loop");
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }
}
