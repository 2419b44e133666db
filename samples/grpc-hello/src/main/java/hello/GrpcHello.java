package hello;

import io.github.verbs4j.netty.RdmaIoHandler;
import io.github.verbs4j.netty.RdmaServerSocketChannel;
import io.github.verbs4j.netty.RdmaSocketChannel;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ServerCalls;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

/**
 * A gRPC greeter, server and client, on RDMA. The service is plain gRPC (a method descriptor
 * with a string marshaller, so no code generation is needed); the three lines marked
 * {@code RDMA} are all that differs from the same program on TCP.
 */
public final class GrpcHello {

    /** Strings as UTF-8: a marshaller of the simplest kind. */
    static final MethodDescriptor.Marshaller<String> UTF8 = new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(String value) {
            return new ByteArrayInputStream(value.getBytes(StandardCharsets.UTF_8));
        }

        @Override
        public String parse(InputStream stream) {
            try {
                return new String(stream.readAllBytes(), StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    };

    static final MethodDescriptor<String, String> SAY_HELLO = MethodDescriptor.<String, String>newBuilder()
            .setType(MethodDescriptor.MethodType.UNARY)
            .setFullMethodName(MethodDescriptor.generateFullMethodName("hello.Greeter", "SayHello"))
            .setRequestMarshaller(UTF8)
            .setResponseMarshaller(UTF8)
            .build();

    private GrpcHello() {
    }

    public static void main(String[] args) throws Exception {
        // RDMA: event loops that poll the RDMA device (on TCP: new NioIoHandler.newFactory())
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, RdmaIoHandler.newFactory());

        ServerServiceDefinition greeter = ServerServiceDefinition.builder("hello.Greeter")
                .addMethod(SAY_HELLO, ServerCalls.asyncUnaryCall((name, reply) -> {
                    reply.onNext("Hello, " + name);
                    reply.onCompleted();
                }))
                .build();
        Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
                // RDMA: the server's channel type and event loops
                .channelType(RdmaServerSocketChannel.class).bossEventLoopGroup(group).workerEventLoopGroup(group)
                .addService(greeter)
                .build()
                .start();

        ManagedChannel channel = NettyChannelBuilder.forAddress(new InetSocketAddress("127.0.0.1", server.getPort()))
                // RDMA: the client's channel type and event loop
                .channelType(RdmaSocketChannel.class).eventLoopGroup(group)
                .usePlaintext()
                .build();
        try {
            for (String name : new String[] {"RDMA", "verbs4j", "Netty"}) {
                String answer = ClientCalls.blockingUnaryCall(channel, SAY_HELLO, io.grpc.CallOptions.DEFAULT
                        .withDeadlineAfter(30, TimeUnit.SECONDS), name);
                if (!answer.equals("Hello, " + name)) {
                    throw new AssertionError("asked for " + name + ", got '" + answer + "'");
                }
                System.out.println(answer);
            }
            System.out.println("grpc-hello: 3 calls answered over " + server.getListenSockets());
        } finally {
            channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }
}
