package io.github.verbs4j;

/**
 * The state of a port ({@code struct ibv_port_attr}).
 *
 * @param state            the logical state; {@link PortState#ACTIVE} to carry traffic
 * @param maxMtu           the largest MTU the port supports
 * @param activeMtu        the MTU in use: the path MTU to choose for QPs on this port
 * @param gidTableLength   entries in the GID table
 * @param portCapFlags     {@code IBV_PORT_*} capability bits
 * @param maxMessageSize   largest message in bytes
 * @param pkeyTableLength  entries in the P_Key table
 * @param lid              the base LID (0 on RoCE)
 * @param smLid            the subnet manager's LID
 * @param lmc              LID mask control
 * @param activeWidth      {@code active_width} code
 * @param activeSpeed      {@code active_speed} code
 * @param physicalState    {@code phys_state} code (5 = LinkUp)
 * @param linkLayer        InfiniBand or Ethernet (RoCE)
 * @param extended         whether the extended {@code query_port} filled the attributes (else the
 *                         compat {@code ibv_query_port}, which leaves {@code flags},
 *                         {@code port_cap_flags2} and newer fields zero)
 */
public record PortAttributes(
        PortState state,
        Mtu maxMtu,
        Mtu activeMtu,
        int gidTableLength,
        int portCapFlags,
        long maxMessageSize,
        int pkeyTableLength,
        int lid,
        int smLid,
        int lmc,
        int activeWidth,
        int activeSpeed,
        int physicalState,
        LinkLayer linkLayer,
        boolean extended) {

    /** Whether QPs on this port must carry a GRH (RoCE: link layer Ethernet). */
    public boolean needsGrh() {
        return linkLayer == LinkLayer.ETHERNET;
    }
}
