package io.github.verbs4j;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

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
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * XRC across two processes sharing a domain file: the child JVM ({@link XrcPeer}) creates the
 * domain of the file, a target QP and two XRC SRQs; this JVM opens the same domain without
 * CREATE (it exists only because the child holds it) and sends from an XRC_SEND QP to each SRQ
 * by number; every byte is compared in the child. Skips where the device has no XRC (kernel rxe
 * and siw).
 */
class XrcTwoProcessTest {

    @TempDir
    Path dir;

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void sendsFromHereLandInTheSrqsOfTheOtherProcessByNumber() throws Exception {
        try (Context probe = Rig.open()) {
            assumeTrue(probe.queryDevice().hasXrc(), () -> probe.device().name()
                    + " has no XRC (IBV_DEVICE_XRC unset: kernel rxe and siw implement none)");
        }
        Path file = dir.resolve("domain");
        try (Context ctx = Rig.open()) {
            VerbsException none = assertThrows(VerbsException.class, () -> ctx.openXrcDomain(file));
            assertTrue(none.is(Errno.EINVAL), "no process holds a domain for the file yet: " + none.getMessage());
        }
        Process child = startPeer(file);
        PrintStream toChild = new PrintStream(child.getOutputStream(), true, StandardCharsets.UTF_8);
        BufferedReader fromChild = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
        HexFormat hex = HexFormat.of();
        Random random = new Random(13);
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd(); CompletionQueue cq = ctx.createCq(8);
             MemoryRegion mr = pd.allocate(65536, Access.LOCAL_WRITE);
             QueuePair ini = pd.queuePair(QpType.XRC_SEND).sendCq(cq).build()) {
            Endpoint tgt = Endpoint.parse(expect(fromChild, "TGT "));
            String[] srqs = expect(fromChild, "SRQ ").split(" ");
            int srqn1 = Integer.parseInt(srqs[0]);
            int srqn2 = Integer.parseInt(srqs[1]);
            try (XrcDomain shared = ctx.openXrcDomain(file)) {
                // the child's domain: opened here without CREATE
                assertEquals(file, shared.file());
                if (Rig.onSoftrdma()) {
                    VerbsException elsewhere = assertThrows(VerbsException.class, () -> shared.openTarget(tgt.qpn()));
                    assertTrue(elsewhere.is(Errno.EOPNOTSUPP), "softrdma cannot open another process's target QP: "
                            + elsewhere.getMessage());
                }
            }
            ini.connect(tgt);
            toChild.println("EP " + ini.endpoint());
            expect(fromChild, "READY");

            byte[] one = new byte[6000];
            byte[] two = new byte[1500];
            random.nextBytes(one);
            random.nextBytes(two);
            MemorySegment.copy(one, 0, mr.segment(), ValueLayout.JAVA_BYTE, 0, one.length);
            MemorySegment.copy(two, 0, mr.segment(), ValueLayout.JAVA_BYTE, 16384, two.length);
            ini.postSend(SendRequest.send().id(2).local(mr, 16384, two.length).xrcRemoteSrqn(srqn2).signaled());
            ini.postSend(SendRequest.send().id(1).local(mr, 0, one.length).xrcRemoteSrqn(srqn1).signaled());
            Completions wcs = cq.completions(1);
            assertEquals(2, ok(cq, wcs).wrId());
            assertEquals(1, ok(cq, wcs).wrId());

            String[] r1 = expect(fromChild, "RECV1 ").split(" ");
            assertEquals("11", r1[0]);
            assertEquals(String.valueOf(one.length), r1[1]);
            assertEquals(Integer.toHexString(tgt.qpn()), r1[2], "the completion names the target QP");
            assertArrayEquals(one, hex.parseHex(r1[3]), "the SEND to SRQ 1, byte for byte, in the other process");
            String[] r2 = expect(fromChild, "RECV2 ").split(" ");
            assertEquals("22", r2[0]);
            assertEquals(String.valueOf(two.length), r2[1]);
            assertArrayEquals(two, hex.parseHex(r2[3]), "the SEND to SRQ 2, byte for byte, in the other process");
            toChild.println("BYE");
            assertTrue(child.waitFor(30, TimeUnit.SECONDS), "the peer exits");
            assertEquals(0, child.exitValue());
            // the child closed its domain on exit and no process holds one for the file now
            VerbsException gone = assertThrows(VerbsException.class, () -> ctx.openXrcDomain(file));
            assertTrue(gone.is(Errno.EINVAL), gone.getMessage());
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

    private static Process startPeer(Path file) throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> cmd = new ArrayList<>(List.of(java, "--enable-native-access=ALL-UNNAMED", "-Xshare:auto",
                "-XX:TieredStopAtLevel=1"));
        for (String p : new String[] {"verbs4j.libibverbs", "verbs4j.librdmacm"}) {
            if (System.getProperty(p) != null) {
                cmd.add("-D" + p + "=" + System.getProperty(p));
            }
        }
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), XrcPeer.class.getName(), file.toString()));
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
