package io.github.verbs4j;

/**
 * What a device can do ({@code struct ibv_device_attr}, from {@code ibv_query_device}).
 * GUIDs are in host order. {@code maxMw} is the number of memory windows (0: none; see
 * {@link #memoryWindows()}).
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
        int physicalPortCount,
        int maxMw) {

    /** {@code IBV_DEVICE_XRC}: the device has XRC ({@link XrcDomain}, {@link QpType#XRC_SEND}, {@link XrcTarget}). */
    public boolean hasXrc() {
        return (deviceCapFlags & (1 << 20)) != 0;
    }

    /** {@code IBV_DEVICE_MEM_WINDOW}: type 1 memory windows. */
    private static final int MEM_WINDOW = 1 << 17;
    /** {@code IBV_DEVICE_MEM_WINDOW_TYPE_2A} and {@code _2B}: type 2 memory windows. */
    private static final int MEM_WINDOW_TYPE_2 = (1 << 23) | (1 << 24);

    /** The memory window types the device reports ({@code device_cap_flags}); empty when it has none. */
    public java.util.Set<MemoryWindow.Type> memoryWindows() {
        java.util.EnumSet<MemoryWindow.Type> set = java.util.EnumSet.noneOf(MemoryWindow.Type.class);
        if ((deviceCapFlags & MEM_WINDOW) != 0) {
            set.add(MemoryWindow.Type.TYPE_1);
        }
        if ((deviceCapFlags & MEM_WINDOW_TYPE_2) != 0) {
            set.add(MemoryWindow.Type.TYPE_2);
        }
        return set;
    }
}
