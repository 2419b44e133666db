package io.github.verbs4j.examples.cm;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.concurrent.Callable;

/**
 * {@code verbs4j rping}: rdma-core's {@code rping} on verbs4j's rdma_cm API, wire-compatible with
 * it in both roles.
 *
 * <p>The exchange, per ping: the client SENDs a 16-byte advertisement {@code {be64 addr, be32
 * rkey, be32 size}} of its source buffer; the server RDMA READs {@code size} bytes from it and
 * SENDs a 16-byte "go ahead"; the client advertises its sink buffer the same way; the server RDMA
 * WRITEs the string it read (up to and including its NUL) into the sink and SENDs "go ahead"
 * again. The client's data for ping {@code n} is {@code "rdma-ping-n: "} followed by letters
 * cycling through ASCII 65..122, starting one letter further each ping, with a NUL in the last
 * byte. With {@code -V} the client compares the sink with the source after every ping.
 *
 * <p>The server serves one client and ends when it disconnects, like {@code rping -s} without
 * {@code -P}.
 */
@Command(name = "rping",
        description = "RDMA ping-pong over rdma_cm, compatible with rdma-core's rping (-s server, -c client).")
public final class RpingCommand implements Callable<Integer> {

    /** rping's default port. */
    public static final int DEFAULT_PORT = 7174;
    /** rping's bounds: room for "rdma-ping-2147483647: " and less than 64 KiB. */
    static final int MIN_SIZE = 26;
    static final int MAX_SIZE = 64 * 1024 - 1;
    /** How long any single step may take before the run fails (rping itself waits forever). */
    private static final int STEP_SECONDS = 60;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    // no mixinStandardHelpOptions: its -V (version) would take rping's -V (validate)
    @Option(names = {"-h", "--help"}, usageHelp = true, description = "show this help and exit")
    boolean help;

    @Option(names = "-s", description = "server side")
    boolean server;

    @Option(names = "-c", description = "client side")
    boolean client;

    @Option(names = "-a", paramLabel = "addr", description = "address (the server binds to it; default: any)")
    String address;

    @Option(names = "-p", paramLabel = "port", description = "port (default: ${DEFAULT-VALUE})")
    int port = DEFAULT_PORT;

    @Option(names = "-C", paramLabel = "count", description = "ping count (client; 0: forever)")
    int count;

    @Option(names = "-S", paramLabel = "size", description = "ping data size (default: ${DEFAULT-VALUE})")
    int size = 64;

    @Option(names = "-v", description = "display ping data to stdout")
    boolean verbose;

    @Option(names = "-V", description = "validate ping data")
    boolean validate;

    @Option(names = "-d", description = "debug printfs")
    boolean debug;

    @Option(names = "-t", paramLabel = "seconds", description = "give up a step after this long (default: 60)")
    int stepSeconds = STEP_SECONDS;

    @Override
    public Integer call() {
        if (server == client) {
            throw new CommandLine.ParameterException(spec.commandLine(), "give exactly one of -s (server) and -c (client)");
        }
        if (size < MIN_SIZE || size > MAX_SIZE) {
            throw new CommandLine.ParameterException(spec.commandLine(),
                    "Invalid size " + size + " (valid range is " + MIN_SIZE + " to " + MAX_SIZE + ")");
        }
        if (count < 0) {
            throw new CommandLine.ParameterException(spec.commandLine(), "Invalid count " + count);
        }
        if (port < 0 || port > 65535) {
            throw new CommandLine.ParameterException(spec.commandLine(), "Invalid port " + port);
        }
        if (stepSeconds < 1) {
            throw new CommandLine.ParameterException(spec.commandLine(), "-t must be at least 1 second");
        }
        if (client && address == null) {
            throw new CommandLine.ParameterException(spec.commandLine(), "the client needs the server's address (-a)");
        }
        // the rdma_cm code lives in Rping, so that this class (which picocli inspects when the
        // tool starts, whatever the command) refers to no verbs-cm type
        InetAddress host;
        try {
            host = address == null ? InetAddress.getByAddress(new byte[4]) : InetAddress.getByName(address);
        } catch (UnknownHostException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "unknown host " + address);
        }
        Rping rping = new Rping(spec.commandLine().getOut(), spec.commandLine().getErr(), host, port, count, size,
                verbose, validate, debug, Duration.ofSeconds(stepSeconds));
        return server ? rping.runServer() : rping.runClient();
    }
}
