package io.github.verbs4j.examples;

import io.github.verbs4j.Access;
import io.github.verbs4j.ConnectOptions;
import io.github.verbs4j.Context;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.OdpCapabilities;
import io.github.verbs4j.Endpoint;
import io.github.verbs4j.Mtu;
import io.github.verbs4j.PortAttributes;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QpType;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.SendRequest;
import picocli.CommandLine;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code verbs4j rc-pingpong}: rdma-core's {@code ibv_rc_pingpong} (RC SENDs back and forth) with
 * its flags, its TCP exchange and its output lines, so either side may be the stock tool.
 */
@Command(name = "rc-pingpong", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Ping-pong over an RC queue pair (like ibv_rc_pingpong, and wire-compatible with it).",
                "Server: verbs4j rc-pingpong -g 1    client: verbs4j rc-pingpong -g 1 <server host>"})
final class RcPingPongCommand extends PingPongCommand {

    @Option(names = {"-s", "--size"}, paramLabel = "<size>", description = "Size of the message to exchange (default 4096).")
    Integer sizeOption;

    @Option(names = {"-m", "--mtu"}, paramLabel = "<size>", defaultValue = "1024",
            description = "Path MTU: 256, 512, 1024, 2048 or 4096 (default ${DEFAULT-VALUE}).")
    int mtu;

    @Option(names = {"-N", "--new_send"}, description = "Send through the new post-send API (ibv_qp_ex: ibv_wr_start, ibv_wr_send, ibv_wr_complete).")
    boolean newSend;

    @Option(names = {"-o", "--odp"}, description = "Register the buffer with on-demand paging (IBV_ACCESS_ON_DEMAND).")
    boolean odp;

    @Option(names = {"-O", "--iodp"}, description = "Use the implicit on-demand region (the whole address space).")
    boolean implicitOdp;

    @Option(names = {"-P", "--prefetch"}, description = "Prefetch the on-demand buffer (ibv_advise_mr) before the exchange.")
    boolean prefetch;

    private Mtu pathMtu;

    @Override
    void validate() {
        super.validate();
        pathMtu = switch (mtu) {
            case 256 -> Mtu.MTU_256;
            case 512 -> Mtu.MTU_512;
            case 1024 -> Mtu.MTU_1024;
            case 2048 -> Mtu.MTU_2048;
            case 4096 -> Mtu.MTU_4096;
            default -> throw new CommandLine.ParameterException(spec.commandLine(),
                    "-m: the path MTU is 256, 512, 1024, 2048 or 4096, not " + mtu);
        };
        if (prefetch && !odp && !implicitOdp) {
            throw new CommandLine.ParameterException(spec.commandLine(), "-P: prefetch applies to an on-demand buffer (-o or -O)");
        }
    }

    /**
     * With -o, the buffer is registered with ON_DEMAND; with -O, it is named through the
     * implicit on-demand region; -P prefetches it (ibv_advise_mr, PREFETCH with FLUSH). The
     * device must report RC SEND and RECV on demand (and implicit ODP for -O), as the stock tool
     * checks.
     */
    @Override
    MemoryRegion registerBuffer(Context ctx, ProtectionDomain pd, MemorySegment[] memory) {
        if (!odp && !implicitOdp) {
            return super.registerBuffer(ctx, pd, memory);
        }
        OdpCapabilities caps = ctx.odpCapabilities();
        if (!caps.supported() || !caps.rc().containsAll(EnumSet.of(OdpCapabilities.Operation.SEND,
                OdpCapabilities.Operation.RECV))) {
            throw new Verbs4jTool.Verbs4jFailure("The device isn't ODP capable or does not support RC send and receive with ODP");
        }
        if (implicitOdp && !caps.implicitSupported()) {
            throw new Verbs4jTool.Verbs4jFailure("The device doesn't support implicit ODP");
        }
        // an automatic arena: the region (or, for -O, this command) keeps the memory reachable
        MemorySegment buf = Arena.ofAuto().allocate(bufferBytes(), 4096);
        memory[0] = buf;
        MemoryRegion mr = implicitOdp ? pd.registerImplicitOnDemand(Access.LOCAL_WRITE)
                : pd.register(buf, Access.ON_DEMAND, Access.LOCAL_WRITE);
        if (prefetch) {
            try {
                mr.advise(MemoryRegion.Advice.PREFETCH, buf.address() - mr.address(), bufferBytes(), true);
            } catch (RuntimeException e) {
                mr.close();
                throw e;
            }
        }
        return mr;
    }

    @Override
    boolean newSend() {
        return newSend;
    }

    @Override
    QpType qpType() {
        return QpType.RC;
    }

    @Override
    int defaultSize() {
        return 4096;
    }

    @Override
    Integer sizeOption() {
        return sizeOption;
    }

    @Override
    int sendOffset() {
        return 0;
    }

    @Override
    int bufferBytes() {
        return size;
    }

    @Override
    String localGidSeparator() {
        return ",";
    }

    @Override
    void checkPort(PortAttributes port) {
    }

    @Override
    ConnectOptions connectOptions() {
        // as the stock tool: no remote access to the QP, RTR/RTS timers 12/14, retries 7
        return ConnectOptions.defaults().withPort(shared.ibPort).withGidIndex(Math.max(0, gidIndex)).withMtu(pathMtu)
                .withServiceLevel(sl).withAccess();
    }

    @Override
    void connect(QueuePair qp, Endpoint remote, ProtectionDomain pd, SendRequest send) {
        qp.connect(remote, connectOptions());
    }
}
