package io.github.verbs4j.transfer;

import java.time.Duration;
import java.util.Objects;

/**
 * How a {@link TransferEngine} connects and stripes its traffic: an immutable value; start from
 * {@link #defaults()} and name what differs with the {@code withX} methods (each returns new
 * options: use its result). Every value is checked where the options are made
 * ({@link IllegalArgumentException} naming the field and its range).
 *
 * <pre>{@code
 * TransferOptions options = TransferOptions.defaults().withQpsPerPeer(4).withChunkSize(256 << 10);
 * }</pre>
 *
 * @param qpsPerPeer     queue pairs opened to each peer; the chunks of a batch are striped over them
 * @param maxOutstanding chunks in flight on one queue pair at most (its send queue depth)
 * @param chunkSize      the largest RDMA READ or WRITE one request is split into, in bytes
 * @param maxBatches     batches in flight on the engine at once
 * @param connectTimeout how long connecting one queue pair, or one directory look-up, may take
 * @param spinWait       how long a thread that awaits a batch or a look-up polls the queues
 *                       without a result before it blocks on the engine's completion channel
 *                       (and the peers' rdma_cm events) until a completion wakes it; zero blocks
 *                       at once. Spinning answers a completion a few microseconds sooner, blocking
 *                       leaves the core to others (on a shared machine, to the very peer awaited).
 *                       While batches stream, a wait spins for four times the usual time between
 *                       completions instead, within [spinWait, 20 x spinWait]: with selective
 *                       signaling a completion comes only every quarter of a queue pair's depth,
 *                       and a wait that blocked between two of them would stall the stream
 *                       (a READ stream above all, whose data lands without the waiting thread)
 */
public record TransferOptions(int qpsPerPeer, int maxOutstanding, int chunkSize, int maxBatches, Duration connectTimeout,
        Duration spinWait) {

    /** The default {@link #spinWait()}: 50 µs, a few of softrdma's or a NIC's round trips. */
    public static final Duration DEFAULT_SPIN_WAIT = Duration.ofNanos(50_000);

    /** Checks every value (ranges in the messages). */
    public TransferOptions {
        if (qpsPerPeer < 1 || qpsPerPeer > 64) {
            throw new IllegalArgumentException("qpsPerPeer must be within 1..64, got " + qpsPerPeer);
        }
        if (maxOutstanding < 1 || maxOutstanding > 4096) {
            throw new IllegalArgumentException("maxOutstanding must be within 1..4096, got " + maxOutstanding);
        }
        if (chunkSize < 1) {
            throw new IllegalArgumentException("chunkSize must be positive, got " + chunkSize);
        }
        if (maxBatches < 1) {
            throw new IllegalArgumentException("maxBatches must be positive, got " + maxBatches);
        }
        Objects.requireNonNull(connectTimeout, "connectTimeout");
        if (connectTimeout.isNegative() || connectTimeout.isZero()) {
            throw new IllegalArgumentException("connectTimeout must be positive, got " + connectTimeout);
        }
        Objects.requireNonNull(spinWait, "spinWait");
        if (spinWait.isNegative() || spinWait.compareTo(Duration.ofSeconds(1)) > 0) {
            throw new IllegalArgumentException("spinWait must be within 0..1 s, got " + spinWait);
        }
    }

    /**
     * 2 queue pairs per peer, 16 chunks of at most 1 MiB in flight on each, 16 batches, 10 s to
     * connect, 50 µs of polling before a wait blocks.
     */
    public static TransferOptions defaults() {
        return new TransferOptions(2, 16, 1 << 20, 16, Duration.ofSeconds(10), DEFAULT_SPIN_WAIT);
    }

    /** These options with {@code n} queue pairs per peer. */
    public TransferOptions withQpsPerPeer(int n) {
        return new TransferOptions(n, maxOutstanding, chunkSize, maxBatches, connectTimeout, spinWait);
    }

    /** These options with at most {@code n} chunks in flight per queue pair. */
    public TransferOptions withMaxOutstanding(int n) {
        return new TransferOptions(qpsPerPeer, n, chunkSize, maxBatches, connectTimeout, spinWait);
    }

    /** These options with chunks of at most {@code bytes}. */
    public TransferOptions withChunkSize(int bytes) {
        return new TransferOptions(qpsPerPeer, maxOutstanding, bytes, maxBatches, connectTimeout, spinWait);
    }

    /** These options with at most {@code n} batches in flight on the engine. */
    public TransferOptions withMaxBatches(int n) {
        return new TransferOptions(qpsPerPeer, maxOutstanding, chunkSize, n, connectTimeout, spinWait);
    }

    /** These options allowing {@code timeout} for connecting one queue pair or one directory look-up. */
    public TransferOptions withConnectTimeout(Duration timeout) {
        return new TransferOptions(qpsPerPeer, maxOutstanding, chunkSize, maxBatches, timeout, spinWait);
    }

    /** These options polling for {@code spinWait} before a wait blocks (zero: block at once). */
    public TransferOptions withSpinWait(Duration spinWait) {
        return new TransferOptions(qpsPerPeer, maxOutstanding, chunkSize, maxBatches, connectTimeout, spinWait);
    }
}
