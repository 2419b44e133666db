package io.github.verbs4j;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
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

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void rdmaBetweenTwoJvms() throws Exception {
        try (Context probe = Rig.open()) {
            Rig.assumeHandConnect(probe);
        }
        Process child = startPeer();
        PrintStream toChild = new PrintStream(child.getOutputStream(), true, StandardCharsets.UTF_8);
        BufferedReader fromChild = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
        HexFormat hex = HexFormat.of();
        Random random = new Random(2026);
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd(); CompletionQueue cq = ctx.createCq(16);
             MemoryRegion mr = pd.allocate(PeerProcess.SIZE, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
             QueuePair qp = pd.queuePair(QpType.RC).cq(cq).build()) {
            Endpoint peer = Endpoint.parse(expect(fromChild, "EP "));
            RemoteBuffer peerBuffer = RemoteBuffer.parse(expect(fromChild, "MR "));
            toChild.println("EP " + qp.endpoint());
            toChild.println("MR " + mr.remote());
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
            assertEquals(2, ok(cq, wcs).wrId());

            String[] recv = expect(fromChild, "RECV ").split(" ");
            assertEquals("600dcafe", recv[0]);
            assertEquals("1000", recv[1]);
            assertArrayEquals(message, hex.parseHex(recv[2]), "SEND payload, byte for byte, in the other process");
            assertArrayEquals(written, hex.parseHex(expect(fromChild, "WRITTEN ")), "RDMA WRITE, byte for byte");

            qp.postSend(SendRequest.rdmaRead().id(3).local(mr, 40_000, PeerProcess.WRITE_BACK_LENGTH)
                    .remote(peerBuffer, 32 * 1024).signaled());
            Completion read = ok(cq, wcs);
            assertEquals(WcOpcode.RDMA_READ, read.opcode());
            byte[] expected = new byte[PeerProcess.WRITE_BACK_LENGTH];
            for (int i = 0; i < expected.length; i++) {
                expected[i] = PeerProcess.pattern(i);
            }
            assertArrayEquals(expected, mr.segment().asSlice(40_000, expected.length).toArray(ValueLayout.JAVA_BYTE),
                    "RDMA READ of the other process's memory");

            qp.postSend(SendRequest.fetchAndAdd(1000).id(4).local(mr, 48_000, 8)
                    .remote(peerBuffer, PeerProcess.ATOMIC_OFFSET).signaled());
            assertEquals(WcOpcode.ATOMIC_FETCH_AND_ADD, ok(cq, wcs).opcode());
            assertEquals(PeerProcess.ATOMIC_INITIAL, mr.segment().get(ValueLayout.JAVA_LONG, 48_000));
            toChild.println("VALUE?");
            assertEquals(PeerProcess.ATOMIC_INITIAL + 1000, Long.parseLong(expect(fromChild, "VALUE ")));

            toChild.println("WRITE");
            Completion imm = ok(cq, wcs);
            assertEquals(9, imm.wrId());
            assertEquals(WcOpcode.RECV_RDMA_WITH_IMM, imm.opcode());
            assertEquals(PeerProcess.WRITE_BACK_IMM, imm.immediate());
            assertArrayEquals(expected, mr.segment().asSlice(8192, expected.length).toArray(ValueLayout.JAVA_BYTE),
                    "RDMA WRITE_WITH_IMM from the other process");
            expect(fromChild, "WROTE");
            toChild.println("BYE");
            assertTrue(child.waitFor(20, TimeUnit.SECONDS), "the peer exits");
            assertEquals(0, child.exitValue());
        } finally {
            child.destroyForcibly();
        }
    }

    private static Completion ok(CompletionQueue cq, Completions wcs) {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (System.nanoTime() < deadline) {
            if (cq.poll(wcs) > 0) {
                Completion wc = wcs.get(0);
                if (!wc.ok()) {
                    throw wc.error();
                }
                return wc;
            }
            Thread.onSpinWait();
        }
        throw new AssertionError("no completion within 20 s");
    }

    private static Process startPeer() throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> cmd = new ArrayList<>(List.of(java, "--enable-native-access=ALL-UNNAMED", "-Xshare:auto",
                "-XX:TieredStopAtLevel=1"));
        for (String p : new String[] {"verbs4j.libibverbs", "verbs4j.librdmacm"}) {
            if (System.getProperty(p) != null) {
                cmd.add("-D" + p + "=" + System.getProperty(p));
            }
        }
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), PeerProcess.class.getName()));
        return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    private static String expect(BufferedReader in, String prefix) throws Exception {
        String line = in.readLine();
        if (line == null || !line.startsWith(prefix)) {
            throw new AssertionError("expected '" + prefix + "...' from the peer process, got " + line);
        }
        return line.substring(prefix.length());
    }
}
