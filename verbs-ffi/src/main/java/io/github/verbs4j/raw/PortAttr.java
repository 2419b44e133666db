package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_port_attr;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;

/**
 * {@code struct ibv_port_attr} as Java values, as {@code ibv_query_port} fills it (the fields
 * verbs4j reports): the enum values raw ({@code IBV_PORT_*}, {@code IBV_MTU_*},
 * {@code IBV_LINK_LAYER_*}), unsigned fields read unsigned ({@code max_msg_sz} as a long).
 */
public record PortAttr(int state, int maxMtu, int activeMtu, int gidTblLen, int portCapFlags, long maxMsgSz,
        int pkeyTblLen, int lid, int smLid, int lmc, int activeWidth, int activeSpeed, int physState, int linkLayer) {

    /** A zeroed {@code struct ibv_port_attr} for {@code ibv_query_port} to fill. */
    public static MemorySegment allocate(SegmentAllocator allocator) {
        MemorySegment a = allocator.allocate(ibv_port_attr.layout());
        a.fill((byte) 0);
        return a;
    }

    /** Reads the {@code struct ibv_port_attr} at {@code a}. */
    public static PortAttr read(MemorySegment a) {
        return new PortAttr(ibv_port_attr.state(a), ibv_port_attr.max_mtu(a), ibv_port_attr.active_mtu(a),
                ibv_port_attr.gid_tbl_len(a), ibv_port_attr.port_cap_flags(a),
                Integer.toUnsignedLong(ibv_port_attr.max_msg_sz(a)), Short.toUnsignedInt(ibv_port_attr.pkey_tbl_len(a)),
                Short.toUnsignedInt(ibv_port_attr.lid(a)), Short.toUnsignedInt(ibv_port_attr.sm_lid(a)),
                Byte.toUnsignedInt(ibv_port_attr.lmc(a)), Byte.toUnsignedInt(ibv_port_attr.active_width(a)),
                Byte.toUnsignedInt(ibv_port_attr.active_speed(a)), Byte.toUnsignedInt(ibv_port_attr.phys_state(a)),
                Byte.toUnsignedInt(ibv_port_attr.link_layer(a)));
    }
}
