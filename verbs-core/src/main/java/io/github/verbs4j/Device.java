package io.github.verbs4j;

import java.util.HexFormat;

/**
 * An RDMA device as {@code ibv_get_device_list} reports it: a name such as {@code mlx5_0},
 * {@code rxe0} or {@code softrdma0}, its node GUID, and its node and transport types.
 *
 * <p>A {@code Device} is a plain value: it holds no native resource, so it needs no closing and
 * is safe to share between threads. {@link #open()} looks the device up again by name.
 */
public final class Device {

    private final String name;
    private final long guid;
    private final int nodeType;
    private final int transportType;

    Device(String name, long guid, int nodeType, int transportType) {
        this.name = name;
        this.guid = guid;
        this.nodeType = nodeType;
        this.transportType = transportType;
    }

    /** The device name ({@code ibv_get_device_name}). */
    public String name() {
        return name;
    }

    /** The node GUID in host order ({@code ibv_get_device_guid}, converted from big-endian). */
    public long guid() {
        return guid;
    }

    /** The node GUID the way {@code ibv_devices} prints it: 16 lower-case hex digits. */
    public String guidString() {
        return HexFormat.of().toHexDigits(guid);
    }

    /** {@code enum ibv_node_type}: 1 CA, 2 switch, 3 router, 4 RNIC, 5 usNIC, ... */
    public int nodeType() {
        return nodeType;
    }

    /** {@code enum ibv_transport_type} as its C value: 0 IB, 1 iWARP, 2 usNIC, ... ({@link #transport()} typed). */
    public int transportType() {
        return transportType;
    }

    /** The transport, typed: {@code device.transport() == TransportType.IWARP}. */
    public TransportType transport() {
        return TransportType.of(transportType);
    }

    /**
     * Opens this device ({@code ibv_open_device}), looking it up again by name: a
     * {@code Device} holds no native pointer, so it stays valid after the list it came from is freed.
     *
     * <p><b>Errors</b>: as {@link Verbs#open(String)} (IllegalArgumentException when the device
     * has gone away).
     */
    public Context open() {
        return Context.open(name);
    }

    @Override
    public String toString() {
        return name + " (node GUID " + guidString() + ")";
    }
}
