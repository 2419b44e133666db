package io.github.verbs4j.examples;

import io.github.verbs4j.AddressHandle;
import io.github.verbs4j.AddressVector;
import io.github.verbs4j.ConnectOptions;
import io.github.verbs4j.Endpoint;
import io.github.verbs4j.PortAttributes;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QpType;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.SendRequest;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code verbs4j ud-pingpong}: rdma-core's {@code ibv_ud_pingpong} (UD SENDs back and forth,
 * Q_Key 0x11111111, an address handle built from the exchanged LID/GID). Receives are 40 bytes
 * longer than the message: a UD receive starts with the 40-byte GRH slot.
 */
@Command(name = "ud-pingpong", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Ping-pong over a UD queue pair (like ibv_ud_pingpong, and wire-compatible with it).",
                "Server: verbs4j ud-pingpong -g 1 -s 1024    client: verbs4j ud-pingpong -g 1 -s 1024 <server host>"})
final class UdPingPongCommand extends PingPongCommand {

    /** The GRH slot at the start of every UD receive buffer. */
    static final int GRH_BYTES = 40;
    static final int QKEY = 0x11111111;

    @Option(names = {"-s", "--size"}, paramLabel = "<size>",
            description = "Size of the message to exchange, at most the port's active MTU (default 2048).")
    Integer sizeOption;

    @Override
    QpType qpType() {
        return QpType.UD;
    }

    @Override
    int defaultSize() {
        return 2048;
    }

    @Override
    Integer sizeOption() {
        return sizeOption;
    }

    @Override
    int sendOffset() {
        return GRH_BYTES;
    }

    @Override
    int bufferBytes() {
        return size + GRH_BYTES;
    }

    @Override
    String localGidSeparator() {
        // sic: the stock tool prints "PSN 0x...: GID" on this line
        return ":";
    }

    @Override
    void checkPort(PortAttributes port) {
        int mtu = port.activeMtu().bytes();
        if (size > mtu) {
            throw new Verbs4jTool.Verbs4jFailure("requested size " + size + " is larger than the port's active MTU (" + mtu
                    + "): a UD message is one packet; use -s " + mtu + " or less");
        }
    }

    @Override
    ConnectOptions connectOptions() {
        return ConnectOptions.defaults().withPort(shared.ibPort).withQkey(QKEY).withServiceLevel(sl);
    }

    @Override
    void connect(QueuePair qp, Endpoint remote, ProtectionDomain pd, SendRequest send) {
        qp.activate(connectOptions());
        AddressVector av = AddressVector.to(remote).port(shared.ibPort).serviceLevel(sl).sgidIndex(Math.max(0, gidIndex))
                .hopLimit(1);
        AddressHandle ah = own(pd.createAh(av));
        send.ud(ah, remote.qpn(), QKEY);
    }
}
