package io.github.verbs4j.channel;

import io.github.verbs4j.PeerLostException;
import io.github.verbs4j.WorkCompletionException;
import io.github.verbs4j.testsupport.PeerJvm;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import io.github.verbs4j.test.SoftRdmaExtension;
import io.github.verbs4j.test.SoftRdmaTest;
import org.junit.jupiter.api.Test;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Channels between processes ({@link ChannelPeer}): a stream under softrdma's packet faults,
 * and a peer killed with SIGKILL while senders wait. Full size:
 * {@code -Dverbs4j.channel.messages=1000000}.
 */
@SoftRdmaTest
class TwoProcessChannelTest {

    static final long WAIT_SECONDS = 120L * Traffic.SLOWDOWN;
    /** Drops, duplicates, reordering and delay on every packet of both processes. */
    static final String FAULTS = "seed=7,drop=0.02,dup=0.01,reorder=0.02,delay=0.01:1ms";

    private final List<Process> peers = new ArrayList<>();

    record Peer(Process process, BufferedReader in) {
        String expect(String prefix, long seconds) throws Exception {
            return PeerJvm.expect(in, prefix, Duration.ofSeconds(seconds));
        }
    }

    private Peer start(Map<String, String> env, String... args) throws Exception {
        ProcessBuilder pb = new ProcessBuilder(PeerJvm.command(List.of(), ChannelPeer.class, args))
                .redirectError(ProcessBuilder.Redirect.INHERIT);
        pb.environment().putAll(env);
        Process process = pb.start();
        peers.add(process);
        return new Peer(process, new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8)));
    }

    @AfterEach
    void stopPeers() throws InterruptedException {
        for (Process p : peers) {
            p.destroyForcibly();
            p.waitFor(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void mixedSizesUnderPacketFaultsArriveInOrderNoneLostOrDuplicated() throws Exception {
        faultStream(ChannelOptions.Notification.AUTO);
    }

    /** The same stream notified by SEND after plain WRITEs, the mode of transports without immediate data. */
    @Test
    void mixedSizesUnderPacketFaultsArriveInOrderNoneLostOrDuplicatedNotifiedBySend() throws Exception {
        faultStream(ChannelOptions.Notification.SEND);
    }

    private void faultStream(ChannelOptions.Notification mode) throws Exception {
        Assumptions.assumeTrue(SoftRdmaExtension.onSoftRdma(), "SOFTRDMA_FAULTS is softrdma's: the kernel's rxe/siw inject no faults");
        long n = Traffic.messages(3_000);
        Map<String, String> env = Map.of("SOFTRDMA_FAULTS", FAULTS);
        Peer server = start(env, "serve", Long.toString(n), "11", mode.name());
        int port = Integer.parseInt(server.expect("PORT", WAIT_SECONDS));
        Peer client = start(env, "send", Integer.toString(port), Long.toString(n), "11", mode.name());
        // retransmissions after drops take their time: the wait grows with the stream
        long streamSeconds = WAIT_SECONDS + n / 50 * Traffic.SLOWDOWN;
        assertEquals(Long.toString(n), client.expect("SENT", streamSeconds));
        assertEquals(Long.toString(n), server.expect("OK", WAIT_SECONDS));
        assertTrue(client.process().waitFor(WAIT_SECONDS, TimeUnit.SECONDS));
        assertEquals(0, client.process().exitValue());
        assertTrue(server.process().waitFor(WAIT_SECONDS, TimeUnit.SECONDS));
        assertEquals(0, server.process().exitValue());
    }

    @Test
    void peerKilledMidStreamFailsEveryPendingOperationPromptly() throws Exception {
        peerKilledMidStream(ChannelOptions.defaults());
    }

    /** The same with application polling: the blocked threads themselves notice the loss. */
    @Test
    void peerKilledMidStreamFailsEveryPendingOperationOfAnApplicationPolledChannel() throws Exception {
        peerKilledMidStream(ChannelOptions.defaults().withApplicationPolling(true));
    }

    /** The same with both sides notifying by SEND (no immediate data): the SENDs' errors and the CM fail it. */
    @Test
    void peerKilledMidStreamFailsEveryPendingOperationNotifiedBySend() throws Exception {
        peerKilledMidStream(ChannelOptions.defaults().withNotification(ChannelOptions.Notification.SEND));
    }

    private void peerKilledMidStream(ChannelOptions options) throws Exception {
        try (ChannelServer server = ChannelServer.listen(Traffic.any(), options);
             ExecutorService ex = Executors.newFixedThreadPool(4)) {
            Peer holder = start(Map.of(), "hold", Integer.toString(server.localAddress().getPort()),
                    options.notification().name());
            Channel ch = server.accept(Duration.ofSeconds(WAIT_SECONDS));
            assertNotNull(ch);
            List<Future<?>> pending = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                pending.add(ex.submit(() -> {
                    MemorySegment msg = MemorySegment.ofArray(new byte[900]);
                    while (true) {
                        ch.send(msg);
                    }
                }));
            }
            pending.add(ex.submit(() -> ch.receive(Duration.ofSeconds(WAIT_SECONDS))));
            holder.expect("HOLDING", WAIT_SECONDS);
            // the peer holds its ring: the senders are blocked on credits
            Thread.sleep(300);
            for (Future<?> f : pending) {
                assertFalse(f.isDone(), "an operation ended before the peer died");
            }
            long t0 = System.nanoTime();
            holder.process().destroyForcibly(); // SIGKILL
            for (Future<?> f : pending) {
                ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                        () -> f.get(10L * Traffic.SLOWDOWN, TimeUnit.SECONDS));
                PeerLostException lost = assertInstanceOf(PeerLostException.class, e.getCause(), () -> "got " + e.getCause());
                // the cause is what showed the loss (a work completion, or none for the CM's disconnect), never the failure again
                assertFalse(lost.getCause() instanceof PeerLostException, () -> "doubled: " + lost.getCause());
                if (lost.getCause() instanceof WorkCompletionException wc) {
                    assertEquals(wc.status(), lost.status(), lost.getMessage());
                } else if (lost.getCause() == null) {
                    assertNull(lost.status(), () -> "the CM's disconnect, yet a status: " + lost.getMessage());
                }
            }
            long ms = (System.nanoTime() - t0) / 1_000_000;
            System.out.println("every pending operation failed " + ms + " ms after SIGKILL");
            assertNotNull(ch.failure());
            try {
                ch.close();
            } catch (PeerLostException undelivered) {
                // staged messages that could not reach the dead peer: reported, resources released
            }
            assertTrue(ch.isClosed());
        }
    }
}
