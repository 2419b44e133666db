package io.github.verbs4j.examples;

import io.github.verbs4j.Context;
import io.github.verbs4j.Device;
import io.github.verbs4j.DeviceAttributes;
import io.github.verbs4j.GidEntry;
import io.github.verbs4j.GidType;
import io.github.verbs4j.LinkLayer;
import io.github.verbs4j.OdpCapabilities;
import io.github.verbs4j.PortAttributes;
import io.github.verbs4j.PortState;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;

/**
 * {@code verbs4j devinfo}: device and port attributes in {@code ibv_devinfo}'s format (field
 * names, tabs, value forms), so the two can be compared line by line. The default output is
 * what {@code ibv_devinfo} prints, except {@code board_id}, which is read from
 * {@code /sys/class/infiniband/<dev>/board_id} and so is absent for user-space devices. With
 * {@code -v}: the {@code struct ibv_device_attr} fields verbs4j exposes, the capability flags,
 * the port's limits and its GID table with types; the extended attributes (ODP, TSO, RSS,
 * packet pacing, tag matching) and the fields verbs4j does not expose are left out, never
 * invented.
 */
@Command(name = "devinfo", mixinStandardHelpOptions = true, sortOptions = false,
        description = "Print device and port attributes (like ibv_devinfo).")
final class DevInfoCommand implements Callable<Integer> {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Option(names = {"-d", "--ib-dev"}, paramLabel = "<dev>", description = "Only device <dev> (default: all devices).")
    String device;

    @Option(names = {"-i", "--ib-port"}, paramLabel = "<port>", description = "Only port <port> (default: all ports).")
    Integer ibPort;

    @Option(names = {"-l", "--list"}, description = "Print only the device names.")
    boolean list;

    @Option(names = {"-v", "--verbose"}, description = "Print all the attributes verbs4j can query, and the GID table.")
    boolean verbose;

    private PrintWriter out;

    private static final String[] CAP_FLAGS = new String[32];

    static {
        String[] names = {"RESIZE_MAX_WR", "BAD_PKEY_CNTR", "BAD_QKEY_CNTR", "RAW_MULTI", "AUTO_PATH_MIG",
                "CHANGE_PHY_PORT", "UD_AV_PORT_ENFORCE", "CURR_QP_STATE_MOD", "SHUTDOWN_PORT", "INIT_TYPE",
                "PORT_ACTIVE_EVENT", "SYS_IMAGE_GUID", "RC_RNR_NAK_GEN", "SRQ_RESIZE", "N_NOTIFY_CQ"};
        for (int i = 0; i < names.length; i++) {
            CAP_FLAGS[i] = names[i];
        }
        CAP_FLAGS[17] = "MEM_WINDOW";
        CAP_FLAGS[18] = "UD_IP_CSUM";
        CAP_FLAGS[20] = "XRC";
        CAP_FLAGS[21] = "MEM_MGT_EXTENSIONS";
        CAP_FLAGS[23] = "MEM_WINDOW_TYPE_2A";
        CAP_FLAGS[24] = "MEM_WINDOW_TYPE_2B";
        CAP_FLAGS[25] = "RC_IP_CSUM";
        CAP_FLAGS[26] = "RAW_IP_CSUM";
        CAP_FLAGS[29] = "MANAGED_FLOW_STEERING";
    }

    @Override
    public Integer call() {
        if (ibPort != null && ibPort < 1) {
            throw new CommandLine.ParameterException(spec.commandLine(), "-i: ports are numbered from 1, not " + ibPort);
        }
        out = spec.commandLine().getOut();
        if (list) {
            List<Device> devices = DeviceChoice.devices();
            out.printf("%d HCA%s found:%n", devices.size(), devices.size() != 1 ? "s" : "");
            for (Device d : devices) {
                out.printf("\t%s%n", d.name());
            }
            out.println();
            out.flush();
            return 0;
        }
        List<Device> devices = device == null ? DeviceChoice.devices() : List.of(DeviceChoice.find(device));
        for (Device d : devices) {
            try (Context ctx = d.open()) {
                print(d, ctx);
            }
        }
        out.flush();
        return 0;
    }

    private void print(Device d, Context ctx) {
        DeviceAttributes a = ctx.queryDevice();
        if (ibPort != null && ibPort > a.physicalPortCount()) {
            throw new Verbs4jTool.Verbs4jFailure(d.name() + " has no port " + ibPort + " (it has " + a.physicalPortCount() + ")");
        }
        out.printf("hca_id:\t%s%n", d.name());
        out.printf("\ttransport:\t\t\t%s (%d)%n", transport(d.transportType()), d.transportType());
        if (!a.firmwareVersion().isEmpty()) {
            out.printf("\tfw_ver:\t\t\t\t%s%n", a.firmwareVersion());
        }
        out.printf("\tnode_guid:\t\t\t%s%n", guid(a.nodeGuid()));
        out.printf("\tsys_image_guid:\t\t\t%s%n", guid(a.systemImageGuid()));
        out.printf("\tvendor_id:\t\t\t0x%04x%n", a.vendorId());
        out.printf("\tvendor_part_id:\t\t\t%d%n", a.vendorPartId());
        out.printf("\thw_ver:\t\t\t\t0x%X%n", a.hardwareVersion());
        String board = boardId(d.name());
        if (board != null) {
            out.printf("\tboard_id:\t\t\t%s%n", board);
        }
        out.printf("\tphys_port_cnt:\t\t\t%d%n", a.physicalPortCount());
        if (verbose) {
            out.printf("\tmax_mr_size:\t\t\t0x%x%n", a.maxMrSize());
            out.printf("\tpage_size_cap:\t\t\t0x%x%n", a.pageSizeCap());
            out.printf("\tmax_qp:\t\t\t\t%d%n", a.maxQp());
            out.printf("\tmax_qp_wr:\t\t\t%d%n", a.maxQpWr());
            out.printf("\tdevice_cap_flags:\t\t0x%08x%n", a.deviceCapFlags());
            int unknown = 0;
            for (int bit = 0; bit < 32; bit++) {
                if ((a.deviceCapFlags() & (1 << bit)) != 0) {
                    if (CAP_FLAGS[bit] != null) {
                        out.printf("\t\t\t\t\t%s%n", CAP_FLAGS[bit]);
                    } else {
                        unknown |= 1 << bit;
                    }
                }
            }
            if (unknown != 0) {
                out.printf("\t\t\t\t\tUnknown flags: 0x%X%n", unknown);
            }
            out.printf("\tmax_sge:\t\t\t%d%n", a.maxSge());
            out.printf("\tmax_sge_rd:\t\t\t%d%n", a.maxSgeRd());
            out.printf("\tmax_cq:\t\t\t\t%d%n", a.maxCq());
            out.printf("\tmax_cqe:\t\t\t%d%n", a.maxCqe());
            out.printf("\tmax_mr:\t\t\t\t%d%n", a.maxMr());
            out.printf("\tmax_pd:\t\t\t\t%d%n", a.maxPd());
            out.printf("\tmax_qp_rd_atom:\t\t\t%d%n", a.maxQpRdAtomic());
            out.printf("\tmax_qp_init_rd_atom:\t\t%d%n", a.maxQpInitRdAtomic());
            out.printf("\tatomic_cap:\t\t\t%s (%d)%n", atomic(a.atomicCapability()), a.atomicCapability());
            out.printf("\tmax_mw:\t\t\t\t%d%n", a.maxMw());
            out.printf("\tmax_ah:\t\t\t\t%d%n", a.maxAh());
            out.printf("\tmax_srq:\t\t\t%d%n", a.maxSrq());
            if (a.maxSrq() != 0) {
                out.printf("\tmax_srq_wr:\t\t\t%d%n", a.maxSrqWr());
                out.printf("\tmax_srq_sge:\t\t\t%d%n", a.maxSrqSge());
            }
            out.printf("\tmax_pkeys:\t\t\t%d%n", a.maxPkeys());
            out.printf("\tlocal_ca_ack_delay:\t\t%d%n", a.localCaAckDelay());
            printOdp(ctx.odpCapabilities());
            out.printf("\tnum_comp_vectors:\t\t%d%n", ctx.completionVectorCount());
        }
        for (int port = 1; port <= a.physicalPortCount(); port++) {
            if (ibPort != null && port != ibPort) {
                continue;
            }
            PortAttributes p = ctx.port(port).query();
            out.printf("\t\tport:\t%d%n", port);
            out.printf("\t\t\tstate:\t\t\t%s (%d)%n", state(p.state()), p.state().value());
            out.printf("\t\t\tmax_mtu:\t\t%d (%d)%n", p.maxMtu().bytes(), p.maxMtu().value());
            out.printf("\t\t\tactive_mtu:\t\t%d (%d)%n", p.activeMtu().bytes(), p.activeMtu().value());
            out.printf("\t\t\tsm_lid:\t\t\t%d%n", p.smLid());
            out.printf("\t\t\tport_lid:\t\t%d%n", p.lid());
            out.printf("\t\t\tport_lmc:\t\t0x%02x%n", p.lmc());
            out.printf("\t\t\tlink_layer:\t\t%s%n", linkLayer(p.linkLayer()));
            if (verbose) {
                out.printf("\t\t\tmax_msg_sz:\t\t0x%x%n", p.maxMessageSize());
                out.printf("\t\t\tport_cap_flags:\t\t0x%08x%n", p.portCapFlags());
                out.printf("\t\t\tpkey_tbl_len:\t\t%d%n", p.pkeyTableLength());
                out.printf("\t\t\tgid_tbl_len:\t\t%d%n", p.gidTableLength());
                out.printf("\t\t\tactive_width:\t\t%sX (%d)%n", width(p.activeWidth()), p.activeWidth());
                out.printf("\t\t\tactive_speed:\t\t%s (%d)%n", speed(p.activeSpeed()), p.activeSpeed());
                if (d.transportType() == 0) {
                    out.printf("\t\t\tphys_state:\t\t%s (%d)%n", physicalState(p.physicalState()), p.physicalState());
                }
                for (GidEntry g : ctx.port(port).gids()) {
                    printGid(g, p.linkLayer());
                }
            }
            out.println();
        }
    }

    /** ibv_devinfo's on-demand paging lines (from ibv_query_device_ex's odp_caps), in its format. */
    private void printOdp(OdpCapabilities odp) {
        out.printf("\tgeneral_odp_caps:%n");
        if (odp.supported()) {
            out.printf("\t\t\t\t\tODP_SUPPORT%n");
        }
        if (odp.implicitSupported()) {
            out.printf("\t\t\t\t\tODP_SUPPORT_IMPLICIT%n");
        }
        if ((odp.generalCaps() & ~3L) != 0) {
            out.printf("\t\t\t\t\tUnknown flags: 0x%X%n", odp.generalCaps() & ~3L);
        }
        printOdpTransport("rc", odp.rcCaps());
        printOdpTransport("uc", odp.ucCaps());
        printOdpTransport("ud", odp.udCaps());
        printOdpTransport("xrc", odp.xrcCaps());
    }

    private static final String[] ODP_TRANSPORT_CAPS = {"SUPPORT_SEND", "SUPPORT_RECV", "SUPPORT_WRITE", "SUPPORT_READ",
            "SUPPORT_ATOMIC", "SUPPORT_SRQ"};

    private void printOdpTransport(String transport, int caps) {
        out.printf("\t%s_odp_caps:%n", transport);
        if (caps == 0) {
            out.printf("\t\t\t\t\tNO SUPPORT%n");
            return;
        }
        for (int bit = 0; bit < ODP_TRANSPORT_CAPS.length; bit++) {
            if ((caps & (1 << bit)) != 0) {
                out.printf("\t\t\t\t\t%s%n", ODP_TRANSPORT_CAPS[bit]);
            }
        }
        if ((caps & ~0x3f) != 0) {
            out.printf("\t\t\t\t\tUnknown flags: 0x%X%n", caps & ~0x3f);
        }
    }

    private void printGid(GidEntry g, LinkLayer linkLayer) {
        byte[] raw = g.gid().bytes();
        boolean interfaceIdZero = true;
        for (int i = 8; i < 16; i++) {
            interfaceIdZero &= raw[i] == 0;
        }
        if (interfaceIdZero) {
            // ibv_devinfo skips GIDs whose interface ID is zero
            return;
        }
        // the sysfs GID types: IB and RoCE v1 share one value, so both read "RoCE v1"
        String suffix = "";
        if (linkLayer == LinkLayer.ETHERNET) {
            suffix = g.type() == GidType.ROCE_V2 ? ", RoCE v2" : g.type() == null ? ", Invalid gid type" : ", RoCE v1";
        }
        if (g.type() == GidType.ROCE_V2) {
            out.printf("\t\t\tGID[%3d]:\t\t%s%s%n", g.index(), Ipv6Text.format(raw), suffix);
        } else if (g.type() != null) {
            StringBuilder hex = new StringBuilder();
            for (int i = 0; i < 16; i += 2) {
                if (i > 0) {
                    hex.append(':');
                }
                hex.append(String.format("%02x%02x", raw[i] & 0xff, raw[i + 1] & 0xff));
            }
            out.printf("\t\t\tGID[%3d]:\t\t%s%s%n", g.index(), hex, suffix);
        }
    }

    static String guid(long g) {
        return String.format("%04x:%04x:%04x:%04x", (g >>> 48) & 0xffff, (g >>> 32) & 0xffff, (g >>> 16) & 0xffff, g & 0xffff);
    }

    private static String boardId(String device) {
        Path p = Path.of("/sys/class/infiniband", device, "board_id");
        try {
            return Files.isReadable(p) ? Files.readString(p).strip() : null;
        } catch (IOException e) {
            return null;
        }
    }

    private static String transport(int t) {
        return switch (t) {
            case 0 -> "InfiniBand";
            case 1 -> "iWARP";
            case 2 -> "usNIC";
            case 3 -> "usNIC UDP";
            case 4 -> "unspecified";
            default -> "invalid transport";
        };
    }

    private static String state(PortState s) {
        return switch (s.value()) {
            case 1 -> "PORT_DOWN";
            case 2 -> "PORT_INIT";
            case 3 -> "PORT_ARMED";
            case 4 -> "PORT_ACTIVE";
            default -> "invalid state";
        };
    }

    private static String atomic(int cap) {
        return switch (cap) {
            case 0 -> "ATOMIC_NONE";
            case 1 -> "ATOMIC_HCA";
            case 2 -> "ATOMIC_GLOB";
            default -> "invalid atomic capability";
        };
    }

    private static String linkLayer(LinkLayer l) {
        return switch (l) {
            case UNSPECIFIED -> "Unspecified";
            case INFINIBAND -> "InfiniBand";
            case ETHERNET -> "Ethernet";
        };
    }

    private static String width(int w) {
        return switch (w) {
            case 1 -> "1";
            case 2 -> "4";
            case 4 -> "8";
            case 8 -> "12";
            case 16 -> "2";
            default -> "invalid width";
        };
    }

    private static String speed(int s) {
        return switch (s) {
            case 1 -> "2.5 Gbps";
            case 2 -> "5.0 Gbps";
            case 4, 8 -> "10.0 Gbps";
            case 16 -> "14.0 Gbps";
            case 32 -> "25.0 Gbps";
            case 64 -> "50.0 Gbps";
            case 128 -> "100.0 Gbps";
            default -> "invalid speed";
        };
    }

    private static String physicalState(int s) {
        return switch (s) {
            case 1 -> "SLEEP";
            case 2 -> "POLLING";
            case 3 -> "DISABLED";
            case 4 -> "PORT_CONFIGURATION TRAINNING";
            case 5 -> "LINK_UP";
            case 6 -> "LINK_ERROR_RECOVERY";
            case 7 -> "PHY TEST";
            default -> "invalid physical state";
        };
    }
}
