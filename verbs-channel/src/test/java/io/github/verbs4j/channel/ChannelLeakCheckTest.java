package io.github.verbs4j.channel;

import io.github.verbs4j.Context;
import io.github.verbs4j.test.SoftRdmaTest;
import org.junit.jupiter.api.Test;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.testkit.engine.EngineExecutionResults;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Event;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static io.github.verbs4j.channel.ChannelTest.T;
import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

/**
 * The harness's leak check sees a channel a test opened and left open, though the channel opens
 * its parts itself through rdma_cm (event channels, ids, and on the device librdmacm opened a
 * domain, a queue, regions, a queue pair): the test fails naming the channels, their groups and
 * server and the event channels, and the harness closes them with their own close. This class
 * is under the harness too, so its test also fails if anything the leaking test opened is still
 * open after it.
 */
@SoftRdmaTest
class ChannelLeakCheckTest {

    @SoftRdmaTest
    static class LeaksAChannel {
        static ChannelServer server;
        static Channel client;
        static Channel accepted;
        static Context device;
        static List<String> names;

        @Test
        void connectsSendsAndLeavesBothEndsOpen() throws Exception {
            server = ChannelServer.listen(Traffic.any(), ChannelOptions.defaults());
            try (ExecutorService ex = Executors.newSingleThreadExecutor()) {
                Future<Channel> a = ex.submit(() -> server.accept(T));
                client = Channel.connect(server.localAddress(), ChannelOptions.defaults(), T);
                accepted = a.get(T.toSeconds(), TimeUnit.SECONDS);
            }
            client.send(MemorySegment.ofArray(new byte[] {1, 2, 3}));
            try (Message m = accepted.receive(T)) {
                assertEquals(3, m.length());
            }
            device = client.cmId().context();
            names = List.of(client.toString(), accepted.toString(), server.toString(), client.group.toString(),
                    server.group().toString());
        }
    }

    @Test
    void aChannelLeftOpenIsReportedAndClosed() {
        EngineExecutionResults results = EngineTestKit.engine("junit-jupiter")
                .selectors(selectClass(LeaksAChannel.class)).execute();
        List<Event> failed = results.testEvents().failed().list();
        assertEquals(1, failed.size());
        String message = failed.getFirst().getPayload(TestExecutionResult.class).orElseThrow()
                .getThrowable().orElseThrow().getMessage();
        assertTrue(message.startsWith("connectsSendsAndLeavesBothEndsOpen() leaked "), message);
        assertTrue(message.contains(" (still open after it; close them, e.g. with try-with-resources): "), message);
        for (String name : LeaksAChannel.names) {
            assertTrue(message.contains(name), name + " in " + message);
        }
        assertTrue(message.contains("EventChannel[") && message.contains("CmId[TCP"), message);
        assertTrue(!message.contains("could not close"), message);

        Channel client = LeaksAChannel.client;
        Channel accepted = LeaksAChannel.accepted;
        assertAll(() -> assertReleased(client), () -> assertReleased(accepted),
                () -> assertTrue(client.group.isClosed(), "the client's group"),
                () -> assertTrue(LeaksAChannel.server.isClosed(), "the server"),
                () -> assertTrue(LeaksAChannel.server.group().isClosed(), "the server's group"));
        // nothing is left on the device librdmacm opened: its context closes only without dependents
        assertDoesNotThrow(LeaksAChannel.device::close);
    }

    /** The channel's id (and with it its queue pair) and its three regions are closed. */
    private static void assertReleased(Channel ch) {
        assertTrue(ch.isClosed(), ch + " closed");
        assertTrue(ch.cmId().isClosed(), "the id and its queue pair");
        assertTrue(ch.receiver.ring.isClosed(), "the ring");
        assertTrue(ch.words.isClosed(), "the word region");
        assertTrue(ch.sender.stage.isClosed(), "the staging buffer");
    }
}
