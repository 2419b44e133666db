package io.github.verbs4j.netty;

import io.github.verbs4j.CompletionChannel;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QueuePair;
import io.netty.channel.Channel;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.util.concurrent.AutoScalingEventExecutorChooserFactory;
import io.netty.util.concurrent.EventExecutor;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;

import static io.github.verbs4j.netty.EchoRounds.echoes;
import static io.github.verbs4j.netty.EchoRounds.message;
import static io.github.verbs4j.netty.EchoRounds.onLoop;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * RDMA loops in Netty 4.2's auto-scaling group ({@code AutoScalingEventExecutorChooserFactory}):
 * a loop that carried connections and went idle is suspended (its thread ends), resumes on a new
 * thread when a channel is registered with it, and the connection made there carries bytes, its
 * queues confined to the new thread, on the same domain and completion channel as before the
 * suspension (kept, not remade), all closed when the group ends. A loop holding a deregistered
 * connection (queues confined to its thread) is kept from suspending until the connection is
 * registered again and closed. (Netty's own two auto-scaling tests run in {@code RdmaEventLoopTest}.)
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class RdmaAutoScalingTest {

    private EventLoopGroup scaling;
    private EventLoopGroup serverGroup;
    private Channel server;
    /**
     * An unconnected channel registered with each loop of {@link #scaling} from the start, so
     * that no loop is suspended before the test lets it (a registered loop is no candidate):
     * Netty's chooser does not count a loop resumed by a task of its own (not through the
     * chooser) as active again, so one suspended before the test began would leave the group
     * at its minimum, with no further suspension.
     */
    private final List<Channel> placeholders = new ArrayList<>();

    @BeforeEach
    void groups() {
        Rdma.ensureAvailability();
        serverGroup = RdmaLoops.newGroup(1);
        server = RdmaEchoTest.echoServer(serverGroup);
        // Netty testsuite's settings: 1 to 2 loops, a 100 ms window, idle below 20 % for 2 windows
        scaling = new MultiThreadIoEventLoopGroup(2, (Executor) null,
                new AutoScalingEventExecutorChooserFactory(1, 2, 100, TimeUnit.MILLISECONDS, 0.2, 0.9, 2, 2, 1),
                RdmaIoHandler.newFactory());
        for (EventExecutor e : scaling) {
            Channel p = new RdmaSocketChannel();
            ((EventLoop) e).register(p).syncUninterruptibly();
            placeholders.add(p);
        }
    }

    /** Closes the placeholders: from here on an idle loop without registrations may be suspended. */
    private void letLoopsSuspend() {
        for (Channel p : placeholders) {
            p.close().syncUninterruptibly();
        }
    }

    @AfterEach
    void shutdown() {
        if (server != null) {
            server.close().syncUninterruptibly();
        }
        RdmaLoops.shutdown(scaling);
        RdmaLoops.shutdown(serverGroup);
    }

    private List<EventLoop> loops() {
        List<EventLoop> loops = new ArrayList<>();
        for (EventExecutor e : scaling) {
            loops.add((EventLoop) e);
        }
        return loops;
    }

    /** Waits (20 s at most) until {@code loop} is suspended and the thread it ran on has ended. */
    private static void awaitSuspended(EventLoop loop, Thread ranOn) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!(loop.isSuspended() && !ranOn.isAlive()) && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertTrue(loop.isSuspended(), loop + " was not suspended");
        assertFalse(ranOn.isAlive(), "the thread of the suspended loop " + loop + " did not end");
    }

    /** A connection's loop resources, seen from the channel (on its loop). */
    private record Resources(Thread thread, ProtectionDomain pd, CompletionChannel completions,
                             QueuePair qp, CompletionQueue cq, RdmaIoHandler handler) {
        static Resources of(EventLoop loop, RdmaSocketChannel ch) throws Exception {
            return onLoop(loop, () -> new Resources(Thread.currentThread(), ch.queuePair().protectionDomain(),
                    ch.completionQueue().channel(), ch.queuePair(), ch.completionQueue(), ch.ioHandler()));
        }
    }

    @Test
    void anIdleLoopIsSuspendedAndAConnectionOnItAfterItResumedCarriesBytes() throws Exception {
        List<EventLoop> loops = loops();
        assertEquals(2, loops.size());
        // a connection on each loop, so that whichever the group suspends has made its resources
        List<Resources> before = new ArrayList<>();
        for (int i = 0; i < loops.size(); i++) {
            EchoRounds.Collector c = new EchoRounds.Collector();
            Channel client = RdmaLoops.clientBootstrap(loops.get(i)).handler(c)
                    .connect(server.localAddress()).syncUninterruptibly().channel();
            assertSame(loops.get(i), client.eventLoop());
            echoes(client, c, message(i, 5000));
            before.add(Resources.of(loops.get(i), (RdmaSocketChannel) client));
            client.close().syncUninterruptibly();
        }
        letLoopsSuspend();
        // idle and without registrations: one of the two is suspended, its thread ends
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        int suspended = -1;
        while (suspended < 0 && System.nanoTime() < deadline) {
            for (int i = 0; i < loops.size(); i++) {
                if (loops.get(i).isSuspended()) {
                    suspended = i;
                }
            }
            Thread.sleep(20);
        }
        assertTrue(suspended >= 0, "no loop of the idle group was suspended");
        EventLoop loop = loops.get(suspended);
        Resources old = before.get(suspended);
        awaitSuspended(loop, old.thread());
        assertFalse(old.pd().isClosed(), "a suspended loop keeps its protection domain");
        assertFalse(old.completions().isClosed(), "a suspended loop keeps its completion channel");
        assertTrue(old.qp().isClosed() && old.cq().isClosed(), "the closed connection's queues were destroyed");

        // a connection registered with the suspended loop resumes it, on a new thread
        EchoRounds.Collector collector = new EchoRounds.Collector();
        Channel client = RdmaLoops.clientBootstrap(loop).handler(collector)
                .connect(server.localAddress()).syncUninterruptibly().channel();
        assertFalse(loop.isSuspended(), "the loop resumed");
        Resources now = Resources.of(loop, (RdmaSocketChannel) client);
        assertNotSame(old.thread(), now.thread(), "a resumed loop runs on a new thread");
        assertEquals(Optional.of(now.thread()), now.qp().confinedTo());
        assertEquals(Optional.of(now.thread()), now.cq().confinedTo());
        assertSame(old.handler(), now.handler());
        assertSame(old.pd(), now.pd(), "the loop's domain outlived the suspension");
        assertSame(old.completions(), now.completions(), "the loop's completion channel outlived the suspension");
        echoes(client, collector, message(7, 3000));
        echoes(client, collector, message(8, 70_000));
        for (int i = 0; i < 200; i++) {
            echoes(client, collector, message(i, 100));
        }
        long active = onLoop(loop, () -> now.handler().activeIoNanos);
        assertTrue(active > 0, "the loop reported active I/O time: " + active);
        client.close().syncUninterruptibly();

        // the group's end closes every loop's resources, the resumed loop's included
        RdmaLoops.shutdown(scaling);
        for (Resources r : before) {
            assertTrue(r.completions().isClosed(), "completion channel closed at the group's end");
            assertTrue(r.pd().isClosed(), "protection domain closed at the group's end");
        }
    }

    @Test
    void aLoopHoldingADeregisteredConnectionIsNotSuspendedUntilItIsReleased() throws Exception {
        List<EventLoop> loops = loops();
        EventLoop loop = loops.get(0);
        // the other loop keeps a registered connection: only loop 0 can be a candidate
        EchoRounds.Collector otherCollector = new EchoRounds.Collector();
        Channel other = RdmaLoops.clientBootstrap(loops.get(1)).handler(otherCollector)
                .connect(server.localAddress()).syncUninterruptibly().channel();
        EchoRounds.Collector collector = new EchoRounds.Collector();
        Channel client = RdmaLoops.clientBootstrap(loop).handler(collector)
                .connect(server.localAddress()).syncUninterruptibly().channel();
        echoes(client, collector, message(1, 2000));
        RdmaSocketChannel ch = (RdmaSocketChannel) client;
        Resources r = Resources.of(loop, ch);
        letLoopsSuspend();
        assertTrue(client.deregister().syncUninterruptibly().isSuccess());
        // no registration left on the loop, but queues confined to its thread: not suspended
        // (the group may mark it as suspending; its thread goes on) for 20 of the group's windows
        Thread.sleep(2000);
        assertTrue(r.thread().isAlive(), "the loop's thread ended while it held a deregistered connection");
        assertTrue(onLoop(loop, () -> r.handler().suspendGuarded()), "the suspension guard is in place");
        assertSame(r.thread(), onLoop(loop, Thread::currentThread));
        // registered again with its loop, the connection goes on there
        assertTrue(loop.register(client).syncUninterruptibly().isSuccess());
        assertFalse(onLoop(loop, () -> r.handler().suspendGuarded()), "no guard while registered");
        echoes(client, collector, message(2, 70_000));
        assertNotNull(onLoop(loop, ch::queuePair));
        // closed and released: the loop may be suspended again
        client.close().syncUninterruptibly();
        awaitSuspended(loop, r.thread());
        echoes(other, otherCollector, message(3, 1000));
        other.close().syncUninterruptibly();
    }
}
