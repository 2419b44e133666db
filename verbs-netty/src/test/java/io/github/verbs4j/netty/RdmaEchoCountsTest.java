package io.github.verbs4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What one echo round trip of small messages costs the client's channel in completions and
 * polls: the counts the two-process echo's round trip was cut by (docs/netty.md, "Benchmarks").
 */
@Timeout(60)
public class RdmaEchoCountsTest {

    @RegisterExtension
    static final RdmaLoops loops = new RdmaLoops();

    private static final int ROUNDS = 400;
    private static final int SIZE = 64;

    /**
     * Sends one 64-byte message at a time, the next when the echo of the last came back whole,
     * every byte checked; counts the client channel's signaled send completions and the polls
     * its writes made, from the first echo to the last, read on the loop itself.
     */
    private static final class PingPong extends ChannelInboundHandlerAdapter {
        final CompletableFuture<long[]> done = new CompletableFuture<>();
        private final byte[] got = new byte[SIZE];
        private int round;
        private int count;
        private long signaledBefore;
        private long writePollsBefore;
        private long passesBefore;
        private long clockReadsBefore;
        private long blocksBefore;
        private long emptyPassesBefore;
        private long runsBefore;
        private long emptyRunsBefore;

        private void send(ChannelHandlerContext ctx) {
            byte[] payload = new byte[SIZE];
            Arrays.fill(payload, (byte) round);
            ctx.writeAndFlush(ctx.alloc().directBuffer(SIZE).writeBytes(payload));
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            send(ctx);
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf b = (ByteBuf) msg;
            try {
                int n = b.readableBytes();
                if (count + n > SIZE) {
                    done.completeExceptionally(new AssertionError("more than one echo in round " + round));
                    return;
                }
                b.readBytes(got, count, n);
                count += n;
            } finally {
                b.release();
            }
            if (count < SIZE) {
                return;
            }
            byte[] expected = new byte[SIZE];
            Arrays.fill(expected, (byte) round);
            if (!Arrays.equals(expected, got)) {
                done.completeExceptionally(new AssertionError("round " + round + " came back as " + Arrays.toString(got)));
                return;
            }
            count = 0;
            RdmaSocketChannel ch = (RdmaSocketChannel) ctx.channel();
            RdmaIoHandler loop = ch.ioHandler();
            if (round == 0) {
                signaledBefore = ch.signaledSendCompletions;
                writePollsBefore = ch.writePolls;
                passesBefore = loop.passes;
                clockReadsBefore = loop.clockReads;
                blocksBefore = RdmaIoHandler.blockingWaits();
                emptyPassesBefore = ch.emptyCqPolls;
                runsBefore = loop.runs;
                emptyRunsBefore = loop.emptyRuns;
            }
            if (++round == ROUNDS) {
                done.complete(new long[] {ch.signaledSendCompletions - signaledBefore, ch.writePolls - writePollsBefore,
                        loop.passes - passesBefore, loop.clockReads - clockReadsBefore,
                        RdmaIoHandler.blockingWaits() - blocksBefore, ch.emptyCqPolls - emptyPassesBefore,
                        loop.runs - runsBefore, loop.emptyRuns - emptyRunsBefore});
            } else {
                send(ctx);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            done.completeExceptionally(cause);
        }
    }

    /**
     * A 64-byte message goes inline (copied): nothing waits for its send's completion, so only
     * the periodic signaled request is reported (one in 16), not one per message as before; a
     * write from channelRead polls no completions of its own, the loop having just polled them.
     */
    @Test
    void anEchoOfSmallMessagesSignalsOneSendInSixteenAndWritesPollNothing() throws Exception {
        Channel server = RdmaEchoTest.echoServer(loops.group());
        PingPong driver = new PingPong();
        Channel client = loops.clientBootstrap().handler(driver).connect(server.localAddress()).syncUninterruptibly().channel();
        try {
            long[] counts = driver.done.get(30, TimeUnit.SECONDS);
            long signaled = counts[0];
            // ROUNDS - 1 messages between the readings: one in 16 signaled, give or take the
            // credit-only messages (signaled too), which a ping-pong's data carries instead
            assertTrue(signaled >= (ROUNDS - 1) / 16 - 1 && signaled <= (ROUNDS - 1) / 16 + 2,
                    "signaled send completions for " + (ROUNDS - 1) + " echoed messages: " + signaled);
            assertEquals(0, counts[1], "completion queue polls by writes made from channelRead");
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    /**
     * Copied sends left unsignaled stay unacknowledged on the sender until a signaled request
     * covers them; a close's CLOSE is signaled, so the close lingers until it covers them all
     * (not until its timer), and the server's side has every byte.
     */
    @Test
    void aCloseAcknowledgesTheUnsignaledSendsBeforeIt() throws Exception {
        Channel server = RdmaEchoTest.echoServer(loops.group());
        int messages = 10; // fewer than 16: none of them signaled by the period
        byte[] expected = new byte[messages * SIZE];
        for (int i = 0; i < expected.length; i++) {
            expected[i] = (byte) (i * 7);
        }
        RdmaEchoTest.Collector collector = new RdmaEchoTest.Collector(expected.length);
        // a ring of 64 slots returns its credits alone only once 16 are owed: the ten echoes, if
        // they all come back after the last write (the server's loop late on a loaded machine),
        // then send no signaled credit-only message, which would acknowledge the ten sends before
        // the close does (with the default 32 slots, 8 owed did so, and the test failed by load)
        Channel client = loops.clientBootstrap().option(RdmaChannelOption.RDMA_RING_SLOTS, 64).handler(collector)
                .connect(server.localAddress()).syncUninterruptibly().channel();
        RdmaSocketChannel ch = (RdmaSocketChannel) client;
        try {
            for (int i = 0; i < messages; i++) {
                client.writeAndFlush(client.alloc().directBuffer(SIZE).writeBytes(expected, i * SIZE, SIZE)).syncUninterruptibly();
            }
            assertArrayEquals(expected, collector.done.get(30, TimeUnit.SECONDS));
            long open = client.eventLoop().submit(ch::unacknowledgedSends).get(10, TimeUnit.SECONDS);
            assertTrue(open > 0, "the echoed messages' sends are unsignaled, not yet acknowledged: " + open);
            client.close().syncUninterruptibly();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (client.eventLoop().submit(ch::releasePending).get(10, TimeUnit.SECONDS) && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertEquals(0, client.eventLoop().submit(ch::unacknowledgedSends).get(10, TimeUnit.SECONDS),
                    "the close's signaled CLOSE acknowledged every send before it");
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }

    /**
     * A busy loop's pass is one empty {@code ibv_poll_cq} per channel when nothing came; it reads
     * the clock (for the busy-poll budget and the CM look) on one pass in
     * {@link RdmaIoHandler#CLOCK_EVERY_PASSES}, not on every one as before, when that read was 11
     * to 15 % of the loop's time in the two-process echo. The client's loop never blocks here
     * ({@link RdmaNotificationMode#BUSY_POLL}), so the count is exact whatever the machine's load.
     */
    @Test
    void aBusyLoopReadsTheClockOnOnePassInThirtyTwo() throws Exception {
        long[] counts = busyClientEcho();
        long passes = counts[2];
        long clockReads = counts[3];
        // every round trip takes at least the pass that reads the echo
        assertTrue(passes >= ROUNDS - 1, "passes for " + (ROUNDS - 1) + " round trips: " + passes);
        assertTrue(clockReads <= passes / RdmaIoHandler.CLOCK_EVERY_PASSES + 1,
                "clock reads in " + passes + " busy passes: " + clockReads);
    }

    /**
     * A busy loop's empty pass is followed by the next one inside the handler's run, up to
     * {@link RdmaIoHandler#SPIN_PASSES} passes, not by a round of Netty's loop (its task queues
     * and shutdown checks) per empty {@code ibv_poll_cq} as before: a run of Netty's loop that
     * finds nothing has made {@code SPIN_PASSES} empty passes, or fewer only where the clock's
     * pass (one in {@link RdmaIoHandler#CLOCK_EVERY_PASSES}) ended it. One channel on the loop, so
     * a pass is one poll of its queue. Fails with the spin off ({@code SPIN_PASSES} 1: one
     * empty run per empty pass).
     */
    @Test
    void aBusyLoopPollsAgainBeforeItGoesRoundNettysLoop() throws Exception {
        long[] counts = busyClientEcho();
        long passes = counts[2];
        long emptyPasses = counts[5];
        long runs = counts[6];
        long emptyRuns = counts[7];
        assertTrue(passes >= ROUNDS - 1, "passes for " + (ROUNDS - 1) + " round trips: " + passes);
        assertTrue(runs <= passes, "runs of Netty's loop " + runs + ", passes " + passes);
        // as before the spin, one round of Netty's loop per empty poll, this fails
        assertTrue(emptyRuns <= emptyPasses / 2, "runs of Netty's loop that found nothing: " + emptyRuns
                + ", for " + emptyPasses + " empty passes");
        // each empty run: SPIN_PASSES empty passes, or fewer when the clock's pass came first
        assertTrue(emptyRuns <= emptyPasses / RdmaIoHandler.SPIN_PASSES + passes / RdmaIoHandler.CLOCK_EVERY_PASSES + 1,
                "runs of Netty's loop that found nothing: " + emptyRuns + ", for " + emptyPasses + " empty passes of "
                        + passes);
    }

    /**
     * The echo of {@link PingPong} from a client on a loop of its own in
     * {@link RdmaNotificationMode#BUSY_POLL} (it never blocks, so the counts are exact whatever the
     * machine's load) to the shared loops' echo server: the driver's counts, both ends closed.
     */
    private long[] busyClientEcho() throws Exception {
        EventLoopGroup busy = new MultiThreadIoEventLoopGroup(1,
                RdmaIoHandler.newFactory(RdmaTransportOptions.defaults().withMode(RdmaNotificationMode.BUSY_POLL)));
        Channel server = RdmaEchoTest.echoServer(loops.group());
        PingPong driver = new PingPong();
        try {
            Channel client = RdmaLoops.clientBootstrap(busy).handler(driver).connect(server.localAddress()).syncUninterruptibly().channel();
            long[] counts = driver.done.get(30, TimeUnit.SECONDS);
            client.close().syncUninterruptibly();
            return counts;
        } finally {
            server.close().syncUninterruptibly();
            RdmaLoops.shutdown(busy);
        }
    }

    /**
     * The same with the default loop ({@link RdmaNotificationMode#ADAPTIVE}), which may block
     * between two round trips on a loaded machine: a blocking wait reads the clock twice more
     * (its timer's delay, the budget after it), so those are allowed for beside the busy passes'.
     */
    @Test
    void theDefaultLoopReadsTheClockOnOnePassInThirtyTwoWhileBusy() throws Exception {
        Channel server = RdmaEchoTest.echoServer(loops.group());
        PingPong driver = new PingPong();
        Channel client = loops.clientBootstrap().handler(driver).connect(server.localAddress()).syncUninterruptibly().channel();
        try {
            long[] counts = driver.done.get(30, TimeUnit.SECONDS);
            long passes = counts[2];
            long clockReads = counts[3];
            long blocks = counts[4]; // every loop of this JVM: the server's too, so the bound is loose
            assertTrue(clockReads <= passes / RdmaIoHandler.CLOCK_EVERY_PASSES + 1 + 3 * blocks,
                    "clock reads in " + passes + " passes with " + blocks + " blocking waits: " + clockReads);
        } finally {
            client.close().syncUninterruptibly();
            server.close().syncUninterruptibly();
        }
    }
}
