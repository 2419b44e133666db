package io.github.verbs4j.examples.cm;

import io.github.verbs4j.PeerLostException;
import io.github.verbs4j.RemoteBuffer;
import io.github.verbs4j.cm.ConnectParameters;
import io.github.verbs4j.cm.EndpointOptions;
import io.github.verbs4j.cm.RdmaClient;
import io.github.verbs4j.cm.RdmaConnection;
import io.github.verbs4j.cm.RdmaServer;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * The rdma_cm side of {@link RpingCommand}: one run of rping's client or server on verbs4j's
 * {@code RdmaClient}/{@code RdmaServer}. See {@link RpingCommand} for the wire exchange.
 */
final class Rping {

    /** The advertisement: be64 address, be32 rkey, be32 size. */
    static final int INFO_SIZE = 16;

    private final PrintWriter out;
    private final PrintWriter err;
    private final InetAddress address;
    private final int port;
    private final int count;
    private final int size;
    private final boolean verbose;
    private final boolean validate;
    private final boolean debug;
    private final Duration step;

    Rping(PrintWriter out, PrintWriter err, InetAddress address, int port, int count, int size, boolean verbose,
            boolean validate, boolean debug, Duration step) {
        this.out = out;
        this.err = err;
        this.address = address;
        this.port = port;
        this.count = count;
        this.size = size;
        this.verbose = verbose;
        this.validate = validate;
        this.debug = debug;
        this.step = step;
    }

    private Duration step() {
        return step;
    }

    private void debug(String format, Object... args) {
        if (debug) {
            out.printf(format + "%n", args);
            out.flush();
        }
    }

    /** Messages of 16 bytes, two receives posted (rping's max_recv_wr), one READ/WRITE each way (rping's conn params). */
    private EndpointOptions options(int rdmaBytes) {
        return EndpointOptions.defaults().withMessageSize(INFO_SIZE).withReceiveSlots(2).withRdmaBufferSize(rdmaBytes)
                .withParameters(ConnectParameters.defaults());
    }

    int runClient() {
        InetSocketAddress target = new InetSocketAddress(address, port);
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

    int runServer() {
        InetAddress bindTo = address;
        try (RdmaServer s = RdmaServer.listen(new InetSocketAddress(bindTo, port), options(size), 3)) {
            debug("listening on %s", s.localAddress());
            RdmaConnection c = acceptForever(s);
            try (c) {
                debug("accepted a connection from %s", c.remoteAddress());
                MemorySegment buffer = c.rdmaBuffer().segment();
                // The peer may leave at any step once it has what it wanted: on iWARP its disconnect
                // flushes this side's last send before that send's completion is seen.
                rounds:
                while (true) {
                    RemoteBuffer source;
                    try {
                        source = parseInfo(c.receive(Duration.ofDays(365)));
                    } catch (PeerLostException gone) {
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
                    } catch (PeerLostException gone) {
                        break;
                    }
                    int length = cStringLength(buffer.asSlice(0, size)) + 1;
                    c.write(0, new RemoteBuffer(sinkAd.address(), Math.min(length, sinkAd.length()), sinkAd.rkey()),
                            (int) Math.min(length, sinkAd.length()), step());
                    try {
                        c.send(new byte[INFO_SIZE], step());
                    } catch (PeerLostException gone) {
                        break rounds;
                    }
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
            throw bogus(message.length);
        }
        ByteBuffer b = ByteBuffer.wrap(message);
        long address = b.getLong();
        int rkey = b.getInt();
        int size = b.getInt();
        return new RemoteBuffer(address, Integer.toUnsignedLong(size), rkey);
    }

    private static void expectGoAhead(byte[] message) {
        if (message.length != INFO_SIZE) {
            throw bogus(message.length);
        }
    }

    /** The peer broke the protocol: one line from the tool (its handler reports UncheckedIOException). */
    private static UncheckedIOException bogus(int length) {
        String why = "received bogus data, size " + length + " (rping's messages are " + INFO_SIZE + " bytes)";
        return new UncheckedIOException(why, new IOException(why));
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
