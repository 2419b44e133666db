package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_device_attr;
import io.github.verbs4j.ffi.ibv_device_attr_ex;
import io.github.verbs4j.ffi.ibv_odp_caps;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.nio.ByteOrder;

/**
 * {@code struct ibv_device_attr} as Java values, in the struct's order, as
 * {@code ibv_query_device} fills it: the firmware version as a string, the two GUIDs as numbers
 * (the struct holds them in network byte order), unsigned fields read unsigned.
 */
public record DeviceAttr(String fwVer, long nodeGuid, long sysImageGuid, long maxMrSize, long pageSizeCap,
        int vendorId, int vendorPartId, int hwVer, int maxQp, int maxQpWr, int deviceCapFlags, int maxSge,
        int maxSgeRd, int maxCq, int maxCqe, int maxMr, int maxPd, int maxQpRdAtom, int maxQpInitRdAtom,
        int atomicCap, int maxAh, int maxSrq, int maxSrqWr, int maxSrqSge, int maxPkeys, int localCaAckDelay,
        int physPortCnt, int maxMw) {

    /** A zeroed {@code struct ibv_device_attr} for {@code ibv_query_device} to fill. */
    public static MemorySegment allocate(SegmentAllocator allocator) {
        MemorySegment a = allocator.allocate(ibv_device_attr.layout());
        a.fill((byte) 0);
        return a;
    }

    /** Reads the {@code struct ibv_device_attr} at {@code a}. */
    public static DeviceAttr read(MemorySegment a) {
        return new DeviceAttr(ibv_device_attr.fw_ver(a).getString(0), fromNetworkOrder(ibv_device_attr.node_guid(a)),
                fromNetworkOrder(ibv_device_attr.sys_image_guid(a)), ibv_device_attr.max_mr_size(a),
                ibv_device_attr.page_size_cap(a), ibv_device_attr.vendor_id(a), ibv_device_attr.vendor_part_id(a),
                ibv_device_attr.hw_ver(a), ibv_device_attr.max_qp(a), ibv_device_attr.max_qp_wr(a),
                ibv_device_attr.device_cap_flags(a), ibv_device_attr.max_sge(a), ibv_device_attr.max_sge_rd(a),
                ibv_device_attr.max_cq(a), ibv_device_attr.max_cqe(a), ibv_device_attr.max_mr(a),
                ibv_device_attr.max_pd(a), ibv_device_attr.max_qp_rd_atom(a), ibv_device_attr.max_qp_init_rd_atom(a),
                ibv_device_attr.atomic_cap(a), ibv_device_attr.max_ah(a), ibv_device_attr.max_srq(a),
                ibv_device_attr.max_srq_wr(a), ibv_device_attr.max_srq_sge(a),
                Short.toUnsignedInt(ibv_device_attr.max_pkeys(a)),
                Byte.toUnsignedInt(ibv_device_attr.local_ca_ack_delay(a)),
                Byte.toUnsignedInt(ibv_device_attr.phys_port_cnt(a)), ibv_device_attr.max_mw(a));
    }

    /** A GUID (a {@code __be64}) as the number it names. */
    public static long fromNetworkOrder(long value) {
        return ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN ? Long.reverseBytes(value) : value;
    }

    /**
     * The on-demand-paging capabilities in {@code struct ibv_device_attr_ex}
     * ({@code odp_caps.general_caps}, the RC/UC/UD transport caps, {@code xrc_odp_caps}).
     */
    public record OdpCaps(long generalCaps, int rcCaps, int ucCaps, int udCaps, int xrcCaps) {

        /** A zeroed {@code struct ibv_device_attr_ex} for {@code ibv_query_device_ex} to fill. */
        public static MemorySegment allocateExtended(SegmentAllocator allocator) {
            MemorySegment a = allocator.allocate(ibv_device_attr_ex.layout());
            a.fill((byte) 0);
            return a;
        }

        /** Reads them from the {@code struct ibv_device_attr_ex} at {@code a}. */
        public static OdpCaps read(MemorySegment a) {
            MemorySegment caps = ibv_device_attr_ex.odp_caps(a);
            MemorySegment transport = ibv_odp_caps.per_transport_caps(caps);
            return new OdpCaps(ibv_odp_caps.general_caps(caps), ibv_odp_caps.per_transport_caps.rc_odp_caps(transport),
                    ibv_odp_caps.per_transport_caps.uc_odp_caps(transport),
                    ibv_odp_caps.per_transport_caps.ud_odp_caps(transport), ibv_device_attr_ex.xrc_odp_caps(a));
        }
    }
}
