package io.github.verbs4j.netty.bench;

import io.github.verbs4j.netty.LoopCounters;
import io.github.verbs4j.netty.RdmaChannelOption;
import io.github.verbs4j.netty.RdmaIoHandler;
import io.github.verbs4j.netty.RdmaServerSocketChannel;
import io.github.verbs4j.netty.RdmaSocketChannel;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import io.grpc.testing.protobuf.SimpleRequest;
import io.grpc.testing.protobuf.SimpleResponse;
import io.grpc.testing.protobuf.SimpleServiceGrpc;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFactory;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.util.concurrent.EventExecutor;

import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * One transport's numbers for scripts/netty-benchmark: a Netty echo ping-pong (one message in
 * flight; round-trip p50, p99), a one-way stream (the server answers one byte when all has
 * arrived; MB/s, timed after an untimed warm-up stream on another connection; twice: each write a
 * new buffer filled with the payload ({@code stream-<size>B}), then one buffer filled once and
 * written again each time ({@code stream-<size>B-resent}, as perftest sends its one buffer); for "rdma" the
 * server reads with {@code RDMA_ZERO_COPY_READ}, as a streaming application would, and prints a
 * {@code READS} line of its channel's counts, the client a {@code WRITES} line of its own), gRPC unary calls (p50, p99) and a gRPC client stream (messages/s).
 * {@code rdma}: this transport over softrdma; {@code epoll}: Netty's epoll transport over TCP
 * loopback ({@code nio} where epoll cannot load). One line per measurement:
 * {@code RESULT <transport> <what> <value> <unit>}.
 *
 * <p>The echo also measures what is allocated per round trip (one message out, its echo back)
 * after its warm-up: by the event-loop threads ({@code alloc-echo-<size>B-loops}) and by the whole
 * JVM ({@code alloc-echo-<size>B-jvm}), from {@code com.sun.management.ThreadMXBean}. In one JVM
 * both ends of the echo are counted.
 *
 * <p>Modes: {@code <transport> [scale]} runs everything in this JVM (server and client);
 * {@code serve <transport>} and {@code client <transport> <host> <echo-port> <stream-port> [scale]}
 * run the echo and the stream with the server in another process: the server prints
 * {@code PORTS <echo-port> <stream-port>} (both bound to port 0, so free) and serves until it is
 * killed, answering its JVM's JIT time on a third port ({@code JIT-PORT <port>},
 * {@link #serveJitTime}); the client prints the RESULT lines. {@code echo <transport> [scale]} runs the two echoes
 * only (for a profiler).
 */
public final class NettyTransportBenchmark {

    private final String transport;
    private final EventLoopGroup boss;
    private final EventLoopGroup workers;
    private final ChannelFactory<? extends ServerChannel> serverChannels;
    private final ChannelFactory<? extends Channel> clientChannels;
    private final Class<? extends ServerChannel> serverType;
    private final Class<? extends Channel> clientType;

    private NettyTransportBenchmark(String transport) {
        IoHandlerFactory io;
        switch (transport) {
            case "rdma" -> {
                io = RdmaIoHandler.newFactory();
                serverType = RdmaServerSocketChannel.class.asSubclass(ServerChannel.class);
                clientType = RdmaSocketChannel.class;
            }
            case "epoll" -> {
                Epoll.ensureAvailability();
                io = EpollIoHandler.newFactory();
                serverType = EpollServerSocketChannel.class;
                clientType = EpollSocketChannel.class;
            }
            case "nio" -> {
                io = NioIoHandler.newFactory();
                serverType = NioServerSocketChannel.class;
                clientType = NioSocketChannel.class;
            }
            default -> throw new IllegalArgumentException("rdma | epoll | nio: " + transport);
        }
        this.transport = transport;
        boss = new MultiThreadIoEventLoopGroup(1, io);
        workers = new MultiThreadIoEventLoopGroup(2, io);
        serverChannels = () -> newInstance(serverType);
        clientChannels = () -> newInstance(clientType);
    }

    private static <T> T newInstance(Class<T> type) {
        try {
            return type.getConstructor().newInstance();
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    private void result(String what, double value, String unit) {
        System.out.printf("RESULT %s %s %.2f %s%n", transport, what, value, unit);
    }

    /** Echoes every byte back as it came. */
    private static final class Echo extends ChannelInboundHandlerAdapter {
        private long reads;
        private long[] before;

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            if (ctx.channel() instanceof RdmaSocketChannel) {
                before = LoopCounters.passCountValues(ctx.channel());
            }
            ctx.fireChannelActive();
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            if (before != null && reads > 0) {
                // the server side's counts per message echoed, over the connection's life (warm-up included)
                long[] after = LoopCounters.passCountValues(ctx.channel());
                System.out.printf("SERVER-PASSES reads %d per-read passes %.2f clock-reads %.2f cq-polls %.2f empty-cq-polls %.2f"
                                + " loop-runs %.2f%n", reads, (double) (after[0] - before[0]) / reads,
                        (double) (after[1] - before[1]) / reads, (double) (after[2] - before[2]) / reads,
                        (double) (after[3] - before[3]) / reads, (double) (after[4] - before[4]) / reads);
            }
            ctx.fireChannelInactive();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            reads++;
            ctx.write(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }
    }

    /**
     * Reads the stream's length (its first 8 bytes), counts the bytes after it and answers one
     * byte when all have arrived.
     */
    private static final class Sink extends ChannelInboundHandlerAdapter {
        private int headerBytes;
        private long total;
        private long seen;

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf b = (ByteBuf) msg;
            while (headerBytes < Long.BYTES && b.isReadable()) {
                total = total << 8 | (b.readByte() & 0xff);
                headerBytes++;
            }
            seen += b.readableBytes();
            b.release();
            if (headerBytes == Long.BYTES && seen == total) {
                if (ctx.channel() instanceof RdmaSocketChannel) {
                    // the receiving side's counts over the connection (rdma only: not RESULT rows)
                    System.out.println("READS " + seen + " bytes " + LoopCounters.readCounts(ctx.channel())
                            + " " + LoopCounters.passCounts(ctx.channel()));
                }
                ctx.writeAndFlush(ctx.alloc().buffer(1).writeByte(1));
            }
        }
    }

    /** A server on port 0 of 127.0.0.1 whose connections each get a handler of {@code handlers}. */
    private Channel server(Supplier<ChannelHandler> handlers) throws InterruptedException {
        return server(handlers, false);
    }

    /**
     * Whether the stream's server reads without a copy on rdma ({@code RDMA_ZERO_COPY_READ}, as an
     * application that streams large messages would set it): {@code true} unless the system
     * property {@code netty-benchmark.stream-zero-copy-read} is {@code false} (for A/B runs).
     */
    static final boolean STREAM_ZERO_COPY_READ =
            Boolean.parseBoolean(System.getProperty("netty-benchmark.stream-zero-copy-read", "true"));

    /**
     * The stream's {@code RDMA_RING_SLOTS} on both ends on rdma (system property
     * {@code netty-benchmark.stream-ring-slots}, for A/B runs), or 0 for the channels' default.
     */
    static final int STREAM_RING_SLOTS = Integer.getInteger("netty-benchmark.stream-ring-slots", 0);

    /** The stream's server: {@link #server(Supplier)} of {@link Sink}s, reading without a copy on rdma. */
    private Channel streamServer() throws InterruptedException {
        return server(Sink::new, STREAM_ZERO_COPY_READ && transport.equals("rdma"), true);
    }

    private Channel server(Supplier<ChannelHandler> handlers, boolean zeroCopyRead) throws InterruptedException {
        return server(handlers, zeroCopyRead, false);
    }

    private Channel server(Supplier<ChannelHandler> handlers, boolean zeroCopyRead, boolean stream)
            throws InterruptedException {
        ServerBootstrap bootstrap = new ServerBootstrap();
        if (zeroCopyRead) {
            bootstrap.childOption(RdmaChannelOption.RDMA_ZERO_COPY_READ, true);
        }
        if (stream && STREAM_RING_SLOTS > 0 && transport.equals("rdma")) {
            bootstrap.childOption(RdmaChannelOption.RDMA_RING_SLOTS, STREAM_RING_SLOTS);
        }
        return bootstrap.group(boss, workers).channelFactory(serverChannels)
                .childHandler(new ChannelInitializer<>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(handlers.get());
                    }
                })
                .bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
    }

    private Channel client(InetSocketAddress to, ChannelInboundHandlerAdapter handler) throws InterruptedException {
        return client(to, handler, false);
    }

    private Channel client(InetSocketAddress to, ChannelInboundHandlerAdapter handler, boolean stream)
            throws InterruptedException {
        Bootstrap bootstrap = new Bootstrap();
        if (stream && STREAM_RING_SLOTS > 0 && transport.equals("rdma")) {
            bootstrap.option(RdmaChannelOption.RDMA_RING_SLOTS, STREAM_RING_SLOTS);
        }
        return bootstrap.group(workers).channelFactory(clientChannels)
                .option(ChannelOption.TCP_NODELAY, true)
                .handler(handler).connect(to).sync().channel();
    }

    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    /** The threads of this JVM's event loops (each started by a task if it was not yet). */
    private long[] loopThreads() throws Exception {
        List<Long> ids = new ArrayList<>();
        for (EventLoopGroup g : List.of(boss, workers)) {
            for (EventExecutor loop : g) {
                ids.add(loop.submit(() -> Thread.currentThread().threadId()).get(10, TimeUnit.SECONDS));
            }
        }
        return ids.stream().mapToLong(Long::longValue).toArray();
    }

    /** Bytes allocated so far: by {@code threads}, and by the whole JVM. */
    private static long[] allocated(long[] threads) {
        long loops = 0;
        for (long id : threads) {
            loops += THREADS.getThreadAllocatedBytes(id);
        }
        return new long[] {loops, THREADS.getTotalThreadAllocatedBytes()};
    }

    /** The echo in this JVM: its server too. */
    void pingPong(int size, int rounds) throws Exception {
        Channel server = server(Echo::new);
        try {
            pingPong((InetSocketAddress) server.localAddress(), size, rounds, true);
        } finally {
            server.close().sync();
        }
    }

    /**
     * Echo rounds before any can end the warm-up: enough for C2 to compile the round trip's code
     * on both ends (about 10,000 calls of a method). {@code -Dverbs4j.bench.warmUpRounds} sets
     * another count (to compare).
     */
    static final int WARM_UP_ROUNDS = Integer.getInteger("verbs4j.bench.warmUpRounds", 20_000);
    /**
     * The warm-up goes on in windows of at least this long after {@link #WARM_UP_ROUNDS}, and ends
     * after {@link #QUIET_WINDOWS} windows in a row in which neither JVM's JIT compiled for more
     * than {@link #QUIET_COMPILE_SHARE} of the window (a stray C1 compilation of code off the
     * echo's path, such as this check's own, is a millisecond or less). By time, not rounds:
     * the compilation MXBean counts a compilation when it ends, and one C2 compilation on a
     * loaded 2-vCPU host takes tens of milliseconds, so a window of a few thousand rounds (10 ms)
     * without one said nothing (docs/measurements/netty.md, "The JIT during the recorded rounds").
     */
    static final long WARM_UP_WINDOW_NANOS = TimeUnit.MILLISECONDS.toNanos(Long.getLong("verbs4j.bench.warmUpWindowMs", 200));
    static final int QUIET_WINDOWS = 2;
    static final double QUIET_COMPILE_SHARE = 0.01;
    /**
     * The windows end this long after the first {@link #WARM_UP_ROUNDS} even if the JIT has not
     * settled (the WARMUP line says so): under load, compiler threads sharing two vCPUs with
     * four polling loops take longer than that.
     */
    static final long WARM_UP_MAX_NANOS = TimeUnit.MILLISECONDS.toNanos(Long.getLong("verbs4j.bench.warmUpMaxMs", 5_000));
    /**
     * Where the echo's server in another process answers its JIT's total compilation time
     * ({@link #serveJitTime}): {@code -Dverbs4j.bench.peerJitPort}, 0 (none) by default, when
     * only this JVM's JIT is watched.
     */
    static final int PEER_JIT_PORT = Integer.getInteger("verbs4j.bench.peerJitPort", 0);

    /**
     * The echo's driver: sends one message, the next when the last came back whole, for a phase
     * of rounds the main thread starts on the channel's loop ({@link #phase}). Warm-up and
     * recorded phases run the same code (each round trip stored, the snapshots taken at each
     * phase's start and end), so that the recorded rounds take no branch the JIT compiled out
     * during the warm-up (a deoptimisation and a recompilation in the first recorded round).
     */
    private final class EchoDriver extends ChannelInboundHandlerAdapter {
        private final int size;
        private final byte[] payload;
        private final long[] rtt;
        private final long[] loopThreads;
        private final CompletableFuture<ChannelHandlerContext> active = new CompletableFuture<>();
        private CompletableFuture<Void> phaseDone;
        private int left;
        private int recorded;
        private int got;
        private long t0;
        /** The snapshots at the start and the end of the last phase (the recorded rounds), taken on the loop. */
        final long[][] alloc = new long[2][];
        final long[][] counts = new long[2][];
        final long[][] passes = new long[2][];
        final long[] jitMillis = new long[2];

        EchoDriver(int size, int rounds, long[] loopThreads) {
            this.size = size;
            this.payload = new byte[size];
            this.rtt = new long[rounds];
            this.loopThreads = loopThreads;
        }

        @Override
        public void channelActive(ChannelHandlerContext ctx) {
            active.complete(ctx);
            ctx.fireChannelActive();
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            active.completeExceptionally(cause);
            if (phaseDone != null) {
                phaseDone.completeExceptionally(cause);
            }
            ctx.close();
        }

        /** Runs {@code rounds} round trips and waits for them; the last phase's are the recorded ones. */
        void phase(int rounds) throws Exception {
            ChannelHandlerContext ctx = active.get(60, TimeUnit.SECONDS);
            CompletableFuture<Void> done = new CompletableFuture<>();
            ctx.executor().execute(() -> {
                phaseDone = done;
                left = rounds;
                recorded = 0;
                snapshot(ctx, 0);
                send(ctx);
            });
            done.get(600, TimeUnit.SECONDS);
        }

        private void snapshot(ChannelHandlerContext ctx, int i) {
            alloc[i] = allocated(loopThreads);
            counts[i] = loopCounts();
            passes[i] = passCounts(ctx.channel());
            jitMillis[i] = jitMillis();
        }

        private void send(ChannelHandlerContext ctx) {
            got = 0;
            t0 = System.nanoTime();
            ctx.writeAndFlush(ctx.alloc().directBuffer(size).writeBytes(payload));
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf b = (ByteBuf) msg;
            got += b.readableBytes();
            b.release();
            if (got < size) {
                return;
            }
            // a warm-up phase stores its round trips too, over the same slots again
            rtt[recorded] = System.nanoTime() - t0;
            recorded = recorded + 1 == rtt.length ? 0 : recorded + 1;
            if (--left > 0) {
                send(ctx);
                return;
            }
            snapshot(ctx, 1);
            phaseDone.complete(null);
        }
    }

    /** This JVM's JIT time and, where {@link #PEER_JIT_PORT} is set, the peer's: both in ms. */
    private static final class JitClocks implements AutoCloseable {
        private final Socket peer;
        /** Both JVMs' compilation milliseconds when the clocks opened, and at the last {@link #settle}. */
        private final long local0;
        private final long peer0;
        private long local;
        private long peerAt;

        JitClocks() throws IOException {
            peer = PEER_JIT_PORT > 0 ? new Socket(InetAddress.getLoopbackAddress(), PEER_JIT_PORT) : null;
            local0 = local = local();
            peer0 = peerAt = peer();
        }

        long local() {
            return jitMillis();
        }

        /** The peer's total compilation time (a one-byte question, an 8-byte answer); 0 without a peer. */
        long peer() throws IOException {
            if (peer == null) {
                return 0;
            }
            peer.getOutputStream().write(1);
            return new DataInputStream(peer.getInputStream()).readLong();
        }

        /**
         * Reads both clocks again: whether neither JVM compiled for more than {@code millis}
         * since the last reading (a quiet window of the warm-ups).
         */
        boolean settle(long millis) throws IOException {
            long l = local();
            long p = peer();
            boolean quiet = l - local <= millis && p - peerAt <= millis;
            local = l;
            peerAt = p;
            return quiet;
        }

        /** This JVM's compilation milliseconds from the opening to the last {@link #settle}. */
        long localCompiled() {
            return local - local0;
        }

        /** The peer's compilation milliseconds from the opening to the last {@link #settle}. */
        long peerCompiled() {
            return peerAt - peer0;
        }

        @Override
        public void close() throws IOException {
            if (peer != null) {
                peer.close();
            }
        }
    }

    /**
     * The untimed warm-up: {@link #WARM_UP_ROUNDS} rounds, then windows of at least
     * {@link #WARM_UP_WINDOW_NANOS} until {@link #QUIET_WINDOWS} in a row saw neither JVM's JIT
     * compile for more than {@link #QUIET_COMPILE_SHARE} of it, or {@link #WARM_UP_MAX_NANOS}
     * passed. Prints a {@code WARMUP} line: the rounds it took, its milliseconds, whether the JIT
     * settled, and the compilation milliseconds of each JVM during it.
     */
    private void warmUp(EchoDriver driver, int size, boolean serverHere) throws Exception {
        long start = System.nanoTime();
        try (JitClocks jit = new JitClocks()) {
            long rounds = WARM_UP_ROUNDS;
            driver.phase(WARM_UP_ROUNDS);
            jit.settle(Long.MAX_VALUE); // the windows' first reading: the fixed rounds are no window
            // rounds per window, from the rate so far; each window is timed, and runs again if short
            long perWindow = Math.max(1_000, rounds * WARM_UP_WINDOW_NANOS / Math.max(1, System.nanoTime() - start));
            int quiet = 0;
            long windowsStart = System.nanoTime();
            long quietMillis = (long) (TimeUnit.NANOSECONDS.toMillis(WARM_UP_WINDOW_NANOS) * QUIET_COMPILE_SHARE);
            while (quiet < QUIET_WINDOWS && System.nanoTime() - windowsStart < WARM_UP_MAX_NANOS) {
                long windowStart = System.nanoTime();
                do {
                    driver.phase((int) Math.min(perWindow, Integer.MAX_VALUE));
                    rounds += perWindow;
                } while (System.nanoTime() - windowStart < WARM_UP_WINDOW_NANOS);
                quiet = jit.settle(quietMillis) ? quiet + 1 : 0;
            }
            System.out.printf("WARMUP %s echo-%dB rounds %d ms %d jit-settled %s compile-ms client %d server %s%n", transport, size,
                    rounds, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start), quiet >= QUIET_WINDOWS ? "yes" : "no",
                    jit.localCompiled(), PEER_JIT_PORT > 0 ? Long.toString(jit.peerCompiled())
                            : serverHere ? "(this JVM)" : "(not watched)");
        }
    }

    /**
     * Serves this JVM's total compilation time on a TCP port of the loopback address bound to 0 (printed as
     * {@code JIT-PORT <port>}): each byte read is answered with the milliseconds as 8 bytes, so
     * that the echo's client in another process can end its warm-up when this JVM's JIT has
     * settled too. Daemon threads: they end with the process.
     */
    private static void serveJitTime() throws IOException {
        ServerSocket listener = new ServerSocket(0, 8, InetAddress.getLoopbackAddress());
        System.out.printf("JIT-PORT %d%n", listener.getLocalPort());
        Thread acceptor = new Thread(() -> {
            while (true) {
                try {
                    Socket s = listener.accept();
                    Thread answer = new Thread(() -> {
                        try (s) {
                            DataOutputStream out = new DataOutputStream(s.getOutputStream());
                            while (s.getInputStream().read() >= 0) {
                                out.writeLong(jitMillis());
                                out.flush();
                            }
                        } catch (IOException e) {
                            // the client went away
                        }
                    }, "jit-time-answer");
                    answer.setDaemon(true);
                    answer.start();
                } catch (IOException e) {
                    return;
                }
            }
        }, "jit-time-server");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    /** The echo against a server in another process (whose JIT is watched where {@link #PEER_JIT_PORT} is set). */
    void pingPong(InetSocketAddress to, int size, int rounds) throws Exception {
        pingPong(to, size, rounds, false);
    }

    /**
     * Timed rounds of each echo after its warm-up ({@code -Dnetty-benchmark.echo-rounds}, 1 by
     * default), on the same connection: each round prints a {@code ROUND} line of its p50 and p99,
     * and the echo's {@code RESULT} lines are then the medians of the rounds' values (the mean, the
     * p50, the p99); the {@code SHAPE}, allocation, {@code JIT} and count lines are the last round's.
     */
    static final int ECHO_ROUNDS = Integer.getInteger("netty-benchmark.echo-rounds", 1);
    /**
     * With {@code -Dnetty-benchmark.echo-pause=true} the client prints {@code PAUSE echo-<size>B
     * round <k>} before each round of the echo and waits for a line on its standard input, as
     * {@link #STREAM_PAUSE} does for the stream: scripts/netty-benchmark runs the raw verbs loop of
     * that size meanwhile, so that each round's echo and its raw loop run in the same seconds.
     */
    static final boolean ECHO_PAUSE = Boolean.getBoolean("netty-benchmark.echo-pause");

    /** Standard input, read by the pauses ({@link #ECHO_PAUSE}, {@link #STREAM_PAUSE}): one reader, so that none reads ahead of another. */
    private static BufferedReader pauseInput;

    /** Prints {@code PAUSE <what> round <round>} and waits for a line on standard input. */
    private static void pause(String what, int round) throws IOException {
        if (pauseInput == null) {
            pauseInput = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        }
        System.out.printf("PAUSE %s round %d%n", what, round);
        System.out.flush();
        if (pauseInput.readLine() == null) {
            throw new IOException("standard input closed before " + what + " round " + round);
        }
    }

    private void pingPong(InetSocketAddress to, int size, int rounds, boolean serverHere) throws Exception {
        EchoDriver driver = new EchoDriver(size, rounds, loopThreads());
        Channel c = client(to, driver);
        warmUp(driver, size, serverHere);
        double[] means = new double[ECHO_ROUNDS];
        double[] p50s = new double[ECHO_ROUNDS];
        double[] p99s = new double[ECHO_ROUNDS];
        long[] rtt = driver.rtt;
        for (int r = 0; r < ECHO_ROUNDS; r++) {
            if (ECHO_PAUSE) {
                pause("echo-" + size + "B", r + 1);
            }
            driver.phase(rounds);
            means[r] = Arrays.stream(rtt).average().orElse(0) / 1e3;
            Arrays.sort(rtt);
            p50s[r] = rtt[rounds / 2] / 1e3;
            p99s[r] = rtt[(int) (rounds * 0.99)] / 1e3;
            if (ECHO_ROUNDS > 1) {
                System.out.printf("ROUND %d %s echo-%dB-rtt-p50 %.2f us%n", r + 1, transport, size, p50s[r]);
                System.out.printf("ROUND %d %s echo-%dB-rtt-p99 %.2f us%n", r + 1, transport, size, p99s[r]);
            }
        }
        c.close().sync();
        long[][] alloc = driver.alloc;
        long[][] counts = driver.counts;
        long[][] passes = driver.passes;
        long[] jitMillis = driver.jitMillis;
        result("echo-" + size + "B-rtt-mean", median(means), "us");
        result("echo-" + size + "B-rtt-p50", median(p50s), "us");
        result("echo-" + size + "B-rtt-p99", median(p99s), "us");
        // the shape below the p99 (not a RESULT row): whether the round trips are one mode or two
        System.out.printf("SHAPE %s echo-%dB-rtt-us p1 %.2f p10 %.2f p25 %.2f p50 %.2f p75 %.2f p90 %.2f%n", transport, size,
                rtt[rounds / 100] / 1e3, rtt[rounds / 10] / 1e3, rtt[rounds / 4] / 1e3, rtt[rounds / 2] / 1e3,
                rtt[rounds * 3 / 4] / 1e3, rtt[rounds * 9 / 10] / 1e3);
        // per round trip: the recorded rounds, between the two snapshots
        result("alloc-echo-" + size + "B-loops", (double) (alloc[1][0] - alloc[0][0]) / rounds, "B/msg");
        result("alloc-echo-" + size + "B-jvm", (double) (alloc[1][1] - alloc[0][1]) / rounds, "B/msg");
        // whether this JVM's JIT still compiled during the recorded rounds (its compiler threads
        // then took CPU time from the two polling loops): not a RESULT row
        System.out.printf("JIT %s echo-%dB compile-ms-during-rounds %d%n", transport, size, jitMillis[1] - jitMillis[0]);
        if (transport.equals("rdma")) {
            // this JVM's loops only: with the server in another process, its own are printed there
            result("loop-blocks-echo-" + size + "B", (double) (counts[1][0] - counts[0][0]) / rounds, "per-rtt");
            result("loop-wakeups-echo-" + size + "B", (double) (counts[1][1] - counts[0][1]) / rounds, "per-rtt");
            // the client's loop and channel per round trip (not RESULT rows: the table has no column for them)
            String[] names = {"passes", "clock-reads", "cq-polls", "empty-cq-polls", "loop-runs", "empty-loop-runs"};
            StringBuilder line = new StringBuilder("PASSES rdma echo-" + size + "B per-rtt");
            for (int i = 0; i < names.length; i++) {
                line.append(String.format(" %s %.2f", names[i], (double) (passes[1][i] - passes[0][i]) / rounds));
            }
            System.out.println(line);
        }
    }

    /** The client loop's passes, clock reads and queue polls so far (LoopCounters.passCounts; zeros for another transport). */
    private long[] passCounts(Channel c) {
        return transport.equals("rdma") ? LoopCounters.passCountValues(c) : new long[6];
    }

    /** Milliseconds this JVM's JIT has compiled so far (0 where the JVM does not say). */
    private static long jitMillis() {
        java.lang.management.CompilationMXBean jit = java.lang.management.ManagementFactory.getCompilationMXBean();
        return jit != null && jit.isCompilationTimeMonitoringSupported() ? jit.getTotalCompilationTime() : 0;
    }

    /** The RDMA loops' blocking waits and eventfd wake-ups so far (zeros for another transport). */
    private long[] loopCounts() {
        return transport.equals("rdma") ? new long[] {LoopCounters.blockingWaits(), LoopCounters.wakeupWrites()}
                : new long[2];
    }

    /** The stream in this JVM: its server too. */
    void stream(int size, int messages) throws Exception {
        Channel server = streamServer();
        try {
            stream((InetSocketAddress) server.localAddress(), size, messages);
        } finally {
            server.close().sync();
        }
    }

    /** Writes of each untimed warm-up stream ({@link #streamWarmUp}). */
    static final int STREAM_WARM_UP_WRITES = 8_192;

    /**
     * Timed rounds of the stream after its warm-up ({@code -Dnetty-benchmark.stream-rounds}, 1 by
     * default): each round times both rows once, each on a new connection, and prints a
     * {@code ROUND} line per row; the {@code RESULT} line of a row is then the median of its rounds.
     */
    static final int STREAM_ROUNDS = Integer.getInteger("netty-benchmark.stream-rounds", 1);
    /**
     * With {@code -Dnetty-benchmark.stream-pause=true} the client prints {@code PAUSE stream round
     * <k>} before each round and waits for a line on its standard input: scripts/netty-benchmark
     * runs {@code ib_write_bw} meanwhile, so that each round's streams and its {@code ib_write_bw}
     * run in the same seconds (the VM's speed drifts over minutes).
     */
    static final boolean STREAM_PAUSE = Boolean.getBoolean("netty-benchmark.stream-pause");

    /**
     * The untimed warm-up ({@link #streamWarmUp}; both processes' JIT compiles the stream's path
     * meanwhile: without a warm-up a stream of 8,192 writes timed mostly the compilation, 176 MB/s
     * where 65,536 writes gave 1,085 at the same load), then {@link #STREAM_ROUNDS} rounds of the
     * timed streams of {@code messages} writes, filled and resent, each on a new connection, with a
     * {@code JIT} line each.
     */
    void stream(InetSocketAddress to, int size, int messages) throws Exception {
        streamWarmUp(to, size);
        String[] rows = {"stream-" + size + "B", "stream-" + size + "B-resent"};
        double[][] mbs = new double[rows.length][STREAM_ROUNDS];
        try (JitClocks jit = new JitClocks()) {
            for (int r = 0; r < STREAM_ROUNDS; r++) {
                if (STREAM_PAUSE) {
                    pause("stream", r + 1);
                }
                for (int k = 0; k < rows.length; k++) {
                    long local = jit.local();
                    long peer = jit.peer();
                    mbs[k][r] = timedStream(to, size, messages, k == 1);
                    if (STREAM_ROUNDS == 1) {
                        result(rows[k], mbs[k][r], "MB/s");
                    } else {
                        System.out.printf("ROUND %d %s %s %.2f MB/s%n", r + 1, transport, rows[k], mbs[k][r]);
                    }
                    // whether either JVM's JIT still compiled while the row was timed (it takes a CPU of two)
                    System.out.printf("JIT %s %s compile-ms-during-stream client %d server %s%s%n", transport, rows[k],
                            jit.local() - local, PEER_JIT_PORT > 0 ? Long.toString(jit.peer() - peer) : "(not watched)",
                            STREAM_ROUNDS == 1 ? "" : " round " + (r + 1));
                }
            }
        }
        if (STREAM_ROUNDS > 1) {
            for (int k = 0; k < rows.length; k++) {
                result(rows[k], median(mbs[k]), "MB/s");
            }
        }
    }

    /** The median of {@code values} (the mean of the middle two of an even count). */
    static double median(double[] values) {
        double[] v = values.clone();
        Arrays.sort(v);
        int n = v.length;
        return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    }

    /**
     * The stream's untimed warm-up: pairs of streams of {@link #STREAM_WARM_UP_WRITES} writes, one
     * filled and one resent (both rows' paths compiled before either is timed), each on its own
     * connection, until {@link #QUIET_WINDOWS} pairs in a row saw neither JVM's JIT compile for
     * more than {@link #QUIET_COMPILE_SHARE} of the pair's time, or {@link #WARM_UP_MAX_NANOS}
     * passed, as the echo's warm-up: after one warm-up stream the JIT compilers still ran during
     * the timed streams, 6 to 30 us of CPU per 64 KiB message on a loaded 2-vCPU host, beside 14 to
     * 35 for all other threads together (docs/measurements/netty.md, "The 64 KiB stream's CPU per message").
     * Prints a {@code WARMUP} line.
     */
    private void streamWarmUp(InetSocketAddress to, int size) throws Exception {
        long start = System.nanoTime();
        try (JitClocks jit = new JitClocks()) {
            int pairs = 0;
            int quiet = 0;
            do {
                long pairStart = System.nanoTime();
                timedStream(to, size, STREAM_WARM_UP_WRITES, false);
                timedStream(to, size, STREAM_WARM_UP_WRITES, true);
                pairs++;
                long quietMillis = (long) (TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - pairStart) * QUIET_COMPILE_SHARE);
                quiet = jit.settle(quietMillis) ? quiet + 1 : 0;
            } while (quiet < QUIET_WINDOWS && System.nanoTime() - start < WARM_UP_MAX_NANOS);
            System.out.printf("WARMUP %s stream-%dB streams %d ms %d jit-settled %s compile-ms client %d server %s%n", transport,
                    size, 2 * pairs, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start), quiet >= QUIET_WINDOWS ? "yes" : "no",
                    jit.localCompiled(), PEER_JIT_PORT > 0 ? Long.toString(jit.peerCompiled()) : "(not watched)");
        }
    }

    /**
     * One connection's stream of {@code messages} writes of {@code size} bytes after an 8-byte
     * length, from the first write until the server's one-byte answer that all arrived; MB/s.
     * The writer writes while the channel is writable, flushes, and goes on when Netty reports the
     * channel writable again ({@code channelWritabilityChanged}), as an application streams.
     * Each write is a new buffer from the channel's allocator filled with the payload, or with
     * {@code resend} the same buffer, filled once, written again each time (a
     * {@code retainedDuplicate()}): what perftest's {@code ib_write_bw} does with its one buffer,
     * and what an application does with a cached or file-backed payload. The server checks the
     * length either way.
     */
    private double timedStream(InetSocketAddress to, int size, int messages, boolean resend) throws Exception {
        long total = (long) size * messages;
        CompletableFuture<Void> acked = new CompletableFuture<>();
        CompletableFuture<Void> written = new CompletableFuture<>();
        byte[] payload = new byte[size];
        long[] t0 = new long[1];
        Channel c = client(to, new ChannelInboundHandlerAdapter() {
            private int sent = -1; // the length first
            private ByteBuf once; // with resend: the one buffer every write sends

            @Override
            public void channelActive(ChannelHandlerContext ctx) {
                t0[0] = System.nanoTime();
                if (resend) {
                    once = ctx.alloc().directBuffer(size).writeBytes(payload);
                }
                ctx.write(ctx.alloc().directBuffer(Long.BYTES).writeLong(total));
                sent = 0;
                writeMore(ctx);
            }

            @Override
            public void handlerRemoved(ChannelHandlerContext ctx) {
                if (once != null) {
                    once.release();
                    once = null;
                }
            }

            @Override
            public void channelWritabilityChanged(ChannelHandlerContext ctx) {
                writeMore(ctx);
                ctx.fireChannelWritabilityChanged();
            }

            /** Fills up to the high water mark, then waits for the channel to drain below the low one. */
            private void writeMore(ChannelHandlerContext ctx) {
                if (sent < 0 || sent == messages) {
                    return;
                }
                Channel ch = ctx.channel();
                while (sent < messages && ch.isWritable()) {
                    ctx.write(resend ? once.retainedDuplicate() : ctx.alloc().directBuffer(size).writeBytes(payload));
                    sent++;
                }
                ctx.flush();
                if (sent == messages) {
                    written.complete(null);
                }
            }

            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                ((ByteBuf) msg).release();
                acked.complete(null);
            }

            @Override
            public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                written.completeExceptionally(cause);
                acked.completeExceptionally(cause);
                ctx.close();
            }
        }, true);
        written.get(600, TimeUnit.SECONDS);
        acked.get(600, TimeUnit.SECONDS);
        double seconds = (System.nanoTime() - t0[0]) / 1e9;
        if (transport.equals("rdma")) {
            System.out.println("WRITES " + (resend ? "resent " : "") + messages + " " + c.eventLoop().submit(
                    () -> LoopCounters.writeCounts(c) + " " + LoopCounters.passCounts(c)).get());
        }
        c.close().sync();
        return total / seconds / 1e6;
    }

    void grpc(int calls, int streamed) throws Exception {
        Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
                .channelType(serverType).bossEventLoopGroup(boss).workerEventLoopGroup(workers)
                .addService(new SimpleServiceGrpc.SimpleServiceImplBase() {
                    @Override
                    public void unaryRpc(SimpleRequest r, StreamObserver<SimpleResponse> out) {
                        out.onNext(SimpleResponse.newBuilder().setResponseMessage(r.getRequestMessage()).build());
                        out.onCompleted();
                    }

                    @Override
                    public StreamObserver<SimpleRequest> clientStreamingRpc(StreamObserver<SimpleResponse> out) {
                        return new StreamObserver<>() {
                            private int n;

                            @Override
                            public void onNext(SimpleRequest value) {
                                n++;
                            }

                            @Override
                            public void onError(Throwable t) {
                            }

                            @Override
                            public void onCompleted() {
                                out.onNext(SimpleResponse.newBuilder().setResponseMessage(Integer.toString(n)).build());
                                out.onCompleted();
                            }
                        };
                    }
                })
                .build().start();
        ManagedChannel channel = NettyChannelBuilder.forAddress(new InetSocketAddress("127.0.0.1", server.getPort()))
                .channelType(clientType).eventLoopGroup(workers).usePlaintext().build();
        try {
            SimpleServiceGrpc.SimpleServiceBlockingStub stub = SimpleServiceGrpc.newBlockingStub(channel);
            SimpleRequest req = SimpleRequest.newBuilder().setRequestMessage("x".repeat(64)).build();
            for (int i = 0; i < 1000; i++) {
                stub.unaryRpc(req); // warm-up
            }
            long[] t = new long[calls];
            for (int i = 0; i < calls; i++) {
                long t0 = System.nanoTime();
                stub.unaryRpc(req);
                t[i] = System.nanoTime() - t0;
            }
            Arrays.sort(t);
            result("grpc-unary-p50", t[calls / 2] / 1e3, "us");
            result("grpc-unary-p99", t[(int) (calls * 0.99)] / 1e3, "us");
            CompletableFuture<String> done = new CompletableFuture<>();
            long t0 = System.nanoTime();
            StreamObserver<SimpleRequest> in = SimpleServiceGrpc.newStub(channel).clientStreamingRpc(new StreamObserver<>() {
                @Override
                public void onNext(SimpleResponse value) {
                    done.complete(value.getResponseMessage());
                }

                @Override
                public void onError(Throwable e) {
                    done.completeExceptionally(e);
                }

                @Override
                public void onCompleted() {
                }
            });
            for (int i = 0; i < streamed; i++) {
                in.onNext(req);
            }
            in.onCompleted();
            if (!done.get(600, TimeUnit.SECONDS).equals(Integer.toString(streamed))) {
                throw new AssertionError("the server counted " + done.get() + " of " + streamed);
            }
            result("grpc-stream-64B", streamed / ((System.nanoTime() - t0) / 1e9), "msg/s");
        } finally {
            channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        }
    }

    /**
     * {@code <rdma|epoll|nio> [scale]}, {@code echo <transport> [scale]}, {@code serve <transport>},
     * {@code client <transport> <host> <echo-port> <stream-port> [scale]},
     * {@code stream-client <transport> <host> <stream-port> [scale]} (the stream row alone, for A/B
     * runs of it), {@code echo-client <transport> <host> <echo-port> <size> <rounds>} (one echo
     * row alone, after its warm-up ({@link #warmUp}; the server's JIT watched too with
     * {@code -Dverbs4j.bench.peerJitPort} set to its {@code JIT-PORT}): two run lengths under
     * {@code perf stat} give what one round trip costs each process): scale multiplies every
     * count (default 1).
     */
    public static void main(String[] args) throws Exception {
        String mode = switch (args.length > 0 ? args[0] : "") {
            case "echo", "serve", "client", "stream-client", "echo-client" -> args[0];
            default -> "all";
        };
        String[] rest = mode.equals("all") ? args : Arrays.copyOfRange(args, 1, args.length);
        if (rest.length == 0) {
            throw new IllegalArgumentException("usage: [echo|serve|client] <rdma|epoll|nio> ...");
        }
        NettyTransportBenchmark b = new NettyTransportBenchmark(rest[0]);
        int scaleArg = switch (mode) {
            case "client" -> 4;
            case "stream-client" -> 3;
            case "echo-client" -> 5;
            default -> 1;
        };
        double scale = rest.length > scaleArg ? Double.parseDouble(rest[scaleArg]) : 1;
        int rounds = (int) (20_000 * scale);
        // the timed stream's writes per row: -Dnetty-benchmark.stream-writes when given (scripts/netty-benchmark
        // passes its own count, the same as ib_write_bw's -n), else 8,192 x scale
        int streamed = Integer.getInteger("netty-benchmark.stream-writes", (int) (8_192 * scale));
        if (streamed < 1) {
            throw new IllegalArgumentException("netty-benchmark.stream-writes must be positive, not " + streamed);
        }
        try {
            switch (mode) {
                case "serve" -> {
                    Channel echo = b.server(Echo::new);
                    Channel sink = b.streamServer();
                    serveJitTime();
                    System.out.printf("PORTS %d %d%n", ((InetSocketAddress) echo.localAddress()).getPort(),
                            ((InetSocketAddress) sink.localAddress()).getPort());
                    System.out.flush();
                    if (b.transport.equals("rdma")) {
                        // what this side's loops did, for a count per round trip from two run lengths
                        Runtime.getRuntime().addShutdownHook(new Thread(() -> System.out.println("COUNTERS " + LoopCounters.line())));
                    }
                    echo.closeFuture().sync(); // until the process is killed
                }
                case "client" -> {
                    InetSocketAddress echo = new InetSocketAddress(rest[1], Integer.parseInt(rest[2]));
                    InetSocketAddress sink = new InetSocketAddress(rest[1], Integer.parseInt(rest[3]));
                    b.pingPong(echo, 64, rounds);
                    b.pingPong(echo, 4096, rounds);
                    b.stream(sink, 65536, streamed);
                }
                case "stream-client" -> b.stream(new InetSocketAddress(rest[1], Integer.parseInt(rest[2])), 65536, streamed);
                case "echo-client" -> b.pingPong(new InetSocketAddress(rest[1], Integer.parseInt(rest[2])),
                        Integer.parseInt(rest[3]), Integer.parseInt(rest[4]));
                case "echo" -> {
                    b.pingPong(64, rounds);
                    b.pingPong(4096, rounds);
                }
                default -> {
                    b.pingPong(64, rounds);
                    b.pingPong(4096, rounds);
                    b.stream(65536, streamed);
                    b.grpc((int) (10_000 * scale), (int) (100_000 * scale));
                }
            }
        } finally {
            b.workers.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
            b.boss.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
        }
        System.exit(0);
    }
}
