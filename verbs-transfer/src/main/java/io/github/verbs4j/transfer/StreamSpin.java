package io.github.verbs4j.transfer;

/**
 * How long a wait polls without a result before it blocks: the engine's
 * {@link TransferOptions#spinWait()} while nothing streams, and while batches stream
 * {@link #GAPS} times the usual time between two progress passes that took completions, within
 * [spinWait, {@link #MAX_FACTOR} x spinWait] (so a spinWait of zero still blocks at once).
 *
 * <p>Why the spin follows the stream: a completion is the only progress a wait sees, and with
 * selective signaling one comes per quarter of a queue pair's depth ({@link Lane}). A READ's
 * data lands without any work of the waiting thread that the engine could count, so a stream of
 * 64 KiB READs, 16 in flight, shows one completion per 256 KiB: at a few GB/s about as far apart
 * as the fixed spin of 50 µs, and the wait blocked every few chunks. A block arms the queue's
 * notification, and on softrdma an arm takes the same-host rings back from the polling thread
 * (docs/softrdma.md): the process's agent then places every response and wakes the waiter
 * through the completion channel, a third busy thread beside the two that move the data, and the
 * READs behind the block wait to be posted until the waiter runs again. A spin of a few usual
 * gaps keeps a streaming wait polling; the bound keeps a wait for a stalled or lost peer short.
 *
 * <p>Written under the engine's monitor ({@link #completions}, {@link #streamEnded}); read by
 * waits outside it.
 */
final class StreamSpin {

    /** The spin while batches stream, in usual gaps between completions. */
    static final int GAPS = 4;
    /** The longest spin while batches stream, in multiples of spinWait. */
    static final int MAX_FACTOR = 20;
    /** Each gap's weight in the usual gap: 1 / 2^WEIGHT_SHIFT. */
    private static final int WEIGHT_SHIFT = 3;

    private final long baseNanos;
    private final long longestNanos;
    private volatile long spinNanos;
    /** The usual gap: a running average, every gap clipped to the longest spin so that one stall does not dominate. */
    private long gapNanos;
    /** When the last pass took completions in this stream (System.nanoTime), or {@link Long#MIN_VALUE}: none yet. */
    private long lastNanos = Long.MIN_VALUE;

    StreamSpin(long baseNanos) {
        this.baseNanos = baseNanos;
        this.longestNanos = MAX_FACTOR * baseNanos;
        this.spinNanos = baseNanos;
    }

    /** The spin a wait that begins to find nothing now polls for before it blocks, in nanoseconds. */
    long spinNanos() {
        return spinNanos;
    }

    /** A progress pass took completions at {@code now} (System.nanoTime) while batches were in flight. */
    void completions(long now) {
        if (lastNanos != Long.MIN_VALUE) {
            long gap = Math.min(now - lastNanos, longestNanos);
            gapNanos += (gap - gapNanos) >> WEIGHT_SHIFT;
            spinNanos = Math.max(baseNanos, Math.min(longestNanos, GAPS * gapNanos));
        }
        lastNanos = now;
    }

    /**
     * No batch is in flight any more: the next stream measures its own gaps (the time between two
     * streams is the application's, not the transport's) and starts from spinWait.
     */
    void streamEnded() {
        if (lastNanos != Long.MIN_VALUE) {
            lastNanos = Long.MIN_VALUE;
            gapNanos = 0;
            spinNanos = baseNanos;
        }
    }
}
