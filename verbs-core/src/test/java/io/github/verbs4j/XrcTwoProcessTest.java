package io.github.verbs4j;

import io.github.verbs4j.testsupport.PeerJvm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * XRC across two processes sharing a domain file: the child JVM ({@link XrcPeer}) creates the
 * domain of the file, a target QP and two XRC SRQs; this JVM opens the same domain without
 * CREATE (it exists only because the child holds it) and sends from an XRC_SEND QP to each SRQ
 * by number; every byte is compared in the child. Then the other way round for the SRQ: an XRC
 * SRQ of this JVM, in the child's domain, is reached through the child's target QP (the target
 * QP sharing that XRC exists for). Skips where the device has no XRC (kernel rxe and siw).
 */
class XrcTwoProcessTest {

    private static final Duration PEER_WAIT = Duration.ofSeconds(20);

    @TempDir
    Path dir;

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void sendsFromHereLandInTheSrqsOfTheOtherProcessByNumber() throws Exception {
        try (Context probe = Rig.open()) {
            XrcTest.assumeXrc(probe);
        }
        Path file = dir.resolve("domain");
        try (Context ctx = Rig.open()) {
            VerbsException none = assertThrows(VerbsException.class, () -> ctx.openXrcDomain(file));
            assertTrue(none.is(Errno.EINVAL), "no process holds a domain for the file yet: " + none.getMessage());
        }
        HexFormat hex = HexFormat.of();
        Random random = new Random(13);
        try (PeerJvm child = PeerJvm.start(PeerJvm.QUICK_START, XrcPeer.class, file.toString());
             Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd(); CompletionQueue cq = ctx.createCq(8);
             MemoryRegion mr = pd.allocate(65536, Access.LOCAL_WRITE);
             QueuePair ini = pd.queuePair(QpType.XRC_SEND).sendCq(cq).build()) {
            Endpoint tgt = Endpoint.parse(child.expect("TGT "));
            String[] srqs = child.expect("SRQ ").split(" ");
            int srqn1 = Integer.parseInt(srqs[0]);
            int srqn2 = Integer.parseInt(srqs[1]);
            XrcDomain shared = ctx.openXrcDomain(file);
            // the child's domain: opened here without CREATE; its target QP opened from here
            // (ibv_open_qp), queried through this handle while the child connects and uses it
            assertEquals(file, shared.file());
            XrcTarget opened = shared.openTarget(tgt.qpn());
            assertTrue(opened.isOpened());
            assertEquals(tgt.qpn(), opened.qpNumber());
            assertEquals(QpState.RESET, opened.state(), "the child's target QP, not connected yet");
            ini.connect(tgt);
            child.println("EP " + ini.endpoint());
            child.expect("READY");

            byte[] one = new byte[6000];
            byte[] two = new byte[1500];
            random.nextBytes(one);
            random.nextBytes(two);
            MemorySegment.copy(one, 0, mr.segment(), ValueLayout.JAVA_BYTE, 0, one.length);
            MemorySegment.copy(two, 0, mr.segment(), ValueLayout.JAVA_BYTE, 16384, two.length);
            ini.postSend(SendRequest.send().id(2).local(mr, 16384, two.length).xrcRemoteSrqn(srqn2).signaled());
            ini.postSend(SendRequest.send().id(1).local(mr, 0, one.length).xrcRemoteSrqn(srqn1).signaled());
            Completions wcs = cq.completions(1);
            assertEquals(2, Rig.okWithin(cq, wcs, PEER_WAIT).wrId());
            assertEquals(1, Rig.okWithin(cq, wcs, PEER_WAIT).wrId());

            String[] r1 = child.expect("RECV1 ").split(" ");
            assertEquals("11", r1[0]);
            assertEquals(String.valueOf(one.length), r1[1]);
            assertEquals(Integer.toHexString(tgt.qpn()), r1[2], "the completion names the target QP");
            assertArrayEquals(one, hex.parseHex(r1[3]), "the SEND to SRQ 1, byte for byte, in the other process");
            String[] r2 = child.expect("RECV2 ").split(" ");
            assertEquals("22", r2[0]);
            assertEquals(String.valueOf(two.length), r2[1]);
            assertArrayEquals(two, hex.parseHex(r2[3]), "the SEND to SRQ 2, byte for byte, in the other process");
            assertEquals(QpState.RTS, opened.state(), "the child connected its target QP");
            // the child's own close of the QP waits for this handle (EBUSY until then)
            opened.close();
            shared.close();
            child.println("BYE");
            assertTrue(child.process().waitFor(30, TimeUnit.SECONDS), "the peer exits");
            assertEquals(0, child.process().exitValue());
            // the child closed its domain on exit and no process holds one for the file now
            VerbsException gone = assertThrows(VerbsException.class, () -> ctx.openXrcDomain(file));
            assertTrue(gone.is(Errno.EINVAL), gone.getMessage());
        }
    }

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void sendsThroughTheOtherProcessesTargetLandInAnSrqOfThisProcess() throws Exception {
        try (Context probe = Rig.open()) {
            XrcTest.assumeXrc(probe);
        }
        Path file = dir.resolve("domain");
        Random random = new Random(17);
        try (PeerJvm child = PeerJvm.start(PeerJvm.QUICK_START, XrcPeer.class, file.toString());
             Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd();
             CompletionQueue scq = ctx.createCq(8); CompletionQueue rcq = ctx.createCq(8);
             MemoryRegion mr = pd.allocate(65536, Access.LOCAL_WRITE);
             QueuePair ini = pd.queuePair(QpType.XRC_SEND).sendCq(scq).build()) {
            Endpoint tgt = Endpoint.parse(child.expect("TGT "));
            String[] srqs = child.expect("SRQ ").split(" ");
            try (XrcDomain shared = ctx.openXrcDomain(file);
                 SharedReceiveQueue mine = shared.createSrq(pd, rcq, 4, 1)) {
                ini.connect(tgt);
                child.println("EP " + ini.endpoint());
                child.expect("READY");
                mine.postRecv(ReceiveRequest.create().id(33).local(mr, 32768, 16384));

                // this process's INI QP -> the child's target QP -> this process's SRQ
                byte[] data = new byte[7000];
                random.nextBytes(data);
                MemorySegment.copy(data, 0, mr.segment(), ValueLayout.JAVA_BYTE, 0, data.length);
                ini.postSend(SendRequest.sendWithImm(0x5eed).id(3).local(mr, 0, data.length)
                        .xrcRemoteSrqn(mine.srqNumber()).signaled());
                Completions wcs = scq.completions(1);
                assertEquals(3, Rig.okWithin(scq, wcs, PEER_WAIT).wrId());
                Completions rwcs = rcq.completions(1);
                Completion wc = Rig.okWithin(rcq, rwcs, PEER_WAIT);
                assertEquals(33, wc.wrId());
                assertEquals(WcOpcode.RECV, wc.opcode());
                assertEquals(data.length, wc.byteLength());
                assertTrue(wc.hasImmediate());
                assertEquals(0x5eed, wc.immediate());
                assertEquals(tgt.qpn(), wc.qpNumber(), "the completion names the other process's target QP");
                assertArrayEquals(data, mr.segment().asSlice(32768, data.length).toArray(ValueLayout.JAVA_BYTE),
                        "the SEND, byte for byte, in this process's SRQ");
                assertEquals(0, rcq.poll(rwcs), "one completion only");

                // the child's own SRQs still take theirs, so its script ends as in the test above
                byte[] small = new byte[100];
                random.nextBytes(small);
                MemorySegment.copy(small, 0, mr.segment(), ValueLayout.JAVA_BYTE, 16384, small.length);
                ini.postSend(SendRequest.send().id(1).local(mr, 16384, small.length)
                        .xrcRemoteSrqn(Integer.parseInt(srqs[0])).signaled());
                ini.postSend(SendRequest.send().id(2).local(mr, 16384, small.length)
                        .xrcRemoteSrqn(Integer.parseInt(srqs[1])).signaled());
                assertEquals(1, Rig.okWithin(scq, wcs, PEER_WAIT).wrId());
                assertEquals(2, Rig.okWithin(scq, wcs, PEER_WAIT).wrId());
                HexFormat hex = HexFormat.of();
                assertArrayEquals(small, hex.parseHex(child.expect("RECV1 ").split(" ")[3]));
                assertArrayEquals(small, hex.parseHex(child.expect("RECV2 ").split(" ")[3]));
                assertFalse(mine.srqNumber() == Integer.parseInt(srqs[0])
                        || mine.srqNumber() == Integer.parseInt(srqs[1]), "SRQ numbers are unique in the domain");
            }
            child.println("BYE");
            assertTrue(child.process().waitFor(30, TimeUnit.SECONDS), "the peer exits");
            assertEquals(0, child.process().exitValue());
        }
    }
}
