package quickstart;

import io.github.verbs4j.Access;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Completions;
import io.github.verbs4j.Context;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QpType;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.WcStatus;
import io.github.verbs4j.test.Peer;
import io.github.verbs4j.test.SoftRdmaTest;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Unit tests of RDMA code on softrdma: @SoftRdmaTest injects the contexts and checks for leaks. */
@SoftRdmaTest
class QuickstartTest {

    @Test
    void rdmaWriteBetweenTwoContexts(Context ctx, @Peer Context peer) {
        try (ProtectionDomain pdA = ctx.allocatePd();
             ProtectionDomain pdB = peer.allocatePd();
             CompletionQueue cqA = ctx.createCq(16).confine(); // the test's thread alone polls, posts, closes
             CompletionQueue cqB = peer.createCq(16).confine();
             QueuePair a = pdA.queuePair(QpType.RC).cq(cqA).build().confine();
             QueuePair b = pdB.queuePair(QpType.RC).cq(cqB).build().confine();
             MemoryRegion src = pdA.allocate(64, Access.LOCAL_WRITE);
             MemoryRegion dst = pdB.allocate(64, Access.LOCAL_WRITE, Access.REMOTE_WRITE)) {
            a.connect(b.endpoint());
            b.connect(a.endpoint());
            src.segment().setString(0, "unit-tested");
            a.postSend(SendRequest.rdmaWrite().id(7).local(src, 0, 12).remote(dst.remote()).signaled());
            Completions wcs = new Completions(1);
            while (cqA.poll(wcs) == 0) {
                Thread.onSpinWait();
            }
            assertEquals(WcStatus.SUCCESS, wcs.get(0).status());
            assertEquals(7, wcs.get(0).wrId());
            assertEquals("unit-tested", dst.segment().getString(0));
        }
    }

    @Test
    void readmeProgramPrintsTheWrittenLine() {
        java.io.PrintStream out = System.out;
        java.io.ByteArrayOutputStream captured = new java.io.ByteArrayOutputStream();
        System.setOut(new java.io.PrintStream(captured, true));
        try {
            Hello.main(new String[0]);
        } finally {
            System.setOut(out);
        }
        assertEquals("SUCCESS: hello, RDMA", captured.toString().strip());
    }

    @Test
    void twoProcessWrite() throws Exception {
        assertTrue(Quickstart.target().startsWith("hello from process "));
    }
}
