package io.github.verbs4j.examples.cm;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.concurrent.Callable;

/**
 * {@code verbs4j udaddy}: UD datagrams over rdma_cm ({@code RDMA_PS_UDP}), following rdma-core's
 * {@code udaddy} exchange in both roles.
 *
 * <p>The client resolves the server's address and route, creates a UD queue pair, posts its
 * receives and connects (the SIDR exchange). Its address handle comes from the ESTABLISHED
 * event's {@code ah_attr} and its datagrams carry the event's QP number and Q_Key, so the
 * server may be on another host with another GID. It sends {@code -C} datagrams of {@code -S}
 * bytes (SEND with immediate data: its own QP number), then waits for as many replies. The
 * server accepts one request, receives the datagrams, builds its address handle back from the
 * first receive's completion and GRH ({@code ibv_create_ah_from_wc}) and replies to each.
 *
 * <p>With {@code -V} (verbs4j's own option; both ends must be verbs4j) each datagram carries
 * its number and a pattern that follows from it, the server checks every byte of what it
 * received and echoes it, and the client checks every byte of the echoes: byte-exact both ways.
 */
@Command(name = "udaddy",
        description = "UD datagrams over rdma_cm (RDMA_PS_UDP), following rdma-core's udaddy (-s: the server to reach).")
public final class UdaddyCommand implements Callable<Integer> {

    /** udaddy's port. */
    public static final int DEFAULT_PORT = 7174;
    /** -V's datagrams start with their number (4 bytes). */
    static final int MIN_VALIDATED_SIZE = 4;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    // no mixinStandardHelpOptions: its -V (version) would take the -V (validate) here
    @Option(names = {"-h", "--help"}, usageHelp = true, description = "show this help and exit")
    boolean help;

    @Option(names = "-s", paramLabel = "server_address", description = "the server to reach (client side); without it: server side")
    String serverAddress;

    @Option(names = "-b", paramLabel = "bind_address", description = "the local address to bind to")
    String bindAddress;

    @Option(names = "-C", paramLabel = "message_count", description = "datagrams each way (default: ${DEFAULT-VALUE})")
    int count = 10;

    @Option(names = "-S", paramLabel = "message_size", description = "bytes per datagram, at most the path MTU (default: ${DEFAULT-VALUE})")
    int size = 100;

    @Option(names = "--port", paramLabel = "port", description = "the rdma_cm port (default: ${DEFAULT-VALUE}, udaddy's)")
    int port = DEFAULT_PORT;

    @Option(names = "-V", description = "numbered, patterned datagrams checked byte by byte at both ends (verbs4j at both ends)")
    boolean validate;

    @Option(names = "--timeout", paramLabel = "seconds",
            description = "give up a step after this long (default: ${DEFAULT-VALUE})")
    int stepSeconds = 60;

    @Override
    public Integer call() {
        if (count < 1) {
            throw new CommandLine.ParameterException(spec.commandLine(), "-C must be at least 1, got " + count);
        }
        if (size < 1 || (validate && size < MIN_VALIDATED_SIZE)) {
            throw new CommandLine.ParameterException(spec.commandLine(), "-S must be at least "
                    + (validate ? MIN_VALIDATED_SIZE + " with -V" : "1") + ", got " + size);
        }
        if (port < 0 || port > 65535) {
            throw new CommandLine.ParameterException(spec.commandLine(), "invalid port " + port);
        }
        if (stepSeconds < 1) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--timeout must be at least 1 second");
        }
        // the rdma_cm code lives in Udaddy, so that this class (which picocli inspects when the
        // tool starts, whatever the command) refers to no verbs-cm type
        InetAddress bind = host(bindAddress);
        Udaddy run = new Udaddy(spec.commandLine().getOut(), spec.commandLine().getErr(), count, size, validate,
                Duration.ofSeconds(stepSeconds));
        return serverAddress == null ? run.runServer(bind, port) : run.runClient(bind, host(serverAddress), port);
    }

    private InetAddress host(String name) {
        if (name == null) {
            return null;
        }
        try {
            return InetAddress.getByName(name);
        } catch (UnknownHostException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "unknown host " + name);
        }
    }
}
