package io.github.verbs4j.netty.grpc;

import io.github.verbs4j.netty.RdmaIoHandler;
import io.github.verbs4j.netty.RdmaServerSocketChannel;
import io.github.verbs4j.netty.RdmaSocketChannel;
import io.grpc.BindableService;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.util.concurrent.DefaultThreadFactory;

import java.io.IOException;
import java.net.InetSocketAddress;

/**
 * How an application puts gRPC-java on this transport: grpc-netty's builders, given the channel
 * classes and event loop groups of {@link RdmaIoHandler}; nothing else of gRPC changes.
 */
final class GrpcOverRdma {

    private GrpcOverRdma() {
    }

    static EventLoopGroup group(String name, int threads) {
        return new MultiThreadIoEventLoopGroup(threads, new DefaultThreadFactory(name, true),
                RdmaIoHandler.newFactory());
    }

    /** A server on the loopback address (softrdma's device), on a port the system picks. */
    static Server startServer(EventLoopGroup boss, EventLoopGroup worker, BindableService service)
            throws IOException {
        return startServer(boss, worker, service, new InetSocketAddress("127.0.0.1", 0));
    }

    /** A server on {@code address}: an RDMA device's IP address and an rdma_cm port. */
    static Server startServer(EventLoopGroup boss, EventLoopGroup worker, BindableService service,
            InetSocketAddress address) throws IOException {
        return NettyServerBuilder.forAddress(address)
                .channelType(RdmaServerSocketChannel.class)
                .bossEventLoopGroup(boss)
                .workerEventLoopGroup(worker)
                .addService(service)
                .build()
                .start();
    }

    static ManagedChannel channel(EventLoopGroup group, int port) {
        return channel(group, new InetSocketAddress("127.0.0.1", port));
    }

    static ManagedChannel channel(EventLoopGroup group, InetSocketAddress server) {
        return NettyChannelBuilder.forAddress(server)
                .channelType(RdmaSocketChannel.class)
                .eventLoopGroup(group)
                .usePlaintext()
                .build();
    }
}
