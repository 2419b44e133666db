package io.github.verbs4j.netty.grpc;

import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.stub.StreamObserver;
import io.grpc.testing.protobuf.SimpleRequest;
import io.grpc.testing.protobuf.SimpleResponse;
import io.grpc.testing.protobuf.SimpleServiceGrpc;
import io.netty.channel.EventLoopGroup;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * The other process of {@link RdmaGrpcTwoProcessTest}. {@code serve}: a gRPC server on this
 * transport; prints {@code PORT <port>} and serves until its stdin closes (or it is killed).
 * {@code call <port> <messages>}: a client that makes {@code messages} unary calls and streams
 * {@code messages} messages each way (bidi), checking every answer; prints {@code OK <messages>}.
 */
public final class GrpcPeer {

    private GrpcPeer() {
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "serve" -> serve();
            case "call" -> call(Integer.parseInt(args[1]), Integer.parseInt(args[2]));
            default -> throw new IllegalArgumentException("serve | call <port> <messages>: " + args[0]);
        }
    }

    private static void serve() throws Exception {
        EventLoopGroup boss = GrpcOverRdma.group("peer-boss", 1);
        EventLoopGroup worker = GrpcOverRdma.group("peer-worker", 1);
        Server server = GrpcOverRdma.startServer(boss, worker, new EchoService());
        System.out.println("PORT " + server.getPort());
        System.out.flush();
        while (System.in.read() >= 0) {
            // serve until the test closes our stdin
        }
        server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        worker.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        boss.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
    }

    private static void call(int port, int messages) throws Exception {
        EventLoopGroup group = GrpcOverRdma.group("peer-client", 1);
        ManagedChannel channel = GrpcOverRdma.channel(group, port);
        try {
            check(channel, messages);
            System.out.println("OK " + messages);
        } finally {
            channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }

    /** Unary calls and a bidi stream of {@code messages} each, every answer checked. */
    static void check(ManagedChannel channel, int messages) throws Exception {
        SimpleServiceGrpc.SimpleServiceBlockingStub blocking = SimpleServiceGrpc.newBlockingStub(channel);
        for (int i = 0; i < messages; i++) {
            String text = EchoService.message(i);
            String got = blocking.unaryRpc(SimpleRequest.newBuilder().setRequestMessage(text).build())
                    .getResponseMessage();
            if (!got.equals(EchoService.reply(text))) {
                throw new AssertionError("unary call " + i + " answered '" + got + "'");
            }
        }
        CompletableFuture<SimpleResponse> done = new CompletableFuture<>();
        List<String> received = new ArrayList<>();
        StreamObserver<SimpleRequest> requests = SimpleServiceGrpc.newStub(channel)
                .bidiStreamingRpc(RdmaGrpcTest.observer(done, received));
        for (int i = 0; i < messages; i++) {
            requests.onNext(SimpleRequest.newBuilder().setRequestMessage(EchoService.message(i)).build());
        }
        requests.onCompleted();
        done.get(300, TimeUnit.SECONDS);
        synchronized (received) {
            if (received.size() != messages) {
                throw new AssertionError("bidi stream: " + received.size() + " answers of " + messages);
            }
            for (int i = 0; i < messages; i++) {
                if (!received.get(i).equals(EchoService.reply(EchoService.message(i)))) {
                    throw new AssertionError("bidi answer " + i + " was '" + received.get(i) + "'");
                }
            }
        }
    }
}
