package io.github.verbs4j.cm;

import java.util.Objects;

/**
 * The shape of an {@link RdmaConnection}: its registered buffers, the sizes of its queue pair
 * and completion queue, how it waits, and the parameters it connects or accepts with. Start
 * from {@link #defaults()} and change what differs with the {@code withX} methods, as every
 * options type of verbs4j does; immutable and thread-safe.
 *
 * <pre>{@code
 * EndpointOptions options = EndpointOptions.defaults()
 *         .withMessageSize(1024).withReceiveSlots(64)  // 64 receive buffers of 1 KiB kept posted
 *         .withSendQueueDepth(128)                     // up to 128 READs/WRITEs/sends outstanding
 *         .withRdmaBufferSize(1 << 20)
 *         .withParameters(ConnectParameters.defaults().withDepths(16, 16));
 * }</pre>
 *
 * <p>Each value is checked when the options are made ({@link IllegalArgumentException} naming
 * it), so a wither throws for a value out of range. A set {@code completionQueueSize} must hold
 * {@code sendQueueDepth + receiveSlots}: set the depths before it.
 *
 * <p>Sizes are what is asked of the device: the queue pair may get more
 * ({@link io.github.verbs4j.QueuePair#capabilities()}); a device that cannot give them fails
 * the connect or accept with {@code rdma_create_qp}'s EINVAL.
 *
 * @param messageSize         bytes of the send buffer and of each receive buffer: the largest
 *                            message (at least 1; default 4096)
 * @param receiveSlots        receive buffers kept posted: messages the peer may send ahead of
 *                            {@link RdmaConnection#receive} (1..65536; default 8)
 * @param rdmaBufferSize      bytes of the buffer peers may READ and WRITE
 *                            ({@link RdmaConnection#remote()}; at least 1; default 64 KiB)
 * @param sendQueueDepth      send requests (sends, READs, WRITEs) outstanding at once: the QP's
 *                            {@code max_send_wr} (1..65536; default 16)
 * @param completionQueueSize entries of the connection's completion queue, or 0 (the default)
 *                            for {@code sendQueueDepth + receiveSlots}, which no traffic of the
 *                            connection can overflow; {@link #completionQueueEntries()} says which
 * @param maxInlineData       bytes a send request may carry inline ({@code max_inline_data};
 *                            default 0)
 * @param maxSendSge          scatter/gather entries per send request (at least 1; default 1)
 * @param maxRecvSge          scatter/gather entries per receive request (at least 1; default 1)
 * @param spinPolls           empty polls of the completion queue before a wait blocks on the
 *                            completion channel: a few hundred keep the latency of a busy
 *                            connection low, 0 blocks at once (no CPU spent idle; default 200)
 * @param parameters          the connect/accept parameters, with the private data to send
 */
public record EndpointOptions(int messageSize, int receiveSlots, int rdmaBufferSize, int sendQueueDepth,
        int completionQueueSize, int maxInlineData, int maxSendSge, int maxRecvSge, int spinPolls,
        ConnectParameters parameters) {

    /** Checks every value; see the class comment for the ranges. */
    public EndpointOptions {
        atLeast("messageSize", messageSize, 1);
        within("receiveSlots", receiveSlots, 1, 65536);
        atLeast("rdmaBufferSize", rdmaBufferSize, 1);
        within("sendQueueDepth", sendQueueDepth, 1, 65536);
        atLeast("completionQueueSize", completionQueueSize, 0);
        atLeast("maxInlineData", maxInlineData, 0);
        atLeast("maxSendSge", maxSendSge, 1);
        atLeast("maxRecvSge", maxRecvSge, 1);
        atLeast("spinPolls", spinPolls, 0);
        Objects.requireNonNull(parameters, "parameters");
        if (completionQueueSize != 0 && completionQueueSize < sendQueueDepth + receiveSlots) {
            throw new IllegalArgumentException("completionQueueSize " + completionQueueSize + " could overflow: "
                    + "it must hold sendQueueDepth + receiveSlots = " + (sendQueueDepth + receiveSlots) + " entries");
        }
    }

    /** 4 KiB messages, 8 receive buffers, a 64 KiB RDMA buffer, 16 send requests, {@link ConnectParameters#defaults()}. */
    public static EndpointOptions defaults() {
        return new EndpointOptions(4096, 8, 64 * 1024, 16, 0, 0, 1, 1, 200, ConnectParameters.defaults());
    }

    /** The entries the completion queue is made with: {@link #completionQueueSize()}, or {@code sendQueueDepth + receiveSlots} for 0. */
    public int completionQueueEntries() {
        return completionQueueSize > 0 ? completionQueueSize : sendQueueDepth + receiveSlots;
    }

    /** These options with messages of at most {@code bytes}. */
    public EndpointOptions withMessageSize(int bytes) {
        return new EndpointOptions(bytes, receiveSlots, rdmaBufferSize, sendQueueDepth, completionQueueSize,
                maxInlineData, maxSendSge, maxRecvSge, spinPolls, parameters);
    }

    /** These options with {@code slots} receive buffers kept posted. */
    public EndpointOptions withReceiveSlots(int slots) {
        return new EndpointOptions(messageSize, slots, rdmaBufferSize, sendQueueDepth, completionQueueSize,
                maxInlineData, maxSendSge, maxRecvSge, spinPolls, parameters);
    }

    /** These options with an RDMA buffer of {@code bytes}. */
    public EndpointOptions withRdmaBufferSize(int bytes) {
        return new EndpointOptions(messageSize, receiveSlots, bytes, sendQueueDepth, completionQueueSize,
                maxInlineData, maxSendSge, maxRecvSge, spinPolls, parameters);
    }

    /** These options with up to {@code depth} send requests outstanding. */
    public EndpointOptions withSendQueueDepth(int depth) {
        return new EndpointOptions(messageSize, receiveSlots, rdmaBufferSize, depth, completionQueueSize,
                maxInlineData, maxSendSge, maxRecvSge, spinPolls, parameters);
    }

    /** These options with a completion queue of {@code entries} (0: sized from the depths). */
    public EndpointOptions withCompletionQueueSize(int entries) {
        return new EndpointOptions(messageSize, receiveSlots, rdmaBufferSize, sendQueueDepth, entries,
                maxInlineData, maxSendSge, maxRecvSge, spinPolls, parameters);
    }

    /** These options with up to {@code bytes} of inline data per send request. */
    public EndpointOptions withMaxInlineData(int bytes) {
        return new EndpointOptions(messageSize, receiveSlots, rdmaBufferSize, sendQueueDepth, completionQueueSize,
                bytes, maxSendSge, maxRecvSge, spinPolls, parameters);
    }

    /** These options with {@code n} scatter/gather entries per send request. */
    public EndpointOptions withMaxSendSge(int n) {
        return new EndpointOptions(messageSize, receiveSlots, rdmaBufferSize, sendQueueDepth, completionQueueSize,
                maxInlineData, n, maxRecvSge, spinPolls, parameters);
    }

    /** These options with {@code n} scatter/gather entries per receive request. */
    public EndpointOptions withMaxRecvSge(int n) {
        return new EndpointOptions(messageSize, receiveSlots, rdmaBufferSize, sendQueueDepth, completionQueueSize,
                maxInlineData, maxSendSge, n, spinPolls, parameters);
    }

    /** These options spinning {@code polls} empty polls before a wait blocks. */
    public EndpointOptions withSpinPolls(int polls) {
        return new EndpointOptions(messageSize, receiveSlots, rdmaBufferSize, sendQueueDepth, completionQueueSize,
                maxInlineData, maxSendSge, maxRecvSge, polls, parameters);
    }

    /** These options connecting or accepting with {@code parameters}. */
    public EndpointOptions withParameters(ConnectParameters parameters) {
        return new EndpointOptions(messageSize, receiveSlots, rdmaBufferSize, sendQueueDepth, completionQueueSize,
                maxInlineData, maxSendSge, maxRecvSge, spinPolls, parameters);
    }

    /** These options sending {@code data} as private data with the connect or accept (kept in {@link #parameters()}). */
    public EndpointOptions withPrivateData(byte[] data) {
        return withParameters(parameters.withPrivateData(data));
    }

    /** These options with other buffer sizes. */
    public EndpointOptions withBuffers(int messageSize, int receiveSlots, int rdmaBufferSize) {
        return new EndpointOptions(messageSize, receiveSlots, rdmaBufferSize, sendQueueDepth, completionQueueSize,
                maxInlineData, maxSendSge, maxRecvSge, spinPolls, parameters);
    }

    /** The {@link QpInit} these options ask {@code rdma_create_qp} for. */
    QpInit qpInit() {
        return QpInit.defaults().withMaxSendWr(sendQueueDepth).withMaxRecvWr(receiveSlots).withMaxSendSge(maxSendSge)
                .withMaxRecvSge(maxRecvSge).withMaxInlineData(maxInlineData);
    }

    private static void atLeast(String name, int value, int min) {
        if (value < min) {
            throw new IllegalArgumentException(name + " must be at least " + min + ", got " + value);
        }
    }

    private static void within(String name, int value, int min, int max) {
        if (value < min || value > max) {
            throw new IllegalArgumentException(name + " must be within " + min + ".." + max + ", got " + value);
        }
    }
}
