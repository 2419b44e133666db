package io.github.verbs4j;

/**
 * What a device can do ({@code struct ibv_device_attr}, from {@code ibv_query_device}).
 * GUIDs are in host order.
 */
public record DeviceAttributes(
        String firmwareVersion,
        long nodeGuid,
        long systemImageGuid,
        long maxMrSize,
        long pageSizeCap,
        int vendorId,
        int vendorPartId,
        int hardwareVersion,
        int maxQp,
        int maxQpWr,
        int deviceCapFlags,
        int maxSge,
        int maxSgeRd,
        int maxCq,
        int maxCqe,
        int maxMr,
        int maxPd,
        int maxQpRdAtomic,
        int maxQpInitRdAtomic,
        int atomicCapability,
        int maxAh,
        int maxSrq,
        int maxSrqWr,
        int maxSrqSge,
        int maxPkeys,
        int localCaAckDelay,
        int physicalPortCount) {
}
