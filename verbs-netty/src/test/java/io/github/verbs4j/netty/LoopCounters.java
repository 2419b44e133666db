package io.github.verbs4j.netty;

/**
 * The RDMA event loops' counters of this JVM, for code outside this package (the benchmark):
 * how often loops blocked, were woken through their eventfd, and looked at their CM channels
 * while busy. Sums since the JVM started; a difference of two readings counts what ran between.
 */
public final class LoopCounters {

    private LoopCounters() {
    }

    /** Blocking {@code poll(2)} waits. */
    public static long blockingWaits() {
        return RdmaIoHandler.blockingWaits();
    }

    /** Writes of a loop's wakeup eventfd. */
    public static long wakeupWrites() {
        return RdmaIoHandler.wakeupWrites();
    }

    /** Non-blocking looks at the CM event channels of busy loops (each one {@code poll(2)}). */
    public static long cmChecks() {
        return RdmaIoHandler.cmChecks();
    }

    /** The three, as one line for a log. */
    public static String line() {
        return "blocking-waits " + blockingWaits() + " wakeup-writes " + wakeupWrites() + " cm-checks " + cmChecks();
    }

    /**
     * What one RDMA channel's writes did so far, as one line for a log: the chains it posted, the
     * messages it sent from registered memory without a copy, the signaled send completions it
     * polled, and the completion queue polls its writes made outside the loop's pass over the
     * queue. Read it on the channel's event loop.
     */
    public static String writeCounts(io.netty.channel.Channel channel) {
        RdmaSocketChannel ch = (RdmaSocketChannel) channel;
        return "chains " + ch.chainsPosted + " sent-without-copy " + ch.sentWithoutCopy
                + " signaled-send-completions " + ch.signaledSendCompletions + " write-polls " + ch.writePolls;
    }

    /**
     * What one RDMA channel's reads did so far, as one line for a log: messages read in place
     * (zero-copy), buffers filled by a copy, read loops, credit-only messages sent. Read it on the
     * channel's event loop.
     */
    public static String readCounts(io.netty.channel.Channel channel) {
        RdmaSocketChannel ch = (RdmaSocketChannel) channel;
        return "in-place " + ch.readsInPlace + " copied " + ch.readsCopied + " read-loops " + ch.readLoops
                + " credit-only-messages " + ch.creditOnlyMessages;
    }

    /**
     * What the event loop of one RDMA channel and the channel's completion queue did so far, as
     * one line for a log: the loop's passes, the clock reads they made, the channel's
     * {@code ibv_poll_cq} calls, all and empty, and the rounds of Netty's loop that ran the
     * handler, all and those that found nothing. Read it on the channel's event loop.
     */
    public static String passCounts(io.netty.channel.Channel channel) {
        long[] c = passCountValues(channel);
        return "passes " + c[0] + " clock-reads " + c[1] + " cq-polls " + c[2] + " empty-cq-polls " + c[3]
                + " loop-runs " + c[4] + " empty-loop-runs " + c[5];
    }

    /** The six counts of {@link #passCounts}, in its order. Read them on the channel's event loop. */
    public static long[] passCountValues(io.netty.channel.Channel channel) {
        RdmaSocketChannel ch = (RdmaSocketChannel) channel;
        RdmaIoHandler h = ch.ioHandler();
        return new long[] {h.passes, h.clockReads, ch.cqPolls, ch.emptyCqPolls, h.runs, h.emptyRuns};
    }
}
