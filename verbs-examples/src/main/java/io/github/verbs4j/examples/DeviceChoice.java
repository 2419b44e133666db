package io.github.verbs4j.examples;

import io.github.verbs4j.Context;
import io.github.verbs4j.Device;
import io.github.verbs4j.Verbs;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.List;

/** Device selection shared by the commands: {@code -d name}, else the first device, as rdma-core's tools do. */
final class DeviceChoice {

    private DeviceChoice() {
    }

    /** The devices, with a failure to load libibverbs turned into a one-line tool failure. */
    static List<Device> devices() {
        List<Device> devices;
        try {
            // VerbsException (e.g. ENOSYS without kernel RDMA) goes to the tool's handler as is;
            // an Error would bypass it, so the loading failure is turned into a tool failure here
            devices = Verbs.devices();
        } catch (UnsatisfiedLinkError e) {
            throw new Verbs4jTool.Verbs4jFailure(e.getMessage());
        }
        if (devices.isEmpty()) {
            throw new Verbs4jTool.Verbs4jFailure("no RDMA devices found");
        }
        return devices;
    }

    /** The named device, or the first one when {@code name} is null. */
    static Device find(String name) {
        List<Device> devices = devices();
        if (name == null) {
            return devices.getFirst();
        }
        for (Device d : devices) {
            if (d.name().equals(name)) {
                return d;
            }
        }
        throw new Verbs4jTool.Verbs4jFailure("RDMA device " + name + " not found (have: "
                + String.join(", ", devices.stream().map(Device::name).toList()) + ")");
    }

    static Context open(String name) {
        return find(name).open();
    }

    private static final int PAGE_SIZE = queryPageSize();

    /** The system page size ({@code getpagesize()}), which rdma-core's ping-pongs use for {@code -c}. */
    static int pageSize() {
        return PAGE_SIZE;
    }

    private static int queryPageSize() {
        Linker linker = Linker.nativeLinker();
        try {
            MethodHandle getpagesize = linker.downcallHandle(
                    linker.defaultLookup().find("getpagesize").orElseThrow(),
                    FunctionDescriptor.of(ValueLayout.JAVA_INT));
            return (int) getpagesize.invokeExact();
        } catch (Throwable e) {
            // the libc symbol is always there on Linux; 4 KiB is the x86-64 page if it is not
            return 4096;
        }
    }
}
