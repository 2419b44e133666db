package io.github.verbs4j;

import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** UC, UD with a GRH, and shared receive queues, bytes compared. */
class TransportsTest {

    private static final int GRH_BYTES = 40;
    private final Random random = new Random(7);

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
    void ucSendAndWrite() {
        try (Rig rig = Rig.create(QpType.UC, ConnectOptions.defaults(), Access.LOCAL_WRITE, Access.REMOTE_WRITE)) {
            byte[] msg = fill(rig.mrA, 0, 1000);
            rig.b.postRecv(ReceiveRequest.create().id(1).local(rig.mrB, 0, 1000));
            rig.a.postSend(SendRequest.send().id(2).local(rig.mrA, 0, 1000).signaled());
            rig.ok(rig.cqA);
            assertEquals(1000, rig.ok(rig.cqB).byteLength());
            assertArrayEquals(msg, read(rig.mrB, 0, 1000));

            byte[] data = fill(rig.mrA, 2000, 3000);
            rig.b.postRecv(ReceiveRequest.create().id(3).local(rig.mrB, 0, 8));
            rig.a.postSend(SendRequest.rdmaWriteWithImm(99).id(4).local(rig.mrA, 2000, 3000)
                    .remote(rig.mrB.remote(), 10_000).signaled());
            rig.ok(rig.cqA);
            Completion r = rig.ok(rig.cqB);
            assertEquals(WcOpcode.RECV_RDMA_WITH_IMM, r.opcode());
            assertEquals(99, r.immediate());
            assertArrayEquals(data, read(rig.mrB, 10_000, 3000));
        }
    }

    @Test
    void udSendWithGrh() {
        try (Rig rig = Rig.create(QpType.UD, ConnectOptions.defaults(), Access.LOCAL_WRITE)) {
            Endpoint eb = rig.b.endpoint(1, 1);
            Endpoint ea = rig.a.endpoint(1, 1);
            try (AddressHandle ah = rig.pd.createAh(AddressVector.to(eb).port(1).sgidIndex(1))) {
                byte[] msg = fill(rig.mrA, 0, 512);
                rig.b.postRecv(ReceiveRequest.create().id(5).local(rig.mrB, 0, GRH_BYTES + 1024));
                rig.a.postSend(SendRequest.sendWithImm(0x5151).id(6).local(rig.mrA, 0, 512)
                        .ud(ah, eb.qpn(), ConnectOptions.DEFAULT_QKEY).signaled());
                assertEquals(6, rig.ok(rig.cqA).wrId());
                Completion r = rig.ok(rig.cqB);
                assertEquals(5, r.wrId());
                assertTrue(r.hasGrh(), "a UD receive over RoCE carries a GRH");
                assertEquals(GRH_BYTES + 512, r.byteLength());
                assertEquals(rig.a.qpNumber(), r.sourceQp());
                assertEquals(0x5151, r.immediate());
                assertArrayEquals(msg, read(rig.mrB, GRH_BYTES, 512));
                byte[] senderGid = ea.gid().bytes();
                if (ea.gid().isIpv4Mapped()) {
                    // RoCE v2 over IPv4 (as rxe): the 40-byte area holds an IPv4 header in its last 20 bytes
                    assertEquals(0x45, read(rig.mrB, 20, 1)[0] & 0xff, "IPv4 header, version 4, IHL 5");
                    assertArrayEquals(Arrays.copyOfRange(senderGid, 12, 16), read(rig.mrB, 20 + 12, 4),
                            "IPv4 source address is the sender's");
                } else {
                    assertArrayEquals(senderGid, read(rig.mrB, 8, 16), "GRH source GID is the sender's");
                }
            }
        }
    }

    @Test
    void udReplyThroughAnAddressHandleMadeFromTheCompletion() {
        try (Rig rig = Rig.create(QpType.UD, ConnectOptions.defaults(), Access.LOCAL_WRITE)) {
            Endpoint eb = rig.b.endpoint(1, 1);
            try (AddressHandle toB = rig.pd.createAh(AddressVector.to(eb).port(1).sgidIndex(1))) {
                rig.b.postRecv(ReceiveRequest.create().id(1).local(rig.mrB, 0, GRH_BYTES + 256));
                rig.a.postRecv(ReceiveRequest.create().id(2).local(rig.mrA, 8192, GRH_BYTES + 256));
                fill(rig.mrA, 0, 100);
                rig.a.postSend(SendRequest.send().id(3).local(rig.mrA, 0, 100)
                        .ud(toB, eb.qpn(), ConnectOptions.DEFAULT_QKEY).signaled());
                rig.ok(rig.cqA);
                Completion request = rig.ok(rig.cqB);
                int sender = request.sourceQp();
                assertEquals(rig.a.qpNumber(), sender);
                // the server knows nothing about the client but this completion and its GRH
                try (AddressHandle back = rig.pd.createAhFromCompletion(request, rig.mrB.segment().asSlice(0, GRH_BYTES), 1)) {
                    byte[] reply = fill(rig.mrB, 4096, 64);
                    rig.b.postSend(SendRequest.send().id(4).local(rig.mrB, 4096, 64)
                            .ud(back, sender, ConnectOptions.DEFAULT_QKEY).signaled());
                    assertEquals(4, rig.ok(rig.cqB).wrId());
                    Completion got = rig.ok(rig.cqA);
                    assertEquals(2, got.wrId());
                    assertEquals(GRH_BYTES + 64, got.byteLength());
                    assertEquals(rig.b.qpNumber(), got.sourceQp());
                    assertArrayEquals(reply, read(rig.mrA, 8192 + GRH_BYTES, 64));
                }
            }
        }
    }

    @Test
    void udWithAWrongQkeyIsDropped() {
        try (Rig rig = Rig.create(QpType.UD, ConnectOptions.defaults(), Access.LOCAL_WRITE)) {
            Endpoint eb = rig.b.endpoint(1, 1);
            try (AddressHandle ah = rig.pd.createAh(AddressVector.to(eb).port(1).sgidIndex(1))) {
                rig.b.postRecv(ReceiveRequest.create().id(5).local(rig.mrB, 0, GRH_BYTES + 64));
                rig.a.postSend(SendRequest.send().id(6).local(rig.mrA, 0, 8).ud(ah, eb.qpn(), 0x2222).signaled());
                assertTrue(rig.ok(rig.cqA).ok(), "UD sends complete locally whatever happens remotely");
                Completions wcs = new Completions(1);
                long deadline = System.nanoTime() + 200_000_000L;
                while (System.nanoTime() < deadline) {
                    assertEquals(0, rig.cqB.poll(wcs), "a datagram with the wrong Q_Key is silently dropped");
                }
            }
        }
    }

    @Test
    void sharedReceiveQueueFeedsTwoQueuePairs() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd();
             CompletionQueue sendCq = ctx.createCq(32); CompletionQueue recvCq = ctx.createCq(32);
             SharedReceiveQueue srq = pd.createSrq(16, 2);
             MemoryRegion src = pd.allocate(8192); MemoryRegion dst = pd.allocate(8192)) {
            Rig.assumeHandConnect(ctx);
            QueuePair s1 = pd.queuePair(QpType.RC).cq(sendCq).build();
            QueuePair s2 = pd.queuePair(QpType.RC).cq(sendCq).build();
            QueuePair r1 = pd.queuePair(QpType.RC).sendCq(sendCq).recvCq(recvCq).srq(srq).build();
            QueuePair r2 = pd.queuePair(QpType.RC).sendCq(sendCq).recvCq(recvCq).srq(srq).build();
            try {
                s1.connect(r1.endpoint());
                r1.connect(s1.endpoint());
                s2.connect(r2.endpoint());
                r2.connect(s2.endpoint());
                IllegalStateException notHere = assertThrows(IllegalStateException.class,
                        () -> r1.postRecv(ReceiveRequest.create().local(dst, 0, 8)));
                assertTrue(notHere.getMessage().contains("post receives there"), notHere.getMessage());

                ReceiveRequest rr = ReceiveRequest.create();
                for (int i = 0; i < 4; i++) {
                    srq.postRecv(rr.id(i).local(dst, i * 1024L, 1024));
                }
                byte[] m1 = fill(src, 0, 700);
                byte[] m2 = fill(src, 1024, 900);
                s1.postSend(SendRequest.send().id(1).local(src, 0, 700).signaled());
                s2.postSend(SendRequest.send().id(2).local(src, 1024, 900).signaled());
                Completions wcs = new Completions(4);
                int got = 0;
                int[] lengthByQp = new int[2];
                long[] idByQp = new long[2];
                long deadline = System.nanoTime() + 5_000_000_000L;
                while (got < 2 && System.nanoTime() < deadline) {
                    int n = recvCq.poll(wcs);
                    for (int k = 0; k < n; k++) {
                        Completion wc = wcs.get(k);
                        assertTrue(wc.ok(), wc::toString);
                        int which = wc.qpNumber() == r1.qpNumber() ? 0 : 1;
                        lengthByQp[which] = wc.byteLength();
                        idByQp[which] = wc.wrId();
                        got++;
                    }
                }
                assertEquals(2, got);
                assertEquals(700, lengthByQp[0]);
                assertEquals(900, lengthByQp[1]);
                assertArrayEquals(m1, read(dst, idByQp[0] * 1024, 700));
                assertArrayEquals(m2, read(dst, idByQp[1] * 1024, 900));
                assertTrue(Arrays.equals(new long[] {0, 1}, idByQp) || Arrays.equals(new long[] {1, 0}, idByQp),
                        "the first two SRQ receives were consumed: " + Arrays.toString(idByQp));

                SharedReceiveQueue.Attributes attrs = srq.query();
                assertTrue(attrs.maxWr() >= 16, attrs::toString);
                assertTrue(attrs.maxSge() >= 2, attrs::toString);
                srq.limit(1);
                assertEquals(1, srq.query().limit());
            } finally {
                r2.close();
                r1.close();
                s2.close();
                s1.close();
            }
        }
    }

    private static <T extends Throwable> T assertThrows(Class<T> type, org.junit.jupiter.api.function.Executable e) {
        return org.junit.jupiter.api.Assertions.assertThrows(type, e);
    }
}
