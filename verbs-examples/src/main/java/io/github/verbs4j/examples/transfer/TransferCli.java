package io.github.verbs4j.examples.transfer;

import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;

import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;

/**
 * What {@code transfer-bench} and {@code allreduce} share: the local device address option,
 * address and {@code host:port} parsing into picocli usage errors, and the tables' rules.
 */
final class TransferCli {

    private TransferCli() {
    }

    /** The {@code -a/--bind} option: the address of the local RDMA device. */
    static final class Bind {

        @CommandLine.Spec(CommandLine.Spec.Target.MIXEE)
        CommandSpec spec;

        @Option(names = {"-a", "--bind"}, paramLabel = "<addr>", defaultValue = "127.0.0.1",
                description = "local address of an RDMA device (default: ${DEFAULT-VALUE})")
        String bind;

        /** The address, or a usage error naming the option. */
        InetAddress address() {
            return TransferCli.address(spec, "--bind", bind);
        }

        /** The address with {@code port}. */
        InetSocketAddress at(int port) {
            return new InetSocketAddress(address(), port);
        }
    }

    /** {@code text} resolved, or a usage error naming {@code option}. */
    static InetAddress address(CommandSpec spec, String option, String text) {
        try {
            return InetAddress.getByName(text);
        } catch (UnknownHostException e) {
            throw usage(spec, option + ": unknown host '" + text + "'");
        }
    }

    /** {@code host:port} (port 0..65535), or a usage error naming {@code option}. */
    static InetSocketAddress hostPort(CommandSpec spec, String option, String text) {
        int colon = text.lastIndexOf(':');
        if (colon <= 0 || colon == text.length() - 1) {
            throw usage(spec, option + " is host:port, not '" + text + "'");
        }
        int port = port(spec, option, text.substring(colon + 1));
        return new InetSocketAddress(address(spec, option, text.substring(0, colon)), port);
    }

    /** A port number 0..65535, or a usage error naming {@code option}. */
    static int port(CommandSpec spec, String option, String text) {
        try {
            int port = Integer.parseInt(text);
            if (port >= 0 && port <= 65535) {
                return port;
            }
        } catch (NumberFormatException e) {
            // the usage error below
        }
        throw usage(spec, option + ": '" + text + "' is no port (0..65535)");
    }

    /** Fails with a usage error unless {@code ok}. */
    static void require(CommandSpec spec, boolean ok, String message) {
        if (!ok) {
            throw usage(spec, message);
        }
    }

    static CommandLine.ParameterException usage(CommandSpec spec, String message) {
        return new CommandLine.ParameterException(spec.commandLine(), message);
    }

    /** A table's horizontal rule, {@code width} dashes. */
    static void rule(PrintStream out, int width) {
        out.println("-".repeat(width));
    }
}
