package io.github.verbs4j;

import io.github.verbs4j.raw.VerbsConstants;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Inline sends from memory that no memory region covers ({@link SendRequest#inlineData}): the
 * provider copies the bytes at post time and ignores lkeys, so a plain arena segment is enough.
 */
class InlineDataTest {

    private final Random random = new Random(7);
    private Rig rig;

    @BeforeEach
    void connect() {
        rig = Rig.rc();
    }

    @AfterEach
    void close() {
        if (rig != null) { // null when Rig.rc() skipped the test
            rig.close();
        }
    }

    private MemorySegment randomSegment(Arena arena, int length) {
        byte[] data = new byte[length];
        random.nextBytes(data);
        return arena.allocate(length).copyFrom(MemorySegment.ofArray(data));
    }

    private static byte[] read(MemoryRegion mr, long offset, int length) {
        return mr.segment().asSlice(offset, length).toArray(ValueLayout.JAVA_BYTE);
    }

    /** Asserts that neither side saw a completion: nothing reached the device. */
    private void assertNothingPosted() {
        assertEquals(0, rig.cqA.poll(rig.wcs), "no send completion");
        assertEquals(0, rig.cqB.poll(rig.wcs), "no receive completion");
    }

    @Test
    void sendFromAnUnregisteredSegmentArrivesByteForByte() {
        rig.b.postRecv(ReceiveRequest.create().id(1).local(rig.mrB, 0, 64));
        byte[] expected;
        SendRequest wr = SendRequest.send().id(2).signaled();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment data = randomSegment(arena, 48);
            expected = data.toArray(ValueLayout.JAVA_BYTE);
            wr.inlineData(data);
            assertSame(data, wr.inlineData());
            assertTrue((wr.flags() & VerbsConstants.IBV_SEND_INLINE) != 0, "inlineData sets IBV_SEND_INLINE");
            rig.a.postSend(wr);
        } // the memory is freed right after the post: the bytes were copied by then
        Completion sent = rig.ok(rig.cqA);
        assertEquals(2, sent.wrId());
        assertEquals(WcOpcode.SEND, sent.opcode());
        Completion received = rig.ok(rig.cqB);
        assertEquals(1, received.wrId());
        assertEquals(48, received.byteLength());
        assertArrayEquals(expected, read(rig.mrB, 0, 48));
    }

    @Test
    void rdmaWriteWithImmediateFromAnUnregisteredSegment() {
        rig.mrB.segment().fill((byte) 0);
        rig.b.postRecv(ReceiveRequest.create().id(3).local(rig.mrB, 0, 8));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment data = randomSegment(arena, 64);
            byte[] expected = data.toArray(ValueLayout.JAVA_BYTE);
            rig.a.postSend(SendRequest.rdmaWriteWithImm(0x1234abcd).id(4).inlineData(data)
                    .remote(rig.mrB.remote(), 1000).signaled());
            // change the source after the post: what arrives is what was there at post time
            data.fill((byte) 0x55);
            rig.ok(rig.cqA);
            Completion wc = rig.ok(rig.cqB);
            assertEquals(WcOpcode.RECV_RDMA_WITH_IMM, wc.opcode());
            assertEquals(0x1234abcd, wc.immediate());
            assertArrayEquals(expected, read(rig.mrB, 1000, 64));
            assertArrayEquals(new byte[8], read(rig.mrB, 1064, 8), "nothing written past the 64 bytes");
        }
    }

    @Test
    void inlineAndRegisteredRequestsChainInOnePost() {
        byte[] registered = new byte[32];
        random.nextBytes(registered);
        MemorySegment.copy(registered, 0, rig.mrA.segment(), ValueLayout.JAVA_BYTE, 0, 32);
        rig.b.postRecv(ReceiveRequest.create().id(5).local(rig.mrB, 0, 64));
        rig.b.postRecv(ReceiveRequest.create().id(6).local(rig.mrB, 64, 64));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment data = randomSegment(arena, 17);
            byte[] inline = data.toArray(ValueLayout.JAVA_BYTE);
            SendRequest second = SendRequest.send().id(8).local(rig.mrA, 0, 32).signaled();
            SendRequest first = SendRequest.send().id(7).inlineData(data).signaled().next(second);
            rig.a.postSend(first);
            assertEquals(7, rig.ok(rig.cqA).wrId());
            assertEquals(8, rig.ok(rig.cqA).wrId());
            assertEquals(17, rig.ok(rig.cqB).byteLength());
            assertEquals(32, rig.ok(rig.cqB).byteLength());
            assertArrayEquals(inline, read(rig.mrB, 0, 17));
            assertArrayEquals(registered, read(rig.mrB, 64, 32));
        }
    }

    @Test
    void longerThanMaxInlineIsRefusedInJava() {
        int max = rig.a.capabilities().maxInlineData();
        assertTrue(max >= 64, "the rig asks for 64 inline bytes, got " + max);
        try (Arena arena = Arena.ofConfined()) {
            SendRequest wr = SendRequest.send().id(9).inlineData(arena.allocate(max + 1)).signaled();
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(wr));
            assertEquals("request 9 inlines " + (max + 1) + " bytes, " + rig.a + " takes at most " + max, e.getMessage());
            assertNothingPosted();
            // exactly the maximum goes through
            rig.b.postRecv(ReceiveRequest.create().id(10).local(rig.mrB, 0, max));
            MemorySegment full = randomSegment(arena, max);
            rig.a.postSend(wr.inlineData(full));
            rig.ok(rig.cqA);
            assertEquals(max, rig.ok(rig.cqB).byteLength());
            assertArrayEquals(full.toArray(ValueLayout.JAVA_BYTE), read(rig.mrB, 0, max));
        }
    }

    @Test
    void closedArenaIsRefusedAtPostNotACrash() {
        Arena arena = Arena.ofConfined();
        SendRequest wr = SendRequest.send().id(11).inlineData(randomSegment(arena, 16)).signaled();
        arena.close();
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> rig.a.postSend(wr));
        assertEquals("request 11: the arena of its inline data was closed", e.getMessage());
        assertNothingPosted();
        // and a segment already closed is refused when set
        IllegalStateException set = assertThrows(IllegalStateException.class,
                () -> SendRequest.send().inlineData(wr.inlineData()));
        assertEquals("the arena of the inline data is closed", set.getMessage());
        // the QP is untouched: a good request still goes through
        rig.b.postRecv(ReceiveRequest.create().id(12).local(rig.mrB, 0, 64));
        try (Arena live = Arena.ofConfined()) {
            MemorySegment data = randomSegment(live, 16);
            rig.a.postSend(wr.inlineData(data));
            rig.ok(rig.cqA);
            assertEquals(16, rig.ok(rig.cqB).byteLength());
            assertArrayEquals(data.toArray(ValueLayout.JAVA_BYTE), read(rig.mrB, 0, 16));
        }
    }

    @Test
    void misuseIsNamedBeforeTheDevice() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment data = randomSegment(arena, 8);
            IllegalArgumentException heap = assertThrows(IllegalArgumentException.class,
                    () -> SendRequest.send().inlineData(MemorySegment.ofArray(new byte[8])));
            assertTrue(heap.getMessage().startsWith("inline data must be a native segment"), heap.getMessage());

            SendRequest read = SendRequest.rdmaRead().id(13).inlineData(data).remote(rig.mrB.remote());
            IllegalArgumentException noRead = assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(read));
            assertTrue(noRead.getMessage().startsWith("RDMA_READ cannot carry inline data (request 13)"), noRead.getMessage());

            SendRequest notInline = SendRequest.send().id(14).inlineData(data).inline(false);
            IllegalArgumentException off = assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(notInline));
            assertTrue(off.getMessage().startsWith("request 14 carries unregistered inline data but inline(false)"),
                    off.getMessage());
            assertNothingPosted();

            // a registered buffer replaces the inline data, and the request is an ordinary one again
            SendRequest replaced = SendRequest.send().id(15).inlineData(data).local(rig.mrA, 0, 8).signaled();
            assertNull(replaced.inlineData());
            rig.mrA.segment().asSlice(0, 8).fill((byte) 0x5a);
            byte[] registered = read(rig.mrA, 0, 8);
            rig.b.postRecv(ReceiveRequest.create().id(16).local(rig.mrB, 0, 64));
            rig.a.postSend(replaced);
            assertEquals(15, rig.ok(rig.cqA).wrId());
            assertEquals(8, rig.ok(rig.cqB).byteLength());
            assertArrayEquals(registered, read(rig.mrB, 0, 8), "the registered buffer went out, not the inline data");
            // setting another entry drops the inline one: the request holds no entries until sgeCount says
            assertTrue(SendRequest.send().inlineData(data).sge(1, rig.mrA, 0, 8).toString().contains(", 0 SGEs"));
            IllegalStateException unset = assertThrows(IllegalStateException.class,
                    () -> SendRequest.send().inlineData(data).sge(1, rig.mrA, 0, 8).sgeCount(2));
            assertEquals("scatter/gather entry 0 is not set", unset.getMessage());
        }
        assertNull(rig.ctx.pollAsyncEvent(Duration.ZERO), "no async event from refused requests");
    }
}
