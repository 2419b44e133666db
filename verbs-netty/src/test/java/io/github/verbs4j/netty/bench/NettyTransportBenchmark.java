package io.github.verbs4j.netty.bench;

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

import java.net.InetSocketAddress;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * One transport's numbers for scripts/netty-benchmark: a Netty echo ping-pong (one message in
 * flight; round-trip p50, p99), a one-way stream (the server answers one byte when all has
 * arrived; MB/s), gRPC unary calls (p50, p99) and a gRPC client stream (messages/s).
 * {@code rdma}: this transport over softrdma; {@code epoll}: Netty's epoll transport over TCP
 * loopback ({@code nio} where epoll cannot load). One line per measurement:
 * {@code RESULT <transport> <what> <value> <unit>}.
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
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ctx.write(msg);
        }

        @Override
        public void channelReadComplete(ChannelHandlerContext ctx) {
            ctx.flush();
        }
    }

    /** Counts bytes; answers one byte when {@code total} have arrived. */
    private static final class Sink extends ChannelInboundHandlerAdapter {
        private final long total;
        private long seen;

        Sink(long total) {
            this.total = total;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf b = (ByteBuf) msg;
            seen += b.readableBytes();
            b.release();
            if (seen == total) {
                ctx.writeAndFlush(ctx.alloc().buffer(1).writeByte(1));
            }
        }
    }

    private Channel server(ChannelInboundHandlerAdapter handler) throws InterruptedException {
        return new ServerBootstrap().group(boss, workers).channelFactory(serverChannels)
                .childHandler(new ChannelInitializer<>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(handler instanceof Echo ? new Echo() : handler);
                    }
                })
                .bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
    }

    private Channel client(InetSocketAddress to, ChannelInboundHandlerAdapter handler) throws InterruptedException {
        return new Bootstrap().group(workers).channelFactory(clientChannels)
                .option(ChannelOption.TCP_NODELAY, true)
                .handler(handler).connect(to).sync().channel();
    }

    void pingPong(int size, int rounds) throws Exception {
        Channel server = server(new Echo());
        long[] rtt = new long[rounds];
        CompletableFuture<Void> done = new CompletableFuture<>();
        byte[] payload = new byte[size];
        ChannelInboundHandlerAdapter driver = new ChannelInboundHandlerAdapter() {
            private int round = -1000; // warm-up rounds, not recorded
            private int got;
            private long t0;

            void send(ChannelHandlerContext ctx) {
                got = 0;
                t0 = System.nanoTime();
                ctx.writeAndFlush(ctx.alloc().directBuffer(size).writeBytes(payload));
            }

            @Override
            public void channelActive(ChannelHandlerContext ctx) {
                send(ctx);
            }

            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                ByteBuf b = (ByteBuf) msg;
                got += b.readableBytes();
                b.release();
                if (got < size) {
                    return;
                }
                if (round >= 0) {
                    rtt[round] = System.nanoTime() - t0;
                }
                if (++round == rounds) {
                    done.complete(null);
                } else {
                    send(ctx);
                }
            }
        };
        Channel c = client((InetSocketAddress) server.localAddress(), driver);
        done.get(600, TimeUnit.SECONDS);
        c.close().sync();
        server.close().sync();
        Arrays.sort(rtt);
        result("echo-" + size + "B-rtt-p50", rtt[rounds / 2] / 1e3, "us");
        result("echo-" + size + "B-rtt-p99", rtt[(int) (rounds * 0.99)] / 1e3, "us");
    }

    void stream(int size, int messages) throws Exception {
        long total = (long) size * messages;
        Channel server = server(new Sink(total));
        CompletableFuture<Void> acked = new CompletableFuture<>();
        Channel c = client((InetSocketAddress) server.localAddress(), new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                ((ByteBuf) msg).release();
                acked.complete(null);
            }
        });
        byte[] payload = new byte[size];
        long t0 = System.nanoTime();
        CompletableFuture<Void> written = new CompletableFuture<>();
        c.eventLoop().execute(new Runnable() {
            private int sent;

            @Override
            public void run() {
                // fill up to the high water mark, then continue when the channel drains
                while (sent < messages && c.isWritable()) {
                    c.write(c.alloc().directBuffer(size).writeBytes(payload));
                    sent++;
                }
                c.flush();
                if (sent < messages) {
                    c.eventLoop().schedule(this, 20, TimeUnit.MICROSECONDS);
                } else {
                    written.complete(null);
                }
            }
        });
        written.get(600, TimeUnit.SECONDS);
        acked.get(600, TimeUnit.SECONDS);
        double seconds = (System.nanoTime() - t0) / 1e9;
        c.close().sync();
        server.close().sync();
        result("stream-" + size + "B", total / seconds / 1e6, "MB/s");
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

    /** {@code <rdma|epoll|nio> [scale]}: scale multiplies every count (default 1). */
    public static void main(String[] args) throws Exception {
        double scale = args.length > 1 ? Double.parseDouble(args[1]) : 1;
        NettyTransportBenchmark b = new NettyTransportBenchmark(args[0]);
        try {
            b.pingPong(64, (int) (20_000 * scale));
            b.pingPong(4096, (int) (20_000 * scale));
            b.stream(65536, (int) (8_192 * scale));
            b.grpc((int) (10_000 * scale), (int) (100_000 * scale));
        } finally {
            b.workers.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
            b.boss.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
        }
        System.exit(0);
    }
}
