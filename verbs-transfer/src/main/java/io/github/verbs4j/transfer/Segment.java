package io.github.verbs4j.transfer;

import io.github.verbs4j.MemoryRegion;

import java.lang.foreign.MemorySegment;

/**
 * A local segment registered with a {@link TransferEngine}: memory peers may READ and WRITE,
 * and the local side of this engine's requests. {@link TransferEngine#unregister} (or closing the
 * engine) deregisters it.
 */
public final class Segment {

    final TransferEngine engine;
    final MemoryRegion region;
    private final SegmentDescriptor descriptor;

    Segment(TransferEngine engine, MemoryRegion region, SegmentDescriptor descriptor) {
        this.engine = engine;
        this.region = region;
        this.descriptor = descriptor;
    }

    /** The segment's name within its engine. */
    public String name() {
        return descriptor.name();
    }

    /** The memory. */
    public MemorySegment memory() {
        return region.segment();
    }

    /** Its size in bytes. */
    public long length() {
        return descriptor.length();
    }

    /** What peers learn about it. */
    public SegmentDescriptor descriptor() {
        return descriptor;
    }

    /** Whether it is still registered. */
    public boolean isRegistered() {
        return !region.isClosed();
    }

    @Override
    public String toString() {
        return "Segment[" + descriptor + "]";
    }
}
