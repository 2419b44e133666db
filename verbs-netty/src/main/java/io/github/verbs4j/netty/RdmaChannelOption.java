package io.github.verbs4j.netty;

import io.netty.channel.ChannelOption;

/**
 * The RDMA options of {@link RdmaSocketChannel} and {@link RdmaServerSocketChannel}, beside
 * Netty's usual ones. A server channel's values are inherited by the channels it accepts.
 *
 * @param <T> the option's value type
 */
public final class RdmaChannelOption<T> extends ChannelOption<T> {

    /** Receive slots per connection (and the peer's send credits): 2..65536, default 64. */
    public static final ChannelOption<Integer> RDMA_RING_SLOTS = valueOf(RdmaChannelOption.class, "RDMA_RING_SLOTS");
    /** Bytes per receive slot, the largest single message on the wire: 256..16 MiB, default 64 KiB. */
    public static final ChannelOption<Integer> RDMA_SLOT_SIZE = valueOf(RdmaChannelOption.class, "RDMA_SLOT_SIZE");
    /** Send work requests in flight per connection (the send queue's depth): default 128. */
    public static final ChannelOption<Integer> RDMA_SEND_DEPTH = valueOf(RdmaChannelOption.class, "RDMA_SEND_DEPTH");
    /** Bytes a send may carry inline in its work request (0: none), default 64. */
    public static final ChannelOption<Integer> RDMA_INLINE_SIZE = valueOf(RdmaChannelOption.class, "RDMA_INLINE_SIZE");
    /** How the event loop learns of completions: busy-poll, then block on the completion channel. */
    public static final ChannelOption<RdmaNotificationMode> RDMA_NOTIFICATION_MODE =
            valueOf(RdmaChannelOption.class, "RDMA_NOTIFICATION_MODE");

    @SuppressWarnings("deprecation")
    private RdmaChannelOption() {
        super(null);
    }
}
