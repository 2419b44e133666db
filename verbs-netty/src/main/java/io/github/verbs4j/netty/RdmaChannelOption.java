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
     * Reads deliver each message as its receive slot itself, wrapped in a {@code ByteBuf}, instead of
     * a copy in a buffer of the channel's allocator: default {@code false}. The slot goes back to
     * the peer (reposted, its credit returned) when the buffer is released, so a handler that keeps
     * buffers keeps slots, and the peer's credits, not memory, throttle it. At most half of the
     * ring is held that way: once half the slots are out with the application, messages are copied
     * as without this option until buffers come back, so that a handler that waits for more data
     * before it releases anything (a decoder gathering a large frame) cannot stall the connection.
     * The ring's memory stays allocated after the channel closes until its last such buffer is
     * released. Each read is one whole message, whatever buffer size the {@code RecvByteBufAllocator}
     * handle guessed (the copy splits a message over the handle's buffers). Each slot's buffer
     * object is recycled for the slot's next message (no allocation per message): as with Netty's
     * pooled buffers, a reference used after its {@code release()} refuses access only until then,
     * and afterwards reads the peer's next message in that slot. Takes effect when the
     * connection is set up.
     */
    public static final ChannelOption<Boolean> RDMA_ZERO_COPY_READ =
            valueOf(RdmaChannelOption.class, "RDMA_ZERO_COPY_READ");
    /**
     * How messages travel ({@link RdmaWireMode}): {@code AUTO} (the default) picks RDMA WRITE with
     * immediate on InfiniBand and RoCE and SEND on iWARP from the device's transport. Both ends
     * must use the same mode. Takes effect when the connection is set up.
     *
     * <p># Errors: {@code WRITE_WITH_IMM} on an iWARP device fails the connect (or the accept) with
     * an {@code UnsupportedOperationException} that says why: iWARP has no immediate data on RDMA
     * WRITE. A peer of the other mode is refused: the connect fails with a
     * {@code ConnectException} naming both modes.
     */
    public static final ChannelOption<RdmaWireMode> RDMA_WIRE_MODE = valueOf(RdmaChannelOption.class, "RDMA_WIRE_MODE");
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
