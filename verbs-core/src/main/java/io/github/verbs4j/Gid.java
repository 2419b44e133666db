package io.github.verbs4j;

import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Arrays;
import java.util.HexFormat;

/**
 * A 128-bit global identifier ({@code union ibv_gid}), in network byte order. On RoCE ports a GID
 * is an IP address: IPv4 addresses appear as IPv4-mapped IPv6 ({@code ::ffff:10.0.2.15}).
 *
 * <p>Immutable value; thread-safe.
 */
public final class Gid {

    /** The all-zero GID (an empty table entry, or "no GRH"). */
    public static final Gid ZERO = new Gid(new byte[16]);

    private final byte[] raw;

    private Gid(byte[] raw) {
        this.raw = raw;
    }

    /** A GID from 16 bytes in network order (copied). */
    public static Gid of(byte[] bytes) {
        if (bytes.length != 16) {
            throw new IllegalArgumentException("a GID has 16 bytes, got " + bytes.length);
        }
        return new Gid(bytes.clone());
    }

    /** The RoCE GID of an IP address: IPv4 mapped into IPv6, IPv6 as is. */
    public static Gid of(InetAddress address) {
        byte[] a = address.getAddress();
        if (address instanceof Inet4Address) {
            byte[] g = new byte[16];
            g[10] = (byte) 0xff;
            g[11] = (byte) 0xff;
            System.arraycopy(a, 0, g, 12, 4);
            return new Gid(g);
        }
        return new Gid(a);
    }

    /**
     * Parses the forms {@link #toString()} and {@link #toHex()} produce: eight groups of four hex
     * digits separated by colons, or 32 hex digits.
     */
    public static Gid parse(String text) {
        String hex = text.replace(":", "");
        if (hex.length() != 32) {
            throw new IllegalArgumentException("not a GID (want 32 hex digits, optionally in groups of 4): " + text);
        }
        try {
            return new Gid(HexFormat.of().parseHex(hex));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("not a GID (bad hex digit): " + text, e);
        }
    }

    /** A copy of the 16 bytes, network order. */
    public byte[] bytes() {
        return raw.clone();
    }

    byte[] raw() {
        return raw;
    }

    /** Whether every byte is zero. */
    public boolean isZero() {
        for (byte b : raw) {
            if (b != 0) {
                return false;
            }
        }
        return true;
    }

    /** Whether this is an IPv4-mapped GID ({@code ::ffff:a.b.c.d}). */
    public boolean isIpv4Mapped() {
        for (int i = 0; i < 10; i++) {
            if (raw[i] != 0) {
                return false;
            }
        }
        return raw[10] == (byte) 0xff && raw[11] == (byte) 0xff;
    }

    /** The IP address this GID holds (IPv4 for mapped GIDs). */
    public InetAddress toInetAddress() {
        try {
            return isIpv4Mapped() ? InetAddress.getByAddress(Arrays.copyOfRange(raw, 12, 16))
                    : Inet6Address.getByAddress(null, raw, null);
        } catch (UnknownHostException e) {
            throw new AssertionError(e);
        }
    }

    /** 32 lower-case hex digits. */
    public String toHex() {
        return HexFormat.of().formatHex(raw);
    }

    /** The form {@code ibv_devinfo -v} prints: {@code 0000:0000:0000:0000:0000:ffff:0a00:020f}. */
    @Override
    public String toString() {
        String hex = toHex();
        StringBuilder sb = new StringBuilder(39);
        for (int i = 0; i < 32; i += 4) {
            if (i > 0) {
                sb.append(':');
            }
            sb.append(hex, i, i + 4);
        }
        return sb.toString();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Gid g && Arrays.equals(raw, g.raw);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(raw);
    }
}
