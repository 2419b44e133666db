package io.github.verbs4j.examples;

import picocli.CommandLine;
import picocli.CommandLine.Option;

/**
 * {@code -p}, {@code -d} and {@code -i}, which the ping-pong and perftest-style commands share
 * (a picocli mixin), with their checks.
 */
final class PeerOptions {

    @Option(names = {"-p", "--port"}, paramLabel = "<port>", defaultValue = "18515",
            description = "TCP port of the address exchange: the server listens on it, the client connects to it "
                    + "(default ${DEFAULT-VALUE}).")
    int port;

    @Option(names = {"-d", "--ib-dev"}, paramLabel = "<dev>", description = "RDMA device (default: the first device found).")
    String device;

    @Option(names = {"-i", "--ib-port"}, paramLabel = "<port>", defaultValue = "1",
            description = "Port of the device (default ${DEFAULT-VALUE}).")
    int ibPort;

    /** Usage errors (exit 2) for values no run could use. */
    void validate(CommandLine cl) {
        if (port < 0 || port > 65535) {
            throw new CommandLine.ParameterException(cl, "-p: a TCP port is 0..65535, not " + port);
        }
        if (ibPort < 1) {
            throw new CommandLine.ParameterException(cl, "-i: ports are numbered from 1, not " + ibPort);
        }
    }
}
