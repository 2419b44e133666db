package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_cq_init_attr_ex;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.util.Objects;

/**
 * The creation attributes of an extended completion queue, and their one encoding into
 * {@code struct ibv_cq_init_attr_ex} ({@code ibv_create_cq_ex}). The fields not named here
 * ({@code cq_context}, {@code comp_mask}, {@code flags}, {@code parent_domain}) are written as 0.
 *
 * @param entries     {@code cqe}: the least number of completions it holds
 * @param channel     {@code channel}: the completion channel, {@link MemorySegment#NULL} for none
 * @param compVector  {@code comp_vector}
 * @param wcFlags     {@code wc_flags}: the {@code IBV_WC_EX_WITH_*} fields the poller reads
 */
public record CqInitAttrEx(int entries, MemorySegment channel, int compVector, long wcFlags) {

    public CqInitAttrEx {
        Objects.requireNonNull(channel, "channel (MemorySegment.NULL for none)");
    }

    /** A zeroed {@code struct ibv_cq_init_attr_ex} from {@code allocator} holding these attributes. */
    public MemorySegment write(SegmentAllocator allocator) {
        MemorySegment attr = allocator.allocate(ibv_cq_init_attr_ex.layout());
        attr.fill((byte) 0);
        ibv_cq_init_attr_ex.cqe(attr, entries);
        ibv_cq_init_attr_ex.channel(attr, channel);
        ibv_cq_init_attr_ex.comp_vector(attr, compVector);
        ibv_cq_init_attr_ex.wc_flags(attr, wcFlags);
        return attr;
    }
}
