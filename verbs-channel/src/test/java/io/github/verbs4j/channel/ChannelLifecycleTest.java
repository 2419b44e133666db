package io.github.verbs4j.channel;

import io.github.verbs4j.PeerLostException;
import io.github.verbs4j.WcStatus;
import io.github.verbs4j.WorkCompletionException;
import io.github.verbs4j.test.SoftRdmaTest;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;

import static io.github.verbs4j.channel.ChannelTest.T;
import static io.github.verbs4j.channel.ChannelTest.pair;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The channel's owners on core's lifecycle model (closed from the moment close begins, misuse
 * an {@link IllegalStateException} naming the owner), how a failed work request surfaces, and
 * the byte order of {@link Message}'s getters.
 */
@SoftRdmaTest
class ChannelLifecycleTest {

    @Test
    void groupAndServerSayTheyAreClosedAndRefuseUseAfterClose() {
        ChannelGroup group = ChannelGroup.create(ChannelOptions.defaults());
        ChannelServer server = group.listen(Traffic.any());
        assertFalse(group.isClosed());
        assertFalse(server.isClosed());

        group.close(); // closes its servers too
        assertTrue(group.isClosed());
        assertTrue(server.isClosed());
        IllegalStateException accept = assertThrows(IllegalStateException.class, () -> server.accept(Duration.ofMillis(10)));
        assertEquals("ChannelServer[closed] is closed", accept.getMessage());
        IllegalStateException listen = assertThrows(IllegalStateException.class, () -> group.listen(Traffic.any()));
        assertEquals(group + " is closed", listen.getMessage());
        assertThrows(IllegalStateException.class, () -> group.connect(Traffic.any(), Duration.ofMillis(10)));
        group.close(); // idempotent
        server.close();
    }

    @Test
    void aServerOfItsOwnClosesItsGroup() {
        ChannelServer server = ChannelServer.listen(Traffic.any(), ChannelOptions.defaults());
        ChannelGroup group = server.group();
        server.close();
        assertTrue(server.isClosed());
        assertTrue(group.isClosed());
    }

    /**
     * The peer's ring is deregistered under it, so the next RDMA WRITE into it completes with a
     * remote access error: the sender's channel fails with a {@link PeerLostException} whose
     * cause is that {@link WorkCompletionException} itself, in the caller's thread and at every
     * later operation, the message not repeated down the chain.
     */
    @Test
    void aFailedWriteFailsTheChannelWithItsWorkCompletionAsTheCause() throws Exception {
        try (ChannelTest.Pair p = pair(ChannelOptions.defaults())) {
            p.accepted().receiver.ring.close();
            p.client().send(MemorySegment.ofArray(new byte[] {1, 2, 3})); // staged and posted

            PeerLostException lost = assertThrows(PeerLostException.class, () -> p.client().receive(T));
            WorkCompletionException wc = assertInstanceOf(WorkCompletionException.class, lost.getCause());
            assertEquals(WcStatus.REMOTE_ACCESS_ERROR, wc.status());
            assertEquals(WcStatus.REMOTE_ACCESS_ERROR, lost.status(), "the status that showed the loss");
            assertTrue(lost.getMessage().contains("REMOTE_ACCESS_ERROR on an RDMA WRITE"), lost.getMessage());
            assertFalse(lost.getMessage().contains(wc.getMessage()), lost.getMessage());
            assertSame(wc, p.client().failure().getCause(), "one work completion: the one that failed");

            PeerLostException again = assertThrows(PeerLostException.class,
                    () -> p.client().send(MemorySegment.ofArray(new byte[8])));
            assertSame(wc, again.getCause());
            assertEquals(WcStatus.REMOTE_ACCESS_ERROR, again.status());
        }
    }

    @Test
    void getIntAndGetLongReadLittleEndianAtAnyIndex() throws Exception {
        byte[] bytes = new byte[16];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) (0x10 + i * 0x11);
        }
        ByteBuffer le = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        try (ChannelTest.Pair p = pair(ChannelOptions.defaults())) {
            p.client().send(MemorySegment.ofArray(bytes));
            try (Message m = p.accepted().receive(T)) {
                assertEquals(le.getLong(0), m.getLong(0));
                assertEquals(le.getLong(3), m.getLong(3));
                assertEquals(le.getInt(1), m.getInt(1));
                assertEquals(le.getInt(12), m.getInt(12));
                assertEquals(0x7766554433221100L + 0x1010101010101010L, m.getLong(0), "bytes 10 21 32 ... read low first");
                assertThrows(IndexOutOfBoundsException.class, () -> m.getLong(9));
                assertThrows(IndexOutOfBoundsException.class, () -> m.getInt(-1));
            }
        }
    }
}
