package io.github.verbs4j.examples;

import io.github.verbs4j.VerbsException;
import io.github.verbs4j.WorkCompletionException;
import picocli.CommandLine;
import picocli.CommandLine.Command;

import java.io.PrintWriter;
import java.io.UncheckedIOException;

/**
 * The {@code verbs4j} command-line tool: rdma-core's diagnostic and test programs, written
 * against the public verbs4j API only.
 *
 * <pre>
 * verbs4j devices        list RDMA devices (like ibv_devices)
 * verbs4j devinfo [-v]   device and port attributes (like ibv_devinfo)
 * verbs4j gids           GID tables (like show_gids)
 * verbs4j rc-pingpong    RC ping-pong, wire-compatible with ibv_rc_pingpong
 * verbs4j ud-pingpong    UD ping-pong, wire-compatible with ibv_ud_pingpong
 * verbs4j send-lat, write-lat, read-lat, atomic-lat, send-bw, write-bw, read-bw
 *                        perftest-style latency and bandwidth tests (client/server)
 * verbs4j udaddy        UD datagrams over rdma_cm, following rdma-core's udaddy
 * verbs4j channel-bench  message rate and latency of verbs-channel (client/server; --raw: the same traffic on bare verbs)
 * verbs4j transfer-bench batch READ/WRITE bandwidth of verbs-transfer (client/server)
 * verbs4j allreduce      ring allreduce of verbs-transfer's collectives, N ranks
 * </pre>
 *
 * <p>Exit codes: 0 success, 1 RDMA failure (unavailable, no devices, a verb failed; one line on
 * stderr, no stack trace), 2 usage error. Which libibverbs runs is chosen as everywhere in
 * verbs4j: {@code -Dverbs4j.libibverbs=<path>|system}; the {@code scripts/verbs4j} launcher
 * sets it from {@code --softrdma}.
 */
@Command(name = "verbs4j", mixinStandardHelpOptions = true, versionProvider = Verbs4jTool.Version.class,
        description = "RDMA verbs from Java: device listing and tests on libibverbs/librdmacm.",
        subcommands = {
                DevicesCommand.class,
                DevInfoCommand.class,
                GidsCommand.class,
                RcPingPongCommand.class,
                UdPingPongCommand.class,
                PerfCommands.SendLat.class,
                PerfCommands.WriteLat.class,
                PerfCommands.ReadLat.class,
                PerfCommands.AtomicLat.class,
                PerfCommands.SendBw.class,
                PerfCommands.WriteBw.class,
                PerfCommands.ReadBw.class,
                io.github.verbs4j.examples.cm.RpingCommand.class,
                io.github.verbs4j.examples.cm.UdaddyCommand.class,
                io.github.verbs4j.examples.channel.ChannelBenchCommand.class,
                io.github.verbs4j.examples.transfer.TransferBenchCommand.class,
                io.github.verbs4j.examples.transfer.AllreduceCommand.class,
                CommandLine.HelpCommand.class,
        })
public final class Verbs4jTool implements Runnable {

    /** RDMA failure: unavailable, no devices, a verb failed. */
    public static final int EXIT_RDMA_FAILURE = 1;
    /** Bad command line (picocli's own convention). */
    public static final int EXIT_USAGE = CommandLine.ExitCode.USAGE;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public void run() {
        throw new CommandLine.ParameterException(spec.commandLine(), "name a command, e.g. 'verbs4j devices'");
    }

    public static void main(String[] args) {
        System.exit(execute(new PrintWriter(System.out, true), new PrintWriter(System.err, true), args));
    }

    /** Runs the tool with the given output streams and returns its exit code (for tests and embedding). */
    public static int execute(PrintWriter out, PrintWriter err, String... args) {
        CommandLine cli = new CommandLine(new Verbs4jTool());
        cli.setOut(out);
        cli.setErr(err);
        // numbers as rdma-core's tools read them (strtoul base 0): 4096, 0x1000 and 010 (octal)
        CommandLine.ITypeConverter<Integer> strtoulLike = text -> {
            try {
                return Integer.decode(text);
            } catch (NumberFormatException e) {
                throw new CommandLine.TypeConversionException("'" + text + "' is not an int");
            }
        };
        cli.registerConverter(Integer.class, strtoulLike);
        cli.registerConverter(Integer.TYPE, strtoulLike);
        // usage errors in one line, naming the command and where its help is; exit 2
        cli.setParameterExceptionHandler((e, arguments) -> {
            CommandLine failed = e.getCommandLine();
            String command = failed.getCommandSpec().qualifiedName();
            StringBuilder line = new StringBuilder(command).append(": ").append(e.getMessage());
            if (e instanceof CommandLine.UnmatchedArgumentException u && !u.getSuggestions().isEmpty()) {
                line.append(" (did you mean ").append(String.join(" or ", u.getSuggestions())).append("?)");
            }
            line.append(" (see '").append(command).append(" --help')");
            failed.getErr().println(line);
            failed.getErr().flush();
            return failed.getCommandSpec().exitCodeOnInvalidInput();
        });
        cli.setExecutionExceptionHandler((e, commandLine, parseResult) -> {
            if (e instanceof Verbs4jFailure || e instanceof VerbsException || e instanceof WorkCompletionException
                    || e instanceof UnsupportedOperationException || e instanceof UncheckedIOException) {
                commandLine.getErr().println("verbs4j: " + withoutPrefix(e.getMessage()));
                commandLine.getErr().flush();
                return EXIT_RDMA_FAILURE;
            }
            throw e;
        });
        return cli.execute(args);
    }

    /** The library's own messages may already start with "verbs4j: "; the tool says it once. */
    private static String withoutPrefix(String message) {
        String m = message == null ? "unknown failure" : message;
        return m.startsWith("verbs4j: ") ? m.substring("verbs4j: ".length()) : m;
    }

    /** A failure the tool reports in one line (no stack trace) with exit code 1. */
    static final class Verbs4jFailure extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Verbs4jFailure(String message) {
            super(message, null, false, false);
        }
    }

    /** {@code --version}: the version the build wrote into version.properties. */
    static final class Version implements CommandLine.IVersionProvider {
        @Override
        public String[] getVersion() throws java.io.IOException {
            java.util.Properties p = new java.util.Properties();
            try (var in = Verbs4jTool.class.getResourceAsStream("version.properties")) {
                if (in == null) {
                    return new String[] {"verbs4j (version unknown: version.properties missing from the class path)"};
                }
                p.load(in);
            }
            return new String[] {"verbs4j " + p.getProperty("version", "unknown")};
        }
    }
}
