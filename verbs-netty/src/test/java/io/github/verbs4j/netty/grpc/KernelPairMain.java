package io.github.verbs4j.netty.grpc;

import io.github.verbs4j.netty.RdmaIoHandler;
import io.github.verbs4j.netty.RdmaServerSocketChannel;
import io.github.verbs4j.netty.RdmaSocketChannel;
import io.grpc.Attributes;
import io.grpc.ConnectivityState;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.ServerTransportFilter;
import io.grpc.netty.NettyServerBuilder;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;

import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * The two ends of the check between two kernels (scripts/rxe-vm.d/netty-check): one end serves on
 * an RDMA device's address, the other, in another VM, connects to it, both on this transport.
 * <ul>
 *   <li>{@code echo-serve ADDR PORT}: echoes one connection until the client closes it; prints
 *       the bytes echoed.</li>
 *   <li>{@code echo-call ADDR PORT}: sends {@link #SIZES} ({@link #ROUNDS} times), one message at a
 *       time, and checks every byte of each echo before the next; prints the count.</li>
 *   <li>{@code grpc-serve ADDR PORT}: {@link EchoService} through grpc-netty until its first client
 *       transport ends.</li>
 *   <li>{@code grpc-call ADDR PORT}: {@link GrpcPeer#check} with {@link #GRPC_MESSAGES} unary calls and a
 *       bidi stream of as many messages, every answer checked.</li>
 * </ul>
 * A client retries a refused connect until {@link #CONNECT_WITHIN_SECONDS}: the other VM may
 * still be starting its JVM (about 50 times slower under emulation). Exits 0 only when all was
 * right; anything else ends in an exception and a non-zero status.
 */
public final class KernelPairMain {

    /** Message sizes: small, around a 1024-byte path MTU, larger than it, and 64 KiB (the slot size, and more). */
    static final int[] SIZES = {1, 7, 100, 1000, 1023, 1024, 1025, 3000, 4096, 9000,
        65536, 65536, 65535, 65536, 65536, 100_000};
    static final int ROUNDS = 2;
    static final int GRPC_MESSAGES = 20;
    private static final long CONNECT_WITHIN_SECONDS = 240;
    private static final long ECHO_WITHIN_SECONDS = 120;

    private KernelPairMain() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            throw new IllegalArgumentException("usage: echo-serve|echo-call|grpc-serve|grpc-call ADDR PORT");
        }
        InetSocketAddress address = new InetSocketAddress(args[1], Integer.parseInt(args[2]));
        switch (args[0]) {
            case "echo-serve" -> echoServe(address);
            case "echo-call" -> echoCall(address);
            case "grpc-serve" -> grpcServe(address);
            case "grpc-call" -> grpcCall(address);
            default -> throw new IllegalArgumentException("echo-serve|echo-call|grpc-serve|grpc-call: " + args[0]);
        }
    }

    /** Byte {@code offset} of message {@code index}: differs between messages and along each. */
    static byte expected(int index, int offset) {
        return (byte) (index * 31 + offset * 7 + (offset >>> 8));
    }

    private static EventLoopGroup group() {
        return new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
    }

    private static void echoServe(InetSocketAddress address) throws Exception {
        EventLoopGroup group = group();
        CompletableFuture<Long> done = new CompletableFuture<>();
        try {
            Channel server = new ServerBootstrap().group(group).channel(RdmaServerSocketChannel.class)
                    .childHandler(new ChannelInitializer<Channel>() {
                        @Override
                        protected void initChannel(Channel ch) {
                            ch.pipeline().addLast(new ChannelInboundHandlerAdapter() {
                                private long echoed;

                                @Override
                                public void channelRead(ChannelHandlerContext ctx, Object msg) {
                                    echoed += ((ByteBuf) msg).readableBytes();
                                    ctx.write(msg);
                                }

                                @Override
                                public void channelReadComplete(ChannelHandlerContext ctx) {
                                    ctx.flush();
                                }

                                @Override
                                public void channelInactive(ChannelHandlerContext ctx) {
                                    done.complete(echoed);
                                }

                                @Override
                                public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                                    done.completeExceptionally(cause);
                                    ctx.close();
                                }
                            });
                        }
                    }).bind(address).sync().channel();
            System.out.println("echo server: listening on " + server.localAddress());
            long echoed = done.get();
            System.out.println("echo server: echoed " + echoed + " bytes, the client closed");
            server.close().sync();
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }

    /** Compares what comes back with the message in flight; completes once all of it came. */
    static final class EchoChecker extends ChannelInboundHandlerAdapter {
        volatile CompletableFuture<Void> current = new CompletableFuture<>();
        private volatile int index;
        private volatile int length;
        private int received;

        void expect(int index, int length) {
            this.index = index;
            this.length = length;
            this.received = 0;
            this.current = new CompletableFuture<>();
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf buf = (ByteBuf) msg;
            try {
                int n = buf.readableBytes();
                if (received + n > length) {
                    current.completeExceptionally(new AssertionError("message " + index + " of " + length
                            + " bytes: " + (received + n) + " came back"));
                    return;
                }
                for (int i = 0; i < n; i++) {
                    byte got = buf.getByte(buf.readerIndex() + i);
                    if (got != expected(index, received + i)) {
                        current.completeExceptionally(new AssertionError("message " + index + " of " + length
                                + " bytes: byte " + (received + i) + " came back as " + got + ", sent "
                                + expected(index, received + i)));
                        return;
                    }
                }
                received += n;
                if (received == length) {
                    current.complete(null);
                }
            } finally {
                buf.release();
            }
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            current.completeExceptionally(new AssertionError("the connection closed during message " + index));
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            current.completeExceptionally(cause);
        }
    }

    private static void echoCall(InetSocketAddress server) throws Exception {
        EventLoopGroup group = group();
        EchoChecker checker = new EchoChecker();
        try {
            Bootstrap bootstrap = new Bootstrap().group(group).channel(RdmaSocketChannel.class).handler(checker);
            Channel channel = connect(server, () -> bootstrap.connect(server).sync().channel());
            // the wire AUTO picked from the device: WRITE_WITH_IMM on rxe (RoCE), SEND on siw (iWARP)
            System.out.println("wire mode: " + ((RdmaSocketChannel) channel).wireMode() + " to " + server);
            int messages = 0;
            long bytes = 0;
            int large = 0;
            for (int round = 0; round < ROUNDS; round++) {
                for (int size : SIZES) {
                    ByteBuf buf = channel.alloc().buffer(size);
                    for (int i = 0; i < size; i++) {
                        buf.writeByte(expected(messages, i));
                    }
                    checker.expect(messages, size);
                    channel.writeAndFlush(buf).sync();
                    try {
                        checker.current.get(ECHO_WITHIN_SECONDS, TimeUnit.SECONDS);
                    } catch (ExecutionException e) {
                        throw new AssertionError(e.getCause().getMessage(), e.getCause());
                    }
                    messages++;
                    bytes += size;
                    if (size >= 65536) {
                        large++;
                    }
                }
            }
            channel.close().sync();
            System.out.println("echo: " + messages + " messages, " + bytes + " bytes echoed from "
                    + server + ", every byte checked (" + large + " of 64 KiB or more)");
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }

    private interface Attempt<T> {
        T run() throws Exception;
    }

    /** Runs {@code attempt} until it is not refused, or {@link #CONNECT_WITHIN_SECONDS} passed. */
    private static <T> T connect(InetSocketAddress server, Attempt<T> attempt) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(CONNECT_WITHIN_SECONDS);
        // The refusals are counted, not printed: the check's runner restarts a client whose output
        // reads as a refused connection, and a JVM start is what costs most in the VM.
        for (int refused = 0; ; refused++) {
            try {
                T connected = attempt.run();
                System.out.println("connected to " + server + " after " + refused + " refused attempts");
                return connected;
            } catch (ConnectException e) {
                if (System.nanoTime() - deadline > 0) {
                    throw e;
                }
                Thread.sleep(500);
            }
        }
    }

    private static void grpcServe(InetSocketAddress address) throws Exception {
        EventLoopGroup boss = GrpcOverRdma.group("kernel-boss", 1);
        EventLoopGroup worker = GrpcOverRdma.group("kernel-worker", 1);
        CountDownLatch clientGone = new CountDownLatch(1);
        try {
            Server server = NettyServerBuilder.forAddress(address)
                    .channelType(RdmaServerSocketChannel.class)
                    .bossEventLoopGroup(boss)
                    .workerEventLoopGroup(worker)
                    .addService(new EchoService())
                    .addTransportFilter(new ServerTransportFilter() {
                        @Override
                        public void transportTerminated(Attributes attributes) {
                            clientGone.countDown();
                        }
                    })
                    .build()
                    .start();
            System.out.println("grpc server: listening on " + address);
            clientGone.await();
            System.out.println("grpc server: served a client until its connection closed");
            server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        } finally {
            worker.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
            boss.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }

    private static void grpcCall(InetSocketAddress server) throws Exception {
        EventLoopGroup group = GrpcOverRdma.group("kernel-client", 1);
        ManagedChannel channel = GrpcOverRdma.channel(group, server);
        try {
            // gRPC retries a refused connect itself, with backoff; wait until it is connected
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(CONNECT_WITHIN_SECONDS);
            ConnectivityState state;
            while ((state = channel.getState(true)) != ConnectivityState.READY) {
                if (System.nanoTime() - deadline > 0) {
                    throw new ConnectException("no gRPC connection to " + server + " within "
                            + CONNECT_WITHIN_SECONDS + " s (state " + state + ")");
                }
                Thread.sleep(200);
            }
            GrpcPeer.check(channel, GRPC_MESSAGES);
            System.out.println("grpc: " + GRPC_MESSAGES + " unary calls and a bidi stream of " + GRPC_MESSAGES
                    + " messages to " + server + ", every answer checked");
        } finally {
            channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }
}
