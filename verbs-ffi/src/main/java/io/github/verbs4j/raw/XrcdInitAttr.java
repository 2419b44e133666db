package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_xrcd_init_attr;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;

/**
 * The attributes of {@code ibv_open_xrcd}, and their one encoding into
 * {@code struct ibv_xrcd_init_attr}: the file the domain is keyed on and the {@code O_*} flags
 * ({@code O_CREAT}, {@code O_EXCL}); {@code comp_mask} names both.
 */
public record XrcdInitAttr(int fd, int oflags) {

    /** A zeroed {@code struct ibv_xrcd_init_attr} from {@code allocator} holding these attributes. */
    public MemorySegment write(SegmentAllocator allocator) {
        MemorySegment attr = allocator.allocate(ibv_xrcd_init_attr.layout());
        attr.fill((byte) 0);
        ibv_xrcd_init_attr.comp_mask(attr, RdmaCore.IBV_XRCD_INIT_ATTR_FD() | RdmaCore.IBV_XRCD_INIT_ATTR_OFLAGS());
        ibv_xrcd_init_attr.fd(attr, fd);
        ibv_xrcd_init_attr.oflags(attr, oflags);
        return attr;
    }
}
