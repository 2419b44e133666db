package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_device;

import java.lang.foreign.MemorySegment;

/**
 * The fields of {@code struct ibv_device} that verbs-core reads: the node and transport types
 * ({@code enum ibv_node_type}, {@code enum ibv_transport_type}). The name and GUID come from
 * {@code ibv_get_device_name} and {@code ibv_get_device_guid} ({@link VerbsFunctions}).
 */
public final class DeviceFields {

    private DeviceFields() {
    }

    /** {@code sizeof(struct ibv_device)}. */
    public static final long SIZE = ibv_device.layout().byteSize();

    /** {@code device}, an entry of {@code ibv_get_device_list}, sized to the struct. */
    public static MemorySegment of(MemorySegment device) {
        return device.reinterpret(SIZE);
    }

    /** {@code device->node_type}. */
    public static int nodeType(MemorySegment device) {
        return ibv_device.node_type(device);
    }

    /** {@code device->transport_type}. */
    public static int transportType(MemorySegment device) {
        return ibv_device.transport_type(device);
    }
}
