package io.github.verbs4j;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Every opcode between two RC queue pairs in one JVM, bytes compared. */
class DataPathTest {

    private final Random random = new Random(42);
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

    private byte[] fill(MemoryRegion mr, long offset, int length) {
        byte[] data = new byte[length];
        random.nextBytes(data);
        MemorySegment.copy(data, 0, mr.segment(), ValueLayout.JAVA_BYTE, offset, length);
        return data;
    }

    private static byte[] read(MemoryRegion mr, long offset, int length) {
        return mr.segment().asSlice(offset, length).toArray(ValueLayout.JAVA_BYTE);
    }

    @Test
    void send() {
        byte[] data = fill(rig.mrA, 0, 4000);
        rig.b.postRecv(ReceiveRequest.create().id(11).local(rig.mrB, 100, 5000));
        rig.a.postSend(SendRequest.send().id(12).local(rig.mrA, 0, 4000).signaled());
        Completion s = rig.ok(rig.cqA);
        assertEquals(12, s.wrId());
        assertEquals(WcOpcode.SEND, s.opcode());
        assertEquals(rig.a.qpNumber(), s.qpNumber());
        Completion r = rig.ok(rig.cqB);
        assertEquals(11, r.wrId());
        assertEquals(WcOpcode.RECV, r.opcode());
        assertEquals(4000, r.byteLength());
        assertFalse(r.hasImmediate());
        assertEquals(rig.b.qpNumber(), r.qpNumber());
        assertArrayEquals(data, read(rig.mrB, 100, 4000));
    }

    @Test
    void sendWithImmediate() {
        byte[] data = fill(rig.mrA, 0, 32);
        rig.b.postRecv(ReceiveRequest.create().id(1).local(rig.mrB, 0, 64));
        rig.a.postSend(SendRequest.sendWithImm(0xCAFEF00D).id(2).local(rig.mrA, 0, 32).signaled());
        rig.ok(rig.cqA);
        Completion r = rig.ok(rig.cqB);
        assertEquals(WcOpcode.RECV, r.opcode());
        assertTrue(r.hasImmediate());
        assertEquals(0xCAFEF00D, r.immediate());
        assertEquals(32, r.byteLength());
        assertArrayEquals(data, read(rig.mrB, 0, 32));
    }

    @Test
    void rdmaWrite() {
        byte[] data = fill(rig.mrA, 512, 10_000);
        rig.a.postSend(SendRequest.rdmaWrite().id(3).local(rig.mrA, 512, 10_000)
                .remote(rig.mrB.remote(), 1024).signaled());
        Completion s = rig.ok(rig.cqA);
        assertEquals(WcOpcode.RDMA_WRITE, s.opcode());
        assertEquals(3, s.wrId());
        assertArrayEquals(data, read(rig.mrB, 1024, 10_000));
        // the bytes around the target are untouched
        assertArrayEquals(new byte[1024], read(rig.mrB, 0, 1024));
        assertEquals(0, rig.cqB.poll(rig.wcs), "a plain WRITE completes nothing at the target");
    }

    @Test
    void rdmaWriteWithImmediate() {
        byte[] data = fill(rig.mrA, 0, 300);
        rig.b.postRecv(ReceiveRequest.create().id(21).local(rig.mrB, 60_000, 16));
        rig.a.postSend(SendRequest.rdmaWriteWithImm(0x01020304).id(22).local(rig.mrA, 0, 300)
                .remote(rig.mrB.remote(), 4096).signaled());
        assertEquals(WcOpcode.RDMA_WRITE, rig.ok(rig.cqA).opcode());
        Completion r = rig.ok(rig.cqB);
        assertEquals(21, r.wrId());
        assertEquals(WcOpcode.RECV_RDMA_WITH_IMM, r.opcode());
        assertTrue(r.hasImmediate());
        assertEquals(0x01020304, r.immediate());
        assertEquals(300, r.byteLength());
        assertArrayEquals(data, read(rig.mrB, 4096, 300));
    }

    @Test
    void rdmaRead() {
        byte[] data = fill(rig.mrB, 2048, 20_000);
        rig.a.postSend(SendRequest.rdmaRead().id(31).local(rig.mrA, 8, 20_000)
                .remote(rig.mrB.remote(), 2048).signaled());
        Completion s = rig.ok(rig.cqA);
        assertEquals(WcOpcode.RDMA_READ, s.opcode());
        assertEquals(20_000, s.byteLength());
        assertArrayEquals(data, read(rig.mrA, 8, 20_000));
    }

    @Test
    void fetchAndAdd() {
        rig.mrB.segment().set(ValueLayout.JAVA_LONG, 64, 1_000_000_000_000L);
        rig.a.postSend(SendRequest.fetchAndAdd(5).id(41).local(rig.mrA, 16, 8).remote(rig.mrB.remote(), 64).signaled());
        Completion s = rig.ok(rig.cqA);
        assertEquals(WcOpcode.ATOMIC_FETCH_AND_ADD, s.opcode());
        assertEquals(1_000_000_000_000L, rig.mrA.segment().get(ValueLayout.JAVA_LONG, 16), "old value fetched");
        assertEquals(1_000_000_000_005L, rig.mrB.segment().get(ValueLayout.JAVA_LONG, 64), "value added");
    }

    @Test
    void compareAndSwap() {
        rig.mrB.segment().set(ValueLayout.JAVA_LONG, 0, 77L);
        SendRequest cas = SendRequest.compareAndSwap(77, -1L).id(51).local(rig.mrA, 0, 8).remote(rig.mrB.remote()).signaled();
        rig.a.postSend(cas);
        assertEquals(WcOpcode.ATOMIC_CMP_AND_SWP, rig.ok(rig.cqA).opcode());
        assertEquals(77L, rig.mrA.segment().get(ValueLayout.JAVA_LONG, 0));
        assertEquals(-1L, rig.mrB.segment().get(ValueLayout.JAVA_LONG, 0), "swapped: compare matched");

        // compare no longer matches: nothing changes remotely, the current value comes back
        rig.a.postSend(cas.id(52).compareAdd(77).swap(5));
        rig.ok(rig.cqA);
        assertEquals(-1L, rig.mrA.segment().get(ValueLayout.JAVA_LONG, 0));
        assertEquals(-1L, rig.mrB.segment().get(ValueLayout.JAVA_LONG, 0), "not swapped: compare differed");
    }

    @Test
    void inlineSend() {
        byte[] data = fill(rig.mrA, 0, 48);
        rig.b.postRecv(ReceiveRequest.create().id(61).local(rig.mrB, 0, 64));
        SendRequest wr = SendRequest.send().id(62).local(rig.mrA, 0, 48).inline(true).signaled();
        rig.a.postSend(wr);
        // inline data were copied at post time: changing the buffer now must not change what arrives
        rig.mrA.segment().asSlice(0, 48).fill((byte) 0);
        rig.ok(rig.cqA);
        assertEquals(48, rig.ok(rig.cqB).byteLength());
        assertArrayEquals(data, read(rig.mrB, 0, 48));
    }

    @Test
    void gatherAndScatterWithSeveralEntries() {
        byte[] p1 = fill(rig.mrA, 0, 100);
        byte[] p2 = fill(rig.mrA, 1000, 200);
        byte[] p3 = fill(rig.mrA, 5000, 300);
        // receive into two pieces: 250 bytes then the rest
        rig.b.postRecv(ReceiveRequest.create().id(71).sge(0, rig.mrB, 0, 250).sge(1, rig.mrB, 8000, 1000).sgeCount(2));
        rig.a.postSend(SendRequest.send().id(72).sge(0, rig.mrA, 0, 100).sge(1, rig.mrA, 1000, 200)
                .sge(2, rig.mrA, 5000, 300).sgeCount(3).signaled());
        rig.ok(rig.cqA);
        assertEquals(600, rig.ok(rig.cqB).byteLength());
        byte[] all = new byte[600];
        System.arraycopy(p1, 0, all, 0, 100);
        System.arraycopy(p2, 0, all, 100, 200);
        System.arraycopy(p3, 0, all, 300, 300);
        byte[] got = new byte[600];
        System.arraycopy(read(rig.mrB, 0, 250), 0, got, 0, 250);
        System.arraycopy(read(rig.mrB, 8000, 350), 0, got, 250, 350);
        assertArrayEquals(all, got);
    }

    @Test
    void chainsPostWithOneCall() {
        byte[] d1 = fill(rig.mrA, 0, 64);
        byte[] d2 = fill(rig.mrA, 64, 64);
        byte[] d3 = fill(rig.mrA, 128, 64);
        ReceiveRequest r1 = ReceiveRequest.create().id(1).local(rig.mrB, 0, 64);
        ReceiveRequest r2 = ReceiveRequest.create().id(2).local(rig.mrB, 64, 64);
        r1.next(r2);
        rig.b.postRecv(r1);
        SendRequest w = SendRequest.rdmaWrite().id(10).local(rig.mrA, 128, 64).remote(rig.mrB.remote(), 4096);
        SendRequest s1 = SendRequest.send().id(11).local(rig.mrA, 0, 64);
        SendRequest s2 = SendRequest.send().id(12).local(rig.mrA, 64, 64).signaled();
        w.next(s1);
        s1.next(s2);
        rig.a.postSend(w);
        // only the last request is signaled: one send completion for the chain
        assertEquals(12, rig.ok(rig.cqA).wrId());
        assertEquals(1, rig.ok(rig.cqB).wrId());
        assertEquals(2, rig.ok(rig.cqB).wrId());
        assertArrayEquals(d1, read(rig.mrB, 0, 64));
        assertArrayEquals(d2, read(rig.mrB, 64, 64));
        assertArrayEquals(d3, read(rig.mrB, 4096, 64));
        assertEquals(0, rig.cqA.poll(rig.wcs), "unsignaled requests complete silently");
    }

    @Test
    void reusedRequestPostsManyTimes() {
        SendRequest wr = SendRequest.rdmaWrite().local(rig.mrA, 0, 8).remote(rig.mrB.remote()).signaled();
        for (long i = 0; i < 200; i++) {
            rig.mrA.segment().set(ValueLayout.JAVA_LONG, 0, i * 31);
            rig.a.postSend(wr.id(i));
            assertEquals(i, rig.ok(rig.cqA).wrId());
            assertEquals(i * 31, rig.mrB.segment().get(ValueLayout.JAVA_LONG, 0));
        }
    }

    @Test
    void batchPollReturnsSeveralCompletions() {
        for (int i = 0; i < 8; i++) {
            rig.b.postRecv(ReceiveRequest.create().id(100 + i).local(rig.mrB, i * 16L, 16));
        }
        for (int i = 0; i < 8; i++) {
            rig.mrA.segment().set(ValueLayout.JAVA_INT, i * 16L, i);
            rig.a.postSend(SendRequest.send().id(i).local(rig.mrA, i * 16L, 4).signaled());
        }
        int sends = 0;
        int recvs = 0;
        long deadline = System.nanoTime() + 5_000_000_000L;
        while ((sends < 8 || recvs < 8) && System.nanoTime() < deadline) {
            int n = rig.cqA.poll(rig.wcs);
            for (int k = 0; k < n; k++) {
                assertTrue(rig.wcs.get(k).ok());
                assertEquals(sends++, rig.wcs.get(k).wrId(), "send completions in posting order");
            }
            n = rig.cqB.poll(rig.wcs);
            for (int k = 0; k < n; k++) {
                assertEquals(100 + recvs++, rig.wcs.get(k).wrId(), "receives consumed in posting order");
            }
        }
        assertEquals(8, sends);
        assertEquals(8, recvs);
        for (int i = 0; i < 8; i++) {
            assertEquals(i, rig.mrB.segment().get(ValueLayout.JAVA_INT, i * 16L));
        }
    }
}
