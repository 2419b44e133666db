package io.github.verbs4j.examples;

import io.github.verbs4j.Access;
import io.github.verbs4j.Closer;
import io.github.verbs4j.CompletionChannel;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Completion;
import io.github.verbs4j.Completions;
import io.github.verbs4j.ConnectOptions;
import io.github.verbs4j.Context;
import io.github.verbs4j.Endpoint;
import io.github.verbs4j.Gid;
import io.github.verbs4j.LinkLayer;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.PortAttributes;
import io.github.verbs4j.PostSession;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QpType;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.QueuePairBuilder;
import io.github.verbs4j.ReceiveRequest;
import io.github.verbs4j.SendOp;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.TransportType;
import picocli.CommandLine;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.io.PrintWriter;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.ServerSocket;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;

/**
 * What {@code rc-pingpong} and {@code ud-pingpong} share: rdma-core's ping-pong, rebuilt on the
 * verbs4j API. Both sides post {@code -r} receives, the client sends first, and each side sends
 * its next message once its previous send completed and the peer's message arrived, {@code -n}
 * times. One buffer serves both directions, filled with {@code 0x7b}; with {@code -c} the client
 * writes 0 at the start of each page before the first send and the server checks the received
 * buffer (rdma-core checks just those page-start bytes; verbs4j also checks that the rest is
 * still the {@code 0x7b} fill, which the stock client sends too, and exits 1 on a mismatch where
 * the stock tool only prints the "invalid data" line).
 */
abstract class PingPongCommand implements Callable<Integer> {

    static final long RECV_WRID = 1;
    static final long SEND_WRID = 2;
    static final byte FILL = 0x7b;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Parameters(arity = "0..1", paramLabel = "<host>",
            description = "Connect to the server at <host>; without it, start a server and wait for a connection.")
    String host;

    @CommandLine.Mixin
    PeerOptions shared = new PeerOptions();

    @Option(names = {"-r", "--rx-depth"}, paramLabel = "<dep>", defaultValue = "500",
            description = "Number of receives to post at a time (default ${DEFAULT-VALUE}).")
    int rxDepth;

    @Option(names = {"-n", "--iters"}, paramLabel = "<iters>", defaultValue = "1000", description = "Number of exchanges (default ${DEFAULT-VALUE}).")
    int iters;

    @Option(names = {"-l", "--sl"}, paramLabel = "<sl>", defaultValue = "0", description = "Service level (default ${DEFAULT-VALUE}).")
    int sl;

    @Option(names = {"-e", "--events"}, description = "Sleep on CQ events (default: poll).")
    boolean events;

    @Option(names = {"-g", "--gid-idx"}, paramLabel = "<gid index>", defaultValue = "-1",
            description = "Local port GID index (RoCE needs one: 1 on softrdma and rxe, ::ffff:IPv4).")
    int gidIndex;

    @Option(names = {"-c", "--chk"}, description = "Validate the received buffer (server side).")
    boolean check;

    @Option(names = "--progress", description = "Show progress on stderr even when it is not a terminal.")
    boolean progress;

    @Option(names = {"-w", "--warmup"}, paramLabel = "<n>", defaultValue = "" + DEFAULT_WARMUP,
            description = "Untimed round trips between two QPs of this process before the exchange, at least <n>,"
                    + " then more until a round compiles nothing, so the timed one runs on compiled code"
                    + " (default ${DEFAULT-VALUE}; 0: none). The peer's protocol is unchanged: it works against"
                    + " the stock tool.")
    int warmup;

    /**
     * The least number of warm-up round trips (C2 compiles a method after about 10,000 calls):
     * at 1,000 iterations an unwarmed run measured 14.1 us/iter against 2.9 for ibv_rc_pingpong,
     * and the same as it at 100,000 (issue 25). More rounds of {@link #WARMUP_ROUND} follow until
     * one compiles nothing ({@link #warmUp}).
     */
    static final int DEFAULT_WARMUP = 20_000;

    /** The round trips of each further warm-up round, and the most such rounds. */
    static final int WARMUP_ROUND = 5_000;
    static final int WARMUP_MAX_ROUNDS = 20;
    /** The further rounds start only within this time of the first's end (a loaded machine makes each slow). */
    static final long WARMUP_MAX_EXTRA_NANOS = 3_000_000_000L;

    private final Deque<AutoCloseable> resources = new ArrayDeque<>();
    PrintWriter out;
    int size;

    abstract QpType qpType();

    abstract int defaultSize();

    /** {@code -s} as given, or null. */
    abstract Integer sizeOption();

    /** Where sends start in the buffer. */
    abstract int sendOffset();

    /** The buffer's size (and each receive's length). */
    abstract int bufferBytes();

    /** The separator before "GID" in the local-address line (the stock UD tool prints ':'). */
    abstract String localGidSeparator();

    /** Checks and options after the port is known (e.g. UD's size limit). */
    abstract void checkPort(PortAttributes port);

    abstract ConnectOptions connectOptions();

    /** Readies the QP for {@code remote} and sets up {@code send} to reach it. */
    abstract void connect(QueuePair qp, Endpoint remote, ProtectionDomain pd, SendRequest send);

    <T extends AutoCloseable> T own(T resource) {
        resources.push(resource);
        return resource;
    }

    void validate() {
        CommandLine cl = spec.commandLine();
        shared.validate(cl);
        Integer s = sizeOption();
        size = s == null ? defaultSize() : s;
        if (size < 1) {
            throw new CommandLine.ParameterException(cl, "-s: the message size must be at least 1 byte, not " + size);
        }
        if (rxDepth < 1) {
            throw new CommandLine.ParameterException(cl, "-r: the receive depth must be at least 1, not " + rxDepth);
        }
        if (iters < 1) {
            throw new CommandLine.ParameterException(cl, "-n: at least 1 iteration, not " + iters);
        }
        if (warmup < 0) {
            throw new CommandLine.ParameterException(cl, "-w: the warm-up is 0 or more round trips, not " + warmup);
        }
        if (sl < 0 || sl > 15) {
            throw new CommandLine.ParameterException(cl, "-l: a service level is 0..15, not " + sl);
        }
    }

    @Override
    public Integer call() {
        validate();
        out = spec.commandLine().getOut();
        try {
            return run();
        } finally {
            closeAll();
        }
    }

    private void closeAll() {
        RuntimeException first = null;
        while (!resources.isEmpty()) {
            try {
                resources.pop().close();
            } catch (RuntimeException e) {
                if (first == null) {
                    first = e;
                }
            } catch (Exception e) {
                if (first == null) {
                    first = new RuntimeException(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    private int run() {
        Context ctx = own(DeviceChoice.open(shared.device));
        PortAttributes portAttributes = ctx.port(shared.ibPort).query();
        checkPort(portAttributes);
        CompletionChannel channel = events ? own(ctx.createCompletionChannel()) : null;
        ProtectionDomain pd = own(ctx.allocatePd());
        MemorySegment[] memory = new MemorySegment[1];
        MemoryRegion mr = own(registerBuffer(ctx, pd, memory));
        MemorySegment buf = memory[0];
        // the buffer's offset in the region: 0, or its address in an implicit on-demand region
        base = buf.address() - mr.address();
        buf.fill(FILL);
        // Confined: this thread posts, polls, arms and (closeAll) closes them, so its posts and
        // polls skip the close guard's mark (docs/guide.md, "8.1 Confining a queue pair and its queues")
        CompletionQueue cq = own(createCq(ctx, channel)).confine();
        QueuePair qp = own(createQp(pd, cq)).confine();
        qp.init(connectOptions());

        ReceiveRequest recv = ReceiveRequest.create().id(RECV_WRID).local(mr, base, bufferBytes());
        int routs = postReceives(qp, recv, rxDepth);
        if (channel != null) {
            cq.requestNotify(false);
        }

        int lid = portAttributes.lid();
        if (portAttributes.linkLayer() != LinkLayer.ETHERNET && lid == 0) {
            throw new Verbs4jTool.Verbs4jFailure("couldn't get local LID (port " + shared.ibPort + " has LID 0: no subnet manager?)");
        }
        Gid gid = gidIndex >= 0 ? ctx.port(shared.ibPort).gid(gidIndex) : Gid.ZERO;
        if (gidIndex < 0 && portAttributes.needsGrh()) {
            // the stock tool goes on and fails at RTR; say what is missing instead
            throw new Verbs4jTool.Verbs4jFailure("port " + shared.ibPort + " of " + ctx.device().name()
                    + " is RoCE (link layer Ethernet): choose a GID with -g (e.g. -g 1 for ::ffff:IPv4)");
        }
        Endpoint local = new Endpoint(lid, qp.qpNumber(), qp.initialPsn(), gid);
        SendRequest send = SendRequest.send().id(SEND_WRID).local(mr, base + sendOffset(), size).signaled();
        // before the address exchange, so the peer (ours or the stock tool) sees the same protocol
        warmUp(ctx, pd, lid, gid, events);

        Endpoint remote;
        if (host == null) {
            // bound before the address line appears, so a client started on seeing it finds the port open
            ServerSocket listener = Tcp.listen(shared.port);
            printAddress("  local address:  ", local, localGidSeparator());
            remote = PingPongWire.serve(listener, local, r -> connect(qp, r, pd, send));
        } else {
            printAddress("  local address:  ", local, localGidSeparator());
            remote = PingPongWire.connect(host, shared.port, local);
        }
        printAddress("  remote address: ", remote, ",");
        if (host != null) {
            connect(qp, remote, pd, send);
        }

        if (host != null && check) {
            for (int i = 0; i < size; i += DeviceChoice.pageSize()) {
                // rdma-core writes i / page_size % sizeof(char), which is 0 for every page
                buf.set(ValueLayout.JAVA_BYTE, sendOffset() + i, (byte) 0);
            }
        }
        Progress meter = new Progress(progress, spec.name(), iters);
        long nanos = exchange(qp, cq, channel, recv, routs, send, mr, base + sendOffset(), iters, host != null, meter, "");
        meter.finish();


        double usec = nanos / 1000.0;
        long bytes = (long) size * iters * 2;
        out.printf(Locale.ROOT, "%d bytes in %.2f seconds = %.2f Mbit/sec%n", bytes, usec / 1e6, bytes * 8. / usec);
        out.printf(Locale.ROOT, "%d iters in %.2f seconds = %.2f usec/iter%n", iters, usec / 1e6, usec / iters);
        out.flush();

        if (host == null && check) {
            return validateReceived(buf) ? 0 : Verbs4jTool.EXIT_RDMA_FAILURE;
        }
        return 0;
    }

    /** The ping-pong's CQ: room for every receive and the send, signalling {@code channel} if there is one. */
    private CompletionQueue createCq(Context ctx, CompletionChannel channel) {
        return channel == null ? ctx.createCq(rxDepth + 1) : ctx.createCq(rxDepth + 1, channel, 0);
    }

    /** The ping-pong's QP on {@code cq}, in RESET: the timed run's and each warm-up side's alike. */
    private QueuePair createQp(ProtectionDomain pd, CompletionQueue cq) {
        QueuePairBuilder qpb = pd.queuePair(qpType()).cq(cq).maxSendWr(1).maxRecvWr(rxDepth)
                .maxSendSge(1).maxRecvSge(1);
        if (newSend()) {
            qpb.sendOps(SendOp.SEND); // ibv_create_qp_ex, as the stock tool's -N
        }
        return qpb.build();
    }

    /** The buffer's offset inside its region ({@link #registerBuffer}). */
    private long base;

    /**
     * Registers the ping-pong buffer of {@link #bufferBytes()} bytes and stores its memory in
     * {@code memory[0]}: memory the region owns, local access ({@code ibv_reg_mr}).
     */
    MemoryRegion registerBuffer(Context ctx, ProtectionDomain pd, MemorySegment[] memory) {
        MemoryRegion mr = pd.allocate(bufferBytes(), Access.LOCAL_WRITE);
        memory[0] = mr.segment();
        return mr;
    }

    /**
     * The ping-pong itself: {@code n} exchanges on {@code qp}, the first SEND posted here when
     * {@code sendFirst} (the client), each later one once the previous SEND completed and the
     * peer's message arrived; receives reposted in batches of up to {@code rxDepth}. Returns the
     * nanoseconds from the first SEND to the last completion. The warm-up runs this very method, on
     * both sides of a pair of QPs, so the timed run starts in code the JIT has compiled as a whole
     * method with the timed run's profile ({@link #warmUp}). {@code phase} prefixes failures.
     */
    private long exchange(QueuePair qp, CompletionQueue cq, CompletionChannel channel, ReceiveRequest recv, int routs,
                          SendRequest send, MemoryRegion mr, long sendAt, int n, boolean sendFirst, Progress meter,
                          String phase) {
        int pending = (int) RECV_WRID;
        if (sendFirst) {
            post(qp, send, mr, sendAt);
            pending |= (int) SEND_WRID;
        }
        Completions wcs = cq.completions(2);
        long start = System.nanoTime();
        meter.start();
        int rcnt = 0;
        int scnt = 0;
        while (rcnt < n || scnt < n) {
            if (channel != null) {
                channel.await();
                cq.requestNotify(false);
            }
            int ne;
            do {
                ne = cq.poll(wcs);
            } while (channel == null && ne < 1);
            for (int k = 0; k < ne; k++) {
                Completion wc = wcs.get(k);
                if (!wc.ok()) {
                    throw new Verbs4jTool.Verbs4jFailure(String.format("%sfailed status %s (%d) for wr_id %d",
                            phase, wc.status(), wc.statusValue(), wc.wrId()));
                }
                long id = wc.wrId();
                if (id == SEND_WRID) {
                    ++scnt;
                } else if (id == RECV_WRID) {
                    if (--routs <= 1) {
                        routs += postReceives(qp, recv, rxDepth - routs);
                    }
                    ++rcnt;
                    meter.tick(rcnt);
                } else {
                    throw new Verbs4jTool.Verbs4jFailure("completion for unknown wr_id " + id);
                }
                pending &= ~(int) id;
                if (scnt < n && pending == 0) {
                    post(qp, send, mr, sendAt);
                    pending = (int) (RECV_WRID | SEND_WRID);
                }
            }
        }
        return System.nanoTime() - start;
    }

    /**
     * The untimed round trips before the exchange: {@link #warmup} of them, then rounds of
     * {@link #WARMUP_ROUND} until one compiles nothing (at most {@link #WARMUP_MAX_ROUNDS}, begun
     * within {@link #WARMUP_MAX_EXTRA_NANOS}), each with {@link #awaitQuietCompiler} after it. Each
     * round runs {@link #exchange} itself on both sides of a fresh pair of QPs of this command's
     * type connected to each other, each side on a thread of its own, with the timed run's
     * notification mode, so the JIT compiles the
     * timed run's code with its profile: a side waiting for its peer polls an empty CQ, as in the
     * timed run. (A QP connected to itself, which this tool used before, delivers each SEND at
     * once: no poll ever came back empty, so the compiled loop treated an empty poll as never
     * happening, and the first empty poll of the timed run threw it back to the interpreter;
     * and the fixed count ended while the hot methods were still at the JIT's lower tiers, whose
     * recompilation then ran inside the timed loop. Seen with {@code -XX:+PrintCompilation}.)
     * A device that cannot connect a QP by hand (iWARP: through rdma_cm only) gets none, said on
     * stderr.
     */
    private void warmUp(Context ctx, ProtectionDomain pd, int lid, Gid gid, boolean events) {
        if (warmup == 0) {
            return;
        }
        if (ctx.device().transport() == TransportType.IWARP) {
            spec.commandLine().getErr().println("verbs4j " + spec.name() + ": no warm-up on " + ctx.device().name()
                    + " (iWARP connects through rdma_cm only); the first iterations run colder");
            return;
        }
        // The two regions live until the command ends: deregistering one advances the requests'
        // validity epoch, and the timed run's first repost would then take the validation's slow
        // path, which the compiled code treats as never taken (one more deoptimization, timed).
        MemoryRegion[] regions = {own(pd.allocate(bufferBytes(), Access.LOCAL_WRITE)),
                own(pd.allocate(bufferBytes(), Access.LOCAL_WRITE))};
        warmUpRound(ctx, pd, regions, lid, gid, events, warmup);
        awaitQuietCompiler();
        long until = System.nanoTime() + WARMUP_MAX_EXTRA_NANOS;
        for (int round = 0; JitCompilation.known() && round < WARMUP_MAX_ROUNDS && System.nanoTime() - until < 0; round++) {
            long before = JitCompilation.millis();
            warmUpRound(ctx, pd, regions, lid, gid, events, WARMUP_ROUND);
            awaitQuietCompiler();
            if (JitCompilation.millis() == before) {
                return;
            }
        }
    }

    /** One warm-up round: {@code n} round trips between two fresh QPs on {@code regions}, the QPs closed afterwards. */
    private void warmUpRound(Context ctx, ProtectionDomain pd, MemoryRegion[] regions, int lid, Gid gid, boolean events,
                             int n) {
        try (WarmUpSide first = new WarmUpSide(ctx, pd, regions[0], events);
             WarmUpSide second = new WarmUpSide(ctx, pd, regions[1], events)) {
            connect(first.qp, new Endpoint(lid, second.qp.qpNumber(), second.qp.initialPsn(), gid), pd, first.send);
            connect(second.qp, new Endpoint(lid, first.qp.qpNumber(), first.qp.initialPsn(), gid), pd, second.send);
            // Both sides on threads of their own, each confining its QP and CQ (as the timed run
            // does, so the JIT compiles the confined posts and polls) and posting its receives;
            // neither sends before both have posted: a UD message without one is dropped. When
            // one side fails (a completion in error), the other would wait for its peer for ever:
            // this thread sees the failure and moves both QPs to the error state (a control-path
            // call, open to every thread), which flushes the survivor's receives, so its next
            // poll sees a failed completion and it ends; an ended owner releases its objects, so
            // this thread's close (try-with-resources) then lands.
            AtomicReference<Throwable> failure = new AtomicReference<>();
            CountDownLatch armed = new CountDownLatch(2);
            Thread[] sides = {warmUpThread(first, n, true, armed, failure),
                    warmUpThread(second, n, false, armed, failure)};
            try {
                for (Thread side : sides) {
                    while (side.isAlive() && failure.get() == null) {
                        side.join(20);
                    }
                }
                if (failure.get() != null) {
                    first.stop();
                    second.stop();
                    for (Thread side : sides) {
                        side.join(WARMUP_STOP_MILLIS);
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                failure.compareAndSet(null, new Verbs4jTool.Verbs4jFailure("warm-up interrupted"));
            }
            Throwable failed = failure.get();
            if (failed instanceof RuntimeException e) {
                throw e;
            } else if (failed instanceof Error e) {
                throw e;
            } else if (failed != null) {
                throw new Verbs4jTool.Verbs4jFailure("warm-up: " + failed);
            }
        }
    }

    /** How long a failed warm-up waits for each side's thread to end after {@link WarmUpSide#stop}. */
    static final long WARMUP_STOP_MILLIS = 10_000;

    private Thread warmUpThread(WarmUpSide side, int n, boolean sendFirst, CountDownLatch armed,
                                AtomicReference<Throwable> failure) {
        return Thread.ofPlatform().name(sendFirst ? "verbs4j warm-up client" : "verbs4j warm-up server").daemon()
                .start(() -> {
                    try {
                        int routs;
                        try {
                            side.qp.confine();
                            side.cq.confine();
                            routs = side.armReceives();
                        } finally {
                            armed.countDown();
                        }
                        armed.await();
                        if (failure.get() == null) {
                            side.run(n, sendFirst, routs);
                        }
                    } catch (Throwable t) {
                        failure.compareAndSet(null, t);
                    }
                });
    }

    /** One side of a warm-up pair: its own CQ (and completion channel) and QP, on a region it does not own. */
    private final class WarmUpSide implements AutoCloseable {
        final CompletionChannel channel;
        final CompletionQueue cq;
        final MemoryRegion mr;
        final QueuePair qp;
        final SendRequest send;
        final ReceiveRequest recv;
        final Progress meter = Progress.silent(progress);
        /** The channel, CQ and QP, closed in reverse; the region is the command's. */
        private final Closer made = new Closer();

        WarmUpSide(Context ctx, ProtectionDomain pd, MemoryRegion mr, boolean events) {
            this.mr = mr;
            try {
                channel = events ? made.register(ctx.createCompletionChannel()) : null;
                cq = made.register(createCq(ctx, channel));
                qp = made.register(createQp(pd, cq));
                qp.init(connectOptions());
                send = SendRequest.send().id(SEND_WRID).local(mr, sendOffset(), size).signaled();
                recv = ReceiveRequest.create().id(RECV_WRID).local(mr, 0, bufferBytes());
            } catch (RuntimeException e) {
                made.closeSuppressingInto(e);
                throw e;
            }
        }

        /** Posts the receives (and arms the CQ's notification); returns how many. */
        int armReceives() {
            int routs = postReceives(qp, recv, rxDepth);
            if (channel != null) {
                cq.requestNotify(false);
            }
            return routs;
        }

        void run(int n, boolean sendFirst, int routs) {
            exchange(qp, cq, channel, recv, routs, send, mr, sendOffset(), n, sendFirst, meter, "warm-up: ");
        }

        /** Ends a side whose peer failed: its QP to the error state, which flushes its receives. */
        void stop() {
            try {
                qp.toError();
            } catch (RuntimeException e) {
                // closed, or already in error: nothing to stop
            }
        }

        @Override
        public void close() {
            made.close();
        }
    }

    /** {@link JitCompilation#awaitQuiet} for at most {@value #QUIET_COMPILER_MAX_MILLIS} ms. */
    static void awaitQuietCompiler() {
        JitCompilation.awaitQuiet(QUIET_COMPILER_MAX_MILLIS);
    }

    static final long QUIET_COMPILER_MAX_MILLIS = 2_000;

    /** Whether the SENDs go through the post-send API ({@code ibv_qp_ex}, the stock tool's {@code -N}). */
    boolean newSend() {
        return false;
    }

    /** Posts the SEND: {@code ibv_post_send}, or with {@link #newSend()} ibv_wr_start/send/set_sge/complete. */
    private void post(QueuePair qp, SendRequest send, MemoryRegion mr, long sendAt) {
        if (!newSend()) {
            qp.postSend(send);
            return;
        }
        try (PostSession s = qp.startPosting()) {
            s.id(SEND_WRID).signaled(true).send().sge(mr, sendAt, size);
        }
    }

    /** The server's {@code -c}: page starts 0 (what rdma-core checks), every other byte the fill. */
    private boolean validateReceived(MemorySegment buf) {
        int page = DeviceChoice.pageSize();
        boolean ok = true;
        for (int p = 0; p * (long) page < size; p++) {
            int from = p * page;
            int to = (int) Math.min(size, (long) from + page);
            boolean pageOk = buf.get(ValueLayout.JAVA_BYTE, sendOffset() + from) == 0;
            for (int i = from + 1; pageOk && i < to; i++) {
                pageOk = buf.get(ValueLayout.JAVA_BYTE, sendOffset() + i) == FILL;
            }
            if (!pageOk) {
                out.printf("invalid data in page %d%n", p);
                ok = false;
            }
        }
        out.flush();
        return ok;
    }

    private static int postReceives(QueuePair qp, ReceiveRequest recv, int n) {
        for (int i = 0; i < n; i++) {
            qp.postRecv(recv);
        }
        return n;
    }

    private void printAddress(String prefix, Endpoint e, String gidSeparator) {
        out.printf("%sLID 0x%04x, QPN 0x%06x, PSN 0x%06x%s GID %s%n", prefix, e.lid(), e.qpn(), e.psn(), gidSeparator,
                Ipv6Text.format(e.gid().bytes()));
        out.flush();
    }
}
