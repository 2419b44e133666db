package io.github.verbs4j.examples;

import io.github.verbs4j.Access;
import io.github.verbs4j.CompletionChannel;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Completion;
import io.github.verbs4j.Completions;
import io.github.verbs4j.ConnectOptions;
import io.github.verbs4j.Context;
import io.github.verbs4j.DeviceAttributes;
import io.github.verbs4j.Endpoint;
import io.github.verbs4j.GidEntry;
import io.github.verbs4j.GidType;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.Port;
import io.github.verbs4j.PortAttributes;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QpType;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.ReceiveRequest;
import io.github.verbs4j.RemoteBuffer;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.WcOpcode;
import picocli.CommandLine;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.io.PrintWriter;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.net.ServerSocket;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;

/**
 * The perftest-style latency and bandwidth tests ({@code send-lat}, {@code write-lat},
 * {@code read-lat}, {@code atomic-lat}, {@code send-bw}, {@code write-bw}, {@code read-bw}): a
 * server and a client over one RC queue pair, set up through {@link PerfWire}'s TCP exchange;
 * the client chooses sizes and iterations, the server follows. Results in perftest's table form.
 *
 * <p>The loops use the zero-allocation API: one reusable {@link SendRequest} and
 * {@link ReceiveRequest}, one {@link Completions} batch, a preallocated sample array.
 * Latency of SEND and WRITE is half the round trip (as perftest reports it); READ and atomic
 * latency is the full operation. {@code write-lat} spins on the last byte of its buffer, as
 * perftest's does: each side writes the iteration number there in the other's memory.
 *
 * <p>As perftest, SEND and WRITE messages up to the inline size ({@code -I}; by default 236 bytes
 * for send-lat, 220 for write-lat, none for the bandwidth tests) go inline, and the bandwidth
 * tests request a completion for one message in {@code -Q} (default 100) only: the numbers
 * measure the transport, not a completion per message.
 */
abstract class PerfCommand implements Callable<Integer> {

    enum Kind {
        SEND_LAT("send-lat", "Send Latency Test", true),
        WRITE_LAT("write-lat", "RDMA_Write Latency Test", true),
        READ_LAT("read-lat", "RDMA_Read Latency Test", true),
        ATOMIC_LAT("atomic-lat", "Atomic FETCH_AND_ADD Latency Test", true),
        SEND_BW("send-bw", "Send BW Test", false),
        WRITE_BW("write-bw", "RDMA_Write BW Test", false),
        READ_BW("read-bw", "RDMA_Read BW Test", false);

        final String command;
        final String title;
        final boolean latency;

        Kind(String command, String title, boolean latency) {
            this.command = command;
            this.title = title;
            this.latency = latency;
        }

        static Kind of(String command) {
            for (Kind k : values()) {
                if (k.command.equals(command)) {
                    return k;
                }
            }
            return null;
        }
    }

    static final String SEPARATOR = "---------------------------------------------------------------------------------------";
    private static final int TX_DEPTH = 128;
    private static final int RX_DEPTH = 512;
    private static final long SEND_ID = 1;
    /** Bandwidth requests carry {@code SEND_BASE + } the count of messages posted up to them. */
    private static final long SEND_BASE = 1L << 32;
    /** perftest's defaults: inline sizes of its latency tests, completions per messages of its bandwidth tests. */
    private static final int SEND_LAT_INLINE = 236;
    private static final int WRITE_LAT_INLINE = 220;
    private static final int DEFAULT_CQ_MOD = 100;
    private static final long RECV_ID = 2;
    private static final long STALL_NANOS = 30_000_000_000L;
    private static final java.time.Duration EVENT_WAIT = java.time.Duration.ofSeconds(1);
    private static final VarHandle BYTE = ValueLayout.JAVA_BYTE.varHandle();

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Parameters(arity = "0..1", paramLabel = "<host>",
            description = "Connect to the server at <host>; without it, start a server and wait for one client.")
    String host;

    @CommandLine.Mixin
    PeerOptions shared = new PeerOptions();

    @Option(names = {"-x", "--gid-index"}, paramLabel = "<index>", defaultValue = "-1",
            description = "Local GID index (default: on RoCE the first RoCE v2 ::ffff:IPv4 GID, else 0).")
    int gidIndex;

    @Option(names = {"-s", "--size"}, paramLabel = "<bytes>",
            description = "Message size (default 2; atomic-lat: 8, the only size). Client side; the server follows.")
    Integer size;

    @Option(names = {"-a", "--all"}, description = "Run all sizes from 2 to 2^23 bytes (client side).")
    boolean all;

    @Option(names = {"-n", "--iters"}, paramLabel = "<n>",
            description = "Iterations per size (default 1000 for latency, 5000 for bandwidth). Client side.")
    Integer iters;

    @Option(names = {"-w", "--warmup"}, paramLabel = "<n>",
            description = "Client side: untimed iterations of the first size before the measured ones, run over the"
                    + " same connection as rounds of -n iterations each (the server answers them as any round), so the"
                    + " measured rounds run on compiled code on both sides (default " + PingPongCommand.DEFAULT_WARMUP
                    + "; 0: none).")
    Integer warmup;

    @Option(names = {"-e", "--events"}, description = "Sleep on completion events instead of polling (not for write-lat, which spins on memory).")
    boolean events;

    @Option(names = {"-I", "--inline-size"}, paramLabel = "<bytes>",
            description = "SEND and WRITE messages up to <bytes> go inline (perftest's -I; default 236 for send-lat,"
                    + " 220 for write-lat, 0 for the bandwidth tests). Each side uses its own.")
    Integer inlineSize;

    @Option(names = {"-Q", "--cq-mod"}, paramLabel = "<n>",
            description = "Bandwidth tests: request a completion for one message in <n> (perftest's -Q; default ${DEFAULT-VALUE}, 1..128).",
            defaultValue = "" + DEFAULT_CQ_MOD)
    int cqMod;

    @Option(names = "--progress", description = "Show progress on stderr even when it is not a terminal.")
    boolean progress;

    @Option(names = "--max-size", paramLabel = "<bytes>", defaultValue = "8388608",
            description = "Server side: refuse clients asking for messages over <bytes> (default ${DEFAULT-VALUE}, -a's largest; "
                    + "at most 2^30). The server's buffer is twice the largest size a client asks for.")
    int maxSize;

    @Option(names = "--idle-timeout", paramLabel = "<seconds>", defaultValue = "30",
            description = "Server side: give up when the client sends no GO or BYE for <seconds> after the handshake or a "
                    + "size's run (default ${DEFAULT-VALUE}); its DONE after a run may take " + DONE_TIMEOUT_MINUTES
                    + " min, as a run of a one-sided test is the client's alone.")
    int idleTimeout;

    /** How long the server waits for the client's DONE: a one-sided run (READ, WRITE bandwidth) is the client's alone. */
    static final int DONE_TIMEOUT_MINUTES = 10;

    abstract Kind kind();

    private final Deque<AutoCloseable> resources = new ArrayDeque<>();
    private PrintWriter out;

    // the run's state, set up in call()
    private Context ctx;
    private CompletionQueue cq;
    private CompletionChannel channel;
    private QueuePair qp;
    private MemoryRegion mr;
    private MemorySegment buf;
    private int slot;
    private RemoteBuffer remote;
    private Completions wcs;
    private ReceiveRequest recv;
    private int recvsPosted;

    private <T extends AutoCloseable> T own(T r) {
        resources.push(r);
        return r;
    }

    private List<Integer> sizes() {
        CommandLine cl = spec.commandLine();
        if (kind() == Kind.ATOMIC_LAT) {
            if (all || (size != null && size != 8)) {
                throw new CommandLine.ParameterException(cl, "atomic-lat: atomics are 8 bytes; -s 8 is the only size");
            }
            return List.of(8);
        }
        if (all && size != null) {
            throw new CommandLine.ParameterException(cl, "-a and -s exclude each other");
        }
        if (all) {
            List<Integer> s = new ArrayList<>();
            for (int b = 1; b <= 23; b++) {
                s.add(1 << b);
            }
            return s;
        }
        int s = size == null ? 2 : size;
        if (s < 1 || s > (1 << 30)) {
            throw new CommandLine.ParameterException(cl, "-s: a size is 1..2^30 bytes, not " + s);
        }
        return List.of(s);
    }

    private void validate() {
        CommandLine cl = spec.commandLine();
        shared.validate(cl);
        if (iters != null && iters < 1) {
            throw new CommandLine.ParameterException(cl, "-n: at least 1 iteration, not " + iters);
        }
        if (events && kind() == Kind.WRITE_LAT) {
            throw new CommandLine.ParameterException(cl, "write-lat spins on memory: -e does not apply");
        }
        if (maxSize < 1 || maxSize > (1 << 30)) {
            throw new CommandLine.ParameterException(cl, "--max-size: 1..2^30 bytes, not " + maxSize);
        }
        if (idleTimeout < 1 || idleTimeout > 86_400) {
            throw new CommandLine.ParameterException(cl, "--idle-timeout: 1..86400 seconds, not " + idleTimeout);
        }
        if (cqMod < 1 || cqMod > TX_DEPTH) {
            throw new CommandLine.ParameterException(cl, "-Q: one completion per 1.." + TX_DEPTH + " messages, not " + cqMod);
        }
        if (inlineSize != null && (inlineSize < 0 || inlineSize > 4096)) {
            throw new CommandLine.ParameterException(cl, "-I: an inline size is 0..4096 bytes, not " + inlineSize);
        }
        if (inlineSize != null && inlineSize > 0 && !carriesInline()) {
            throw new CommandLine.ParameterException(cl, kind().command + " sends no data: -I does not apply");
        }
        if (warmup != null && warmup < 0) {
            throw new CommandLine.ParameterException(cl, "-w: the warm-up is 0 or more iterations, not " + warmup);
        }
        if (host == null && (size != null || all || iters != null || warmup != null)) {
            throw new CommandLine.ParameterException(cl, "-s, -a, -n and -w are client options: the server follows the client");
        }
    }

    @Override
    public Integer call() {
        validate();
        out = spec.commandLine().getOut();
        try {
            ctx = own(DeviceChoice.open(shared.device));
            return host == null ? serve() : drive();
        } finally {
            RuntimeException first = null;
            while (!resources.isEmpty()) {
                try {
                    resources.pop().close();
                } catch (Exception e) {
                    if (first == null) {
                        first = e instanceof RuntimeException r ? r : new RuntimeException(e);
                    }
                }
            }
            if (first != null) {
                throw first;
            }
        }
    }

    /** Whether the test's requests carry data that may go inline (SEND and WRITE). */
    private boolean carriesInline() {
        return switch (kind()) {
            case SEND_LAT, WRITE_LAT, SEND_BW, WRITE_BW -> true;
            default -> false;
        };
    }

    /** The inline size asked for: -I, else perftest's default for the test. */
    private int requestedInline() {
        if (inlineSize != null) {
            return inlineSize;
        }
        return switch (kind()) {
            case SEND_LAT -> SEND_LAT_INLINE;
            case WRITE_LAT -> WRITE_LAT_INLINE;
            default -> 0;
        };
    }

    /** Sets {@code IBV_SEND_INLINE} on a SEND or WRITE of {@code s} bytes when it fits the QP's inline size. */
    private SendRequest inlineIfSmall(SendRequest request, int s) {
        return request.inline(s <= Math.min(requestedInline(), qp.capabilities().maxInlineData()));
    }

    /** Opens the device and builds the QP and the buffer: two slots of the largest size (source, target). */
    private Endpoint setUp(int maxSize, boolean withEvents) {
        Port p = ctx.port(shared.ibPort);
        PortAttributes pa = p.query();
        int gid = gidIndex >= 0 ? gidIndex : defaultGidIndex(p, pa);
        channel = withEvents ? own(ctx.createCompletionChannel()) : null;
        ProtectionDomain pd = own(ctx.allocatePd());
        slot = (int) Math.min(Integer.MAX_VALUE - 64, ((long) maxSize + 63) & ~63L);
        mr = own(pd.allocate(2L * slot, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC));
        buf = mr.segment();
        int cqe = TX_DEPTH + RX_DEPTH + 1;
        // Confined: the command's thread posts, polls, arms and (call's finally) closes them, so
        // its posts and polls skip the close guard's mark (docs/guide.md, "8.1 Confining a queue pair and its queues")
        cq = own(channel == null ? ctx.createCq(cqe) : ctx.createCq(cqe, channel, 0)).confine();
        qp = own(pd.queuePair(QpType.RC).cq(cq).maxSendWr(TX_DEPTH).maxRecvWr(RX_DEPTH).maxSendSge(1).maxRecvSge(1)
                .maxInline(requestedInline()).build()).confine();
        qp.init(connectOptions(gid));
        wcs = cq.completions(16);
        recv = ReceiveRequest.create().id(RECV_ID).local(mr, slot, slot);
        if (channel != null) {
            cq.requestNotify(false);
        }
        this.gidIndex = gid;
        return qp.endpoint(shared.ibPort, gid);
    }

    private ConnectOptions connectOptions(int gid) {
        DeviceAttributes da = ctx.queryDevice();
        int depth = Math.max(1, Math.min(16, Math.min(da.maxQpRdAtomic(), da.maxQpInitRdAtomic())));
        return ConnectOptions.defaults().withPort(shared.ibPort).withGidIndex(gid).withMaxRdAtomic(depth)
                .withMaxDestRdAtomic(depth);
    }

    private static int defaultGidIndex(Port p, PortAttributes pa) {
        if (!pa.needsGrh()) {
            return 0;
        }
        for (GidEntry e : p.gids()) {
            if (e.type() == GidType.ROCE_V2 && e.gid().isIpv4Mapped()) {
                return e.index();
            }
        }
        return 0;
    }

    private RemoteBuffer target() {
        return mr.remote().slice(slot, slot);
    }

    // ---- server

    private int serve() {
        ServerSocket listener = Tcp.listen(shared.port);
        banner(null, 0);
        out.printf("%n************************************%n* Waiting for client to connect... *%n************************************%n");
        out.flush();
        try (PerfWire wire = PerfWire.accept(listener)) {
            PerfWire.Hello hello;
            try {
                hello = PerfWire.parseHello(wire.receiveHandshake(), maxSize);
            } catch (PerfWire.BadField e) {
                refuse(wire, e.getMessage());
                throw new Verbs4jTool.Verbs4jFailure("the client broke the verbs4j perf protocol: " + e.getMessage());
            }
            Kind asked = Kind.of(hello.test());
            if (asked != kind()) {
                String why = "this server runs " + kind().command + ", the client asked for " + PerfWire.printable(hello.test());
                refuse(wire, why);
                throw new Verbs4jTool.Verbs4jFailure(why);
            }
            int n = hello.iterations();
            int[] sizes = hello.sizes();
            Endpoint peer = hello.endpoint();
            remote = hello.remote();
            Endpoint local = setUp(hello.maxSize(), events);
            qp.connect(peer, connectOptions(gidIndex));
            wire.send(PerfWire.TAG + " " + PerfWire.VERSION + " OK " + local + " " + target());
            addresses(local, peer);
            while (true) {
                String cmd = wire.receive(idleTimeoutMs(), "GO or BYE");
                if (cmd.equals("BYE")) {
                    break;
                }
                if (!cmd.startsWith("GO ")) {
                    throw new Verbs4jTool.Verbs4jFailure("the client broke the verbs4j perf protocol: expected GO or BYE, got '"
                            + PerfWire.printable(cmd) + "'");
                }
                int s = announcedSize(cmd.substring(3), sizes);
                prepareSize(s, n);
                wire.send("READY");
                switch (kind()) {
                    case SEND_LAT -> sendLatency(s, n, false, null);
                    case WRITE_LAT -> writeLatency(s, n, false, null);
                    case SEND_BW -> receiveAll(n);
                    default -> {
                        // READ, atomics and WRITE bandwidth need nothing from the server's CPU
                    }
                }
                wire.expect("DONE", DONE_TIMEOUT_MINUTES * 60_000);
                wire.send("DONE");
            }
        }
        out.println(SEPARATOR);
        out.flush();
        return 0;
    }

    private int idleTimeoutMs() {
        return idleTimeout * 1000;
    }

    /** Tells the client why it is refused (best effort: it may be gone already). */
    private static void refuse(PerfWire wire, String why) {
        try {
            wire.send(PerfWire.TAG + " " + PerfWire.VERSION + " ERROR " + why);
        } catch (Verbs4jTool.Verbs4jFailure ignored) {
            // the client left; the server reports the first failure
        }
    }

    /** A GO's size: one of those the HELLO announced (the buffer was sized for them). */
    private static int announcedSize(String word, int[] sizes) {
        int s;
        try {
            s = PerfWire.size(word, Integer.MAX_VALUE);
        } catch (PerfWire.BadField e) {
            throw new Verbs4jTool.Verbs4jFailure("the client broke the verbs4j perf protocol: " + e.getMessage());
        }
        for (int announced : sizes) {
            if (announced == s) {
                return s;
            }
        }
        throw new Verbs4jTool.Verbs4jFailure("the client broke the verbs4j perf protocol: GO " + s
                + " names a size its HELLO did not announce");
    }

    // ---- client

    private int drive() {
        List<Integer> sizes = sizes();
        int n = iters != null ? iters : (kind().latency ? 1000 : 5000);
        Endpoint local = setUp(sizes.stream().mapToInt(Integer::intValue).max().orElse(2), events);
        try (PerfWire wire = PerfWire.connect(host, shared.port)) {
            wire.send(PerfWire.TAG + " " + PerfWire.VERSION + " HELLO " + kind().command + " " + n + " "
                    + sizes.stream().map(String::valueOf).collect(Collectors.joining(",")) + " " + local + " " + target());
            String[] answer = wire.receiveHandshake();
            if (answer.length >= 1 && answer[0].equals("ERROR")) {
                throw new Verbs4jTool.Verbs4jFailure("the server refused: "
                        + PerfWire.printable(String.join(" ", Arrays.copyOfRange(answer, 1, answer.length)), PerfWire.MAX_LINE));
            }
            if (answer.length != 3 || !answer[0].equals("OK")) {
                throw new Verbs4jTool.Verbs4jFailure("the server broke the verbs4j perf protocol: "
                        + PerfWire.printable(String.join(" ", answer), PerfWire.MAX_LINE));
            }
            Endpoint peer;
            try {
                peer = PerfWire.endpoint(answer[1]);
                remote = PerfWire.remoteBuffer(answer[2], sizes.stream().mapToInt(Integer::intValue).max().orElse(2));
            } catch (PerfWire.BadField e) {
                throw new Verbs4jTool.Verbs4jFailure("the server broke the verbs4j perf protocol: " + e.getMessage());
            }
            qp.connect(peer, connectOptions(gidIndex));
            banner(peer, n);
            addresses(local, peer);
            // the warm-up: whole rounds of the first size, unreported, until warm iterations ran
            int warm = warmup != null ? warmup : PingPongCommand.DEFAULT_WARMUP;
            int rounds = (int) ((warm + (long) n - 1) / n);
            if (rounds > 0) {
                out.printf(" Warm-up: %d rounds of %d iterations at %d bytes, not reported%n", rounds, n, sizes.get(0));
                out.flush();
            }
            for (int r = 0; r < rounds; r++) {
                round(wire, sizes.get(0), n, false);
            }
            out.println(SEPARATOR);
            out.println(kind().latency
                    ? " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
                    : " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]");
            out.flush();
            for (int s : sizes) {
                round(wire, s, n, true);
            }
            wire.send("BYE");
        }
        out.println(SEPARATOR);
        out.flush();
        return 0;
    }

    /** One round of size s, n iterations (GO, READY, the loop, DONE both ways); reported when asked. */
    private void round(PerfWire wire, int s, int n, boolean report) {
        prepareSize(s, n);
        wire.send("GO " + s);
        wire.expect("READY");
        if (kind().latency) {
            long[] samples = new long[n];
            switch (kind()) {
                case SEND_LAT -> sendLatency(s, n, true, samples);
                case WRITE_LAT -> writeLatency(s, n, true, samples);
                case READ_LAT -> oneSidedLatency(s, n, samples, SendRequest.rdmaRead());
                case ATOMIC_LAT -> oneSidedLatency(8, n, samples, SendRequest.fetchAndAdd(1));
                default -> throw new AssertionError(kind());
            }
            wire.send("DONE");
            wire.expect("DONE");
            if (report) {
                reportLatency(s, n, samples, kind() == Kind.SEND_LAT || kind() == Kind.WRITE_LAT);
            }
        } else {
            long[] timing = bandwidth(s, n);
            wire.send("DONE");
            // the server answers once it has everything: SEND bandwidth counts delivered messages
            wire.expect("DONE");
            if (report) {
                reportBandwidth(s, n, timing);
            }
        }
    }

    // ---- the loops

    /** Clears the target slot and, for SEND tests, fills the receive queue. */
    private void prepareSize(int s, int n) {
        buf.asSlice(slot, slot).fill((byte) 0);
        buf.asSlice(0, slot).fill((byte) 0x5a);
        if (kind() == Kind.SEND_LAT || kind() == Kind.SEND_BW) {
            // receives take a whole slot, so those left from a smaller size fit a larger one
            while (recvsPosted < RX_DEPTH) {
                qp.postRecv(recv);
                recvsPosted++;
            }
        }
    }

    /** Waits for at least one completion (spinning, or on the channel with -e) and checks them all. */
    private int awaitCompletions() {
        long since = 0;
        while (true) {
            int n = cq.poll(wcs);
            if (n == 0 && channel != null) {
                cq.requestNotify(false);
                n = cq.poll(wcs);
                if (n == 0) {
                    channel.await(EVENT_WAIT);
                    n = cq.poll(wcs);
                }
            }
            if (n > 0) {
                for (int k = 0; k < n; k++) {
                    Completion wc = wcs.get(k);
                    if (!wc.ok()) {
                        throw new Verbs4jTool.Verbs4jFailure("completion with status " + wc.status() + " (" + wc.statusValue()
                                + ") for " + (wc.wrId() == RECV_ID ? "a receive" : "a " + kind().command + " request")
                                + ": the peer went away or refused the access");
                    }
                }
                return n;
            }
            if (since == 0) {
                since = System.nanoTime();
            } else if (System.nanoTime() - since > STALL_NANOS) {
                throw new Verbs4jTool.Verbs4jFailure("no completion for " + STALL_NANOS / 1_000_000_000L + " s: the peer stopped");
            }
            Thread.onSpinWait();
        }
    }

    /** SEND ping-pong: the client sends and waits for the answer; the server answers each message. */
    private void sendLatency(int s, int n, boolean client, long[] samples) {
        SendRequest send = inlineIfSmall(SendRequest.send().id(SEND_ID).local(mr, 0, s).signaled(), s);
        Progress meter = new Progress(progress, kind().command + " " + s + " B", n);
        meter.start();
        int unacked = 0;
        for (int i = 0; i < n; i++) {
            long t0 = System.nanoTime();
            if (client) {
                qp.postSend(send);
                unacked++;
            }
            boolean received = false;
            while (!received) {
                int k = awaitCompletions();
                for (int j = 0; j < k; j++) {
                    Completion wc = wcs.get(j);
                    if (wc.wrId() == RECV_ID) {
                        received = true;
                        qp.postRecv(recv);
                    } else {
                        unacked--;
                    }
                }
            }
            if (!client) {
                qp.postSend(send);
                unacked++;
            } else {
                samples[i] = System.nanoTime() - t0;
            }
            meter.tick(i + 1);
        }
        while (unacked > 0) {
            int k = awaitCompletions();
            for (int j = 0; j < k; j++) {
                if (wcs.get(j).wrId() == RECV_ID) {
                    throw new Verbs4jTool.Verbs4jFailure("an unexpected message arrived after the last iteration");
                }
                unacked--;
            }
        }
        meter.finish();
    }

    /** WRITE ping-pong: each side writes the iteration number into the other's last byte and spins on its own. */
    private void writeLatency(int s, int n, boolean client, long[] samples) {
        SendRequest write = inlineIfSmall(SendRequest.rdmaWrite().id(SEND_ID).local(mr, 0, s)
                .remote(remote.address(), remote.rkey()).signaled(), s);
        long lastByteOut = s - 1;
        long lastByteIn = slot + (long) s - 1;
        Progress meter = new Progress(progress, kind().command + " " + s + " B", n);
        meter.start();
        int unacked = 0;
        for (int i = 0; i < n; i++) {
            byte mark = (byte) (i + 1);
            long t0 = System.nanoTime();
            if (client) {
                buf.set(ValueLayout.JAVA_BYTE, lastByteOut, mark);
                qp.postSend(write);
                unacked++;
            }
            long spins = 0;
            long since = 0;
            while ((byte) BYTE.getVolatile(buf, lastByteIn) != mark) {
                // reap our own WRITE completions while spinning: an error there means the peer is gone
                if (unacked > 0 && cq.poll(wcs) > 0) {
                    for (int j = 0; j < wcs.count(); j++) {
                        Completion wc = wcs.get(j);
                        if (!wc.ok()) {
                            throw new Verbs4jTool.Verbs4jFailure("RDMA WRITE completed with status " + wc.status() + " ("
                                    + wc.statusValue() + "): the peer went away");
                        }
                        unacked--;
                    }
                }
                if ((++spins & 0xfffff) == 0) {
                    long now = System.nanoTime();
                    if (since == 0) {
                        since = now;
                    } else if (now - since > STALL_NANOS) {
                        throw new Verbs4jTool.Verbs4jFailure("no RDMA WRITE from the peer for " + STALL_NANOS / 1_000_000_000L + " s: the peer stopped");
                    }
                }
                Thread.onSpinWait();
            }
            if (!client) {
                buf.set(ValueLayout.JAVA_BYTE, lastByteOut, mark);
                qp.postSend(write);
                unacked++;
            } else {
                samples[i] = System.nanoTime() - t0;
            }
            if (unacked >= TX_DEPTH / 2) {
                while (unacked > 0) {
                    unacked -= awaitCompletions();
                }
            }
            meter.tick(i + 1);
        }
        while (unacked > 0) {
            unacked -= awaitCompletions();
        }
        meter.finish();
    }

    /** READ or atomic latency: one request at a time, each timed to its completion. */
    private void oneSidedLatency(int s, int n, long[] samples, SendRequest request) {
        request.id(SEND_ID).local(mr, slot, s).remote(remote.address(), remote.rkey()).signaled();
        Progress meter = new Progress(progress, kind().command + " " + s + " B", n);
        meter.start();
        for (int i = 0; i < n; i++) {
            long t0 = System.nanoTime();
            qp.postSend(request);
            awaitCompletions();
            samples[i] = System.nanoTime() - t0;
            meter.tick(i + 1);
        }
        meter.finish();
        if (kind() == Kind.ATOMIC_LAT) {
            // the last FETCH_AND_ADD fetched n - 1: the server's counter went 0, 1, ..., n
            long fetched = buf.get(ValueLayout.JAVA_LONG_UNALIGNED, slot);
            if (fetched != n - 1) {
                throw new Verbs4jTool.Verbs4jFailure("the last FETCH_AND_ADD returned " + fetched + ", expected " + (n - 1));
            }
        }
    }

    /** The server's side of send-bw: take n messages, keeping the receive queue full. */
    private void receiveAll(int n) {
        Progress meter = new Progress(progress, kind().command, n);
        meter.start();
        int got = 0;
        while (got < n) {
            int k = awaitCompletions();
            for (int j = 0; j < k; j++) {
                if (wcs.get(j).wrId() == RECV_ID) {
                    got++;
                    qp.postRecv(recv);
                }
            }
            meter.tick(got);
        }
        meter.finish();
    }

    /**
     * The client's bandwidth loop: up to {@value #TX_DEPTH} requests in flight, one in {@code -Q}
     * signaled (and the last); a completion of a request counts every message posted up to it
     * (RC completes in order). SEND and WRITE messages up to {@code -I} bytes go inline. Returns
     * {total nanos, nanos of the best stretch, messages in that stretch} for the average and the peak.
     */
    private long[] bandwidth(int s, int n) {
        SendRequest request = switch (kind()) {
            case SEND_BW -> SendRequest.send();
            case WRITE_BW -> SendRequest.rdmaWrite();
            case READ_BW -> SendRequest.rdmaRead();
            default -> throw new AssertionError(kind());
        };
        request.local(mr, kind() == Kind.READ_BW ? slot : 0, s);
        if (kind() != Kind.SEND_BW) {
            request.remote(remote.address(), remote.rkey());
        }
        if (carriesInline()) {
            inlineIfSmall(request, s);
        }
        // the peak is the best stretch of at least one full window: shorter ones measure bursts of
        // completions, not bandwidth; runs shorter than two windows report the average as the peak
        int chunk = Math.max(TX_DEPTH, n / 16);
        long bestChunk = Long.MAX_VALUE;
        Progress meter = new Progress(progress, kind().command + " " + s + " B", n);
        int posted = 0;
        int completed = 0;
        long start = System.nanoTime();
        long chunkStart = start;
        int nextChunk = chunk;
        meter.start();
        while (completed < n) {
            while (posted < n && posted - completed < TX_DEPTH) {
                posted++;
                qp.postSend(request.id(SEND_BASE + posted).signaled(posted % cqMod == 0 || posted == n));
            }
            int k = awaitCompletions();
            for (int j = 0; j < k; j++) {
                long id = wcs.get(j).wrId();
                if (id > SEND_BASE) {
                    completed = (int) Math.max(completed, id - SEND_BASE);
                }
            }
            if (completed >= nextChunk) {
                long now = System.nanoTime();
                long perChunk = (now - chunkStart) * chunk / Math.max(1, completed - (nextChunk - chunk));
                bestChunk = Math.min(bestChunk, perChunk);
                chunkStart = now;
                nextChunk = completed + chunk;
            }
            meter.tick(completed);
        }
        long total = System.nanoTime() - start;
        meter.finish();
        if (bestChunk == Long.MAX_VALUE || bestChunk > total * chunk / n) {
            return new long[] {total, total, n};
        }
        return new long[] {total, bestChunk, chunk};
    }

    // ---- output

    private void banner(Endpoint peer, int n) {
        out.println(SEPARATOR);
        out.printf("%s%s%n", " ".repeat(Math.max(0, (SEPARATOR.length() - kind().title.length()) / 2)), kind().title);
        out.printf(" Device         : %s%n", ctx.device().name());
        out.printf(" Connection type: RC        Using polling or events : %s%n", events ? "EVENTS" : "POLLING");
        if (host != null) {
            out.printf(" Iterations     : %d%n", n);
            out.printf(" GID index      : %d%n", gidIndex);
            out.printf(" Protocol       : %s %d (TCP port %d)%n", PerfWire.TAG, PerfWire.VERSION, shared.port);
        } else {
            out.printf(" TCP port       : %d%n", shared.port);
        }
        out.println(SEPARATOR);
        out.flush();
    }

    private void addresses(Endpoint local, Endpoint peer) {
        out.printf(" local address: LID %#06x QPN %#08x PSN %#08x GID %s%n", local.lid(), local.qpn(), local.psn(),
                Ipv6Text.format(local.gid().bytes()));
        out.printf(" remote address: LID %#06x QPN %#08x PSN %#08x GID %s%n", peer.lid(), peer.qpn(), peer.psn(),
                Ipv6Text.format(peer.gid().bytes()));
        out.flush();
    }

    private void reportLatency(int s, int n, long[] samples, boolean halfRoundTrip) {
        double[] us = new double[n];
        for (int i = 0; i < n; i++) {
            us[i] = samples[i] / 1000.0 / (halfRoundTrip ? 2 : 1);
        }
        Arrays.sort(us);
        double sum = 0;
        for (double v : us) {
            sum += v;
        }
        double avg = sum / n;
        double var = 0;
        for (double v : us) {
            var += (v - avg) * (v - avg);
        }
        double stdev = Math.sqrt(var / n);
        out.printf(Locale.ROOT, " %-7d %-10d     %-7.2f        %-7.2f      %-7.2f          %-7.2f        %-7.2f          %-7.2f                 %-7.2f%n",
                s, n, us[0], us[n - 1], us[n / 2], avg, stdev, percentile(us, 0.99), percentile(us, 0.999));
        out.flush();
    }

    /** The nearest-rank percentile of sorted values. */
    static double percentile(double[] sorted, double p) {
        int rank = (int) Math.ceil(p * sorted.length);
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
    }

    private void reportBandwidth(int s, int n, long[] timing) {
        double mib = 1024.0 * 1024.0;
        double avg = (double) s * n / (timing[0] / 1e9) / mib;
        double peak = (double) s * timing[2] / (timing[1] / 1e9) / mib;
        double mpps = n / (timing[0] / 1e9) / 1e6;
        out.printf(Locale.ROOT, " %-10d %-10d     %-12.2f        %-12.2f          %.6f%n", s, n, Math.max(peak, avg), avg, mpps);
        out.flush();
    }
}
