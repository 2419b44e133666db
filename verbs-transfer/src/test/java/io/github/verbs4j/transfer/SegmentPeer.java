package io.github.verbs4j.transfer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32C;

/**
 * A peer JVM of {@link TransferProcessTest}: opens an engine, registers segment "data" of the
 * given size filled with {@link TestNet#pattern} of its seed, prints {@code READY <port>}, then
 * answers {@code CRC <offset> <length>} with the CRC32C of that range, until {@code EXIT}.
 */
public final class SegmentPeer {

    private SegmentPeer() {
    }

    public static void main(String[] args) throws Exception {
        int seed = Integer.parseInt(args[0]);
        long size = Long.parseLong(args[1]);
        try (TransferEngine engine = TransferEngine.open("peer" + seed, new InetSocketAddress(TestNet.ADDRESS, 0),
                TestNet.options())) {
            Segment data = engine.allocate("data", size);
            MemorySegment m = data.memory();
            for (long i = 0; i < size; i++) {
                m.set(ValueLayout.JAVA_BYTE, i, TestNet.pattern(seed, i));
            }
            System.out.println("READY " + engine.localAddress().getPort());
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                String[] w = line.trim().split(" ");
                if (w[0].equals("CRC")) {
                    System.out.println("CRC " + crc(m, Long.parseLong(w[1]), Long.parseLong(w[2])));
                } else if (w[0].equals("EXIT")) {
                    break;
                }
            }
        }
        System.out.println("BYE");
    }

    static long crc(MemorySegment m, long offset, long length) {
        CRC32C c = new CRC32C();
        c.update(m.asSlice(offset, length).asByteBuffer());
        return c.getValue();
    }
}
