package io.github.verbs4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.UnpooledDirectByteBuf;
import io.netty.util.ResourceLeakDetector;
import io.netty.util.ResourceLeakDetectorFactory;
import io.netty.util.ResourceLeakTracker;

import java.nio.ByteBuffer;

/**
 * A message of {@link RdmaChannelOption#RDMA_ZERO_COPY_READ} reads: the payload of a receive slot,
 * wrapped where it lies. Its last release hands the slot back to its channel (reposted, its credit
 * returned to the peer) and lets go of the ring, which stays allocated while any of these is held.
 * A {@code ByteBuffer} view, not a raw address, so that every access is bounds-checked by the JDK:
 * after its release the buffer refuses access (Netty's reference count), and even a stale view
 * onto a freed ring throws rather than reads freed memory.
 *
 * <p>A buffer the application drops without releasing it never returns its slot (the peer loses
 * that credit for good). Such buffers are tracked by Netty's {@link ResourceLeakDetector}, at its
 * levels, as Netty's pooled buffers are: at {@code SIMPLE} (Netty's default) one buffer in
 * {@code io.netty.leakDetection.samplingInterval} is tracked, at {@code PARANOID} every one, and at
 * {@code ADVANCED} and above {@code touch}, {@code retain} and {@code release} are recorded. One
 * collected unreleased is reported with Netty's usual {@code LEAK: ReceiveSlotBuf.release() was
 * not called before it's garbage-collected} error, when a later buffer is made. The tracker is
 * kept on the buffer itself rather than in a wrapping buffer (Netty's leak-aware wrappers are not
 * public), so the buffer the pipeline sees is still this one.
 *
 * <p>One of these is made per message (with the {@code ByteBuffer} view Netty's constructor
 * slices), not one per slot reset on reuse: after its release the slot is posted again and the
 * peer writes its next message there, and a reference the application kept past the release
 * must then refuse access rather than read that message. A reused object cannot tell a stale
 * reference from its new holder's (both are the same reference; a generation in the object
 * changes for both), so only a new object keeps the reference count's check
 * (RdmaZeroCopyReadTest). Netty's pooled buffers accept that hazard for memory the application
 * itself reuses; here the memory is rewritten by the peer without the application's doing.
 */
final class ReceiveSlotBuf extends UnpooledDirectByteBuf {

    /** Netty's detector for these buffers; a test may set a leak listener on it. */
    static final ResourceLeakDetector<ReceiveSlotBuf> LEAKS =
            ResourceLeakDetectorFactory.instance().newResourceLeakDetector(ReceiveSlotBuf.class);

    private final RdmaSocketChannel channel;
    private final RdmaSocketChannel.ReceiveRing ring;
    private final int slot;
    /** Null when this buffer is not tracked (detection disabled, or not sampled). */
    private final ResourceLeakTracker<ReceiveSlotBuf> leak;
    /** Whether accesses are recorded too: Netty's ADVANCED and PARANOID levels. */
    private final boolean recordAccess;

    ReceiveSlotBuf(ByteBufAllocator alloc, ByteBuffer payload, RdmaSocketChannel channel,
                   RdmaSocketChannel.ReceiveRing ring, int slot) {
        // a fixed size: a handler that would grow it gets a copy of its own (Netty's cumulators do)
        super(alloc, payload, payload.remaining());
        this.channel = channel;
        this.ring = ring;
        this.slot = slot;
        this.leak = LEAKS.track(this);
        this.recordAccess = leak != null
                && ResourceLeakDetector.getLevel().ordinal() >= ResourceLeakDetector.Level.ADVANCED.ordinal();
    }

    /** The receive slot it wraps: for tests. */
    int slot() {
        return slot;
    }

    /** Whether the ring under this buffer was freed (after its channel closed and its last buffer was released): for tests. */
    boolean ringFreed() {
        return ring.region.isClosed();
    }

    @Override
    public ByteBuf touch(Object hint) {
        if (recordAccess) {
            leak.record(hint);
        }
        return this;
    }

    @Override
    public ByteBuf touch() {
        if (recordAccess) {
            leak.record();
        }
        return this;
    }

    @Override
    public ByteBuf retain() {
        if (recordAccess) {
            leak.record();
        }
        return super.retain();
    }

    @Override
    public ByteBuf retain(int increment) {
        if (recordAccess) {
            leak.record();
        }
        return super.retain(increment);
    }

    @Override
    public boolean release() {
        if (recordAccess) {
            leak.record();
        }
        return super.release();
    }

    @Override
    public boolean release(int decrement) {
        if (recordAccess) {
            leak.record();
        }
        return super.release(decrement);
    }

    @Override
    protected void deallocate() {
        super.deallocate(); // the view is dropped, never freed: the ring's memory is the channel's
        channel.slotReleased(ring, slot);
        if (leak != null) {
            leak.close(this); // released: not a leak
        }
    }
}
