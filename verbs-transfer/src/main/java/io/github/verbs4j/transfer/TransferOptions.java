package io.github.verbs4j.transfer;

import java.time.Duration;
import java.util.Objects;

/**
 * How a {@link TransferEngine} connects and stripes its traffic.
 *
 * @param qpsPerPeer     queue pairs opened to each peer; the chunks of a batch are striped over them
 * @param maxOutstanding chunks in flight on one queue pair at most (its send queue depth)
 * @param chunkSize      the largest RDMA READ or WRITE one request is split into, in bytes
 * @param maxBatches     batches in flight on the engine at once
 * @param connectTimeout how long connecting one queue pair, or one directory look-up, may take
 */
public record TransferOptions(int qpsPerPeer, int maxOutstanding, int chunkSize, int maxBatches, Duration connectTimeout) {

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
    }

    /** 2 queue pairs per peer, 16 chunks of at most 1 MiB in flight on each, 16 batches, 10 s to connect. */
    public static TransferOptions defaults() {
        return new TransferOptions(2, 16, 1 << 20, 16, Duration.ofSeconds(10));
    }

    /** These options with {@code n} queue pairs per peer. */
    public TransferOptions withQpsPerPeer(int n) {
        return new TransferOptions(n, maxOutstanding, chunkSize, maxBatches, connectTimeout);
    }

    /** These options with at most {@code n} chunks in flight per queue pair. */
    public TransferOptions withMaxOutstanding(int n) {
        return new TransferOptions(qpsPerPeer, n, chunkSize, maxBatches, connectTimeout);
    }

    /** These options with chunks of at most {@code bytes}. */
    public TransferOptions withChunkSize(int bytes) {
        return new TransferOptions(qpsPerPeer, maxOutstanding, bytes, maxBatches, connectTimeout);
    }

    /** These options with at most {@code n} batches in flight on the engine. */
    public TransferOptions withMaxBatches(int n) {
        return new TransferOptions(qpsPerPeer, maxOutstanding, chunkSize, n, connectTimeout);
    }

    /** These options allowing {@code timeout} for connecting one queue pair or one directory look-up. */
    public TransferOptions withConnectTimeout(Duration timeout) {
        return new TransferOptions(qpsPerPeer, maxOutstanding, chunkSize, maxBatches, timeout);
    }
}
