package io.github.verbs4j.netty;

import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.UnpooledDirectByteBuf;

import java.nio.ByteBuffer;

/**
 * A message of {@link RdmaChannelOption#RDMA_ZERO_COPY_READ} reads: the payload of a receive slot,
 * wrapped where it lies. Its last release hands the slot back to its channel (reposted, its credit
 * returned to the peer) and lets go of the ring, which stays allocated while any of these is held.
 * A {@code ByteBuffer} view, not a raw address, so that every access is bounds-checked by the JDK:
 * after its release the buffer refuses access (Netty's reference count), and even a stale view
 * onto a freed ring throws rather than reads freed memory.
 */
final class ReceiveSlotBuf extends UnpooledDirectByteBuf {

    private final RdmaSocketChannel channel;
    private final RdmaSocketChannel.ReceiveRing ring;
    private final int slot;

    ReceiveSlotBuf(ByteBufAllocator alloc, ByteBuffer payload, RdmaSocketChannel channel,
                   RdmaSocketChannel.ReceiveRing ring, int slot) {
        // a fixed size: a handler that would grow it gets a copy of its own (Netty's cumulators do)
        super(alloc, payload, payload.remaining());
        this.channel = channel;
        this.ring = ring;
        this.slot = slot;
    }

    /** Whether the ring under this buffer was freed (after its channel closed and its last buffer was released): for tests. */
    boolean ringFreed() {
        return ring.region.isClosed();
    }

    @Override
    protected void deallocate() {
        super.deallocate(); // the view is dropped, never freed: the ring's memory is the channel's
        channel.slotReleased(ring, slot);
    }
}
