package io.github.verbs4j.netty;

import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.QueuePair;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.concurrent.TimeUnit;

import static io.github.verbs4j.netty.EchoRounds.echoes;
import static io.github.verbs4j.netty.EchoRounds.message;
import static io.github.verbs4j.netty.EchoRounds.onLoop;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A channel deregistered from its event loop and registered with another
 * ({@code channel.deregister()}, then {@code loop.register(channel)}), as Netty's transports allow:
 * a channel that has not begun to connect moves, and connects on its new loop; a server channel
 * moves, bound or not (its listening id is no loop's); a connection's queues belong to the loop
 * that made them, so a connected channel's registration with another loop fails with the reason
 * and the channel is closed from its first loop, nothing left open; registered again with its
 * first loop it goes on; one left deregistered is released when that loop ends.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RdmaReregistrationTest {

    private EventLoopGroup first;
    private EventLoopGroup second;
    private EventLoopGroup serverGroup;

    @BeforeEach
    void groups() {
        first = RdmaLoops.newGroup(1);
        second = RdmaLoops.newGroup(1);
        serverGroup = RdmaLoops.newGroup(1);
    }

    @AfterEach
    void shutdown() {
        RdmaLoops.shutdown(first);
        RdmaLoops.shutdown(second);
        RdmaLoops.shutdown(serverGroup);
    }

    @Test
    void anUnconnectedChannelMovesToAnotherLoopAndConnectsThere() throws Exception {
        Channel server = RdmaEchoTest.echoServer(serverGroup);
        EchoRounds.Collector collector = new EchoRounds.Collector();
        Channel client = RdmaLoops.clientBootstrap(first).handler(collector).register().syncUninterruptibly().channel();
        EventLoop from = client.eventLoop();
        assertTrue(client.deregister().syncUninterruptibly().isSuccess());
        EventLoop to = second.next();
        assertTrue(to.register(client).syncUninterruptibly().isSuccess());
        assertSame(to, client.eventLoop());
        assertTrue(client.connect(server.localAddress()).syncUninterruptibly().isSuccess());
        RdmaSocketChannel ch = (RdmaSocketChannel) client;
        // the connection's queues are the new loop's
        Thread toThread = onLoop(to, Thread::currentThread);
        assertEquals(java.util.Optional.of(toThread), onLoop(to, ch::queuePair).confinedTo());
        assertEquals(java.util.Optional.of(toThread), onLoop(to, ch::completionQueue).confinedTo());
        assertSame(to, onLoop(to, ch::ioHandler).executor());
        assertFalse(from == to);
        echoes(client, collector, message(1, 3000));
        echoes(client, collector, message(2, 70_000));
        client.close().syncUninterruptibly();
        server.close().syncUninterruptibly();
    }

    @Test
    void aConnectedChannelRefusesAnotherLoopWithTheReasonAndClosesFromItsFirstLoop() throws Exception {
        Channel server = RdmaEchoTest.echoServer(serverGroup);
        EchoRounds.Collector collector = new EchoRounds.Collector();
        Channel client = RdmaLoops.clientBootstrap(first).handler(collector)
                .connect(server.localAddress()).syncUninterruptibly().channel();
        echoes(client, collector, message(3, 1000));
        RdmaSocketChannel ch = (RdmaSocketChannel) client;
        EventLoop from = client.eventLoop();
        QueuePair qp = onLoop(from, ch::queuePair);
        CompletionQueue cq = onLoop(from, ch::completionQueue);
        assertTrue(client.deregister().syncUninterruptibly().isSuccess());
        ChannelFuture moved = second.next().register(client).awaitUninterruptibly();
        assertFalse(moved.isSuccess());
        IllegalStateException refused = assertInstanceOf(IllegalStateException.class, moved.cause());
        assertTrue(refused.getMessage().contains("a connected RDMA channel's queue pair and completion queue belong"
                + " to the event loop that created them"), refused.getMessage());
        // Netty closes a channel whose registration failed; the connection is closed by its first loop
        assertTrue(client.closeFuture().awaitUninterruptibly(10, TimeUnit.SECONDS));
        assertFalse(client.isOpen());
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!(qp.isClosed() && cq.isClosed()) && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertTrue(qp.isClosed(), "the queue pair was destroyed");
        assertTrue(cq.isClosed(), "the completion queue was destroyed");
        assertTrue(onLoop(from, () -> !ch.releasePending()));
        server.close().syncUninterruptibly();
    }

    @Test
    void aConnectedChannelRegisteredAgainWithItsFirstLoopGoesOn() throws Exception {
        Channel server = RdmaEchoTest.echoServer(serverGroup);
        EchoRounds.Collector collector = new EchoRounds.Collector();
        Channel client = RdmaLoops.clientBootstrap(first).handler(collector)
                .connect(server.localAddress()).syncUninterruptibly().channel();
        echoes(client, collector, message(4, 500));
        EventLoop from = client.eventLoop();
        assertTrue(client.deregister().syncUninterruptibly().isSuccess());
        assertTrue(from.register(client).syncUninterruptibly().isSuccess());
        assertTrue(client.isActive());
        echoes(client, collector, message(5, 5000));
        client.close().syncUninterruptibly();
        server.close().syncUninterruptibly();
    }

    @Test
    void aBoundServerChannelMovesToAnotherLoopAndAcceptsThere() throws Exception {
        Channel server = RdmaEchoTest.echoServer(serverGroup);
        assertTrue(server.deregister().syncUninterruptibly().isSuccess());
        EventLoop to = second.next();
        assertTrue(to.register(server).syncUninterruptibly().isSuccess());
        assertSame(to, server.eventLoop());
        EchoRounds.Collector collector = new EchoRounds.Collector();
        Channel client = RdmaLoops.clientBootstrap(first).handler(collector)
                .connect(server.localAddress()).syncUninterruptibly().channel();
        echoes(client, collector, message(6, 4096));
        client.close().syncUninterruptibly();
        server.close().syncUninterruptibly();
    }

    @Test
    void aRegistrationWithALoopThatIsShuttingDownIsRefusedAndTheChannelClosed() throws Exception {
        // a loop shut down without a quiet period runs its last tasks and ends, with no pass to
        // close what they registered: an accepted channel registered then made its queues on a
        // loop that was ending, and kept them open past it
        EventLoop loop = first.next();
        RdmaSocketChannel ch = new RdmaSocketChannel();
        ch.pipeline().addLast(new ChannelInboundHandlerAdapter());
        ChannelFuture registered = loop.submit(() -> {
            first.shutdownGracefully(0, 5, TimeUnit.SECONDS);
            return loop.register(ch);
        }).get(10, TimeUnit.SECONDS);
        assertTrue(registered.awaitUninterruptibly(10, TimeUnit.SECONDS));
        assertFalse(registered.isSuccess());
        assertTrue(registered.cause().getMessage().contains("is shutting down"), registered.cause().getMessage());
        assertTrue(ch.closeFuture().isDone());
        assertFalse(ch.isOpen());
    }

    @Test
    void aConnectionLeftDeregisteredIsReleasedWhenItsLoopEnds() throws Exception {
        Channel server = RdmaEchoTest.echoServer(serverGroup);
        EchoRounds.Collector collector = new EchoRounds.Collector();
        Channel client = RdmaLoops.clientBootstrap(first).handler(collector)
                .connect(server.localAddress()).syncUninterruptibly().channel();
        echoes(client, collector, message(7, 100));
        RdmaSocketChannel ch = (RdmaSocketChannel) client;
        EventLoop from = client.eventLoop();
        QueuePair qp = onLoop(from, ch::queuePair);
        CompletionQueue cq = onLoop(from, ch::completionQueue);
        io.github.verbs4j.ProtectionDomain pd = qp.protectionDomain();
        assertNotNull(pd);
        assertTrue(client.deregister().syncUninterruptibly().isSuccess());
        RdmaLoops.shutdown(first);
        assertTrue(qp.isClosed(), "the queue pair went with its loop");
        assertTrue(cq.isClosed(), "the completion queue went with its loop");
        assertTrue(cq.channel().isClosed(), "the loop's completion channel is closed");
        assertTrue(pd.isClosed(), "the loop's protection domain is closed");
        assertFalse(client.isOpen());
        server.close().syncUninterruptibly();
    }
}
