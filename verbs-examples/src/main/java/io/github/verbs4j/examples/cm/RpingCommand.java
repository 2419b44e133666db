package io.github.verbs4j.examples.cm;

import io.github.verbs4j.RemoteBuffer;
import io.github.verbs4j.cm.ConnectParameters;
import io.github.verbs4j.cm.EndpointOptions;
import io.github.verbs4j.cm.PeerDisconnectedException;
import io.github.verbs4j.cm.RdmaClient;
import io.github.verbs4j.cm.RdmaConnection;
import io.github.verbs4j.cm.RdmaServer;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.PrintWriter;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
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
    /** The advertisement: be64 address, be32 rkey, be32 size. */
    static final int INFO_SIZE = 16;
    /** rping's bounds: room for "rdma-ping-2147483647: " and less than 64 KiB. */
    static final int MIN_SIZE = 26;
    static final int MAX_SIZE = 64 * 1024 - 1;

    /** How long any single step may take before the run fails (rping itself waits forever). */
    private static final Duration STEP = Duration.ofSeconds(60);

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
    int stepSeconds = (int) STEP.toSeconds();

    private PrintWriter out;
    private PrintWriter err;

    @Override
    public Integer call() {
        out = spec.commandLine().getOut();
        err = spec.commandLine().getErr();
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
        return server ? runServer() : runClient();
    }

    private Duration step() {
        return Duration.ofSeconds(stepSeconds);
    }

    private InetAddress resolve(String host) {
        try {
            return InetAddress.getByName(host);
        } catch (UnknownHostException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "unknown host " + host);
        }
    }

    private void debug(String format, Object... args) {
        if (debug) {
            out.printf(format + "%n", args);
            out.flush();
        }
    }

    /** Messages of 16 bytes, two receives posted (rping's max_recv_wr), one READ/WRITE each way (rping's conn params). */
    private EndpointOptions options(int rdmaBytes) {
        return new EndpointOptions(INFO_SIZE, 2, rdmaBytes, new ConnectParameters(1, 1, 7, 7, new byte[0]));
    }

    private int runClient() {
        InetSocketAddress target = new InetSocketAddress(resolve(address), port);
        // one registered buffer, remotely readable and writable: the source at 0, the sink at size
        try (RdmaConnection c = new RdmaClient(options(2 * size)).connect(target, step())) {
            debug("connected to %s", target);
            MemorySegment buffer = c.rdmaBuffer().segment();
            MemorySegment source = buffer.asSlice(0, size);
            MemorySegment sink = buffer.asSlice(size, size);
            int start = 65;
            for (int ping = 0; count == 0 || ping < count; ping++) {
                fillPing(source, ping, start);
                start = start == 122 ? 65 : start + 1;

                c.send(info(c.rdmaBuffer().address(), c.rdmaBuffer().rkey(), size), step());
                debug("RDMA addr %x rkey %x len %d", c.rdmaBuffer().address(), c.rdmaBuffer().rkey(), size);
                expectGoAhead(c.receive(step()));
                c.send(info(c.rdmaBuffer().address() + size, c.rdmaBuffer().rkey(), size), step());
                debug("RDMA addr %x rkey %x len %d", c.rdmaBuffer().address() + size, c.rdmaBuffer().rkey(), size);
                expectGoAhead(c.receive(step()));

                if (validate && source.mismatch(sink) != -1) {
                    err.println("data mismatch!");
                    err.flush();
                    return 1;
                }
                if (verbose) {
                    out.println("ping data: " + cString(sink));
                    out.flush();
                }
            }
            c.disconnect();
            debug("disconnected");
        }
        return 0;
    }

    private int runServer() {
        InetAddress bindTo = address == null ? anyAddress() : resolve(address);
        try (RdmaServer s = RdmaServer.listen(new InetSocketAddress(bindTo, port), options(size), 3)) {
            debug("listening on %s", s.localAddress());
            RdmaConnection c = acceptForever(s);
            try (c) {
                debug("accepted a connection from %s", c.remoteAddress());
                MemorySegment buffer = c.rdmaBuffer().segment();
                while (true) {
                    RemoteBuffer source;
                    try {
                        source = parseInfo(c.receive(Duration.ofDays(365)));
                    } catch (PeerDisconnectedException gone) {
                        break;
                    }
                    debug("Received rkey %x addr %x len %d from peer", source.rkey(), source.address(), source.length());
                    if (source.length() > size) {
                        err.println("the client's buffer (" + source.length() + " bytes) exceeds this server's -S " + size);
                        err.flush();
                        return 1;
                    }
                    c.read(0, source, (int) source.length(), step());
                    if (verbose) {
                        out.println("server ping data: " + cString(buffer.asSlice(0, size)));
                        out.flush();
                    }
                    c.send(new byte[INFO_SIZE], step());
                    RemoteBuffer sinkAd;
                    try {
                        sinkAd = parseInfo(c.receive(step()));
                    } catch (PeerDisconnectedException gone) {
                        break;
                    }
                    int length = cStringLength(buffer.asSlice(0, size)) + 1;
                    c.write(0, new RemoteBuffer(sinkAd.address(), Math.min(length, sinkAd.length()), sinkAd.rkey()),
                            (int) Math.min(length, sinkAd.length()), step());
                    c.send(new byte[INFO_SIZE], step());
                }
                err.println("server DISCONNECT EVENT...");
                err.flush();
            }
        }
        return 0;
    }

    private static RdmaConnection acceptForever(RdmaServer s) {
        while (true) {
            try {
                return s.accept(Duration.ofHours(1));
            } catch (io.github.verbs4j.VerbsException e) {
                // rping -s waits for its client indefinitely: only a timed-out wait is retried
                if (!e.errnoName().equals("ETIMEDOUT")) {
                    throw e;
                }
            }
        }
    }

    private static InetAddress anyAddress() {
        try {
            return InetAddress.getByAddress(new byte[4]);
        } catch (UnknownHostException e) {
            throw new IllegalStateException(e);
        }
    }

    /** {@code "rdma-ping-<ping>: "} then letters from {@code start} cycling 65..122, NUL last. */
    static void fillPing(MemorySegment buffer, int ping, int start) {
        int size = (int) buffer.byteSize();
        byte[] prefix = ("rdma-ping-" + ping + ": ").getBytes(StandardCharsets.US_ASCII);
        int n = Math.min(prefix.length, size - 1);
        MemorySegment.copy(prefix, 0, buffer, ValueLayout.JAVA_BYTE, 0, n);
        int c = start;
        for (int i = n; i < size; i++) {
            buffer.set(ValueLayout.JAVA_BYTE, i, (byte) c);
            c = c == 122 ? 65 : c + 1;
        }
        buffer.set(ValueLayout.JAVA_BYTE, size - 1, (byte) 0);
    }

    /** The 16-byte advertisement in network byte order. */
    static byte[] info(long address, int rkey, int size) {
        return ByteBuffer.allocate(INFO_SIZE).putLong(address).putInt(rkey).putInt(size).array();
    }

    static RemoteBuffer parseInfo(byte[] message) {
        if (message.length != INFO_SIZE) {
            throw new IllegalStateException("Received bogus data, size " + message.length);
        }
        ByteBuffer b = ByteBuffer.wrap(message);
        long address = b.getLong();
        int rkey = b.getInt();
        int size = b.getInt();
        return new RemoteBuffer(address, Integer.toUnsignedLong(size), rkey);
    }

    private static void expectGoAhead(byte[] message) {
        if (message.length != INFO_SIZE) {
            throw new IllegalStateException("Received bogus data, size " + message.length);
        }
    }

    static int cStringLength(MemorySegment s) {
        for (int i = 0; i < s.byteSize(); i++) {
            if (s.get(ValueLayout.JAVA_BYTE, i) == 0) {
                return i;
            }
        }
        return (int) s.byteSize() - 1;
    }

    static String cString(MemorySegment s) {
        return new String(s.asSlice(0, cStringLength(s)).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.US_ASCII);
    }
}
