package io.github.verbs4j.channel;

import java.time.Duration;
import java.util.Objects;

/**
 * The sizes and limits of a channel: an immutable value; start from {@link #defaults()} and
 * name what differs with the {@code withX} methods (each returns new options: use its result).
 * Every value is checked where the options are made ({@link IllegalArgumentException} naming
 * the field and its range).
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
 * @param notification     how this side tells the peer what it wrote into the peer's ring:
 *                         {@link Notification#AUTO} (the default) picks by the device's transport
 *                         (RDMA WRITE with immediate data, or on iWARP, which has none, a SEND
 *                         after each plain RDMA WRITE); the other values force one (docs/channel.md,
 *                         "Notification without immediate data")
 * @param parkAfterSpin    with application polling: whether a waiting thread whose spin ran out
 *                         first parks between polls for short, growing intervals (16 to 256 us,
 *                         about 1 ms in all) before it blocks 1 ms between them (off by default:
 *                         docs/channel.md, "Application polling's wait without the millisecond");
 *                         without application polling it changes nothing
 */
public record ChannelOptions(int slots, int slotSize, int writesInFlight, int completionQueueEntries,
        int spinPolls, Duration closeTimeout, boolean applicationPolling, Notification notification, boolean parkAfterSpin) {

    /**
     * How a channel's sender tells the receiver that slots of its ring were written, and returns
     * credits and the close: the 4-byte word that says it goes either as the immediate data of
     * the WRITE, or as a SEND of its own. A receiver takes both, whatever it sends with itself.
     */
    public enum Notification {
        /** {@link #SEND} when the device reports the iWARP transport, {@link #IMMEDIATE} otherwise. */
        AUTO,
        /** RDMA WRITE with immediate data; credits and the close are zero-length WRITEs with immediate. */
        IMMEDIATE,
        /**
         * A plain RDMA WRITE followed, on the same queue pair, by a 4-byte SEND into one of the
         * receive buffers the peer keeps posted; credits and the close are 4-byte SENDs. Works on
         * every transport, iWARP included.
         */
        SEND
    }

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
        Objects.requireNonNull(notification, "notification");
    }

    /**
     * 128 slots of 1 KiB, 8 WRITEs in flight, a shared queue of 8192 entries, 2000 spins, 5 s to
     * close, a polling thread per group, the notification chosen by the transport, no parks
     * after the spin.
     */
    public static ChannelOptions defaults() {
        return new ChannelOptions(128, 1024, 8, 8192, 2000, Duration.ofSeconds(5), false, Notification.AUTO, false);
    }

    /** These options with {@code slots}. */
    public ChannelOptions withSlots(int slots) {
        return new ChannelOptions(slots, slotSize, writesInFlight, completionQueueEntries, spinPolls, closeTimeout, applicationPolling, notification, parkAfterSpin);
    }

    /** These options with {@code slotSize}. */
    public ChannelOptions withSlotSize(int slotSize) {
        return new ChannelOptions(slots, slotSize, writesInFlight, completionQueueEntries, spinPolls, closeTimeout, applicationPolling, notification, parkAfterSpin);
    }

    /** These options with {@code writesInFlight}. */
    public ChannelOptions withWritesInFlight(int writesInFlight) {
        return new ChannelOptions(slots, slotSize, writesInFlight, completionQueueEntries, spinPolls, closeTimeout, applicationPolling, notification, parkAfterSpin);
    }

    /** These options with {@code completionQueueEntries}. */
    public ChannelOptions withCompletionQueueEntries(int entries) {
        return new ChannelOptions(slots, slotSize, writesInFlight, entries, spinPolls, closeTimeout, applicationPolling, notification, parkAfterSpin);
    }

    /** These options with {@code spinPolls}. */
    public ChannelOptions withSpinPolls(int spinPolls) {
        return new ChannelOptions(slots, slotSize, writesInFlight, completionQueueEntries, spinPolls, closeTimeout, applicationPolling, notification, parkAfterSpin);
    }

    /** These options with {@code closeTimeout}. */
    public ChannelOptions withCloseTimeout(Duration closeTimeout) {
        return new ChannelOptions(slots, slotSize, writesInFlight, completionQueueEntries, spinPolls, closeTimeout, applicationPolling, notification, parkAfterSpin);
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
                applicationPolling, notification, parkAfterSpin);
    }

    /**
     * These options with {@code notification}: {@link Notification#SEND} forces the mode for
     * transports without immediate data on any device (softrdma, rxe), for tests;
     * {@link Notification#IMMEDIATE} on an iWARP device makes connecting fail.
     *
     * @param notification how this side notifies its peer
     * @return the changed options
     */
    public ChannelOptions withNotification(Notification notification) {
        return new ChannelOptions(slots, slotSize, writesInFlight, completionQueueEntries, spinPolls, closeTimeout,
                applicationPolling, notification, parkAfterSpin);
    }

    /**
     * These options with {@code parkAfterSpin}: with application polling, a waiting thread whose
     * spin ran out parks for 16, 32, 64, 128, 256, 256 and 256 us between polls before it blocks
     * 1 ms between them, so that an answer that came just after the spin is noticed at most one
     * park late instead of at the end of a millisecond (the mode's tail on a loaded machine).
     * Off by default until an A/B on a quiet machine shows the round trip's median unharmed.
     *
     * @param parkAfterSpin whether to park briefly after the spin
     * @return the changed options
     */
    public ChannelOptions withParkAfterSpin(boolean parkAfterSpin) {
        return new ChannelOptions(slots, slotSize, writesInFlight, completionQueueEntries, spinPolls, closeTimeout,
                applicationPolling, notification, parkAfterSpin);
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
