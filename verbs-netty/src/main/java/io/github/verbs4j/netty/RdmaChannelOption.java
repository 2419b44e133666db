package io.github.verbs4j.netty;

import io.netty.channel.ChannelOption;

/**
 * The RDMA options of {@link RdmaSocketChannel}, beside Netty's usual ones; for accepted
 * channels, set them with {@code ServerBootstrap.childOption}. They take effect when the
 * connection is set up.
 *
 * @param <T> the option's value type
 */
public final class RdmaChannelOption<T> extends ChannelOption<T> {

    /** Receive slots per connection (and the peer's send credits): 4..65535, default 32. */
    public static final ChannelOption<Integer> RDMA_RING_SLOTS = valueOf(RdmaChannelOption.class, "RDMA_RING_SLOTS");
    /** Bytes per receive slot, the largest single message on the wire: 256..16 MiB, default 64 KiB. */
    public static final ChannelOption<Integer> RDMA_SLOT_SIZE = valueOf(RdmaChannelOption.class, "RDMA_SLOT_SIZE");
    /** Send work requests in flight per connection (the send queue's depth, and send-ring slots): 4..65535, default 64. */
    public static final ChannelOption<Integer> RDMA_SEND_DEPTH = valueOf(RdmaChannelOption.class, "RDMA_SEND_DEPTH");
    /** Bytes a send may carry inline in its work request (0: none; the device may grant less): 0..4096, default 64. */
    public static final ChannelOption<Integer> RDMA_INLINE_SIZE = valueOf(RdmaChannelOption.class, "RDMA_INLINE_SIZE");
    /**
     * How the event loop waits for completions. A property of the loop, set through
     * {@link RdmaTransportOptions}: a channel's {@code setOption} returns {@code false} for it.
     */
    public static final ChannelOption<RdmaNotificationMode> RDMA_NOTIFICATION_MODE =
            valueOf(RdmaChannelOption.class, "RDMA_NOTIFICATION_MODE");

    @SuppressWarnings("deprecation")
    private RdmaChannelOption() {
        super(null);
    }
}
