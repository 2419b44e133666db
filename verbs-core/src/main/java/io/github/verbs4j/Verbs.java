package io.github.verbs4j;

import io.github.verbs4j.raw.DeviceAttr;
import io.github.verbs4j.raw.DeviceFields;
import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.NativeLibraries;
import io.github.verbs4j.raw.VerbsFunctions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

/**
 * The entry point: is RDMA usable here, and which devices are there.
 *
 * <pre>{@code
 * if (!Verbs.isAvailable()) {
 *     System.err.println("no RDMA: " + Verbs.unavailabilityCause().getMessage());
 * }
 * for (Device d : Verbs.devices()) System.out.println(d.name());
 * try (Context ctx = Verbs.open("softrdma0")) {      // or Verbs.openFirst(), device.open()
 *     ...
 * }
 * }</pre>
 *
 * <p>Which {@code libibverbs.so.1} is bound is chosen by the system property
 * {@code verbs4j.libibverbs} (default: the system's; a path selects another, such as softrdma's),
 * or by {@code verbs4j.substrate=softrdma} / {@link #useSoftRdma()}, which load softrdma from the
 * {@code io.github.verbs4j:verbs4j-softrdma} jar.
 *
 * <p>Thread-safe.
 */
public final class Verbs {

    private Verbs() {
    }

    /**
     * Runs verbs4j on softrdma, the software RDMA device, from the
     * {@code io.github.verbs4j:verbs4j-softrdma} jar on the class path: its {@code libibverbs.so.1}
     * and {@code librdmacm.so.1} are extracted once into a private per-user folder
     * ({@code ~/.cache/verbs4j/softrdma/}, or {@code -Dverbs4j.softrdma.dir}) and loaded. The same
     * as {@code -Dverbs4j.substrate=softrdma}; a path in {@code -Dverbs4j.libibverbs} still wins.
     *
     * <p>Call it before any other use of verbs4j in this JVM. Idempotent.
     *
     * @throws IllegalStateException when libibverbs was already loaded from elsewhere
     */
    public static void useSoftRdma() {
        NativeLibraries.useSoftRdma();
    }

    /**
     * Whether libibverbs loads and lists at least one RDMA device. Computed once per JVM.
     */
    public static boolean isAvailable() {
        return Availability.CAUSE == null;
    }

    /**
     * Why RDMA is not usable, in one sentence (the exception's message), or {@code null} when it
     * is. Typical causes: rdma-core not installed; {@code ibv_get_device_list} failing with
     * ENOSYS because the kernel has no RDMA support; no devices.
     */
    public static Throwable unavailabilityCause() {
        return Availability.CAUSE;
    }

    /** Throws {@link #unavailabilityCause()} (wrapped) unless RDMA is available. */
    public static void ensureAvailability() {
        if (Availability.CAUSE != null) {
            throw new UnsupportedOperationException("RDMA is not available: " + Availability.CAUSE.getMessage(),
                    Availability.CAUSE);
        }
    }

    /**
     * Lists the RDMA devices ({@code ibv_get_device_list}), possibly none.
     *
     * <p><b>Errors</b>: {@link VerbsException} from {@code ibv_get_device_list}: ENOSYS when the
     * kernel has no RDMA support (no {@code /sys/class/infiniband_verbs}), ENOMEM.
     * {@link UnsatisfiedLinkError} when libibverbs cannot be loaded.
     */
    public static List<Device> devices() {
        return scanDevices(devices -> {
            List<Device> result = new ArrayList<>(devices.size());
            for (MemorySegment dev : devices) {
                result.add(describe(dev));
            }
            return List.copyOf(result);
        });
    }

    /** What {@link #scanDevices} does with the native device list while it is held. */
    @FunctionalInterface
    interface DeviceScan<T> {
        T scan(List<MemorySegment> devices) throws Throwable;
    }

    /**
     * Holds the native device list ({@code ibv_get_device_list}) while {@code scan} looks at the
     * {@code struct ibv_device} pointers, then frees it: the one place that lists devices.
     *
     * <p><b>Errors</b>: {@link VerbsException} from {@code ibv_get_device_list} (ENOSYS with the
     * explanation that there is no RDMA at all); {@link UnsatisfiedLinkError} when libibverbs
     * cannot be loaded; whatever {@code scan} throws.
     */
    static <T> T scanDevices(DeviceScan<T> scan) {
        // Rethrows the loading failure (named file, property, hint) on every call; without it
        // a second call would meet a failed holder class as an obscure NoClassDefFoundError
        // "Could not initialize class".
        NativeLibraries.verbs();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment count = arena.allocate(ValueLayout.JAVA_INT);
            MemorySegment list = (MemorySegment) VerbsFunctions.GET_DEVICE_LIST.invokeExact(errno, count);
            if (Downcalls.isNull(list)) {
                int e = Downcalls.errno(errno);
                throw new VerbsException("ibv_get_device_list", e, Errno.ENOSYS.is(e)
                        ? "no RDMA devices: the kernel has no RDMA support (no /sys/class/infiniband_verbs)"
                          + " and no user-space RDMA device such as softrdma is loaded"
                        : "no RDMA devices");
            }
            try {
                int n = count.get(ValueLayout.JAVA_INT, 0);
                MemorySegment pointers = list.reinterpret(ValueLayout.ADDRESS.byteSize() * n);
                List<MemorySegment> devices = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    devices.add(DeviceFields.of(pointers.getAtIndex(ValueLayout.ADDRESS, i)));
                }
                return scan.scan(devices);
            } finally {
                VerbsFunctions.FREE_DEVICE_LIST.invokeExact(list);
            }
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_get_device_list", t);
        }
    }

    /**
     * Opens the device called {@code name} ({@code ibv_open_device}).
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} when no device has that name (the
     * message lists those present); {@link VerbsException} from {@code ibv_get_device_list}
     * (ENOSYS) or {@code ibv_open_device} (ENOMEM, ENODEV, EACCES).
     */
    public static Context open(String name) {
        return Context.open(name);
    }

    /**
     * Opens the first device {@code ibv_get_device_list} lists.
     *
     * <p><b>Errors</b>: {@link VerbsException} with errno ENODEV when there is none; otherwise as
     * {@link #open(String)}.
     */
    public static Context openFirst() {
        List<Device> devices = devices();
        if (devices.isEmpty()) {
            throw new VerbsException("ibv_get_device_list", Errno.ENODEV, "no RDMA devices to open");
        }
        return Context.open(devices.getFirst().name());
    }

    /**
     * Opens a context on the command fd {@code commandFd} ({@code ibv_import_device}): a dup of
     * another context's {@link Context#commandFd()}, in this process or (on a kernel device
     * that imports) received from another one over a Unix socket. The new context shares that
     * context's objects by handle ({@link Context#importProtectionDomain(int)},
     * {@link ProtectionDomain#importMemoryRegion(int, java.lang.foreign.MemorySegment)}). On
     * success it owns the descriptor and its {@link Context#close()} closes it; on failure the
     * caller keeps it. {@link Context#importContext()} does the dup itself.
     *
     * <p><b>Errors</b>: {@link VerbsException} naming {@code ibv_import_device}: EOPNOTSUPP where
     * the device's provider cannot import (rdma-core's rxe and siw providers; only mlx5 does);
     * EINVAL for a descriptor that is no context's command fd (rdma-core's libibverbs: also for
     * one that is not open); EBADF on softrdma for a descriptor that is not open;
     * {@link UnsupportedOperationException} when libibverbs predates IBVERBS_1.10.
     */
    public static Context importContext(int commandFd) {
        return Context.importDevice(commandFd);
    }

    /** The name, GUID and types of a {@code struct ibv_device}. */
    static Device describe(MemorySegment dev) throws Throwable {
        MemorySegment name = (MemorySegment) VerbsFunctions.GET_DEVICE_NAME.invokeExact(dev);
        long guid = DeviceAttr.fromNetworkOrder((long) VerbsFunctions.GET_DEVICE_GUID.invokeExact(dev));
        return new Device(name.reinterpret(256).getString(0), guid,
                DeviceFields.nodeType(dev), DeviceFields.transportType(dev));
    }

    /** Computed once, on first question. */
    private static final class Availability {
        static final Throwable CAUSE = compute();

        private static Throwable compute() {
            try {
                List<Device> devices = devices();
                if (devices.isEmpty()) {
                    return new VerbsException("ibv_get_device_list", 0, "no RDMA devices found");
                }
                return null;
            } catch (VerbsException | UnsatisfiedLinkError | IllegalStateException e) {
                return e;
            } catch (ExceptionInInitializerError e) {
                return e.getCause() != null ? e.getCause() : e;
            }
        }
    }
}
