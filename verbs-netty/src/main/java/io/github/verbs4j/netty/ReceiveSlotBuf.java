package io.github.verbs4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
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
 * <p>One of these per slot, recycled, not one per message: in steady state a zero-copy read
 * allocates nothing (TransportAllocationTest), as Netty's pooled buffers recycle their objects.
 * The channel keeps a slot's buffer only while the slot is posted; while the application holds
 * it, the application's reference is the only one, so a buffer dropped unreleased is collected
 * and reported (below). Each message sets its capacity to the message's length (a fixed size:
 * {@code maxCapacity} too, so a handler that would grow it gets a copy of its own, as Netty's
 * cumulators do), every access checked against it ({@link BlockByteBuf}).
 *
 * <p><b>The hazard, the same as with Netty's pooled buffers</b>: after its release the buffer
 * refuses access ({@code IllegalReferenceCountException}) only until its slot carries the next
 * message. The slot is posted again at the release, the peer writes its next message there, and
 * the same object is handed to the pipeline for it: a reference kept past its release then reads
 * that message, and releasing it again releases the new holder's buffer. Nothing can tell a stale
 * reference to a reused object from the current one. With Netty's pooled buffers the memory is
 * reused by the application's own later allocations; here by the peer, at the pace of the stream.
 * Code that keeps a {@code ByteBuf} past {@code release()} is wrong on either; the option is off
 * by default (RdmaChannelOption).
 *
 * <p>A buffer the application drops without releasing it never returns its slot (the peer loses
 * that credit for good). Such buffers are tracked by Netty's {@link ResourceLeakDetector}, at its
 * levels, as Netty's pooled buffers are: at {@code SIMPLE} (Netty's default) one message in
 * {@code io.netty.leakDetection.samplingInterval} is tracked, at {@code PARANOID} every one, and at
 * {@code ADVANCED} and above {@code touch}, {@code retain} and {@code release} are recorded. One
 * collected unreleased is reported with Netty's usual {@code LEAK: ReceiveSlotBuf.release() was
 * not called before it's garbage-collected} error, when a later buffer is tracked. The tracker is
 * kept on the buffer itself rather than in a wrapping buffer (Netty's leak-aware wrappers are not
 * public), so the buffer the pipeline sees is still this one.
 */
final class ReceiveSlotBuf extends BlockByteBuf {

    /** Netty's detector for these buffers; a test may set a leak listener on it. */
    static final ResourceLeakDetector<ReceiveSlotBuf> LEAKS =
            ResourceLeakDetectorFactory.instance().newResourceLeakDetector(ReceiveSlotBuf.class);

    private final RdmaSocketChannel channel;
    private final RdmaSocketChannel.ReceiveRing ring;
    private final int slot;
    /** This message's tracker; null when it is not tracked (detection disabled, or not sampled). */
    private ResourceLeakTracker<ReceiveSlotBuf> leak;
    /** Whether accesses are recorded too: Netty's ADVANCED and PARANOID levels. */
    private boolean recordAccess;

    /** The buffer of {@code slot}, over its payload area {@code payload} (the slot less the wire's header). */
    ReceiveSlotBuf(ByteBufAllocator alloc, ByteBuffer payload, RdmaSocketChannel channel,
                   RdmaSocketChannel.ReceiveRing ring, int slot) {
        super(alloc, payload);
        this.channel = channel;
        this.ring = ring;
        this.slot = slot;
    }

    /** Makes it the buffer of the slot's next message, {@code length} bytes from the payload's start; on the loop. */
    ReceiveSlotBuf message(int length) {
        reuse(length, length, length);
        leak = LEAKS.track(this);
        recordAccess = leak != null
                && ResourceLeakDetector.getLevel().ordinal() >= ResourceLeakDetector.Level.ADVANCED.ordinal();
        return this;
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

    RdmaSocketChannel.ReceiveRing ring() {
        return ring;
    }

    @Override
    protected void deallocate() {
        // the view stays, never freed: the ring's memory is the channel's, and the slot's next message reuses it
        ResourceLeakTracker<ReceiveSlotBuf> tracked = leak;
        leak = null;
        recordAccess = false;
        if (tracked != null) {
            tracked.close(this); // released: not a leak
        }
        channel.slotReleased(this);
    }
}
