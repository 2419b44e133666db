package io.github.verbs4j.examples.channel;

import io.github.verbs4j.channel.ChannelOptions;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.concurrent.Callable;

/**
 * {@code verbs4j channel-bench}: message rate, bandwidth and round-trip latency of verbs-channel
 * between a server ({@code -s}) and a client ({@code -c -a <server>}), over one or more
 * connections. The client states the run (size, count, connections) in a first message on each
 * channel; the server checks it, counts and checks every message (its length and sequence
 * number; in the channel mode with {@code --check-every-byte}, every byte), and answers when all
 * arrived. Then connection 0
 * measures round trips. {@code --raw} (on both sides) runs the same traffic on bare verbs instead
 * of the channel, for comparison; {@code --app-poll} lets the application's threads drive the
 * channel instead of a polling thread; {@code --notify SEND} makes a side notify by a SEND after
 * each plain RDMA WRITE, as the channel does by itself on iWARP, which has no immediate data
 * ({@code --raw} needs immediate data and refuses an iWARP device); {@code --in-place} sends with
 * {@code Channel.send(length, MessageWriter)}, without the copy. Both print the heap bytes each
 * process allocated per message in the steady state, and both time the stream after an untimed
 * warm-up that lasts until the JIT is quiet ({@code --stream-warmup}).
 */
@Command(name = "channel-bench", mixinStandardHelpOptions = true,
        description = "Message rate, bandwidth and latency of the verbs4j message channel (client/server over rdma_cm).")
public final class ChannelBenchCommand implements Callable<Integer> {

    /** The server's default port. */
    public static final int DEFAULT_PORT = 7475;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Option(names = "-s", description = "server side")
    boolean server;

    @Option(names = "-c", description = "client side")
    boolean client;

    @Option(names = {"-a", "--address"}, paramLabel = "<addr>", description = "the server's address (client), or the one to bind (server; default: any)")
    String address;

    @Option(names = {"-p", "--port"}, paramLabel = "<port>", description = "port (default: ${DEFAULT-VALUE}; 0 on the server picks a free one and prints it)")
    int port = DEFAULT_PORT;

    @Option(names = {"-S", "--size"}, paramLabel = "<bytes>", description = "message size (default: ${DEFAULT-VALUE})")
    int size = 64;

    @Option(names = {"-n", "--messages"}, paramLabel = "<n>", description = "messages per connection (default: ${DEFAULT-VALUE})")
    long messages = 200_000;

    @Option(names = {"-C", "--connections"}, paramLabel = "<n>", description = "connections, all served by one polling thread per side (default: ${DEFAULT-VALUE})")
    int connections = 1;

    @Option(names = {"-w", "--window"}, paramLabel = "<n>", description = "RDMA WRITEs in flight per connection before messages are coalesced (default: ${DEFAULT-VALUE})")
    int window = 8;

    @Option(names = "--slots", paramLabel = "<n>", description = "receive ring slots per connection (default: ${DEFAULT-VALUE})")
    int slots = 256;

    @Option(names = "--slot-size", paramLabel = "<bytes>", description = "bytes per slot (default: ${DEFAULT-VALUE})")
    int slotSize = 1024;

    @Option(names = "--pings", paramLabel = "<n>", description = "round trips measured on connection 0 (default: ${DEFAULT-VALUE})")
    int pings = 2_000;

    @Option(names = "--warmup", paramLabel = "<n>", description = "round trips before the measured ones, not timed, "
            + "so that the JIT has compiled the round trip's path on both sides (default: ${DEFAULT-VALUE})")
    int warmup = 100_000;

    @Option(names = "--stream-warmup", paramLabel = "<ms>", description = "the longest untimed stream before the timed one: "
            + "it ends once the JIT has compiled nothing for 200 ms (after at least 300 ms and 30,000 messages), "
            + "so that the stream is timed in its steady state, as perftest's (nothing to compile) is; 0: none "
            + "(default: ${DEFAULT-VALUE})")
    int streamWarmupMillis = 5_000;

    @Option(names = "--in-place", description = "send with Channel.send(length, MessageWriter), writing each message straight "
            + "into the channel's staging memory: only its sequence numbers per message, the body where the staging memory "
            + "lacks it (perftest never refills its buffer), the stream's messages and the client's pings alike (the server's echo "
            + "copies either way); without it, Channel.send(MemorySegment) copies each message")
    boolean inPlace;

    @Option(names = "--check-every-byte", description = "server, channel mode: compare every byte of every message "
            + "with the pattern sent; without it the server checks each message's length and sequence numbers (its first "
            + "and last 8 bytes), as --raw's server checks the first 8 and perftest nothing, so that the rates compare")
    boolean checkEveryByte;

    @Option(names = "--spin", paramLabel = "<polls>", description = "empty polls before the polling thread blocks on the completion channel (default: ${DEFAULT-VALUE})")
    int spin = 2_000;

    @Option(names = "--raw", description = "the same WRITE_WITH_IMM traffic on bare verbs (queue pair, reused requests, "
            + "busy-polled completion queues) instead of the channel; one connection, slots of the message size "
            + "(--slot-size and --spin do not apply); give it on both sides")
    boolean raw;

    @Option(names = "--app-poll", description = "the application's threads poll the completion queue themselves "
            + "(ChannelOptions.withApplicationPolling) instead of a polling thread per side; each side chooses for itself")
    boolean appPoll;

    @Option(names = "--notify", paramLabel = "<mode>", description = "how each side tells its peer what it wrote: "
            + "AUTO (immediate data, or a SEND after each plain WRITE on iWARP), IMMEDIATE or SEND "
            + "(ChannelOptions.Notification); each side chooses for itself (default: ${DEFAULT-VALUE})")
    ChannelOptions.Notification notify = ChannelOptions.Notification.AUTO;

    @Option(names = {"-t", "--timeout"}, paramLabel = "<seconds>", description = "give up a step after this long (default: ${DEFAULT-VALUE})")
    int timeoutSeconds = 60;

    @Override
    public Integer call() throws Exception {
        if (server == client) {
            throw new CommandLine.ParameterException(spec.commandLine(), "give exactly one of -s (server) and -c (client)");
        }
        if (client && address == null) {
            throw new CommandLine.ParameterException(spec.commandLine(), "the client needs the server's address (-a)");
        }
        if (port < 0 || port > 65535 || (client && port == 0)) {
            throw new CommandLine.ParameterException(spec.commandLine(), "invalid port " + port);
        }
        if (size < ChannelBench.MIN_SIZE || messages < 1 || connections < 1 || connections > 1024 || pings < 0 || warmup < 0
                || (long) warmup + pings > Integer.MAX_VALUE || timeoutSeconds < 1 || streamWarmupMillis < 0) {
            throw new CommandLine.ParameterException(spec.commandLine(), "size must be at least " + ChannelBench.MIN_SIZE
                    + ", messages and connections (at most 1024) at least 1, pings, warm-up and stream warm-up not negative "
                    + "(pings and warm-up together at most 2^31-1), timeout at least 1 s");
        }
        InetAddress host;
        try {
            host = address == null ? InetAddress.getByAddress(new byte[4]) : InetAddress.getByName(address);
        } catch (UnknownHostException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "unknown host " + address);
        }
        if (raw) {
            if (appPoll) {
                throw new CommandLine.ParameterException(spec.commandLine(), "--raw always polls from the application's thread: "
                        + "--app-poll is for the channel");
            }
            if (notify != ChannelOptions.Notification.AUTO) {
                throw new CommandLine.ParameterException(spec.commandLine(), "--raw always notifies with immediate data: "
                        + "--notify is for the channel");
            }
            if (connections != 1) {
                throw new CommandLine.ParameterException(spec.commandLine(), "--raw runs one connection (-C 1)");
            }
            if (inPlace) {
                throw new CommandLine.ParameterException(spec.commandLine(), "--raw writes 8 bytes a message into reused "
                        + "slots already: --in-place is for the channel");
            }
            if (checkEveryByte) {
                throw new CommandLine.ParameterException(spec.commandLine(), "--raw checks each message's first 8 bytes: "
                        + "--check-every-byte is for the channel");
            }
            RawChannelBench bench;
            try {
                bench = new RawChannelBench(spec.commandLine().getOut(), host, port, size, messages, window, slots, pings,
                        warmup, Duration.ofSeconds(timeoutSeconds), streamWarmupMillis * 1_000_000L);
            } catch (IllegalArgumentException e) {
                throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
            }
            return server ? bench.runServer() : bench.runClient();
        }
        ChannelBench bench;
        try {
            bench = new ChannelBench(spec.commandLine().getOut(), host, port, size, messages, connections, window, slots,
                    slotSize, pings, warmup, spin, appPoll, notify, Duration.ofSeconds(timeoutSeconds), inPlace,
                    streamWarmupMillis * 1_000_000L, checkEveryByte);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        return server ? bench.runServer() : bench.runClient();
    }
}
