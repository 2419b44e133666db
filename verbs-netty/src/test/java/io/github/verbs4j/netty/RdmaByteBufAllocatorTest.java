package io.github.verbs4j.netty;

import io.netty.buffer.ByteBuf;
import io.netty.util.IllegalReferenceCountException;
import io.netty.util.ResourceLeakDetector;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.ByteArrayOutputStream;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link RdmaByteBufAllocator} on its own: buffer objects recycled per size class (nothing
 * allocated per buffer in steady state), each new buffer as an allocator's new buffer must be,
 * accesses bounded by the capacity asked (not the block's), refused after release, and one
 * holder per buffer under releases from other threads.
 */
@Timeout(120)
public class RdmaByteBufAllocatorTest {

    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    @Test
    void aReleasedBufferIsTheNextOfItsSizeClassAndComesBackNew() {
        RdmaByteBufAllocator alloc = new RdmaByteBufAllocator(1 << 16);
        ByteBuf a = alloc.directBuffer(100, 1000);
        a.writeBytes(new byte[100]).readerIndex(10).markReaderIndex();
        long address = a.memoryAddress();
        assertTrue(a.release());
        assertThrows(IllegalReferenceCountException.class, () -> a.getByte(0), "refused once released");
        assertThrows(IllegalReferenceCountException.class, a::memoryAddress);
        assertThrows(IllegalReferenceCountException.class, a::release);

        ByteBuf b = alloc.directBuffer(120, 500); // the same size class (65..128 B)
        assertSame(a, b, "the released buffer object is taken again");
        assertEquals(1, b.refCnt());
        assertEquals(120, b.capacity(), "the capacity asked, not the block's");
        assertEquals(500, b.maxCapacity());
        assertEquals(0, b.readerIndex());
        assertEquals(0, b.writerIndex());
        b.resetReaderIndex();
        assertEquals(0, b.readerIndex(), "marks reset too");
        assertEquals(address, b.memoryAddress());
        assertTrue(b.hasMemoryAddress());

        ByteBuf c = alloc.directBuffer(129); // the next class: another block
        assertNotSame(b, c);
        c.release();
        b.release();
    }

    /** What Netty's direct buffer leaves to its ByteBuffer (the whole block) is checked against the capacity. */
    @Test
    void accessesAreBoundedByTheCapacityAskedNotTheBlock() throws Exception {
        RdmaByteBufAllocator alloc = new RdmaByteBufAllocator(1 << 16);
        ByteBuf b = alloc.directBuffer(100, 100); // a 128-byte block
        assertThrows(IndexOutOfBoundsException.class, () -> b.getByte(100));
        assertThrows(IndexOutOfBoundsException.class, () -> b.setByte(100, 1));
        assertThrows(IndexOutOfBoundsException.class, () -> b.getShort(99));
        assertThrows(IndexOutOfBoundsException.class, () -> b.getInt(97));
        assertThrows(IndexOutOfBoundsException.class, () -> b.setInt(97, 1));
        assertThrows(IndexOutOfBoundsException.class, () -> b.getLong(93));
        assertThrows(IndexOutOfBoundsException.class, () -> b.setLong(93, 1));
        assertThrows(IndexOutOfBoundsException.class, () -> b.getUnsignedMedium(98));
        assertThrows(IndexOutOfBoundsException.class, () -> b.setMedium(98, 1));
        assertThrows(IndexOutOfBoundsException.class, () -> b.setBytes(90, ByteBuffer.allocate(20)));
        assertThrows(IndexOutOfBoundsException.class, () -> b.getBytes(90, new ByteArrayOutputStream(), 20));
        assertThrows(IndexOutOfBoundsException.class, () -> b.copy(90, 20));
        assertThrows(IndexOutOfBoundsException.class, () -> b.writerIndex(101));
        assertThrows(IndexOutOfBoundsException.class, () -> b.writeBytes(new byte[101]), "past maxCapacity");
        b.setLong(92, 0x0102030405060708L);
        assertEquals(0x0102030405060708L, b.getLong(92));
        assertEquals(100, b.capacity());
        b.release();
    }

    /** Within its block a buffer grows in place; past it, into ordinary memory, its bytes kept, and its block comes back. */
    @Test
    void aBufferGrowsInItsBlockThenPastIt() {
        RdmaByteBufAllocator alloc = new RdmaByteBufAllocator(1 << 16);
        ByteBuf b = alloc.directBuffer(70); // a 128-byte block
        long address = b.memoryAddress();
        byte[] data = new byte[300];
        for (int i = 0; i < data.length; i++) {
            data[i] = (byte) (i * 7 + 1);
        }
        b.writeBytes(data, 0, 128);
        assertEquals(address, b.memoryAddress(), "grown to 128 B within its block: not moved");
        assertEquals(128, b.capacity());
        b.writeBytes(data, 128, 172);
        assertTrue(b.capacity() >= 300);
        byte[] back = new byte[300];
        b.getBytes(0, back);
        assertEquals(Arrays.toString(data), Arrays.toString(back), "its bytes kept across the move");
        assertFalse(b.hasMemoryAddress() && b.memoryAddress() == address, "moved out of its block");
        assertTrue(b.release());
        ByteBuf again = alloc.directBuffer(100);
        assertNotSame(b, again, "the block came back under a new buffer");
        assertEquals(address, again.memoryAddress(), "the same block");
        again.release();
    }

    @Test
    void largerThanAChunkIsAChunkOfItsOwn() {
        RdmaByteBufAllocator alloc = new RdmaByteBufAllocator(4096);
        ByteBuf big = alloc.directBuffer(10_000);
        assertEquals(10_000, big.capacity());
        big.writeBytes(new byte[10_000]);
        long address = big.memoryAddress();
        assertSame(RdmaByteBufAllocator.chunkOf(address, 10_000), RdmaByteBufAllocator.chunkOf(address + 9_999, 1));
        assertTrue(big.release());
        assertEquals(null, RdmaByteBufAllocator.chunkOf(address, 1), "its chunk left the index with it");
        assertThrows(IllegalReferenceCountException.class, () -> big.getByte(0));
    }

    /**
     * Netty's pooled allocator recycles its buffer objects: so does this one. One thread takes
     * and releases buffers of two sizes; once the JIT has compiled the path the thread allocates
     * under one byte per buffer (one object per buffer would be 80 B or more). Leak detection is
     * off while it measures (at Netty's default level one buffer in 128 is tracked, an object).
     */
    @Test
    void takingAndReleasingBuffersAllocatesNothingInSteadyState() {
        assertTrue(THREADS.isThreadAllocatedMemorySupported() && THREADS.isThreadAllocatedMemoryEnabled());
        ResourceLeakDetector.Level level = ResourceLeakDetector.getLevel();
        ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.DISABLED);
        try {
            RdmaByteBufAllocator alloc = new RdmaByteBufAllocator(1 << 20);
            int rounds = 100_000;
            double best = Double.POSITIVE_INFINITY;
            // passes until one measures under the bound: until C2 compiled the path, objects its
            // escape analysis removes are still allocated; one allocation per buffer shows in every pass
            for (int pass = 0; pass < 30 && best >= 1.0; pass++) {
                long before = THREADS.getCurrentThreadAllocatedBytes();
                long sum = 0;
                for (int i = 0; i < rounds; i++) {
                    ByteBuf b = alloc.directBuffer((i & 1) == 0 ? 64 : 4096);
                    b.writeLong(i);
                    sum += b.readLong();
                    b.release();
                }
                double perBuffer = (double) (THREADS.getCurrentThreadAllocatedBytes() - before) / rounds;
                best = Math.min(best, perBuffer);
                assertEquals((long) rounds * (rounds - 1) / 2, sum);
            }
            assertTrue(best < 1.0, "bytes allocated per buffer taken and released: " + best);
        } finally {
            ResourceLeakDetector.setLevel(level);
        }
    }

    /**
     * Buffers taken on one thread and released on another, two such pairs at once: every buffer
     * has one holder at a time (each writes its own pattern and reads it back before handing the
     * buffer over), and the objects are recycled across the threads.
     */
    @Test
    void buffersReleasedOnOtherThreadsAreRecycledAndNeverShared() throws Exception {
        RdmaByteBufAllocator alloc = new RdmaByteBufAllocator(1 << 16);
        int perProducer = 50_000;
        CompletableFuture<?>[] done = new CompletableFuture<?>[4];
        // by identity: a ByteBuf's equals and hashCode are its content's
        Set<ByteBuf> seen = Collections.synchronizedSet(Collections.newSetFromMap(new IdentityHashMap<>()));
        for (int p = 0; p < 2; p++) {
            BlockingQueue<ByteBuf> handOver = new ArrayBlockingQueue<>(64);
            long tag = (long) (p + 1) << 40;
            done[2 * p] = CompletableFuture.runAsync(() -> {
                try {
                    for (int i = 0; i < perProducer; i++) {
                        ByteBuf b = alloc.directBuffer(256);
                        seen.add(b);
                        for (int k = 0; k < 32; k++) {
                            b.writeLong(tag + i);
                        }
                        handOver.put(b);
                    }
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                }
            }, runnable -> new Thread(runnable).start());
            done[2 * p + 1] = CompletableFuture.runAsync(() -> {
                try {
                    for (int i = 0; i < perProducer; i++) {
                        ByteBuf b = handOver.take();
                        for (int k = 0; k < 32; k++) {
                            long v = b.readLong();
                            if (v != tag + i) {
                                throw new AssertionError("buffer " + i + " of producer " + tag + " read " + v);
                            }
                        }
                        assertTrue(b.release());
                    }
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                }
            }, runnable -> new Thread(runnable).start());
        }
        CompletableFuture.allOf(done).get(60, TimeUnit.SECONDS);
        assertTrue(seen.size() < 1_000, "buffer objects recycled across threads: " + seen.size() + " for "
                + 2 * perProducer + " buffers");
    }
}
