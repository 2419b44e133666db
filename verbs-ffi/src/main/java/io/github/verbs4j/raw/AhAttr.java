package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_ah_attr;
import io.github.verbs4j.ffi.ibv_global_route;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;

/**
 * {@code struct ibv_ah_attr} (with its {@code struct ibv_global_route}) as Java values: where
 * packets go. Used by {@code ibv_create_ah}, inside {@code ibv_qp_attr} (the primary path of an
 * RC/UC QP) and in rdma_cm's {@code rdma_ud_param}. {@code dgid} is the 16 bytes of the
 * destination GID, or {@code null} without a global route header ({@code is_global} 0; the GRH
 * fields are then not written and read as 0). Values are taken as C does: each is cut to its
 * field's width when written, and read back unsigned.
 */
public record AhAttr(int dlid, int serviceLevel, int srcPathBits, int staticRate, int portNum, byte[] dgid,
        int sgidIndex, int hopLimit, int trafficClass, int flowLabel) {

    /** {@code sizeof(union ibv_gid)}. */
    private static final int GID_BYTES = 16;

    public AhAttr {
        if (dgid != null && dgid.length != GID_BYTES) {
            throw new IllegalArgumentException("a GID has " + GID_BYTES + " bytes, got " + dgid.length);
        }
    }

    /** Whether a global route header is present ({@code is_global}). */
    public boolean isGlobal() {
        return dgid != null;
    }

    /** A zeroed {@code struct ibv_ah_attr} from {@code allocator} holding these values. */
    public MemorySegment write(SegmentAllocator allocator) {
        MemorySegment ah = allocator.allocate(ibv_ah_attr.layout());
        writeInto(ah);
        return ah;
    }

    /** Zeroes the {@code struct ibv_ah_attr} at {@code ah} and writes these values into it. */
    public void writeInto(MemorySegment ah) {
        ah.asSlice(0, ibv_ah_attr.layout().byteSize()).fill((byte) 0);
        ibv_ah_attr.dlid(ah, (short) dlid);
        ibv_ah_attr.sl(ah, (byte) serviceLevel);
        ibv_ah_attr.src_path_bits(ah, (byte) srcPathBits);
        ibv_ah_attr.static_rate(ah, (byte) staticRate);
        ibv_ah_attr.port_num(ah, (byte) portNum);
        if (dgid != null) {
            ibv_ah_attr.is_global(ah, (byte) 1);
            MemorySegment grh = ibv_ah_attr.grh(ah);
            MemorySegment.copy(dgid, 0, ibv_global_route.dgid(grh), ValueLayout.JAVA_BYTE, 0, GID_BYTES);
            ibv_global_route.flow_label(grh, flowLabel);
            ibv_global_route.sgid_index(grh, (byte) sgidIndex);
            ibv_global_route.hop_limit(grh, (byte) hopLimit);
            ibv_global_route.traffic_class(grh, (byte) trafficClass);
        }
    }

    /**
     * Reads the {@code struct ibv_ah_attr} at {@code ah}. Without {@code is_global} the GRH fields
     * are 0 and {@code dgid} is {@code null}; the flow label is its 20 bits.
     */
    public static AhAttr read(MemorySegment ah) {
        byte[] dgid = null;
        int sgidIndex = 0;
        int hopLimit = 0;
        int trafficClass = 0;
        int flowLabel = 0;
        if (ibv_ah_attr.is_global(ah) != 0) {
            MemorySegment grh = ibv_ah_attr.grh(ah);
            dgid = ibv_global_route.dgid(grh).toArray(ValueLayout.JAVA_BYTE);
            sgidIndex = Byte.toUnsignedInt(ibv_global_route.sgid_index(grh));
            hopLimit = Byte.toUnsignedInt(ibv_global_route.hop_limit(grh));
            trafficClass = Byte.toUnsignedInt(ibv_global_route.traffic_class(grh));
            flowLabel = ibv_global_route.flow_label(grh) & 0xfffff;
        }
        return new AhAttr(Short.toUnsignedInt(ibv_ah_attr.dlid(ah)), Byte.toUnsignedInt(ibv_ah_attr.sl(ah)),
                Byte.toUnsignedInt(ibv_ah_attr.src_path_bits(ah)), Byte.toUnsignedInt(ibv_ah_attr.static_rate(ah)),
                Byte.toUnsignedInt(ibv_ah_attr.port_num(ah)), dgid, sgidIndex, hopLimit, trafficClass, flowLabel);
    }
}
