package io.github.verbs4j.transfer.collective;

import java.time.Duration;
import java.util.Objects;

/**
 * How a {@link Ring} is built and how long its waits may take: one value for every rank's
 * {@link Ring#join(java.net.InetSocketAddress, int, int, RingOptions)} (or
 * {@link Ring.Rendezvous#join(int, RingOptions)}), made with {@link #defaults()} and the
 * {@code with…} methods.
 *
 * <p><b>Two timeouts</b>, because they bound different things: the rendezvous waits for processes
 * to start and find each other (seconds to minutes on a loaded machine), a collective waits for a
 * neighbour that is already connected and should answer within its own transfer time. A
 * collective that runs past {@link #operationTimeout()} throws
 * {@link io.github.verbs4j.RdmaTimeoutException} naming the collective and the neighbour's rank
 * it waited for.
 *
 * @param maxBytes         the largest array a collective takes, in bytes: a positive multiple of 8,
 *                         the same on every rank (the ring registers twice this much)
 * @param joinTimeout      how long the rendezvous and the ring's connections may take
 * @param operationTimeout how long each collective may take, from its call to its return
 * @param spinWait         how long a wait polls the completion queue without a result before it
 *                         blocks on the completion channel (and the neighbours' rdma_cm events);
 *                         zero blocks at once. Spinning answers a piece a few microseconds sooner,
 *                         blocking leaves the core to others (on a shared machine, to the very
 *                         neighbour awaited). Within a collective a wait spins for four times the
 *                         usual time between its completions instead, within [spinWait, 20 x
 *                         spinWait]: a piece shows only when its last packet has landed
 */
public record RingOptions(long maxBytes, Duration joinTimeout, Duration operationTimeout, Duration spinWait) {

    /** The default {@link #maxBytes()}: 16 MiB. */
    public static final long DEFAULT_MAX_BYTES = 16L << 20;
    /** The default {@link #joinTimeout()}: 30 s, for processes that start at about the same time. */
    public static final Duration DEFAULT_JOIN_TIMEOUT = Duration.ofSeconds(30);
    /**
     * The default {@link #operationTimeout()}: 60 s, far beyond a collective of
     * {@link #DEFAULT_MAX_BYTES} on any link (a few milliseconds at 10 GB/s, seconds under
     * softrdma on a loaded machine): a bound on a neighbour that stopped taking part, not a
     * performance target.
     */
    public static final Duration DEFAULT_OPERATION_TIMEOUT = Duration.ofSeconds(60);
    /** The default {@link #spinWait()}: 50 µs, a few of softrdma's or a NIC's round trips. */
    public static final Duration DEFAULT_SPIN_WAIT = Duration.ofNanos(50_000);

    public RingOptions {
        if (maxBytes < 8 || maxBytes % 8 != 0) {
            throw new IllegalArgumentException("maxBytes must be a positive multiple of 8, got " + maxBytes);
        }
        positive("joinTimeout", joinTimeout);
        positive("operationTimeout", operationTimeout);
        Objects.requireNonNull(spinWait, "spinWait");
        if (spinWait.isNegative() || spinWait.compareTo(Duration.ofSeconds(1)) > 0) {
            throw new IllegalArgumentException("spinWait must be within 0..1 s, got " + spinWait);
        }
    }

    private static void positive(String name, Duration d) {
        Objects.requireNonNull(d, name);
        if (d.isNegative() || d.isZero()) {
            throw new IllegalArgumentException(name + " must be positive, got " + d);
        }
    }

    /**
     * {@link #DEFAULT_MAX_BYTES}, {@link #DEFAULT_JOIN_TIMEOUT}, {@link #DEFAULT_OPERATION_TIMEOUT}
     * and {@link #DEFAULT_SPIN_WAIT}.
     */
    public static RingOptions defaults() {
        return new RingOptions(DEFAULT_MAX_BYTES, DEFAULT_JOIN_TIMEOUT, DEFAULT_OPERATION_TIMEOUT, DEFAULT_SPIN_WAIT);
    }

    /** These options for collectives of at most {@code bytes} bytes (a positive multiple of 8). */
    public RingOptions withMaxBytes(long bytes) {
        return new RingOptions(bytes, joinTimeout, operationTimeout, spinWait);
    }

    /** These options allowing {@code timeout} for the rendezvous and the ring's connections. */
    public RingOptions withJoinTimeout(Duration timeout) {
        return new RingOptions(maxBytes, timeout, operationTimeout, spinWait);
    }

    /** These options allowing {@code timeout} for each collective. */
    public RingOptions withOperationTimeout(Duration timeout) {
        return new RingOptions(maxBytes, joinTimeout, timeout, spinWait);
    }

    /** These options polling for {@code spinWait} before a wait blocks (zero: block at once). */
    public RingOptions withSpinWait(Duration spinWait) {
        return new RingOptions(maxBytes, joinTimeout, operationTimeout, spinWait);
    }
}
