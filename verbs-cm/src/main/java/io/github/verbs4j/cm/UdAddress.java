package io.github.verbs4j.cm;

import io.github.verbs4j.AddressHandle;
import io.github.verbs4j.AddressVector;
import io.github.verbs4j.Gid;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.raw.AhAttr;

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

    /** The address in {@code ah}; {@code null} when it names no port (not filled in). */
    static UdAddress of(AhAttr ah, int qpNumber, int qkey) {
        if (ah.portNum() == 0) {
            return null;
        }
        return new UdAddress(ah.portNum(), ah.dlid(), ah.serviceLevel(), ah.srcPathBits(), ah.staticRate(),
                ah.isGlobal() ? Gid.of(ah.dgid()) : null, ah.sgidIndex(), ah.hopLimit(), ah.trafficClass(),
                ah.flowLabel(), qpNumber, qkey);
    }
}
