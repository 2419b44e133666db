package io.github.verbs4j;

import java.nio.ByteBuffer;
import java.util.Objects;

/**
 * What a peer needs to connect to a queue pair: its port's LID, its QP number, its initial
 * packet sequence number and its GID. Exchanged out of band (a socket, a file, a pipe) in one of
 * two stable encodings:
 * <ul>
 *   <li>text, {@link #toString()} / {@link #parse(String)}:
 *       {@code LLLL:QQQQQQ:PPPPPP:GGGG...} (LID 4 hex digits, QPN 6, PSN 6, GID 32; the layout
 *       the rdma-core pingpong examples print);</li>
 *   <li>bytes, {@link #toBytes()} / {@link #fromBytes(byte[])}: 26 bytes, big-endian
 *       (LID u16, QPN u32, PSN u32, GID 16 bytes).</li>
 * </ul>
 *
 * @param lid the port's LID (0 on RoCE)
 * @param qpn the QP number (24 bits)
 * @param psn the initial PSN (24 bits)
 * @param gid the GID ({@link Gid#ZERO} on InfiniBand without GRH)
 */
public record Endpoint(int lid, int qpn, int psn, Gid gid) {

    /** The size of {@link #toBytes()}. */
    public static final int BYTES = 26;

    /** Checks the ranges: LID 16 bits, QPN and PSN 24 bits. */
    public Endpoint {
        Objects.requireNonNull(gid, "gid");
        if (lid < 0 || lid > 0xffff) {
            throw new IllegalArgumentException("lid out of 16 bits: " + lid);
        }
        if (qpn < 0 || qpn > 0xffffff) {
            throw new IllegalArgumentException("qpn out of 24 bits: " + qpn);
        }
        if (psn < 0 || psn > 0xffffff) {
            throw new IllegalArgumentException("psn out of 24 bits: " + psn);
        }
    }

    /** Parses {@link #toString()}'s form. */
    public static Endpoint parse(String text) {
        String[] parts = text.trim().split(":", 4);
        if (parts.length != 4 || parts[0].length() != 4 || parts[1].length() != 6 || parts[2].length() != 6) {
            throw new IllegalArgumentException("not an endpoint (want LLLL:QQQQQQ:PPPPPP:<32 hex GID>): " + text);
        }
        try {
            return new Endpoint(Integer.parseInt(parts[0], 16), Integer.parseInt(parts[1], 16),
                    Integer.parseInt(parts[2], 16), Gid.parse(parts[3]));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not an endpoint (bad hex): " + text, e);
        }
    }

    /** Decodes {@link #toBytes()}'s form. */
    public static Endpoint fromBytes(byte[] bytes) {
        if (bytes.length != BYTES) {
            throw new IllegalArgumentException("an encoded endpoint has " + BYTES + " bytes, got " + bytes.length);
        }
        ByteBuffer b = ByteBuffer.wrap(bytes);
        int lid = Short.toUnsignedInt(b.getShort());
        int qpn = b.getInt();
        int psn = b.getInt();
        byte[] gid = new byte[16];
        b.get(gid);
        return new Endpoint(lid, qpn, psn, Gid.of(gid));
    }

    /** The 26-byte big-endian encoding. */
    public byte[] toBytes() {
        ByteBuffer b = ByteBuffer.allocate(BYTES);
        b.putShort((short) lid).putInt(qpn).putInt(psn).put(gid.raw());
        return b.array();
    }

    /** {@code LLLL:QQQQQQ:PPPPPP:<32 hex digits>}. */
    @Override
    public String toString() {
        return String.format("%04x:%06x:%06x:%s", lid, qpn, psn, gid.toHex());
    }
}
