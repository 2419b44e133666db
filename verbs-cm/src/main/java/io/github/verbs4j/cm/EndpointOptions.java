package io.github.verbs4j.cm;

import java.util.Objects;

/**
 * The shape of an {@link RdmaConnection}: its registered buffers, the sizes of its queue pair
 * and completion queue, how it waits, and the parameters it connects or accepts with. Made with
 * {@link #builder()} (or {@link #defaults()}); immutable and thread-safe.
 *
 * <pre>{@code
 * EndpointOptions options = EndpointOptions.builder()
 *         .messageSize(1024).receiveSlots(64)      // 64 receive buffers of 1 KiB kept posted
 *         .sendQueueDepth(128)                     // up to 128 READs/WRITEs/sends outstanding
 *         .rdmaBufferSize(1 << 20)
 *         .parameters(ConnectParameters.defaults().withDepths(16, 16))
 *         .build();
 * }</pre>
 *
 * <p>Sizes are what is asked of the device: the queue pair may get more
 * ({@link io.github.verbs4j.QueuePair#capabilities()}); a device that cannot give them fails
 * the connect or accept with {@code rdma_create_qp}'s EINVAL.
 */
public final class EndpointOptions {

    private final int messageSize;
    private final int receiveSlots;
    private final int rdmaBufferSize;
    private final int sendQueueDepth;
    private final int completionQueueSize;
    private final int maxInlineData;
    private final int maxSendSge;
    private final int maxRecvSge;
    private final int spinPolls;
    private final ConnectParameters parameters;

    private EndpointOptions(Builder b) {
        this.messageSize = b.messageSize;
        this.receiveSlots = b.receiveSlots;
        this.rdmaBufferSize = b.rdmaBufferSize;
        this.sendQueueDepth = b.sendQueueDepth;
        this.completionQueueSize = b.completionQueueSize;
        this.maxInlineData = b.maxInlineData;
        this.maxSendSge = b.maxSendSge;
        this.maxRecvSge = b.maxRecvSge;
        this.spinPolls = b.spinPolls;
        this.parameters = b.parameters;
    }

    /** 4 KiB messages, 8 receive buffers, a 64 KiB RDMA buffer, 16 send requests, {@link ConnectParameters#defaults()}. */
    public static EndpointOptions defaults() {
        return builder().build();
    }

    /** A builder starting from the {@link #defaults()}. */
    public static Builder builder() {
        return new Builder();
    }

    /** A builder starting from these options. */
    public Builder toBuilder() {
        Builder b = new Builder();
        b.messageSize = messageSize;
        b.receiveSlots = receiveSlots;
        b.rdmaBufferSize = rdmaBufferSize;
        b.sendQueueDepth = sendQueueDepth;
        b.completionQueueSize = completionQueueSize;
        b.maxInlineData = maxInlineData;
        b.maxSendSge = maxSendSge;
        b.maxRecvSge = maxRecvSge;
        b.spinPolls = spinPolls;
        b.parameters = parameters;
        return b;
    }

    /** These options sending {@code data} as private data with the connect or accept. */
    public EndpointOptions withPrivateData(byte[] data) {
        return toBuilder().parameters(parameters.withPrivateData(data)).build();
    }

    /** These options with other buffer sizes. */
    public EndpointOptions withBuffers(int messageSize, int receiveSlots, int rdmaBufferSize) {
        return toBuilder().messageSize(messageSize).receiveSlots(receiveSlots).rdmaBufferSize(rdmaBufferSize).build();
    }

    /** Bytes of the send buffer and of each receive buffer: the largest message. */
    public int messageSize() {
        return messageSize;
    }

    /** Receive buffers kept posted: messages the peer may send ahead of {@link RdmaConnection#receive}. */
    public int receiveSlots() {
        return receiveSlots;
    }

    /** Bytes of the buffer peers may READ and WRITE ({@link RdmaConnection#remote()}). */
    public int rdmaBufferSize() {
        return rdmaBufferSize;
    }

    /** Send requests (sends, READs, WRITEs) outstanding at once: the QP's {@code max_send_wr}. */
    public int sendQueueDepth() {
        return sendQueueDepth;
    }

    /**
     * Entries of the connection's completion queue: the one set, or by default
     * {@code sendQueueDepth + receiveSlots}, which no traffic of the connection can overflow.
     */
    public int completionQueueSize() {
        return completionQueueSize > 0 ? completionQueueSize : sendQueueDepth + receiveSlots;
    }

    /** Bytes a send request may carry inline ({@code max_inline_data}). */
    public int maxInlineData() {
        return maxInlineData;
    }

    /** Scatter/gather entries per send request. */
    public int maxSendSge() {
        return maxSendSge;
    }

    /** Scatter/gather entries per receive request. */
    public int maxRecvSge() {
        return maxRecvSge;
    }

    /**
     * Empty polls of the completion queue before a wait blocks on the completion channel: a few
     * hundred keep the latency of a busy connection low, 0 blocks at once (no CPU spent idle).
     */
    public int spinPolls() {
        return spinPolls;
    }

    /** The connect/accept parameters, with the private data to send. */
    public ConnectParameters parameters() {
        return parameters;
    }

    /** The {@link QpInit} these options ask {@code rdma_create_qp} for. */
    QpInit qpInit() {
        return new QpInit(sendQueueDepth, receiveSlots, maxSendSge, maxRecvSge, maxInlineData, false);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof EndpointOptions e && e.messageSize == messageSize && e.receiveSlots == receiveSlots
                && e.rdmaBufferSize == rdmaBufferSize && e.sendQueueDepth == sendQueueDepth
                && e.completionQueueSize == completionQueueSize && e.maxInlineData == maxInlineData
                && e.maxSendSge == maxSendSge && e.maxRecvSge == maxRecvSge && e.spinPolls == spinPolls
                && e.parameters.equals(parameters);
    }

    @Override
    public int hashCode() {
        return Objects.hash(messageSize, receiveSlots, rdmaBufferSize, sendQueueDepth, completionQueueSize,
                maxInlineData, maxSendSge, maxRecvSge, spinPolls, parameters);
    }

    @Override
    public String toString() {
        return "EndpointOptions[messageSize=" + messageSize + ", receiveSlots=" + receiveSlots + ", rdmaBufferSize="
                + rdmaBufferSize + ", sendQueueDepth=" + sendQueueDepth + ", completionQueueSize="
                + completionQueueSize() + ", maxInlineData=" + maxInlineData + ", maxSendSge=" + maxSendSge
                + ", maxRecvSge=" + maxRecvSge + ", spinPolls=" + spinPolls + ", " + parameters + "]";
    }

    /**
     * Builds {@link EndpointOptions}; each setter checks its value ({@link IllegalArgumentException}
     * naming it). Not thread-safe.
     */
    public static final class Builder {

        private int messageSize = 4096;
        private int receiveSlots = 8;
        private int rdmaBufferSize = 64 * 1024;
        private int sendQueueDepth = 16;
        private int completionQueueSize;
        private int maxInlineData;
        private int maxSendSge = 1;
        private int maxRecvSge = 1;
        private int spinPolls = 200;
        private ConnectParameters parameters = ConnectParameters.defaults();

        private Builder() {
        }

        /** See {@link EndpointOptions#messageSize()} (at least 1; default 4096). */
        public Builder messageSize(int bytes) {
            this.messageSize = atLeast("messageSize", bytes, 1);
            return this;
        }

        /** See {@link EndpointOptions#receiveSlots()} (1..65536; default 8). */
        public Builder receiveSlots(int slots) {
            if (slots < 1 || slots > 65536) {
                throw new IllegalArgumentException("receiveSlots must be within 1..65536, got " + slots);
            }
            this.receiveSlots = slots;
            return this;
        }

        /** See {@link EndpointOptions#rdmaBufferSize()} (at least 1; default 64 KiB). */
        public Builder rdmaBufferSize(int bytes) {
            this.rdmaBufferSize = atLeast("rdmaBufferSize", bytes, 1);
            return this;
        }

        /** See {@link EndpointOptions#sendQueueDepth()} (1..65536; default 16). */
        public Builder sendQueueDepth(int depth) {
            if (depth < 1 || depth > 65536) {
                throw new IllegalArgumentException("sendQueueDepth must be within 1..65536, got " + depth);
            }
            this.sendQueueDepth = depth;
            return this;
        }

        /** See {@link EndpointOptions#completionQueueSize()} (0: computed; default 0). */
        public Builder completionQueueSize(int entries) {
            this.completionQueueSize = atLeast("completionQueueSize", entries, 0);
            return this;
        }

        /** See {@link EndpointOptions#maxInlineData()} (default 0). */
        public Builder maxInlineData(int bytes) {
            this.maxInlineData = atLeast("maxInlineData", bytes, 0);
            return this;
        }

        /** See {@link EndpointOptions#maxSendSge()} (at least 1; default 1). */
        public Builder maxSendSge(int n) {
            this.maxSendSge = atLeast("maxSendSge", n, 1);
            return this;
        }

        /** See {@link EndpointOptions#maxRecvSge()} (at least 1; default 1). */
        public Builder maxRecvSge(int n) {
            this.maxRecvSge = atLeast("maxRecvSge", n, 1);
            return this;
        }

        /** See {@link EndpointOptions#spinPolls()} (default 200). */
        public Builder spinPolls(int polls) {
            this.spinPolls = atLeast("spinPolls", polls, 0);
            return this;
        }

        /** See {@link EndpointOptions#parameters()}. */
        public Builder parameters(ConnectParameters parameters) {
            this.parameters = Objects.requireNonNull(parameters, "parameters");
            return this;
        }

        /** The private data sent with the connect or accept (kept in {@link #parameters}). */
        public Builder privateData(byte[] data) {
            this.parameters = parameters.withPrivateData(data);
            return this;
        }

        /**
         * The options.
         *
         * <p><b>Errors</b>: {@link IllegalArgumentException} when a set completion queue size is
         * smaller than {@code sendQueueDepth + receiveSlots}.
         */
        public EndpointOptions build() {
            if (completionQueueSize != 0 && completionQueueSize < sendQueueDepth + receiveSlots) {
                throw new IllegalArgumentException("completionQueueSize " + completionQueueSize + " could overflow: "
                        + "it must hold sendQueueDepth + receiveSlots = " + (sendQueueDepth + receiveSlots) + " entries");
            }
            return new EndpointOptions(this);
        }

        private static int atLeast(String name, int value, int min) {
            if (value < min) {
                throw new IllegalArgumentException(name + " must be at least " + min + ", got " + value);
            }
            return value;
        }
    }
}
