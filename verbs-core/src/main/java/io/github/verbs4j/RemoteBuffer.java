package io.github.verbs4j;

import java.nio.ByteBuffer;

/**
 * A peer's memory as RDMA READ, WRITE and atomics address it: a virtual address, a length and
 * the rkey of the memory region that covers it. Made by {@link MemoryRegion#remote()} on the
 * owning side and sent out of band in one of two stable encodings: text
 * ({@code AAAAAAAAAAAAAAAA:LLLLLLLLLLLLLLLL:KKKKKKKK}, hex) or 20 big-endian bytes.
 *
 * @param address the remote virtual address (the iova the region was registered with)
 * @param length  the number of bytes that may be addressed from {@code address}
 * @param rkey    the remote key
 */
public record RemoteBuffer(long address, long length, int rkey) {

    /** The size of {@link #toBytes()}. */
    public static final int BYTES = 20;

    /** Checks that the length is not negative. */
    public RemoteBuffer {
        if (length < 0) {
            throw new IllegalArgumentException("negative length: " + length);
        }
    }

    /** The part of this buffer from {@code offset}, {@code length} bytes long. */
    public RemoteBuffer slice(long offset, long length) {
        if (offset < 0 || length < 0 || offset + length > this.length) {
            throw new IndexOutOfBoundsException("slice [" + offset + ", " + (offset + length)
                    + ") outside the remote buffer of " + this.length + " bytes");
        }
        return new RemoteBuffer(address + offset, length, rkey);
    }

    /** Parses {@link #toString()}'s form. */
    public static RemoteBuffer parse(String text) {
        String[] parts = text.trim().split(":");
        if (parts.length != 3) {
            throw new IllegalArgumentException("not a remote buffer (want address:length:rkey in hex): " + text);
        }
        try {
            return new RemoteBuffer(Long.parseUnsignedLong(parts[0], 16), Long.parseLong(parts[1], 16),
                    Integer.parseUnsignedInt(parts[2], 16));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not a remote buffer (bad hex): " + text, e);
        }
    }

    /** Decodes {@link #toBytes()}'s form. */
    public static RemoteBuffer fromBytes(byte[] bytes) {
        if (bytes.length != BYTES) {
            throw new IllegalArgumentException("an encoded remote buffer has " + BYTES + " bytes, got " + bytes.length);
        }
        ByteBuffer b = ByteBuffer.wrap(bytes);
        return new RemoteBuffer(b.getLong(), b.getLong(), b.getInt());
    }

    /** 20 bytes, big-endian: address, length, rkey. */
    public byte[] toBytes() {
        return ByteBuffer.allocate(BYTES).putLong(address).putLong(length).putInt(rkey).array();
    }

    @Override
    public String toString() {
        return String.format("%016x:%016x:%08x", address, length, rkey);
    }
}
