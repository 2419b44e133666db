package io.github.verbs4j.netty.grpc;

import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.grpc.testing.protobuf.SimpleRequest;
import io.grpc.testing.protobuf.SimpleResponse;
import io.grpc.testing.protobuf.SimpleServiceGrpc;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * gRPC-java, unmodified (grpc-netty), over this transport in one process: the four kinds of call
 * with {@value #MESSAGES} messages each, every one checked; a deadline that passes; a
 * cancellation the server sees.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class RdmaGrpcTest {

    static final int MESSAGES = 10_000;

    private static EventLoopGroup boss;
    private static EventLoopGroup worker;
    private static EventLoopGroup clientGroup;
    private static EchoService service;
    private static Server server;
    private static ManagedChannel channel;

    @BeforeAll
    static void start() throws Exception {
        boss = GrpcOverRdma.group("grpc-rdma-boss", 1);
        worker = GrpcOverRdma.group("grpc-rdma-worker", 1);
        clientGroup = GrpcOverRdma.group("grpc-rdma-client", 1);
        service = new EchoService();
        server = GrpcOverRdma.startServer(boss, worker, service);
        channel = GrpcOverRdma.channel(clientGroup, server.getPort());
    }

    @AfterAll
    static void stop() throws Exception {
        if (channel != null) {
            channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        }
        if (server != null) {
            server.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        }
        for (EventLoopGroup g : new EventLoopGroup[] {clientGroup, worker, boss}) {
            if (g != null) {
                g.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
            }
        }
    }

    private static SimpleRequest request(String text) {
        return SimpleRequest.newBuilder().setRequestMessage(text).build();
    }

    @Test
    void unaryCallsEachAnswered() {
        SimpleServiceGrpc.SimpleServiceBlockingStub stub = SimpleServiceGrpc.newBlockingStub(channel);
        for (int i = 0; i < MESSAGES; i++) {
            String text = EchoService.message(i);
            assertEquals(EchoService.reply(text), stub.unaryRpc(request(text)).getResponseMessage(), "call " + i);
        }
    }

    @Test
    void clientStreamArrivesWholeAndInOrder() throws Exception {
        CompletableFuture<SimpleResponse> result = new CompletableFuture<>();
        StreamObserver<SimpleRequest> requests = SimpleServiceGrpc.newStub(channel)
                .clientStreamingRpc(observer(result, new ArrayList<>()));
        for (int i = 0; i < MESSAGES; i++) {
            requests.onNext(request(EchoService.message(i)));
        }
        requests.onCompleted();
        // the server checked each message against its index; it answers the count
        assertEquals(Integer.toString(MESSAGES), result.get(120, TimeUnit.SECONDS).getResponseMessage());
    }

    @Test
    void serverStreamArrivesWholeAndInOrder() {
        Iterator<SimpleResponse> it = SimpleServiceGrpc.newBlockingStub(channel)
                .serverStreamingRpc(request(Integer.toString(MESSAGES)));
        int i = 0;
        while (it.hasNext()) {
            assertEquals(EchoService.message(i), it.next().getResponseMessage(), "message " + i);
            i++;
        }
        assertEquals(MESSAGES, i);
    }

    @Test
    void bidiStreamEachAnsweredInOrder() throws Exception {
        CompletableFuture<SimpleResponse> done = new CompletableFuture<>();
        List<String> received = new ArrayList<>();
        StreamObserver<SimpleRequest> requests = SimpleServiceGrpc.newStub(channel)
                .bidiStreamingRpc(observer(done, received));
        for (int i = 0; i < MESSAGES; i++) {
            requests.onNext(request(EchoService.message(i)));
        }
        requests.onCompleted();
        done.get(120, TimeUnit.SECONDS);
        synchronized (received) {
            assertEquals(MESSAGES, received.size());
            for (int i = 0; i < MESSAGES; i++) {
                assertEquals(EchoService.reply(EchoService.message(i)), received.get(i), "message " + i);
            }
        }
    }

    @Test
    void deadlinePassesWithDeadlineExceededAndTheServerSeesTheCallCancelled() throws Exception {
        service.cancelled = new CountDownLatch(1);
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
                () -> SimpleServiceGrpc.newBlockingStub(channel)
                        .withDeadlineAfter(200, TimeUnit.MILLISECONDS)
                        .unaryRpc(request("sleep:10000")));
        assertEquals(Status.Code.DEADLINE_EXCEEDED, e.getStatus().getCode(), e::toString);
        assertTrue(service.cancelled.await(10, TimeUnit.SECONDS), "the server never saw the call end");
        // the connection outlives the call
        assertEquals(EchoService.reply("after"),
                SimpleServiceGrpc.newBlockingStub(channel).unaryRpc(request("after")).getResponseMessage());
    }

    @Test
    void clientCancellationReachesTheServer() throws Exception {
        service.cancelled = new CountDownLatch(1);
        CompletableFuture<SimpleResponse> done = new CompletableFuture<>();
        StreamObserver<SimpleRequest> requests = SimpleServiceGrpc.newStub(channel)
                .bidiStreamingRpc(observer(done, new ArrayList<>()));
        requests.onNext(request("one"));
        ((ClientCallStreamObserver<SimpleRequest>) requests).cancel("the test cancels", null);
        assertTrue(service.cancelled.await(10, TimeUnit.SECONDS), "the server never saw the cancellation");
        Throwable t = assertThrows(Exception.class, () -> done.get(10, TimeUnit.SECONDS)).getCause();
        assertEquals(Status.Code.CANCELLED, Status.fromThrowable(t).getCode(), String.valueOf(t));
        // a cancelled server stream too: the server learns it while it has nothing to send
        service.cancelled = new CountDownLatch(1);
        service.hanging = new CountDownLatch(1);
        CompletableFuture<SimpleResponse> hung = new CompletableFuture<>();
        io.grpc.Context.CancellableContext ctx = io.grpc.Context.current().withCancellation();
        ctx.run(() -> SimpleServiceGrpc.newStub(channel).serverStreamingRpc(request("hang"),
                observer(hung, new ArrayList<>())));
        // cancel once the server has the call (a call cancelled before it left never reaches it)
        assertTrue(service.hanging.await(10, TimeUnit.SECONDS), "the server stream never reached the server");
        assertFalse(hung.isDone());
        ctx.cancel(null);
        assertTrue(service.cancelled.await(10, TimeUnit.SECONDS), "the server never saw the cancellation");
    }

    /** Collects the responses' texts; completes {@code done} with the last response, or its error. */
    static StreamObserver<SimpleResponse> observer(CompletableFuture<SimpleResponse> done, List<String> into) {
        return new StreamObserver<>() {
            private SimpleResponse last;

            @Override
            public void onNext(SimpleResponse value) {
                last = value;
                synchronized (into) {
                    into.add(value.getResponseMessage());
                }
            }

            @Override
            public void onError(Throwable t) {
                done.completeExceptionally(t);
            }

            @Override
            public void onCompleted() {
                done.complete(last);
            }
        };
    }
}
