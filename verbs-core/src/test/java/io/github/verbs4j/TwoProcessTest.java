package io.github.verbs4j;

import io.github.verbs4j.testsupport.PeerJvm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * RDMA between this JVM and a child JVM ({@link PeerProcess}), Endpoints and RemoteBuffers
 * exchanged as text over the child's stdin/stdout: WRITE, SEND with immediate, READ and
 * FETCH_AND_ADD from here, WRITE_WITH_IMM from there, every byte compared.
 */
class TwoProcessTest {

    private static final Duration PEER_WAIT = Duration.ofSeconds(20);

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void rdmaBetweenTwoJvms() throws Exception {
        try (Context probe = Rig.open()) {
            Rig.assumeHandConnect(probe);
        }
        HexFormat hex = HexFormat.of();
        Random random = new Random(2026);
        try (PeerJvm child = PeerJvm.start(PeerJvm.QUICK_START, PeerProcess.class);
             Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd(); CompletionQueue cq = ctx.createCq(16);
             MemoryRegion mr = pd.allocate(PeerProcess.SIZE, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
             QueuePair qp = pd.queuePair(QpType.RC).cq(cq).build()) {
            Endpoint peer = Endpoint.parse(child.expect("EP "));
            RemoteBuffer peerBuffer = RemoteBuffer.parse(child.expect("MR "));
            child.println("EP " + qp.endpoint());
            child.println("MR " + mr.remote());
            qp.init();
            qp.postRecv(ReceiveRequest.create().id(9).local(mr, 0, 64));
            qp.connect(peer);

            byte[] written = new byte[4096];
            random.nextBytes(written);
            MemorySegment.copy(written, 0, mr.segment(), ValueLayout.JAVA_BYTE, 20_000, written.length);
            byte[] message = new byte[1000];
            random.nextBytes(message);
            MemorySegment.copy(message, 0, mr.segment(), ValueLayout.JAVA_BYTE, 30_000, message.length);

            SendRequest write = SendRequest.rdmaWrite().id(1).local(mr, 20_000, 4096).remote(peerBuffer);
            SendRequest send = SendRequest.sendWithImm(0x600DCAFE).id(2).local(mr, 30_000, 1000).signaled();
            write.next(send);
            qp.postSend(write);
            Completions wcs = cq.completions(4);
            assertEquals(2, Rig.okWithin(cq, wcs, PEER_WAIT).wrId());

            String[] recv = child.expect("RECV ").split(" ");
            assertEquals("600dcafe", recv[0]);
            assertEquals("1000", recv[1]);
            assertArrayEquals(message, hex.parseHex(recv[2]), "SEND payload, byte for byte, in the other process");
            assertArrayEquals(written, hex.parseHex(child.expect("WRITTEN ")), "RDMA WRITE, byte for byte");

            qp.postSend(SendRequest.rdmaRead().id(3).local(mr, 40_000, PeerProcess.WRITE_BACK_LENGTH)
                    .remote(peerBuffer, 32 * 1024).signaled());
            Completion read = Rig.okWithin(cq, wcs, PEER_WAIT);
            assertEquals(WcOpcode.RDMA_READ, read.opcode());
            byte[] expected = new byte[PeerProcess.WRITE_BACK_LENGTH];
            for (int i = 0; i < expected.length; i++) {
                expected[i] = PeerProcess.pattern(i);
            }
            assertArrayEquals(expected, mr.segment().asSlice(40_000, expected.length).toArray(ValueLayout.JAVA_BYTE),
                    "RDMA READ of the other process's memory");

            qp.postSend(SendRequest.fetchAndAdd(1000).id(4).local(mr, 48_000, 8)
                    .remote(peerBuffer, PeerProcess.ATOMIC_OFFSET).signaled());
            assertEquals(WcOpcode.ATOMIC_FETCH_AND_ADD, Rig.okWithin(cq, wcs, PEER_WAIT).opcode());
            assertEquals(PeerProcess.ATOMIC_INITIAL, mr.segment().get(ValueLayout.JAVA_LONG, 48_000));
            child.println("VALUE?");
            assertEquals(PeerProcess.ATOMIC_INITIAL + 1000, Long.parseLong(child.expect("VALUE ")));

            child.println("WRITE");
            Completion imm = Rig.okWithin(cq, wcs, PEER_WAIT);
            assertEquals(9, imm.wrId());
            assertEquals(WcOpcode.RECV_RDMA_WITH_IMM, imm.opcode());
            assertEquals(PeerProcess.WRITE_BACK_IMM, imm.immediate());
            assertArrayEquals(expected, mr.segment().asSlice(8192, expected.length).toArray(ValueLayout.JAVA_BYTE),
                    "RDMA WRITE_WITH_IMM from the other process");
            child.expect("WROTE");
            child.println("BYE");
            assertTrue(child.process().waitFor(20, TimeUnit.SECONDS), "the peer exits");
            assertEquals(0, child.process().exitValue());
        }
    }
}
