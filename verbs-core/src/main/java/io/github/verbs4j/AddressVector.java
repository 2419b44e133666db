package io.github.verbs4j;

import io.github.verbs4j.raw.AhAttr;

import java.util.Objects;

/**
 * Where packets go ({@code struct ibv_ah_attr}): the destination LID, the local port, and on
 * RoCE (or routed InfiniBand) a global route header naming the destination GID and the local
 * GID index. Used by {@link QpAttr#addressVector} for RC/UC at RTR and by
 * {@link ProtectionDomain#createAh} for UD.
 *
 * <pre>{@code
 * AddressVector av = AddressVector.to(peer).port(1).sgidIndex(1);
 * }</pre>
 *
 * <p>A mutable builder; not thread-safe. Values are copied when used.
 */
public final class AddressVector {

    private int dlid;
    private int serviceLevel;
    private int srcPathBits;
    private int staticRate;
    private int port = -1;
    private Gid dgid;
    private int sgidIndex;
    private int hopLimit = 64;
    private int trafficClass;
    private int flowLabel;

    /** An empty address vector (set at least the port, and a LID or a GID). */
    public AddressVector() {
    }

    /** An address vector to {@code remote}: its LID, and its GID (a GRH) when that is not zero. */
    public static AddressVector to(Endpoint remote) {
        AddressVector av = new AddressVector().dlid(remote.lid());
        if (!remote.gid().isZero()) {
            av.dgid(remote.gid());
        }
        return av;
    }

    /** The destination LID (ignored on RoCE). */
    public AddressVector dlid(int lid) {
        if (lid < 0 || lid > 0xffff) {
            throw new IllegalArgumentException("lid out of 16 bits: " + lid);
        }
        this.dlid = lid;
        return this;
    }

    /** The service level (0-15). */
    public AddressVector serviceLevel(int sl) {
        if (sl < 0 || sl > 15) {
            throw new IllegalArgumentException("service level out of 0..15: " + sl);
        }
        this.serviceLevel = sl;
        return this;
    }

    /** Source path bits (LMC). */
    public AddressVector srcPathBits(int bits) {
        this.srcPathBits = bits & 0x7f;
        return this;
    }

    /** {@code enum ibv_rate} value; 0 means the port's rate. */
    public AddressVector staticRate(int rate) {
        this.staticRate = rate;
        return this;
    }

    /** The local port number (required). */
    public AddressVector port(int port) {
        if (port < 1 || port > 255) {
            throw new IllegalArgumentException("port numbers run from 1 to 255, got " + port);
        }
        this.port = port;
        return this;
    }

    /** Adds a GRH to {@code gid} (required on RoCE). */
    public AddressVector dgid(Gid gid) {
        this.dgid = Objects.requireNonNull(gid, "gid");
        return this;
    }

    /** The local GID index the GRH is sent from. */
    public AddressVector sgidIndex(int index) {
        if (index < 0 || index > 255) {
            throw new IllegalArgumentException("sgid index out of 0..255: " + index);
        }
        this.sgidIndex = index;
        return this;
    }

    /** GRH hop limit (default 64). */
    public AddressVector hopLimit(int hops) {
        this.hopLimit = hops & 0xff;
        return this;
    }

    /** GRH traffic class. */
    public AddressVector trafficClass(int tclass) {
        this.trafficClass = tclass & 0xff;
        return this;
    }

    /** GRH flow label (20 bits). */
    public AddressVector flowLabel(int label) {
        this.flowLabel = label & 0xfffff;
        return this;
    }

    /** The local port, or -1 when unset. */
    public int port() {
        return port;
    }

    /** Whether a GRH is set. */
    public boolean isGlobal() {
        return dgid != null;
    }

    /** The destination GID, or {@code null} without a GRH. */
    public Gid dgid() {
        return dgid;
    }

    /** Checks the vector for {@code context}: port set, GRH present on RoCE. */
    void validate(Context context, String where) {
        if (port < 0) {
            throw new IllegalArgumentException(where + ": the address vector needs port (ah_attr.port_num)");
        }
        if (dgid == null && context.queryPort(port).needsGrh()) {
            throw new IllegalArgumentException(where + ": port " + port + " is RoCE (link layer Ethernet):"
                    + " the address vector needs a GRH (dgid, is_global = 1)");
        }
    }

    /** These values as the raw layer encodes them ({@code struct ibv_ah_attr}). */
    AhAttr ahAttr() {
        return new AhAttr(dlid, serviceLevel, srcPathBits, staticRate, port, dgid == null ? null : dgid.raw(), sgidIndex,
                hopLimit, trafficClass, flowLabel);
    }

    @Override
    public String toString() {
        return "AddressVector[port " + port + ", dlid 0x" + Integer.toHexString(dlid)
                + (dgid != null ? ", dgid " + dgid + ", sgid index " + sgidIndex : ", no GRH") + "]";
    }
}
