package io.github.verbs4j.examples;

import io.github.verbs4j.Context;
import io.github.verbs4j.Device;
import io.github.verbs4j.GidEntry;
import io.github.verbs4j.GidType;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;

/**
 * {@code verbs4j gids}: every port's GID table in the layout of the {@code show_gids} script
 * (DEV, PORT, INDEX, the GID in sysfs form, the IPv4 address of IPv4-mapped GIDs, the RoCE
 * version and the network device), queried through verbs instead of sysfs, so it works for
 * user-space devices too. The network device comes from
 * {@code /sys/class/infiniband/<dev>/ports/<port>/gid_attrs/ndevs/<index>} and is empty when
 * there is no such file (softrdma). Entries with an all-zero GID and the bare {@code fe80::}
 * prefix are skipped, as the script does.
 */
@Command(name = "gids", mixinStandardHelpOptions = true,
        description = "Print the GID tables: index, GID, IPv4, RoCE version (like show_gids).")
final class GidsCommand implements Callable<Integer> {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Parameters(arity = "0..1", paramLabel = "<dev>", description = "Only this device (default: all).")
    String device;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        List<Device> devices = device == null ? DeviceChoice.devices() : List.of(DeviceChoice.find(device));
        out.print("DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4 \t\tVER\tDEV\n");
        out.print("---\t----\t-----\t---\t\t\t\t\t------------ \t---\t---\n");
        int found = 0;
        for (Device d : devices) {
            try (Context ctx = d.open()) {
                int ports = ctx.queryDevice().physicalPortCount();
                for (int port = 1; port <= ports; port++) {
                    for (GidEntry g : ctx.port(port).gids()) {
                        byte[] raw = g.gid().bytes();
                        String sysfs = sysfsForm(raw);
                        if (sysfs.equals("0000:0000:0000:0000:0000:0000:0000:0000")
                                || sysfs.equals("fe80:0000:0000:0000:0000:0000:0000:0000")) {
                            continue;
                        }
                        String version = g.type() == GidType.ROCE_V2 ? "v2" : g.type() == GidType.ROCE_V1 ? "v1" : "";
                        String netdev = netdev(d.name(), port, g.index());
                        if (g.gid().isIpv4Mapped()) {
                            String ipv4 = (raw[12] & 0xff) + "." + (raw[13] & 0xff) + "." + (raw[14] & 0xff) + "." + (raw[15] & 0xff);
                            out.printf("%s\t%d\t%d\t%s\t%s \t%s\t%s%n", d.name(), port, g.index(), sysfs, ipv4, version, netdev);
                        } else {
                            out.printf("%s\t%d\t%d\t%s\t\t\t%s\t%s%n", d.name(), port, g.index(), sysfs, version, netdev);
                        }
                        found++;
                    }
                }
            }
        }
        out.printf("n_gids_found=%d%n", found);
        out.flush();
        return 0;
    }

    /** The GID as sysfs prints it: eight groups of four lower-case hex digits. */
    static String sysfsForm(byte[] raw) {
        StringBuilder sb = new StringBuilder(39);
        for (int i = 0; i < 16; i += 2) {
            if (i > 0) {
                sb.append(':');
            }
            sb.append(String.format("%02x%02x", raw[i] & 0xff, raw[i + 1] & 0xff));
        }
        return sb.toString();
    }

    private static String netdev(String device, int port, int index) {
        Path p = Path.of("/sys/class/infiniband", device, "ports", Integer.toString(port), "gid_attrs", "ndevs",
                Integer.toString(index));
        try {
            return Files.isReadable(p) ? Files.readString(p).strip() : "";
        } catch (IOException e) {
            return "";
        }
    }
}
