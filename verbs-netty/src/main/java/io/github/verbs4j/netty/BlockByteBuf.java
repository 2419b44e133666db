package io.github.verbs4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.UnpooledDirectByteBuf;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.GatheringByteChannel;
import java.nio.channels.ScatteringByteChannel;

/**
 * A direct buffer over a fixed block of memory that outlives it, for buffer objects that are
 * recycled rather than made per use: a block of {@link RdmaByteBufAllocator}'s chunks, a receive
 * slot of a channel's ring ({@link ReceiveSlotBuf}). Each use starts with {@link #reuse}:
 * reference count 1, the capacity of that use (at most the block's size), indices as given.
 *
 * <p>Its capacity is the use's, not the block's: every access is checked against it, including
 * the ones Netty's direct buffer leaves to its {@code ByteBuffer}'s bounds (which span the whole
 * block; overridden below). It grows within its block without a copy; past it, Netty's
 * {@code capacity(int)} moves it to ordinary direct memory, after which it is Netty's direct
 * buffer ({@link #inBlock()} false) and a subclass must not recycle it.
 */
abstract class BlockByteBuf extends UnpooledDirectByteBuf {
    private final int blockSize;
    /** The block's first byte, index 0 of the buffer while it is in its block. */
    private final long blockAddress;
    /** Whether its memory is still its block (false while the constructor runs, and once grown past it). */
    private boolean inBlock;
    /** The capacity of this use, at most the block's size; while in its block. */
    private int length;

    /** A buffer over all of {@code block} (its remaining bytes), to be {@linkplain #reuse reused} before each use. */
    BlockByteBuf(ByteBufAllocator alloc, ByteBuffer block) {
        super(alloc, block, Integer.MAX_VALUE); // a view: the block is never freed by the buffer
        this.blockSize = block.remaining();
        this.blockAddress = MemorySegment.ofBuffer(block).address(); // from its position, as the buffer's index 0
        this.inBlock = true;
    }

    @Override
    public boolean hasMemoryAddress() {
        return inBlock || super.hasMemoryAddress();
    }

    /**
     * The block's address, while in it (Netty's direct buffer has none without
     * {@code sun.misc.Unsafe}, the JDK 25 default): the transport copies to and from it and finds
     * a registered chunk by it. Without it the transport reached the memory through a segment of
     * the buffer's NIO view, an object per write (40 B) that escape analysis removed in most JVMs
     * but not in every one: a receive slot's buffer echoed back allocated it per message.
     */
    @Override
    public long memoryAddress() {
        if (!inBlock) {
            return super.memoryAddress();
        }
        ensureAccessible();
        return blockAddress;
    }

    /**
     * Makes it a buffer of {@code capacity} bytes (at most its block) and {@code maxCapacity},
     * readable from 0 to {@code writerIndex}, reference count 1, marks 0.
     */
    final void reuse(int capacity, int maxCapacity, int writerIndex) {
        resetRefCnt();
        length = capacity;
        maxCapacity(maxCapacity);
        setIndex(0, writerIndex);
        markReaderIndex();
        markWriterIndex();
    }

    final boolean inBlock() {
        return inBlock;
    }

    final int blockSize() {
        return blockSize;
    }

    @Override
    public int capacity() {
        return inBlock ? length : super.capacity();
    }

    @Override
    public ByteBuf capacity(int newCapacity) {
        if (!inBlock) {
            return super.capacity(newCapacity);
        }
        checkNewCapacity(newCapacity);
        if (newCapacity <= blockSize) {
            if (newCapacity < length) {
                trimIndicesToCapacity(newCapacity);
            }
            length = newCapacity;
            return this;
        }
        super.capacity(newCapacity); // copies the block into new direct memory
        inBlock = false;
        return this;
    }

    @Override
    public int maxFastWritableBytes() {
        return inBlock ? Math.min(blockSize, maxCapacity()) - writerIndex() : super.maxFastWritableBytes();
    }

    // Netty's direct buffer bounds these by its ByteBuffer alone, which is the whole block:
    // checked against the capacity here

    @Override
    public byte getByte(int index) {
        checkIndex(index, 1);
        return _getByte(index);
    }

    @Override
    public short getShort(int index) {
        checkIndex(index, 2);
        return _getShort(index);
    }

    @Override
    public int getUnsignedMedium(int index) {
        checkIndex(index, 3);
        return _getUnsignedMedium(index);
    }

    @Override
    public int getInt(int index) {
        checkIndex(index, 4);
        return _getInt(index);
    }

    @Override
    public long getLong(int index) {
        checkIndex(index, 8);
        return _getLong(index);
    }

    @Override
    public ByteBuf setByte(int index, int value) {
        checkIndex(index, 1);
        _setByte(index, value);
        return this;
    }

    @Override
    public ByteBuf setShort(int index, int value) {
        checkIndex(index, 2);
        _setShort(index, value);
        return this;
    }

    @Override
    public ByteBuf setMedium(int index, int value) {
        checkIndex(index, 3);
        _setMedium(index, value);
        return this;
    }

    @Override
    public ByteBuf setInt(int index, int value) {
        checkIndex(index, 4);
        _setInt(index, value);
        return this;
    }

    @Override
    public ByteBuf setLong(int index, long value) {
        checkIndex(index, 8);
        _setLong(index, value);
        return this;
    }

    @Override
    public ByteBuf setBytes(int index, ByteBuffer src) {
        checkIndex(index, src.remaining());
        return super.setBytes(index, src);
    }

    @Override
    public int setBytes(int index, InputStream in, int length) throws IOException {
        checkIndex(index, length);
        return super.setBytes(index, in, length);
    }

    @Override
    public int setBytes(int index, ScatteringByteChannel in, int length) throws IOException {
        checkIndex(index, length);
        return super.setBytes(index, in, length);
    }

    @Override
    public int setBytes(int index, FileChannel in, long position, int length) throws IOException {
        checkIndex(index, length);
        return super.setBytes(index, in, position, length);
    }

    @Override
    public ByteBuf getBytes(int index, OutputStream out, int length) throws IOException {
        checkIndex(index, length);
        return super.getBytes(index, out, length);
    }

    @Override
    public int getBytes(int index, GatheringByteChannel out, int length) throws IOException {
        checkIndex(index, length);
        return super.getBytes(index, out, length);
    }

    @Override
    public int getBytes(int index, FileChannel out, long position, int length) throws IOException {
        checkIndex(index, length);
        return super.getBytes(index, out, position, length);
    }

    @Override
    public ByteBuf copy(int index, int length) {
        checkIndex(index, length);
        return super.copy(index, length);
    }
}
