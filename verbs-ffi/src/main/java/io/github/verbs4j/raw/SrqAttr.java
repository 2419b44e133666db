package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_srq_attr;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;

/**
 * {@code struct ibv_srq_attr} as Java values: an SRQ's capacity in receive requests, the
 * scatter entries per request and the limit that arms {@code IBV_EVENT_SRQ_LIMIT_REACHED}.
 * {@code ibv_modify_srq} reads it (its mask, {@code IBV_SRQ_MAX_WR}/{@code IBV_SRQ_LIMIT}, says
 * which fields), {@code ibv_query_srq} fills it, and it is embedded in the SRQ init attributes
 * ({@link SrqInitAttr}), where the device writes back what it granted.
 */
public record SrqAttr(int maxWr, int maxSge, int srqLimit) {

    /** A zeroed {@code struct ibv_srq_attr} from {@code allocator} holding these values. */
    public MemorySegment write(SegmentAllocator allocator) {
        MemorySegment attr = allocate(allocator);
        writeInto(attr);
        return attr;
    }

    /** Writes these values into the struct at {@code attr}. */
    void writeInto(MemorySegment attr) {
        ibv_srq_attr.max_wr(attr, maxWr);
        ibv_srq_attr.max_sge(attr, maxSge);
        ibv_srq_attr.srq_limit(attr, srqLimit);
    }

    /** A zeroed {@code struct ibv_srq_attr}: room for {@code ibv_query_srq} to fill. */
    public static MemorySegment allocate(SegmentAllocator allocator) {
        MemorySegment attr = allocator.allocate(ibv_srq_attr.layout());
        attr.fill((byte) 0);
        return attr;
    }

    /** Reads the struct at {@code attr}. */
    public static SrqAttr read(MemorySegment attr) {
        return new SrqAttr(ibv_srq_attr.max_wr(attr), ibv_srq_attr.max_sge(attr), ibv_srq_attr.srq_limit(attr));
    }
}
