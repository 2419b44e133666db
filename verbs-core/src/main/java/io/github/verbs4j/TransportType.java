package io.github.verbs4j;

/**
 * A device's transport ({@code enum ibv_transport_type}, {@code ibv_device.transport_type}):
 * what to decide iWARP's differences from (no UD, no immediate data on RDMA WRITE, connections
 * only through rdma_cm), never the device's name.
 */
public enum TransportType {
    /** {@code IBV_TRANSPORT_UNKNOWN} (-1), and any value this enum does not list. */
    UNKNOWN(-1),
    /** InfiniBand, and RoCE (InfiniBand transport over Ethernet): rxe, mlx5, softrdma. */
    IB(0),
    /** iWARP (RDMA over TCP): siw, cxgb4, irdma in iWARP mode. */
    IWARP(1),
    USNIC(2),
    USNIC_UDP(3),
    UNSPECIFIED(4);

    private final int value;

    TransportType(int value) {
        this.value = value;
    }

    /** The C value. */
    public int value() {
        return value;
    }

    /** The transport for a C value; {@link #UNKNOWN} for one not listed. */
    public static TransportType of(int value) {
        for (TransportType t : values()) {
            if (t.value == value) {
                return t;
            }
        }
        return UNKNOWN;
    }
}
