package io.github.verbs4j.transfer.internal;

/**
 * How long a wait polls without a result before it blocks, for the transfer engine and the ring
 * (internal: this package is not exported): the configured spinWait
 * ({@code TransferOptions.spinWait()}, {@code RingOptions.spinWait()}) while nothing streams, and
 * while batches (or a collective's pieces) stream
 * {@link #GAPS} times the usual time between two progress passes that took completions, within
 * [spinWait, {@link #MAX_FACTOR} x spinWait] (so a spinWait of zero still blocks at once).
 *
 * <p>Why the spin follows the stream: a completion is the only progress a wait sees, and with
 * selective signaling one comes per quarter of a queue pair's depth (the engine's lanes). A READ's
 * data lands without any work of the waiting thread that the engine could count, so a stream of
 * 64 KiB READs, 16 in flight, shows one completion per 256 KiB: at a few GB/s about as far apart
 * as the fixed spin of 50 µs, and the wait blocked every few chunks. A block arms the queue's
 * notification, and on softrdma an arm takes the same-host rings back from the polling thread
 * (docs/softrdma.md): the process's agent then places every response and wakes the waiter
 * through the completion channel, a third busy thread beside the two that move the data, and the
 * READs behind the block wait to be posted until the waiter runs again. A spin of a few usual
 * gaps keeps a streaming wait polling; the bound keeps a wait for a stalled or lost peer short.
 * The ring's pieces (WRITEs with immediate data of 64 KiB to 1 MiB) land the same way: a rank
 * sees a piece only when its last packet is placed.
 *
 * <p>The spin is polling time, not time away: a wait whose thread did not poll for a while
 * (descheduled, or stopped at a safepoint) has not seen the stream idle, and blocking on the one
 * poll it makes when it comes back is the costly case on softrdma. While the waiting thread is
 * away, nothing copies a READ's responses (softrdma leaves a descheduled poller its rings), the
 * responder fills the ring and stops, and the first poll back copies a part of it, most often
 * without a signaled completion (one in four chunks); the wait blocked there, its arm handed the
 * rings to the agent, and the responder's agent went to sleep until the waiter ran again.
 * Counted on a READ stream of 550,400 chunks at load 10-13: 489 of its 527 blocks came on the
 * first poll after a pause longer than half the spin. {@link #spinStart} restarts the spin after
 * such a pause; the engine's batch waits use it. The ring's waits do not (yet): there a rank
 * that was away most often gave its core to its neighbour or an agent that the collective needs,
 * and a longer spin was not measured to help (one pair of 2-rank allreduces each way at load 13
 * showed only the load's spread).
 *
 * <p>Written by one thread at a time (the engine's monitor, the ring's one thread); read by
 * waits outside the engine's monitor.
 */
public final class StreamSpin {

    /**
     * The shortest pause between two polls of a wait that restarts its spin: shorter gaps are
     * a poll's own work (copying what arrived), not time away.
     */
    public static final long PAUSE_NANOS = 20_000;

    /** The spin while batches stream, in usual gaps between completions. */
    public static final int GAPS = 4;
    /** The longest spin while batches stream, in multiples of spinWait. */
    public static final int MAX_FACTOR = 20;
    /** Each gap's weight in the usual gap: 1 / 2^WEIGHT_SHIFT. */
    private static final int WEIGHT_SHIFT = 3;

    private final long baseNanos;
    private final long longestNanos;
    private volatile long spinNanos;
    /** The usual gap: a running average, every gap clipped to the longest spin so that one stall does not dominate. */
    private long gapNanos;
    /** When the last pass took completions in this stream (System.nanoTime), or {@link Long#MIN_VALUE}: none yet. */
    private long lastNanos = Long.MIN_VALUE;

    /** Spins of {@code baseNanos} (spinWait) while nothing streams. */
    public StreamSpin(long baseNanos) {
        this.baseNanos = baseNanos;
        this.longestNanos = MAX_FACTOR * baseNanos;
        this.spinNanos = baseNanos;
    }

    /** The spin a wait that begins to find nothing now polls for before it blocks, in nanoseconds. */
    public long spinNanos() {
        return spinNanos;
    }

    /** A progress pass (a poll) took completions at {@code now} (System.nanoTime) while batches (a collective) were in flight. */
    public void completions(long now) {
        if (lastNanos != Long.MIN_VALUE) {
            long gap = Math.min(now - lastNanos, longestNanos);
            gapNanos += (gap - gapNanos) >> WEIGHT_SHIFT;
            spinNanos = Math.max(baseNanos, Math.min(longestNanos, GAPS * gapNanos));
        }
        lastNanos = now;
    }

    /**
     * No batch is in flight any more (a collective begins): the next stream measures its own gaps (the time between two
     * streams is the application's, not the transport's) and starts from spinWait.
     */
    public void streamEnded() {
        if (lastNanos != Long.MIN_VALUE) {
            lastNanos = Long.MIN_VALUE;
            gapNanos = 0;
            spinNanos = baseNanos;
        }
    }

    /**
     * When the spin of a wait began, after a poll at {@code now} that found nothing: {@code
     * idleSince}, unless the wait's previous poll was at {@code previousPoll}, more than half the
     * spin and more than {@link #PAUSE_NANOS} ago: the thread was away (descheduled, stopped at a
     * safepoint) rather than polling, so its spin starts again at {@code now}. A wait resets
     * {@code previousPoll} after it blocked, so the time blocked never restarts a spin; with a spin
     * of zero nothing restarts (such a wait blocks at once).
     *
     * @param idleSince    when the wait's spin began (System.nanoTime)
     * @param previousPoll when the wait polled last before this poll
     * @param now          this poll's time
     * @param spinNanos    the wait's spin ({@link #spinNanos()})
     */
    public static long spinStart(long idleSince, long previousPoll, long now, long spinNanos) {
        long pause = now - previousPoll;
        return spinNanos > 0 && pause > PAUSE_NANOS && pause > spinNanos / 2 ? now : idleSince;
    }
}
