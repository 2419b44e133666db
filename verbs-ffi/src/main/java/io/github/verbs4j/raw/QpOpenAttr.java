package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_qp_open_attr;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.util.Objects;

/**
 * The attributes of {@code ibv_open_qp}, and their one encoding into
 * {@code struct ibv_qp_open_attr}: the number of an XRC receive QP ({@code IBV_QPT_XRC_RECV},
 * the one type that can be opened) in the XRC domain {@code xrcd}; {@code comp_mask} names the
 * number, the domain and the type.
 */
public record QpOpenAttr(int qpNum, MemorySegment xrcd) {

    public QpOpenAttr {
        Objects.requireNonNull(xrcd, "xrcd");
    }

    /** A zeroed {@code struct ibv_qp_open_attr} from {@code allocator} holding these attributes. */
    public MemorySegment write(SegmentAllocator allocator) {
        MemorySegment attr = allocator.allocate(ibv_qp_open_attr.layout());
        attr.fill((byte) 0);
        ibv_qp_open_attr.comp_mask(attr, RdmaCore.IBV_QP_OPEN_ATTR_NUM() | RdmaCore.IBV_QP_OPEN_ATTR_XRCD()
                | RdmaCore.IBV_QP_OPEN_ATTR_TYPE());
        ibv_qp_open_attr.qp_num(attr, qpNum);
        ibv_qp_open_attr.xrcd(attr, xrcd);
        ibv_qp_open_attr.qp_type(attr, RdmaCore.IBV_QPT_XRC_RECV());
        return attr;
    }
}
