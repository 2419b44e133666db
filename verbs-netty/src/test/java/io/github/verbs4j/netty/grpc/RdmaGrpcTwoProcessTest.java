package io.github.verbs4j.netty.grpc;

import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.testing.protobuf.SimpleRequest;
import io.grpc.testing.protobuf.SimpleResponse;
import io.grpc.testing.protobuf.SimpleServiceGrpc;
import io.netty.channel.EventLoopGroup;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * gRPC over this transport between two JVMs ({@link GrpcPeer}): calls checked message by message,
 * with and without softrdma's packet faults in both processes; and a server process killed with
 * SIGKILL, whose client sees {@code UNAVAILABLE} within seconds.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class RdmaGrpcTwoProcessTest {

    /** Drops, duplicates, reordering and delay on every packet of both processes. */
    static final String FAULTS = "seed=11,drop=0.02,dup=0.01,reorder=0.02,delay=0.01:1ms";
    /**
     * How long a peer's answer or exit may take: a guard against a hang, not a timing claim. The
     * 40,000 verified calls of callsBetweenTwoProcesses took 84 s once with a VM busy on the other
     * core of a 2-core machine (about 40 s otherwise), so the guard leaves room for a slower host.
     */
    static final long WAIT_SECONDS = 300;

    private final List<Process> peers = new ArrayList<>();

    private record Peer(Process process, BufferedReader out) {
        String expect(String prefix) throws Exception {
            ExecutorService reader = Executors.newSingleThreadExecutor();
            try {
                // the peer's log lines may share its stdout: the line with the prefix is the answer
                Future<String> line = reader.submit(() -> {
                    String l;
                    while ((l = out.readLine()) != null && !l.startsWith(prefix)) {
                        System.out.println("peer: " + l);
                    }
                    return l;
                });
                String l = line.get(WAIT_SECONDS, TimeUnit.SECONDS);
                if (l == null) {
                    throw new AssertionError("expected '" + prefix + "...' from the peer, which ended its output");
                }
                return l.substring(prefix.length()).trim();
            } finally {
                reader.shutdownNow();
            }
        }
    }

    private Peer start(Map<String, String> env, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED"));
        for (String p : new String[] {"verbs4j.libibverbs", "verbs4j.librdmacm"}) {
            if (System.getProperty(p) != null) {
                cmd.add("-D" + p + "=" + System.getProperty(p));
            }
        }
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), GrpcPeer.class.getName()));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT);
        pb.environment().putAll(env);
        Process p = pb.start();
        peers.add(p);
        return new Peer(p, new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8)));
    }

    @AfterEach
    void stopPeers() throws InterruptedException {
        for (Process p : peers) {
            p.destroyForcibly();
            p.waitFor(10, TimeUnit.SECONDS);
        }
    }

    private void callsBetweenProcesses(Map<String, String> env, int messages) throws Exception {
        Peer server = start(env, "serve");
        String port = server.expect("PORT");
        Peer client = start(env, "call", port, Integer.toString(messages));
        assertEquals(Integer.toString(messages), client.expect("OK"));
        assertTrue(client.process().waitFor(WAIT_SECONDS, TimeUnit.SECONDS));
        assertEquals(0, client.process().exitValue());
        server.process().getOutputStream().close(); // the server's cue to shut down
        assertTrue(server.process().waitFor(WAIT_SECONDS, TimeUnit.SECONDS));
        assertEquals(0, server.process().exitValue());
    }

    @Test
    void callsBetweenTwoProcesses() throws Exception {
        callsBetweenProcesses(Map.of(), RdmaGrpcTest.MESSAGES);
    }

    @Test
    void callsBetweenTwoProcessesUnderPacketFaults() throws Exception {
        // retransmissions after drops take their time: a smaller count keeps the run short
        callsBetweenProcesses(Map.of("SOFTRDMA_FAULTS", FAULTS), 2_000);
    }

    @Test
    void killedServerProcessGivesUnavailableWithinSeconds() throws Exception {
        Peer server = start(Map.of(), "serve");
        int port = Integer.parseInt(server.expect("PORT"));
        EventLoopGroup group = GrpcOverRdma.group("kill-test-client", 1);
        ManagedChannel channel = GrpcOverRdma.channel(group, port);
        try {
            SimpleServiceGrpc.SimpleServiceBlockingStub stub = SimpleServiceGrpc.newBlockingStub(channel);
            assertEquals(EchoService.reply("alive"),
                    stub.unaryRpc(SimpleRequest.newBuilder().setRequestMessage("alive").build()).getResponseMessage());
            // a call in flight when the server dies: a server stream that sends nothing
            CompletableFuture<SimpleResponse> pending = new CompletableFuture<>();
            SimpleServiceGrpc.newStub(channel).serverStreamingRpc(
                    SimpleRequest.newBuilder().setRequestMessage("hang").build(),
                    RdmaGrpcTest.observer(pending, new ArrayList<>()));
            Thread.sleep(200);
            assertFalse(pending.isDone());
            long t0 = System.nanoTime();
            server.process().destroyForcibly(); // SIGKILL
            Throwable t = assertThrows(Exception.class, () -> pending.get(10, TimeUnit.SECONDS)).getCause();
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertEquals(Status.Code.UNAVAILABLE, Status.fromThrowable(t).getCode(), String.valueOf(t));
            System.out.println("the pending call failed UNAVAILABLE " + ms + " ms after SIGKILL");
            // and a new call finds no server
            StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
                    () -> stub.withDeadlineAfter(10, TimeUnit.SECONDS)
                            .unaryRpc(SimpleRequest.newBuilder().setRequestMessage("dead").build()));
            assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode(), e::toString);
        } finally {
            channel.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }
}
