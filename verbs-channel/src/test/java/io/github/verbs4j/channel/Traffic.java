package io.github.verbs4j.channel;

import io.github.verbs4j.TransportType;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteOrder;
import java.util.zip.CRC32C;

/**
 * The tests' traffic: message {@code seq} of a stream has a size and contents that follow from
 * ({@code seed}, {@code seq}), and carries its sequence number, its length and a CRC-32C of
 * the rest, so that the receiver checks order, loss, duplication and every byte.
 */
final class Traffic {

    private Traffic() {
    }

    static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final int MIN = 16;

    /** The address both ends use: {@code VERBS4J_ADDR} (the rxe VM's) or 127.0.0.1. */
    static final InetAddress ADDRESS = address();

    /** Stretched inside the rxe VM, where the JVM runs emulated. */
    static final int SLOWDOWN = "1".equals(System.getenv("VERBS4J_IN_VM")) ? 10 : 1;

    /** The number of messages a test sends: {@code fallback} or the {@code verbs4j.channel.messages} property. */
    static long messages(long fallback) {
        return Long.getLong("verbs4j.channel.messages", fallback);
    }

    /**
     * Whether an RDMA device here reports the iWARP transport (the kernel's siw0 under
     * {@code scripts/rxe-vm --device siw}), from the reported transport, never from a name.
     */
    static boolean onIwarp() {
        return io.github.verbs4j.Verbs.devices().stream().anyMatch(d -> d.transport() == TransportType.IWARP);
    }

    static InetSocketAddress any() {
        return new InetSocketAddress(ADDRESS, 0);
    }

    private static InetAddress address() {
        String env = System.getenv("VERBS4J_ADDR");
        try {
            return InetAddress.getByName(env == null || env.isBlank() ? "127.0.0.1" : env.trim());
        } catch (UnknownHostException e) {
            throw new ExceptionInInitializerError("VERBS4J_ADDR is not an address: " + env);
        }
    }

    static long mix(long z) {
        z = (z ^ (z >>> 33)) * 0xff51afd7ed558ccdL;
        z = (z ^ (z >>> 33)) * 0xc4ceb9fe1a85ec53L;
        return z ^ (z >>> 33);
    }

    /** Mostly small messages, some of several slots, a few close to the largest. */
    static int size(long seed, long seq, long max) {
        long r = mix(seed * 0x9E3779B97F4A7C15L + seq);
        int bucket = (int) Long.remainderUnsigned(r, 100);
        long span;
        if (bucket < 70) {
            span = Math.min(max, 240);
        } else if (bucket < 92) {
            span = Math.min(max, 4000);
        } else {
            span = max;
        }
        return (int) (MIN + Long.remainderUnsigned(r >>> 8, span - MIN + 1));
    }

    /** Writes message {@code seq} into {@code buf} and returns its slice. */
    static MemorySegment fill(MemorySegment buf, long seed, long seq, int size) {
        MemorySegment m = buf.asSlice(0, size);
        m.set(LONG, 0, seq);
        m.set(INT, 8, size);
        long x = mix(seed ^ seq);
        for (int i = 16; i < size; i++) {
            if ((i & 7) == 0) {
                x = mix(x + i);
            }
            m.set(ValueLayout.JAVA_BYTE, i, (byte) (x >>> ((i & 7) * 8)));
        }
        m.set(INT, 12, crc(m, size));
        return m;
    }

    private static int crc(MemorySegment m, int size) {
        CRC32C c = new CRC32C();
        c.update(m.asSlice(16, size - 16).asByteBuffer());
        return (int) c.getValue();
    }

    /** Checks a received message against message {@code seq}; a message of the stream, in order, byte-exact. */
    static void verify(Message msg, long seed, long seq, long max) {
        int size = size(seed, seq, max);
        MemorySegment m = msg.segment();
        if (m.byteSize() != size) {
            throw new AssertionError("message " + seq + ": " + m.byteSize() + " bytes, expected " + size
                    + " (sequence field " + (m.byteSize() >= 8 ? m.get(LONG, 0) : -1) + ")");
        }
        long got = m.get(LONG, 0);
        if (got != seq) {
            throw new AssertionError("expected message " + seq + ", got " + got + (got < seq ? " (a duplicate)" : " (lost some)"));
        }
        if (m.get(INT, 8) != size || m.get(INT, 12) != crc(m, size)) {
            throw new AssertionError("message " + seq + " of " + size + " bytes: checksum mismatch");
        }
        long x = mix(seed ^ seq);
        for (int i = 16; i < size; i++) {
            if ((i & 7) == 0) {
                x = mix(x + i);
            }
            if (m.get(ValueLayout.JAVA_BYTE, i) != (byte) (x >>> ((i & 7) * 8))) {
                throw new AssertionError("message " + seq + ": byte " + i + " differs");
            }
        }
    }
}
