package io.github.verbs4j.transfer;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Objects;

/**
 * What a peer needs to reach a registered segment: its name, the owning engine's name, and the
 * memory region's address, length and rkey. Published by {@link TransferEngine#register} and
 * learnt by {@link TransferPeer#lookup}.
 *
 * @param name    the segment's name, unique within its engine
 * @param owner   the name of the engine that registered it
 * @param address the virtual address of its first byte (the region's iova)
 * @param length  its size in bytes
 * @param rkey    the remote key of its memory region
 */
public record SegmentDescriptor(String name, String owner, long address, long length, int rkey) {

    /** The longest segment or engine name, in UTF-8 bytes. */
    public static final int MAX_NAME_BYTES = 200;

    public SegmentDescriptor {
        checkName("name", name);
        checkName("owner", owner);
        if (length <= 0) {
            throw new IllegalArgumentException("length must be positive, got " + length);
        }
    }

    static void checkName(String what, String name) {
        Objects.requireNonNull(name, what);
        int n = name.getBytes(StandardCharsets.UTF_8).length;
        if (n == 0 || n > MAX_NAME_BYTES) {
            throw new IllegalArgumentException(what + " must have 1.." + MAX_NAME_BYTES + " UTF-8 bytes, got " + n);
        }
    }

    /**
     * Whether {@code length} bytes at {@code offset} lie inside the segment (no overflow).
     */
    public boolean contains(long offset, long length) {
        return offset >= 0 && length >= 0 && offset <= this.length && length <= this.length - offset;
    }

    void encode(ByteBuffer out) {
        byte[] n = name.getBytes(StandardCharsets.UTF_8);
        byte[] o = owner.getBytes(StandardCharsets.UTF_8);
        out.putLong(address).putLong(length).putInt(rkey);
        out.put((byte) n.length).put(n).put((byte) o.length).put(o);
    }

    static SegmentDescriptor decode(ByteBuffer in) {
        long address = in.getLong();
        long length = in.getLong();
        int rkey = in.getInt();
        byte[] n = new byte[Byte.toUnsignedInt(in.get())];
        in.get(n);
        byte[] o = new byte[Byte.toUnsignedInt(in.get())];
        in.get(o);
        return new SegmentDescriptor(new String(n, StandardCharsets.UTF_8), new String(o, StandardCharsets.UTF_8),
                address, length, rkey);
    }

    @Override
    public String toString() {
        return owner + ":" + name + "[0x" + Long.toHexString(address) + ", " + length + " bytes, rkey 0x"
                + Integer.toHexString(rkey) + "]";
    }
}
