package io.github.verbs4j.cm;

import io.github.verbs4j.AddressHandle;
import io.github.verbs4j.AddressVector;
import io.github.verbs4j.Gid;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.ffi.ibv_ah_attr;
import io.github.verbs4j.ffi.ibv_global_route;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Objects;

/**
 * Where to send UD datagrams to a peer found through rdma_cm: the {@code ah_attr}, {@code qp_num}
 * and {@code qkey} of a {@link PortSpace#UDP} ESTABLISHED event ({@code struct rdma_ud_param}),
 * as {@link CmEvent#udAddress()} gives them. The address vector comes from the CM's route (the
 * peer's GID, this side's GID index and port), so it addresses a peer on another host too.
 *
 * <pre>{@code
 * CmEvent established = id.connect(ConnectParameters.defaults(), timeout);
 * UdAddress peer = established.udAddress();
 * try (AddressHandle ah = peer.createAh(pd)) {
 *     qp.postSend(SendRequest.send().local(buffer, 0, n).ud(ah, peer.qpNumber(), peer.qkey()).signaled());
 * }
 * }</pre>
 *
 * <p>Immutable and thread-safe.
 *
 * @param port         the local port ({@code ah_attr.port_num})
 * @param dlid         the destination LID (0 on RoCE)
 * @param serviceLevel the service level
 * @param srcPathBits  the source path bits
 * @param staticRate   the static rate
 * @param dgid         the destination GID ({@code is_global}), or {@code null} without a GRH
 * @param sgidIndex    the local GID index of the GRH
 * @param hopLimit     the GRH hop limit
 * @param trafficClass the GRH traffic class
 * @param flowLabel    the GRH flow label
 * @param qpNumber     the peer's UD QP number
 * @param qkey         the peer's Q_Key
 */
public record UdAddress(int port, int dlid, int serviceLevel, int srcPathBits, int staticRate, Gid dgid,
        int sgidIndex, int hopLimit, int trafficClass, int flowLabel, int qpNumber, int qkey) {

    /** A new {@link AddressVector} with these values, for {@link ProtectionDomain#createAh}. */
    public AddressVector addressVector() {
        AddressVector av = new AddressVector().port(port).dlid(dlid).serviceLevel(serviceLevel)
                .srcPathBits(srcPathBits).staticRate(staticRate);
        if (dgid != null) {
            av.dgid(dgid).sgidIndex(sgidIndex).hopLimit(hopLimit).trafficClass(trafficClass).flowLabel(flowLabel);
        }
        return av;
    }

    /**
     * An address handle to the peer on {@code pd} ({@code ibv_create_ah} with this address vector).
     *
     * <p><b>Errors</b>: as {@link ProtectionDomain#createAh}.
     */
    public AddressHandle createAh(ProtectionDomain pd) {
        Objects.requireNonNull(pd, "pd");
        return pd.createAh(addressVector());
    }

    /** Reads {@code struct ibv_ah_attr} at {@code ah}; {@code null} when it names no port (not filled in). */
    static UdAddress read(MemorySegment ah, int qpNumber, int qkey) {
        int port = Byte.toUnsignedInt(ibv_ah_attr.port_num(ah));
        if (port == 0) {
            return null;
        }
        Gid dgid = null;
        int sgidIndex = 0;
        int hopLimit = 0;
        int trafficClass = 0;
        int flowLabel = 0;
        if (ibv_ah_attr.is_global(ah) != 0) {
            MemorySegment grh = ibv_ah_attr.grh(ah);
            dgid = Gid.of(ibv_global_route.dgid(grh).toArray(ValueLayout.JAVA_BYTE));
            sgidIndex = Byte.toUnsignedInt(ibv_global_route.sgid_index(grh));
            hopLimit = Byte.toUnsignedInt(ibv_global_route.hop_limit(grh));
            trafficClass = Byte.toUnsignedInt(ibv_global_route.traffic_class(grh));
            flowLabel = ibv_global_route.flow_label(grh) & 0xfffff;
        }
        return new UdAddress(port, Short.toUnsignedInt(ibv_ah_attr.dlid(ah)), Byte.toUnsignedInt(ibv_ah_attr.sl(ah)),
                Byte.toUnsignedInt(ibv_ah_attr.src_path_bits(ah)), Byte.toUnsignedInt(ibv_ah_attr.static_rate(ah)),
                dgid, sgidIndex, hopLimit, trafficClass, flowLabel, qpNumber, qkey);
    }
}
