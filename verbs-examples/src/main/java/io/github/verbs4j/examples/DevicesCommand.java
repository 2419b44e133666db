package io.github.verbs4j.examples;

import io.github.verbs4j.Device;
import picocli.CommandLine;
import picocli.CommandLine.Command;

import java.io.PrintWriter;
import java.util.List;
import java.util.concurrent.Callable;

/**
 * {@code verbs4j devices}: the RDMA devices and their node GUIDs, in {@code ibv_devices}'s
 * format, so that the two can be compared line by line.
 */
@Command(name = "devices", mixinStandardHelpOptions = true,
        description = "List RDMA devices and their node GUIDs (like ibv_devices).")
final class DevicesCommand implements Callable<Integer> {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        List<Device> devices = DeviceChoice.devices();
        PrintWriter out = spec.commandLine().getOut();
        out.printf("    %-16s\t   node GUID%n", "device");
        out.printf("    %-16s\t----------------%n", "------");
        for (Device d : devices) {
            out.printf("    %-16s\t%s%n", d.name(), d.guidString());
        }
        out.flush();
        return 0;
    }
}
