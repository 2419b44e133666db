package io.github.verbs4j;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HexFormat;

/**
 * The receiving process of {@link XrcTwoProcessTest}: opens the XRC domain of the file named by
 * its argument, makes an XRC target QP and two XRC SRQs (each with its own CQ) in it, and reports
 * what lands in each SRQ over stdout.
 *
 * <p>Lines out: {@code TGT <endpoint>}, {@code SRQ <n1> <n2>}, {@code READY},
 * {@code RECV1 <wr_id> <len> <qpn> <hex>}, {@code RECV2 ...}. Lines in: {@code EP <endpoint>}, {@code BYE}.
 */
public final class XrcPeer {

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        HexFormat hex = HexFormat.of();
        try (Context ctx = Verbs.openFirst(); ProtectionDomain pd = ctx.allocatePd();
             CompletionQueue cq1 = ctx.createCq(8); CompletionQueue cq2 = ctx.createCq(8);
             MemoryRegion mr = pd.allocate(65536, Access.LOCAL_WRITE);
             XrcDomain dom = ctx.openXrcDomain(Path.of(args[0]), XrcDomain.OpenFlag.CREATE);
             SharedReceiveQueue s1 = dom.createSrq(pd, cq1, 4, 1);
             SharedReceiveQueue s2 = dom.createSrq(pd, cq2, 4, 1);
             XrcTarget tgt = dom.createTarget()) {
            out.println("TGT " + tgt.endpoint());
            out.println("SRQ " + s1.srqNumber() + " " + s2.srqNumber());
            String ep = in.readLine();
            if (ep == null || !ep.startsWith("EP ")) {
                throw new IllegalStateException("expected EP, got " + ep);
            }
            tgt.connect(Endpoint.parse(ep.substring(3)));
            s1.postRecv(ReceiveRequest.create().id(11).local(mr, 0, 16384));
            s2.postRecv(ReceiveRequest.create().id(22).local(mr, 32768, 16384));
            out.println("READY");
            report(out, hex, "RECV1 ", cq1, mr, 0);
            report(out, hex, "RECV2 ", cq2, mr, 32768);
            String bye = in.readLine();
            if (!"BYE".equals(bye)) {
                throw new IllegalStateException("expected BYE, got " + bye);
            }
        }
    }

    private static void report(PrintStream out, HexFormat hex, String tag, CompletionQueue cq, MemoryRegion mr, long off) {
        Completions wcs = cq.completions(1);
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (cq.poll(wcs) == 0) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("no completion on " + cq + " within 20 s");
            }
            Thread.onSpinWait();
        }
        Completion wc = wcs.get(0);
        if (!wc.ok()) {
            throw wc.error();
        }
        out.println(tag + wc.wrId() + " " + wc.byteLength() + " " + Integer.toHexString(wc.qpNumber()) + " "
                + hex.formatHex(mr.segment().asSlice(off, wc.byteLength()).toArray(ValueLayout.JAVA_BYTE)));
    }
}
