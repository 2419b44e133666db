package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_srq_init_attr;
import io.github.verbs4j.ffi.ibv_srq_init_attr_ex;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.util.Objects;

/**
 * The creation attributes of a shared receive queue, and their one encoding into
 * {@code struct ibv_srq_init_attr} ({@code ibv_create_srq}) and, for XRC,
 * {@code struct ibv_srq_init_attr_ex} ({@code ibv_create_srq_ex}). The device writes what it
 * granted back into the embedded {@link SrqAttr}: {@link #granted} and
 * {@link #grantedExtended} read it after the create call.
 */
public record SrqInitAttr(SrqAttr attr) {

    public SrqInitAttr {
        Objects.requireNonNull(attr, "attr");
    }

    /** A zeroed {@code struct ibv_srq_init_attr} from {@code allocator} holding these attributes. */
    public MemorySegment write(SegmentAllocator allocator) {
        MemorySegment init = allocator.allocate(ibv_srq_init_attr.layout());
        init.fill((byte) 0);
        attr.writeInto(ibv_srq_init_attr.attr(init));
        return init;
    }

    /**
     * A zeroed {@code struct ibv_srq_init_attr_ex} for an XRC SRQ ({@code IBV_SRQT_XRC}) in the
     * protection domain {@code pd} and the XRC domain {@code xrcd}, completing into {@code cq};
     * {@code comp_mask} names the type, both domains and the CQ.
     */
    public MemorySegment writeXrc(SegmentAllocator allocator, MemorySegment pd, MemorySegment xrcd, MemorySegment cq) {
        MemorySegment init = allocator.allocate(ibv_srq_init_attr_ex.layout());
        init.fill((byte) 0);
        attr.writeInto(ibv_srq_init_attr_ex.attr(init));
        ibv_srq_init_attr_ex.comp_mask(init, RdmaCore.IBV_SRQ_INIT_ATTR_TYPE() | RdmaCore.IBV_SRQ_INIT_ATTR_PD()
                | RdmaCore.IBV_SRQ_INIT_ATTR_XRCD() | RdmaCore.IBV_SRQ_INIT_ATTR_CQ());
        ibv_srq_init_attr_ex.srq_type(init, RdmaCore.IBV_SRQT_XRC());
        ibv_srq_init_attr_ex.pd(init, pd);
        ibv_srq_init_attr_ex.xrcd(init, xrcd);
        ibv_srq_init_attr_ex.cq(init, cq);
        return init;
    }

    /** What the device granted, from a struct made by {@link #write} after the create call. */
    public static SrqAttr granted(MemorySegment init) {
        return SrqAttr.read(ibv_srq_init_attr.attr(init));
    }

    /** What the device granted, from a struct made by {@link #writeXrc} after the create call. */
    public static SrqAttr grantedExtended(MemorySegment init) {
        return SrqAttr.read(ibv_srq_init_attr_ex.attr(init));
    }
}
