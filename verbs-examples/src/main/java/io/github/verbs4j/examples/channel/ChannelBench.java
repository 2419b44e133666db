package io.github.verbs4j.examples.channel;

import io.github.verbs4j.RdmaTimeoutException;
import io.github.verbs4j.channel.Channel;
import io.github.verbs4j.channel.ChannelClosedException;
import io.github.verbs4j.channel.ChannelGroup;
import io.github.verbs4j.channel.ChannelOptions;
import io.github.verbs4j.channel.ChannelServer;
import io.github.verbs4j.channel.Message;

import java.io.PrintWriter;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/** The channel-bench run: what {@link ChannelBenchCommand} parsed, and both sides. */
final class ChannelBench {

    static final int MIN_SIZE = 8;
    /** "VCHB": the setup message's tag. */
    private static final int TAG = 0x5643_4842;
    private static final int VERSION = 2;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final String SEPARATOR =
            "-----------------------------------------------------------------------------------------------------------------";
    static final String HEADER =
            " #bytes   #messages   #conns  BW average[MB/sec]  MsgRate[Mpps]   t_half_rtt[usec]    99%[usec]  B/msg[snd]  B/msg[rcv]";
    private static final java.lang.management.ThreadMXBean CPU = java.lang.management.ManagementFactory.getThreadMXBean();
    /**
     * The server's answer when all messages arrived: count, bytes allocated, messages they were
     * counted over, and 1 when it compared every byte of every message (0: the sequence numbers).
     */
    private static final int DONE_BYTES = 32;

    private final PrintWriter out;
    private final InetAddress host;
    private final int port;
    private final int size;
    private final long messages;
    private final int connections;
    private final int pings;
    private final int warmup;
    private final ChannelOptions options;
    private final Duration timeout;
    private final boolean inPlace;
    private final long streamWarmUpNanos;
    /**
     * The server's CPU time per timed message on connection 0's receiving thread and on the
     * group's polling thread (-1: not measured), set by the measuring {@link #sink}: on
     * softrdma the thread that polls also drains the same-host rings, so these say which
     * thread copied the stream out (docs/measurements/channel.md, "The 64 KiB stream: which thread copies").
     */
    private volatile double serverReceivingCpu = -1;
    private volatile double serverPollingCpu = -1;
    /** Server: compare every byte of every message, not only its length and sequence numbers. */
    private final boolean checkEveryByte;

    ChannelBench(PrintWriter out, InetAddress host, int port, int size, long messages, int connections, int window,
            int slots, int slotSize, int pings, int warmup, int spin, boolean appPolling, ChannelOptions.Notification notify,
            Duration timeout, boolean inPlace, long streamWarmUpNanos, boolean checkEveryByte) {
        this.out = out;
        this.host = host;
        this.port = port;
        this.size = size;
        this.messages = messages;
        this.connections = connections;
        this.pings = pings;
        this.warmup = pings == 0 ? 0 : warmup;
        this.timeout = timeout;
        this.inPlace = inPlace;
        this.streamWarmUpNanos = streamWarmUpNanos;
        this.checkEveryByte = checkEveryByte;
        int entries = Math.max(8192, Integer.highestOneBit(connections * (slots + window + 40)) << 1);
        this.options = ChannelOptions.defaults().withSlots(slots).withSlotSize(slotSize).withWritesInFlight(window)
                .withSpinPolls(spin).withCompletionQueueEntries(entries).withApplicationPolling(appPolling).withNotification(notify)
                // docs/channel.md, "Application polling's wait without the millisecond": an A/B of the option
                .withParkAfterSpin(Boolean.getBoolean("verbs4j.bench.parkAfterSpin"));
        // the server echoes the round trips into the client's ring
        long ownLimit = (long) Math.max(1, slots / 4) * slotSize - 8;
        if (pings > 0 && size > ownLimit) {
            throw new IllegalArgumentException("size " + size + " is more than the client's ring carries back ("
                    + ownLimit + " bytes): give the client --slots or --slot-size as large as the server's, or --pings 0");
        }
    }

    int runServer() throws Exception {
        try (ChannelGroup group = ChannelGroup.create(options);
             ChannelServer server = group.listen(new InetSocketAddress(host, port));
             ExecutorService workers = Executors.newCachedThreadPool()) {
            out.printf("channel-bench server listening on %s (port %d)%n", server.localAddress(), server.localAddress().getPort());
            out.flush();
            Channel first;
            try {
                first = server.accept(timeout.multipliedBy(10));
            } catch (RdmaTimeoutException e) {
                out.println("no client connected");
                return 1;
            }
            long[] setup = readSetup(first);
            int conns = (int) setup[2];
            List<Channel> channels = new ArrayList<>(List.of(first));
            for (int i = 1; i < conns; i++) {
                Channel ch;
                try {
                    ch = server.accept(timeout);
                } catch (RdmaTimeoutException e) {
                    out.println("only " + i + " of " + conns + " connections arrived");
                    return 1;
                }
                long[] s = readSetup(ch);
                if (!Arrays.equals(s, setup)) {
                    throw new IllegalStateException("connection " + i + " announced " + Arrays.toString(s) + ", the first " + Arrays.toString(setup));
                }
                channels.add(ch);
            }
            int msgSize = (int) setup[0];
            long count = setup[1];
            int rounds = (int) setup[3];
            List<Future<Long>> sinks = new ArrayList<>();
            for (Channel ch : channels) {
                boolean measure = ch == first;
                sinks.add(workers.submit(() -> sink(ch, msgSize, count, conns, measure, group.pollingThread())));
            }
            long warmedUp = 0;
            for (Future<Long> f : sinks) {
                warmedUp += f.get(timeout.toSeconds() * 10, TimeUnit.SECONDS);
            }
            // round trips on connection 0: echo
            for (int i = 0; i < rounds; i++) {
                try (Message m = first.receive(timeout)) {
                    first.send(m.segment());
                }
            }
            out.printf(Locale.ROOT, "received %d messages of %d bytes on %d connections, %s "
                    + "(and %d of untimed warm-up before them)%n", count * conns, msgSize, conns, checkDescription(checkEveryByte),
                    warmedUp);
            if (serverReceivingCpu >= 0) {
                out.printf(Locale.ROOT, "server CPU per message: %.2f us on the receiving thread (connection 0), %s on the "
                        + "polling thread, timed stream only%n", serverReceivingCpu,
                        serverPollingCpu < 0 ? "-" : String.format(Locale.ROOT, "%.2f us", serverPollingCpu));
            }
            for (Channel ch : channels) {
                try {
                    ch.receive(timeout);
                } catch (ChannelClosedException expected) {
                    // the client closed
                } catch (RdmaTimeoutException slow) {
                    // the client has not closed yet: the server's close ends the channel anyway
                }
            }
            return 0;
        }
    }

    private long[] readSetup(Channel ch) throws InterruptedException {
        try (Message m = ch.receive(timeout)) {
            if (m.length() != 32 || m.getInt(0) != TAG || m.getInt(4) != VERSION) {
                throw new IllegalStateException("not a channel-bench " + VERSION + " client (setup of " + m.length() + " bytes)");
            }
            return new long[] {m.getInt(8), m.getLong(12), m.getInt(20), m.getInt(24)};
        }
    }

    /** What the server checked of each message, as both sides print it. */
    static String checkDescription(boolean everyByte) {
        return everyByte ? "every byte checked" : "each checked by its length and sequence numbers (first and last 8 bytes; "
                + "--check-every-byte on the server compares every byte)";
    }

    /**
     * Takes and checks the untimed warm-up's messages (sequence numbers with the top bit set:
     * {@link #warmUpSequence}) and then {@code count} messages (their length and sequence
     * numbers, as the raw server checks its first 8 bytes; with {@link #checkEveryByte} every
     * byte, a comparison that costs the receiving thread a pass over each message), then answers with the count and,
     * on the connection that {@code measures}, the process's allocation from a fifth of the
     * timed run to its end (all threads: this one, the other connections' and the group's
     * polling thread), over the messages of all {@code conns} connections in that part, and
     * sets {@link #serverReceivingCpu} and {@link #serverPollingCpu} (of {@code poller}, the
     * group's polling thread; null with application polling) from the first timed message on.
     * Returns the warm-up's messages.
     */
    private long sink(Channel ch, int msgSize, long count, int conns, boolean measures, Thread poller)
            throws InterruptedException {
        MemorySegment body = body(Arena.ofAuto(), msgSize);
        long warm = count / 5;
        long before = 0;
        long warmedUp = 0;
        long cpuFrom = -1;
        long pollerCpuFrom = -1;
        for (long i = 0; i < count; ) {
            if (i == warm) {
                before = Allocation.total();
            }
            try (Message m = ch.receive(timeout)) {
                boolean warmUp = i == 0 && m.length() >= 8 && m.getLong(0) < 0;
                long expected = warmUp ? warmUpSequence(warmedUp) : i;
                if (m.length() != msgSize || m.getLong(0) != expected) {
                    throw new IllegalStateException((warmUp ? "warm-up message " + warmedUp : "message " + i) + ": "
                            + m.length() + " bytes, sequence " + (m.length() >= 8 ? Long.toHexString(m.getLong(0)) : "-"));
                }
                if (msgSize >= 16 && (m.getLong(msgSize - 8) != ~expected || checkEveryByte && MemorySegment.mismatch(
                        m.ring(), m.offset() + 8, m.offset() + msgSize - 8, body, 8, msgSize - 8) >= 0)) {
                    throw new IllegalStateException((warmUp ? "warm-up message " + warmedUp : "message " + i) + " of "
                            + msgSize + " bytes arrived with other bytes than were sent");
                }
                if (warmUp) {
                    warmedUp++;
                } else {
                    if (i == 0 && measures) {
                        // the first timed message: the warm-up's compilation and its messages stay out
                        cpuFrom = CPU.getCurrentThreadCpuTime();
                        pollerCpuFrom = poller == null ? -1 : CPU.getThreadCpuTime(poller.threadId());
                    }
                    i++;
                }
            }
        }
        if (cpuFrom >= 0 && count > 1) {
            long pollerCpu = pollerCpuFrom < 0 ? -1 : CPU.getThreadCpuTime(poller.threadId()) - pollerCpuFrom;
            // the polling thread serves every connection: its time over all their messages, as the client counts it
            serverPollingCpu = pollerCpu < 0 ? -1 : pollerCpu / 1e3 / ((count - 1) * conns);
            serverReceivingCpu = (CPU.getCurrentThreadCpuTime() - cpuFrom) / 1e3 / (count - 1);
        }
        long allocated = measures && Allocation.supported() ? Allocation.total() - before : -1;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment done = arena.allocate(DONE_BYTES);
            done.set(LONG, 0, count);
            done.set(LONG, 8, allocated);
            done.set(LONG, 16, (count - warm) * conns);
            done.set(LONG, 24, checkEveryByte ? 1 : 0);
            ch.send(done);
        }
        return warmedUp;
    }

    /** The sequence number of the warm-up's message {@code w}: the top bit set, so that it never equals a timed one. */
    static long warmUpSequence(long w) {
        return Long.MIN_VALUE | w;
    }

    /**
     * A message's bytes between its sequence number (first 8 bytes) and, from 16 bytes on, its
     * inverted sequence number (last 8): a fixed pattern, which the server compares byte by byte.
     */
    private static MemorySegment body(Arena arena, int size) {
        MemorySegment s = arena.allocate(size);
        for (int k = 0; k < size; k++) {
            s.set(ValueLayout.JAVA_BYTE, k, (byte) (k * 31 + 7));
        }
        return s;
    }

    int runClient() throws Exception {
        try (ChannelGroup group = ChannelGroup.create(options);
             ExecutorService workers = Executors.newCachedThreadPool();
             Arena arena = Arena.ofShared()) {
            List<Channel> channels = new ArrayList<>();
            MemorySegment setup = arena.allocate(32);
            setup.set(INT, 0, TAG);
            setup.set(INT, 4, VERSION);
            setup.set(INT, 8, size);
            setup.set(LONG, 12, messages);
            setup.set(INT, 20, connections);
            setup.set(INT, 24, warmup + pings); // the server echoes the warm-up's round trips too
            // each connection states the run at once: the server reads it before it accepts the next
            for (int i = 0; i < connections; i++) {
                Channel ch = group.connect(new InetSocketAddress(host, port), timeout);
                channels.add(ch);
                if (size > ch.maxMessageSize()) {
                    throw new IllegalArgumentException("size " + size + " is more than the server's ring carries ("
                            + ch.maxMessageSize() + " bytes: use larger --slots or --slot-size on the server)");
                }
                ch.send(setup);
            }
            printHeader(channels.getFirst());
            long warm = messages / 5;
            long[] allocation = {-1, -1};
            boolean[] serverCheckedEveryByte = new boolean[1];
            // each connection streams its untimed warm-up; the clock starts when all have
            CountDownLatch warmedUp = new CountDownLatch(channels.size());
            CountDownLatch go = new CountDownLatch(1);
            StreamWarmUp[] warmUps = new StreamWarmUp[channels.size()];
            long[] bodiesWritten = new long[channels.size()];
            long[] sendingCpu = new long[channels.size()];
            Thread poller = group.pollingThread();
            List<Future<?>> senders = new ArrayList<>();
            for (int c = 0; c < channels.size(); c++) {
                Channel ch = channels.get(c);
                boolean measure = c == 0;
                int conn = c;
                senders.add(workers.submit(() -> {
                    MemorySegment msg = body(Arena.ofAuto(), size);
                    InPlaceMessage writer = inPlace ? new InPlaceMessage(msg) : null;
                    StreamWarmUp warmUp = new StreamWarmUp(streamWarmUpNanos);
                    warmUps[conn] = warmUp;
                    try {
                        for (long w = 0; !warmUp.over(w); w++) {
                            sendOne(ch, msg, writer, warmUpSequence(w));
                        }
                    } finally {
                        warmedUp.countDown();
                    }
                    go.await();
                    long before = 0;
                    long cpuBefore = CPU.getCurrentThreadCpuTime();
                    for (long i = 0; i < messages; i++) {
                        if (i == warm) {
                            before = Allocation.total();
                        }
                        sendOne(ch, msg, writer, i);
                    }
                    long allocated = Allocation.total() - before;
                    sendingCpu[conn] = CPU.getCurrentThreadCpuTime() - cpuBefore;
                    bodiesWritten[conn] = writer == null ? -1 : writer.bodiesWritten;
                    try (Message done = ch.receive(timeout.multipliedBy(10))) {
                        if (done.length() != DONE_BYTES || done.getLong(0) != messages) {
                            throw new IllegalStateException("the server did not confirm " + messages + " messages");
                        }
                        if (measure) {
                            allocation[0] = Allocation.supported() ? allocated : -1;
                            long peerAllocated = done.getLong(8);
                            long peerCounted = done.getLong(16);
                            allocation[1] = peerAllocated < 0 || peerCounted < 1 ? -1
                                    : Double.doubleToRawLongBits((double) peerAllocated / peerCounted);
                            serverCheckedEveryByte[0] = done.getLong(24) == 1;
                        }
                    }
                    return null;
                }));
            }
            if (!warmedUp.await(StreamWarmUp.DEFAULT_MAX_NANOS + streamWarmUpNanos + timeout.toNanos(), TimeUnit.NANOSECONDS)) {
                throw new IllegalStateException("the stream's warm-up did not end");
            }
            long t0 = System.nanoTime();
            long pollerCpuBefore = poller == null ? -1 : CPU.getThreadCpuTime(poller.threadId());
            go.countDown();
            for (Future<?> f : senders) {
                f.get(timeout.toSeconds() * 10, TimeUnit.SECONDS);
            }
            double seconds = (System.nanoTime() - t0) / 1e9;
            long pollerCpu = poller == null || pollerCpuBefore < 0 ? -1 : CPU.getThreadCpuTime(poller.threadId()) - pollerCpuBefore;
            long total = messages * connections;
            double mbps = total * (double) size / seconds / 1e6;
            double mpps = total / seconds / 1e6;
            Channel c0 = channels.getFirst();
            long[] rtt = new long[pings];
            long[] rttStart = new long[pings]; // for RoundTripTail: when each began
            MemorySegment ping = arena.allocate(size);
            // --in-place writes the pings in place too (their sequence numbers; the body once per
            // staging slot), as the raw loop only stamps its buffer; the echo copies either way
            InPlaceMessage pingWriter = inPlace ? new InPlaceMessage(ping) : null;
            // the warm-up's round trips first, not timed: the stream ran only the client's send
            // path and the server's receive path, so without them the timed round trips would
            // run the other two (the client's receive, the server's send) while the JIT compiles
            // them (tier 3 for about a second here), and measure that
            for (int i = 0; i < warmup + pings; i++) {
                long s;
                if (pingWriter != null) {
                    pingWriter.sequence = i;
                    s = System.nanoTime();
                    c0.send(size, pingWriter);
                } else {
                    ping.set(LONG, 0, i);
                    s = System.nanoTime();
                    c0.send(ping);
                }
                try (Message pong = c0.receive(timeout)) {
                    if (pong.getLong(0) != i) {
                        throw new IllegalStateException("pong " + i + " did not come back");
                    }
                }
                if (i >= warmup) {
                    rtt[i - warmup] = System.nanoTime() - s;
                    rttStart[i - warmup] = s;
                }
            }
            if (RoundTripTail.ENABLED) {
                RoundTripTail.print(out, rttStart, rtt);
            }
            Arrays.sort(rtt);
            double half = pings == 0 ? Double.NaN : rtt[pings / 2] / 2e3;
            double p99 = pings == 0 ? Double.NaN : rtt[Math.min(pings - 1, (int) (pings * 0.99))] / 2e3;
            double sent = Allocation.perMessage(allocation[0], (messages - warm) * connections);
            double received = allocation[1] == -1 ? Double.NaN : Double.longBitsToDouble(allocation[1]);
            printRow(out, size, total, connections, mbps, mpps, half, p99, sent, received);
            out.println(" Server check   : " + checkDescription(serverCheckedEveryByte[0]));
            out.println(warmUps[0].describe() + (connections > 1 ? " on connection 0; each connection warms up so" : ""));
            if (sendingCpu[0] > 0) {
                // CPU time, not wall time: what the send path costs per message, less moved by other load than the rate
                out.printf(Locale.ROOT, " CPU per message: %.2f us on the sending thread (connection 0), %s on the polling "
                        + "thread, timed stream only%n", sendingCpu[0] / 1e3 / messages,
                        pollerCpu < 0 ? "-" : String.format(Locale.ROOT, "%.2f us", pollerCpu / 1e3 / total));
            }
            if (inPlace) {
                out.printf(Locale.ROOT, " Bodies written : %d of %d messages on connection 0 (warm-up included); the rest only "
                        + "had their sequence numbers written%n", bodiesWritten[0], messages + warmUps[0].messages());
            }
            out.flush();
            for (Channel ch : channels) {
                ch.close();
            }
            return 0;
        }
    }

    /** Sends message {@code seq}: a copy of {@code msg} with the sequence number stamped, or written in place. */
    private static void sendOne(Channel ch, MemorySegment msg, InPlaceMessage writer, long seq) throws InterruptedException {
        int size = (int) msg.byteSize();
        if (writer != null) {
            writer.sequence = seq;
            ch.send(size, writer);
            return;
        }
        msg.set(LONG, 0, seq);
        if (size >= 16) {
            msg.set(LONG, size - 8, ~seq);
        }
        ch.send(msg);
    }

    private void printHeader(Channel ch) {
        out.println(SEPARATOR);
        out.println(ch.notification() == ChannelOptions.Notification.SEND
                ? "            verbs4j channel-bench: messages over RDMA WRITE, each followed by a SEND"
                : "                   verbs4j channel-bench: messages over RDMA WRITE_WITH_IMM");
        out.printf(" Peer           : %s%n", ch.remoteAddress());
        out.printf(" Connections    : %d (%s)%n", connections, options.applicationPolling()
                ? "this side: polled by the application's threads" : "this side: one polling thread");
        out.printf(" Ring (client)  : %d slots of %d bytes; %d WRITEs in flight, then coalescing%n", options.slots(),
                options.slotSize(), options.writesInFlight());
        out.printf(" Send form      : %s%n", inPlace
                ? "in place, Channel.send(length, MessageWriter): per message the sequence numbers, the body only where "
                        + "the staging memory lacks it (perftest never refills its buffer); the pings too"
                : "Channel.send(MemorySegment): each message copied into the staging memory");
        out.printf(Locale.ROOT, " Stream         : timed after an untimed warm-up until the JIT is quiet (%.1f s at most)%n",
                streamWarmUpNanos / 1e9);
        out.printf(" Round trips    : %d timed, after %d of warm-up%n", pings, warmup);
        out.println(SEPARATOR);
        out.println(HEADER);
        out.flush();
    }

    /**
     * One row of the table, and the closing separator. B/msg: heap bytes the sending (receiving)
     * process allocated per message from a fifth of the run to its end, all its threads counted.
     */
    static void printRow(PrintWriter out, int size, long total, int connections, double mbps, double mpps, double half,
            double p99, double sentBytesPerMessage, double receivedBytesPerMessage) {
        out.printf(Locale.ROOT, " %-8d %-11d %-7d %-19.2f %-15.4f %-19.2f %-10.2f %-11.1f %-10.1f%n", size, total,
                connections, mbps, mpps, half, p99, sentBytesPerMessage, receivedBytesPerMessage);
        out.println(SEPARATOR);
        out.flush();
    }
}
