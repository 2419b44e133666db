package io.github.verbs4j.channel;

import java.time.Duration;
import java.util.Objects;

/**
 * The sizes and limits of a channel: an immutable value, changed with the {@code with...}
 * methods.
 *
 * <pre>{@code
 * ChannelOptions options = ChannelOptions.defaults().withSlots(256).withSlotSize(2048);
 * }</pre>
 *
 * @param slots            slots in the receive ring this side offers its peer (a power of two
 *                         is not required; 4 to 16384)
 * @param slotSize         bytes per slot, a multiple of 64 from 64 to 1 MiB; a message takes
 *                         {@code ceil((8 + length) / slotSize)} consecutive slots
 * @param writesInFlight   RDMA WRITEs a channel keeps outstanding before it coalesces further
 *                         messages into the next WRITE (1 to 64)
 * @param completionQueueEntries entries of the completion queue a {@link ChannelGroup} shares
 *                         among its channels (each channel needs {@code slots + writesInFlight + 24})
 * @param spinPolls        how many empty polls the group's thread makes before it blocks on the
 *                         completion channel's fd (0 blocks at once)
 * @param closeTimeout     how long {@link Channel#close()} waits for messages in flight to land
 *                         and for the peer to acknowledge the close
 * @param applicationPolling whether the application's threads drive the channels instead of a
 *                         polling thread of the group: a thread waiting in {@link Channel#send},
 *                         {@link Channel#offer}, {@link Channel#receive} or {@link Channel#close()}
 *                         polls the group's completion queue itself (docs/channel.md, "Application
 *                         polling")
 */
public record ChannelOptions(int slots, int slotSize, int writesInFlight, int completionQueueEntries,
        int spinPolls, Duration closeTimeout, boolean applicationPolling) {

    /** Validates the values. */
    public ChannelOptions {
        if (slots < 4 || slots > 16384) {
            throw new IllegalArgumentException("slots must be 4..16384, got " + slots);
        }
        if (slotSize < 64 || slotSize > (1 << 20) || slotSize % 64 != 0) {
            throw new IllegalArgumentException("slotSize must be a multiple of 64 from 64 to 1 MiB, got " + slotSize);
        }
        if (writesInFlight < 1 || writesInFlight > 64) {
            throw new IllegalArgumentException("writesInFlight must be 1..64, got " + writesInFlight);
        }
        if (completionQueueEntries < 64) {
            throw new IllegalArgumentException("completionQueueEntries must be at least 64, got " + completionQueueEntries);
        }
        if (spinPolls < 0) {
            throw new IllegalArgumentException("spinPolls must not be negative, got " + spinPolls);
        }
        Objects.requireNonNull(closeTimeout, "closeTimeout");
        if (closeTimeout.isNegative()) {
            throw new IllegalArgumentException("closeTimeout must not be negative, got " + closeTimeout);
        }
    }

    /**
     * The options with a polling thread per group ({@code applicationPolling} false).
     *
     * @param slots see the record's description
     * @param slotSize see the record's description
     * @param writesInFlight see the record's description
     * @param completionQueueEntries see the record's description
     * @param spinPolls see the record's description
     * @param closeTimeout see the record's description
     */
    public ChannelOptions(int slots, int slotSize, int writesInFlight, int completionQueueEntries, int spinPolls,
            Duration closeTimeout) {
        this(slots, slotSize, writesInFlight, completionQueueEntries, spinPolls, closeTimeout, false);
    }

    /**
     * 128 slots of 1 KiB, 8 WRITEs in flight, a shared queue of 8192 entries, 2000 spins, 5 s to
     * close, a polling thread per group.
     */
    public static ChannelOptions defaults() {
        return new ChannelOptions(128, 1024, 8, 8192, 2000, Duration.ofSeconds(5), false);
    }

    /** These options with {@code slots}. */
    public ChannelOptions withSlots(int slots) {
        return new ChannelOptions(slots, slotSize, writesInFlight, completionQueueEntries, spinPolls, closeTimeout, applicationPolling);
    }

    /** These options with {@code slotSize}. */
    public ChannelOptions withSlotSize(int slotSize) {
        return new ChannelOptions(slots, slotSize, writesInFlight, completionQueueEntries, spinPolls, closeTimeout, applicationPolling);
    }

    /** These options with {@code writesInFlight}. */
    public ChannelOptions withWritesInFlight(int writesInFlight) {
        return new ChannelOptions(slots, slotSize, writesInFlight, completionQueueEntries, spinPolls, closeTimeout, applicationPolling);
    }

    /** These options with {@code completionQueueEntries}. */
    public ChannelOptions withCompletionQueueEntries(int entries) {
        return new ChannelOptions(slots, slotSize, writesInFlight, entries, spinPolls, closeTimeout, applicationPolling);
    }

    /** These options with {@code spinPolls}. */
    public ChannelOptions withSpinPolls(int spinPolls) {
        return new ChannelOptions(slots, slotSize, writesInFlight, completionQueueEntries, spinPolls, closeTimeout, applicationPolling);
    }

    /** These options with {@code closeTimeout}. */
    public ChannelOptions withCloseTimeout(Duration closeTimeout) {
        return new ChannelOptions(slots, slotSize, writesInFlight, completionQueueEntries, spinPolls, closeTimeout, applicationPolling);
    }

    /**
     * These options with {@code applicationPolling}: when true, a group of these options starts
     * no polling thread and the threads that wait in its channels' operations poll its
     * completion queue themselves.
     *
     * @param applicationPolling whether the application's threads drive the channels
     * @return the changed options
     */
    public ChannelOptions withApplicationPolling(boolean applicationPolling) {
        return new ChannelOptions(slots, slotSize, writesInFlight, completionQueueEntries, spinPolls, closeTimeout,
                applicationPolling);
    }

    /** The largest message a ring of {@code slots} slots of {@code slotSize} bytes carries: a quarter of the ring, less the header. */
    static long maxMessage(int slots, int slotSize) {
        return (long) Math.max(1, slots / 4) * slotSize - Channel.HEADER;
    }

    /** Completion-queue entries one channel of these options needs. */
    int entriesPerChannel() {
        return slots + Channel.EXTRA_RECVS + writesInFlight + 8;
    }
}
