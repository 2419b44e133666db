package io.github.verbs4j.netty.grpc;

import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.grpc.testing.protobuf.SimpleRequest;
import io.grpc.testing.protobuf.SimpleResponse;
import io.grpc.testing.protobuf.SimpleServiceGrpc;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * grpc-testing-proto's {@code SimpleService}, written by hand against its prebuilt stubs:
 * <ul>
 *   <li>unary: answers {@link #reply(String)} of the request;</li>
 *   <li>client streaming: checks that request {@code i} is {@link #message(int)}, and answers the
 *       count, or fails with {@code DATA_LOSS} naming the first message out of place;</li>
 *   <li>server streaming: the request is {@code "<count>"} (or {@code "hang"}: nothing is sent
 *       until the call is cancelled); it streams {@code message(0..count-1)};</li>
 *   <li>bidi streaming: answers each request with {@link #reply(String)} in order.</li>
 * </ul>
 * A unary request {@code "sleep:<ms>"} is answered after that delay, for deadlines. Every call
 * the client cancels (or whose deadline passes) counts down {@link #cancelled}.
 */
final class EchoService extends SimpleServiceGrpc.SimpleServiceImplBase {

    /** Counted down once per call that the server saw cancelled. */
    volatile CountDownLatch cancelled = new CountDownLatch(1);

    /** Counted down when a {@code "hang"} server stream has reached the server. */
    volatile CountDownLatch hanging = new CountDownLatch(1);

    private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "echo-service-timer");
        t.setDaemon(true);
        return t;
    });

    static String message(int i) {
        // varying lengths (1..~300 bytes), each message distinct
        return i + ":" + "x".repeat(i % 293);
    }

    static String reply(String request) {
        return "re:" + request;
    }

    private void watchCancel(StreamObserver<SimpleResponse> responses) {
        ((ServerCallStreamObserver<SimpleResponse>) responses).setOnCancelHandler(() -> cancelled.countDown());
    }

    private static SimpleResponse response(String text) {
        return SimpleResponse.newBuilder().setResponseMessage(text).build();
    }

    @Override
    public void unaryRpc(SimpleRequest request, StreamObserver<SimpleResponse> responses) {
        watchCancel(responses);
        String text = request.getRequestMessage();
        if (text.startsWith("sleep:")) {
            timer.schedule(() -> {
                if (!((ServerCallStreamObserver<SimpleResponse>) responses).isCancelled()) {
                    responses.onNext(response(reply(text)));
                    responses.onCompleted();
                }
            }, Long.parseLong(text.substring(6)), TimeUnit.MILLISECONDS);
            return;
        }
        responses.onNext(response(reply(text)));
        responses.onCompleted();
    }

    @Override
    public StreamObserver<SimpleRequest> clientStreamingRpc(StreamObserver<SimpleResponse> responses) {
        watchCancel(responses);
        return new StreamObserver<>() {
            private int count;
            private boolean failed;

            @Override
            public void onNext(SimpleRequest request) {
                if (failed) {
                    return;
                }
                String expected = message(count);
                if (!expected.equals(request.getRequestMessage())) {
                    failed = true;
                    responses.onError(Status.DATA_LOSS
                            .withDescription("message " + count + " was '" + request.getRequestMessage() + "'")
                            .asRuntimeException());
                    return;
                }
                count++;
            }

            @Override
            public void onError(Throwable t) {
                // the client's cancellation; counted by the cancel handler
            }

            @Override
            public void onCompleted() {
                if (!failed) {
                    responses.onNext(response(Integer.toString(count)));
                    responses.onCompleted();
                }
            }
        };
    }

    @Override
    public void serverStreamingRpc(SimpleRequest request, StreamObserver<SimpleResponse> responses) {
        watchCancel(responses);
        if (request.getRequestMessage().equals("hang")) {
            hanging.countDown();
            return; // nothing until the client cancels
        }
        int count = Integer.parseInt(request.getRequestMessage());
        ServerCallStreamObserver<SimpleResponse> out = (ServerCallStreamObserver<SimpleResponse>) responses;
        // honour flow control: send while the transport is ready, resume when it is again
        int[] next = {0};
        Runnable drain = () -> {
            while (out.isReady() && next[0] < count && !out.isCancelled()) {
                out.onNext(response(message(next[0]++)));
            }
            if (next[0] == count) {
                next[0]++;
                out.onCompleted();
            }
        };
        out.setOnReadyHandler(drain);
        drain.run();
    }

    @Override
    public StreamObserver<SimpleRequest> bidiStreamingRpc(StreamObserver<SimpleResponse> responses) {
        watchCancel(responses);
        return new StreamObserver<>() {
            @Override
            public void onNext(SimpleRequest request) {
                responses.onNext(response(reply(request.getRequestMessage())));
            }

            @Override
            public void onError(Throwable t) {
                // the client's cancellation; counted by the cancel handler
            }

            @Override
            public void onCompleted() {
                responses.onCompleted();
            }
        };
    }
}
