package io.github.verbs4j;

import java.util.EnumSet;
import java.util.Set;

/**
 * What a device pages on demand ({@code struct ibv_odp_caps} of {@code ibv_query_device_ex}):
 * whether it takes {@link Access#ON_DEMAND} regions at all, whether it takes an implicit region
 * over the whole address space ({@link ProtectionDomain#registerImplicitOnDemand}), and, per
 * transport, which operations may use on-demand memory. The raw bit masks are kept as the
 * device reported them.
 *
 * <p>softrdma reports ODP and implicit ODP, RC SEND/RECV/WRITE/READ/ATOMIC/SRQ_RECV and UD
 * SEND/RECV; kernel rxe in Linux 6.1 and siw report none (rxe gained ODP only in later kernels).
 *
 * @param generalCaps {@code general_caps}: {@code IBV_ODP_SUPPORT} (1), {@code IBV_ODP_SUPPORT_IMPLICIT} (2)
 * @param rcCaps      {@code per_transport_caps.rc_odp_caps} ({@code IBV_ODP_SUPPORT_SEND} ...)
 * @param ucCaps      {@code per_transport_caps.uc_odp_caps}
 * @param udCaps      {@code per_transport_caps.ud_odp_caps}
 * @param xrcCaps     {@code xrc_odp_caps}
 */
public record OdpCapabilities(long generalCaps, int rcCaps, int ucCaps, int udCaps, int xrcCaps) {

    /** A device without on-demand paging (or one whose provider has no {@code query_device_ex}). */
    public static final OdpCapabilities NONE = new OdpCapabilities(0, 0, 0, 0, 0);

    /** An operation that may use on-demand memory ({@code enum ibv_odp_transport_cap_bits}). */
    public enum Operation {
        /** {@code IBV_ODP_SUPPORT_SEND}: the gather list of a send. */
        SEND(1),
        /** {@code IBV_ODP_SUPPORT_RECV}: the scatter list of a receive on the QP's own receive queue. */
        RECV(1 << 1),
        /** {@code IBV_ODP_SUPPORT_WRITE}: the target of a peer's RDMA WRITE. */
        WRITE(1 << 2),
        /** {@code IBV_ODP_SUPPORT_READ}: the source of a peer's RDMA READ. */
        READ(1 << 3),
        /** {@code IBV_ODP_SUPPORT_ATOMIC}: the target of a peer's atomic. */
        ATOMIC(1 << 4),
        /** {@code IBV_ODP_SUPPORT_SRQ_RECV}: the scatter list of a receive on a shared receive queue. */
        SRQ_RECV(1 << 5);

        private final int bit;

        Operation(int bit) {
            this.bit = bit;
        }

        /** The C bit. */
        public int bit() {
            return bit;
        }

        static Set<Operation> of(int mask) {
            EnumSet<Operation> set = EnumSet.noneOf(Operation.class);
            for (Operation o : values()) {
                if ((mask & o.bit) != 0) {
                    set.add(o);
                }
            }
            return set;
        }
    }

    /** Whether the device takes {@link Access#ON_DEMAND} regions ({@code IBV_ODP_SUPPORT}). */
    public boolean supported() {
        return (generalCaps & 1) != 0;
    }

    /** Whether the device takes an implicit on-demand region ({@code IBV_ODP_SUPPORT_IMPLICIT}). */
    public boolean implicitSupported() {
        return (generalCaps & 2) != 0;
    }

    /** The RC operations that may use on-demand memory. */
    public Set<Operation> rc() {
        return Operation.of(rcCaps);
    }

    /** The UC operations that may use on-demand memory. */
    public Set<Operation> uc() {
        return Operation.of(ucCaps);
    }

    /** The UD operations that may use on-demand memory. */
    public Set<Operation> ud() {
        return Operation.of(udCaps);
    }

    /** The XRC operations that may use on-demand memory. */
    public Set<Operation> xrc() {
        return Operation.of(xrcCaps);
    }
}
