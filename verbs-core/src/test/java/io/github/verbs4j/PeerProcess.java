package io.github.verbs4j;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

/**
 * The other end of {@link TwoProcessTest}: a separate JVM that talks to the test over its
 * stdin/stdout, one line per message, and does RDMA with it through softrdma.
 *
 * <p>Lines out: {@code EP <endpoint>}, {@code MR <remote buffer>}, {@code RECV <imm> <len> <hex>},
 * {@code WRITTEN <hex>}, {@code VALUE <long>}, {@code WROTE}. Lines in: {@code EP ...},
 * {@code MR ...}, {@code VALUE?}, {@code WRITE}, {@code BYE}.
 */
public final class PeerProcess {

    static final int SIZE = 64 * 1024;
    static final int RECV_OFFSET = 16 * 1024;
    static final int ATOMIC_OFFSET = 60_000;
    static final long ATOMIC_INITIAL = 41;
    static final int WRITE_BACK_LENGTH = 2048;
    static final int WRITE_BACK_IMM = 0xBEEF;

    /** The bytes the peer writes back: a pattern both sides can compute. */
    static byte pattern(int i) {
        return (byte) (i * 7 + 3);
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        HexFormat hex = HexFormat.of();
        try (Context ctx = Verbs.openFirst(); ProtectionDomain pd = ctx.allocatePd(); CompletionQueue cq = ctx.createCq(16);
             MemoryRegion mr = pd.allocate(SIZE, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ,
                     Access.REMOTE_ATOMIC);
             QueuePair qp = pd.queuePair(QpType.RC).cq(cq).build()) {
            mr.segment().set(ValueLayout.JAVA_LONG, ATOMIC_OFFSET, ATOMIC_INITIAL);
            for (int i = 0; i < WRITE_BACK_LENGTH; i++) {
                mr.segment().set(ValueLayout.JAVA_BYTE, 32 * 1024 + i, pattern(i));
            }
            out.println("EP " + qp.endpoint());
            out.println("MR " + mr.remote());
            Endpoint peer = Endpoint.parse(expect(in, "EP "));
            RemoteBuffer peerBuffer = RemoteBuffer.parse(expect(in, "MR "));
            qp.init();
            qp.postRecv(ReceiveRequest.create().id(1).local(mr, RECV_OFFSET, 4096));
            qp.connect(peer);

            Completions wcs = cq.completions(4);
            Completion wc = next(cq, wcs);
            if (!wc.ok()) {
                throw wc.error();
            }
            int len = wc.byteLength();
            out.println("RECV " + Integer.toHexString(wc.immediate()) + " " + len + " "
                    + hex.formatHex(mr.segment().asSlice(RECV_OFFSET, len).toArray(ValueLayout.JAVA_BYTE)));
            // the peer's RDMA WRITE was posted before its SEND: on RC it has landed by now
            out.println("WRITTEN " + hex.formatHex(mr.segment().asSlice(0, 4096).toArray(ValueLayout.JAVA_BYTE)));

            expect(in, "VALUE?");
            out.println("VALUE " + mr.segment().get(ValueLayout.JAVA_LONG, ATOMIC_OFFSET));

            expect(in, "WRITE");
            qp.postSend(SendRequest.rdmaWriteWithImm(WRITE_BACK_IMM).id(2).local(mr, 32 * 1024, WRITE_BACK_LENGTH)
                    .remote(peerBuffer, 8192).signaled());
            wc = next(cq, wcs);
            if (!wc.ok()) {
                throw wc.error();
            }
            out.println("WROTE");
            expect(in, "BYE");
        }
    }

    private static Completion next(CompletionQueue cq, Completions wcs) {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (System.nanoTime() < deadline) {
            if (cq.poll(wcs) > 0) {
                return wcs.get(0);
            }
            Thread.onSpinWait();
        }
        throw new IllegalStateException("peer: no completion within 20 s");
    }

    private static String expect(BufferedReader in, String prefix) throws Exception {
        String line = in.readLine();
        if (line == null || !line.startsWith(prefix)) {
            throw new IllegalStateException("peer: expected '" + prefix + "...', got " + line);
        }
        return line.substring(prefix.length());
    }
}
