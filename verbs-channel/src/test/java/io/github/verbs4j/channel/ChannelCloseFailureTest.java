package io.github.verbs4j.channel;

import io.github.verbs4j.Access;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.PeerLostException;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.test.SoftRdmaTest;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static io.github.verbs4j.channel.ChannelTest.T;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The close sequences of {@link Channel}, {@link ChannelGroup} and {@link ChannelServer} when a
 * release fails: every other resource is released all the same, the first failure is thrown
 * (or suppressed on the exception that says messages were not delivered), none is lost, and a
 * second close does nothing.
 *
 * <p>The failure is a real one: the test allocates a memory region of its own on the group's
 * protection domain (reached through the public {@code cmId().queuePair().protectionDomain()}),
 * so the domain's close refuses, naming that region, as it would for an application that left
 * a region open. The exact message ("still in use by 1 object: " that region) also shows that
 * the channel's own regions and queue pairs on the domain were released before it. Closing
 * the test's region afterwards lets the domain close.
 */
@SoftRdmaTest
class ChannelCloseFailureTest {

    /** A channel that owns its group: a delivered close whose release fails throws that failure. */
    @Test
    void aReleaseFailureAfterADeliveredCloseIsThrownAndEverythingElseIsReleased() throws Exception {
        try (ChannelServer server = ChannelServer.listen(Traffic.any(), ChannelOptions.defaults());
             ExecutorService ex = Executors.newSingleThreadExecutor()) {
            Future<Channel> accepted = ex.submit(() -> server.accept(T));
            Channel client = Channel.connect(server.localAddress(), ChannelOptions.defaults(), T);
            Channel peer = accepted.get(T.toSeconds(), TimeUnit.SECONDS);
            byte[] bytes = {7, 1, 2, 3, 4, 5, 6, 7, 8};
            client.send(MemorySegment.ofArray(bytes));

            ProtectionDomain pd = client.cmId().queuePair().protectionDomain();
            MemoryRegion held = pd.allocate(64, Access.LOCAL_WRITE);
            IllegalStateException refused = assertThrows(IllegalStateException.class, client::close);
            assertEquals(stillInUse(pd, held), refused.getMessage());
            assertEquals(0, refused.getSuppressed().length, "one failure: " + refused);

            assertReleased(client);
            assertTrue(client.group.isClosed());
            assertFalse(pd.isClosed(), "the domain refused");
            // the close protocol ran before the release: the message, then the peer's close
            try (Message m = peer.receive(T)) {
                assertArrayEquals(bytes, m.segment().toArray(ValueLayout.JAVA_BYTE));
            }
            assertThrows(ChannelClosedException.class, () -> peer.receive(T));

            assertDoesNotThrow(client::close, "a second close does nothing");
            held.close();
            pd.close(); // nothing of the channel's is left on it
        }
    }

    /**
     * A channel that owns its group, with a message staged that the lost peer never got: the
     * "not delivered" exception is thrown, and the release failure is suppressed on it.
     */
    @Test
    void aReleaseFailureIsSuppressedOnTheNotDeliveredException() throws Exception {
        ChannelOptions oneWrite = ChannelOptions.defaults().withWritesInFlight(1);
        try (ChannelServer server = ChannelServer.listen(Traffic.any(), oneWrite);
             ExecutorService ex = Executors.newSingleThreadExecutor()) {
            Future<Channel> accepted = ex.submit(() -> server.accept(T));
            Channel client = Channel.connect(server.localAddress(), oneWrite, T);
            Channel peer = accepted.get(T.toSeconds(), TimeUnit.SECONDS);
            stageBehindAFailingWrite(client, peer);

            ProtectionDomain pd = client.cmId().queuePair().protectionDomain();
            MemoryRegion held = pd.allocate(64, Access.LOCAL_WRITE);
            PeerLostException undelivered = assertThrows(PeerLostException.class, client::close);
            assertTrue(undelivered.getMessage().contains("1 staged slots and 0 WRITEs were not delivered"),
                    undelivered.getMessage());
            assertSame(client.failure().getCause(), undelivered.getCause(), "the failed WRITE's completion");
            assertEquals(1, undelivered.getSuppressed().length, "the release failure, suppressed: " + undelivered);
            IllegalStateException refused = assertInstanceOf(IllegalStateException.class, undelivered.getSuppressed()[0]);
            assertEquals(stillInUse(pd, held), refused.getMessage());

            assertReleased(client);
            assertTrue(client.group.isClosed());
            assertDoesNotThrow(client::close, "a second close does nothing");
            held.close();
            pd.close();
        }
    }

    /**
     * A group with two channels that could not deliver and a domain that refuses: the first
     * channel's exception is thrown, the second's and the domain's suppressed on it, in the
     * order of the close; every channel, the polling thread and the rest are closed.
     */
    @Test
    void aGroupThrowsItsFirstFailureWithTheLaterOnesSuppressed() throws Exception {
        ChannelOptions oneWrite = ChannelOptions.defaults().withWritesInFlight(1);
        try (ChannelServer server = ChannelServer.listen(Traffic.any(), oneWrite);
             ExecutorService ex = Executors.newSingleThreadExecutor()) {
            ChannelGroup group = ChannelGroup.create(oneWrite);
            Channel[] clients = new Channel[2];
            for (int i = 0; i < clients.length; i++) {
                Future<Channel> accepted = ex.submit(() -> server.accept(T));
                clients[i] = group.connect(server.localAddress(), T);
                stageBehindAFailingWrite(clients[i], accepted.get(T.toSeconds(), TimeUnit.SECONDS));
            }
            Thread poller = group.pollingThread();
            assertNotNull(poller);
            ProtectionDomain pd = clients[0].cmId().queuePair().protectionDomain();
            MemoryRegion held = pd.allocate(64, Access.LOCAL_WRITE);

            PeerLostException first = assertThrows(PeerLostException.class, group::close);
            assertTrue(first.getMessage().contains("not delivered"), first.getMessage());
            assertSame(clients[0].failure().getCause(), first.getCause(), "the first channel's failure first");
            Throwable[] later = first.getSuppressed();
            assertEquals(2, later.length, "the second channel's and the domain's: " + first);
            PeerLostException second = assertInstanceOf(PeerLostException.class, later[0]);
            assertSame(clients[1].failure().getCause(), second.getCause());
            assertEquals(stillInUse(pd, held), assertInstanceOf(IllegalStateException.class, later[1]).getMessage());

            assertTrue(group.isClosed());
            assertEquals(0, group.channelCount());
            for (Channel c : clients) {
                assertReleased(c);
            }
            assertFalse(poller.isAlive(), "the polling thread stopped");
            assertDoesNotThrow(group::close, "a second close does nothing");
            held.close();
            pd.close();
        }
    }

    /** A server that owns its group: the group's failure is thrown, the listener is closed all the same. */
    @Test
    void aServerThrowsItsGroupsFailureAndStillClosesItsListener() throws Exception {
        ChannelServer server = ChannelServer.listen(Traffic.any(), ChannelOptions.defaults());
        try (ChannelGroup clientGroup = ChannelGroup.create(ChannelOptions.defaults());
             ExecutorService ex = Executors.newSingleThreadExecutor()) {
            Future<Channel> accepted = ex.submit(() -> server.accept(T));
            Channel client = clientGroup.connect(server.localAddress(), T);
            Channel peer = accepted.get(T.toSeconds(), TimeUnit.SECONDS);
            ProtectionDomain pd = peer.cmId().queuePair().protectionDomain();
            MemoryRegion held = pd.allocate(64, Access.LOCAL_WRITE);

            IllegalStateException refused = assertThrows(IllegalStateException.class, server::close);
            assertEquals(stillInUse(pd, held), refused.getMessage());
            assertTrue(server.isClosed());
            assertTrue(server.group().isClosed());
            assertReleased(peer);
            // the accepted channel closed cleanly before the domain refused: the client sees its close
            assertThrows(ChannelClosedException.class, () -> client.receive(T));
            // the listener is gone: a new connection to its port is refused
            assertThrows(RuntimeException.class, () -> clientGroup.connect(server.localAddress(), Duration.ofSeconds(5)));

            assertDoesNotThrow(server::close, "a second close does nothing");
            held.close();
            pd.close();
        }
    }

    /**
     * Leaves {@code client} with a message staged that will never be delivered: the peer's ring
     * is deregistered under it, the first message's WRITE fails (REMOTE_ACCESS_ERROR), and the
     * second message, staged while that WRITE is the one in flight (one allowed), stays staged.
     * Both sends run under the channel's lock, so the failure is handled only after both.
     */
    private static void stageBehindAFailingWrite(Channel client, Channel peer) throws Exception {
        peer.receiver.ring.close();
        synchronized (client) {
            client.send(MemorySegment.ofArray(new byte[] {1}));
            client.send(MemorySegment.ofArray(new byte[] {2}));
        }
        long deadline = System.nanoTime() + T.toNanos();
        while (client.failure() == null) {
            if (System.nanoTime() > deadline) {
                fail("the WRITE into the deregistered ring did not fail within " + T);
            }
            Thread.sleep(1);
        }
    }

    /** The channel's id (and with it its queue pair) and its three regions are closed. */
    private static void assertReleased(Channel ch) {
        assertTrue(ch.isClosed());
        assertTrue(ch.cmId().isClosed(), "the id and its queue pair");
        assertTrue(ch.receiver.ring.isClosed(), "the ring");
        assertTrue(ch.words.isClosed(), "the word region");
        assertTrue(ch.sender.stage.isClosed(), "the staging buffer");
    }

    /** The domain's refusal, naming the one region left on it. */
    private static String stillInUse(ProtectionDomain pd, MemoryRegion held) {
        return "cannot close " + pd + ": still in use by 1 object: " + held + "; close them first";
    }
}
