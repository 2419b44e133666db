package io.github.verbs4j.netty;

import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.ProtectionDomain;
import io.netty.buffer.AbstractByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledDirectByteBuf;
import io.netty.buffer.UnpooledHeapByteBuf;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A {@code ByteBufAllocator} whose direct buffers lie in chunks of memory that an RDMA channel can
 * send from without a copy: set it as a channel's allocator
 * ({@code ChannelOption.ALLOCATOR, RdmaByteBufAllocator.DEFAULT}) and what the application
 * writes from {@code ctx.alloc()} is posted in place (the payload's scatter/gather entry points
 * into the chunk), the buffer released once its send completed. Any other buffer is copied into
 * the channel's send ring, as before.
 *
 * <p>Each chunk is registered lazily, once per protection domain that sends from it (each event
 * loop has its own per device), and the region is cached on the chunk; a loop that ends
 * deregisters its domain's regions. A buffer takes the next bytes of the current chunk; a chunk
 * whose buffers were all released is reused. A buffer grown past its first capacity moves to
 * ordinary direct memory (Netty's {@code capacity(int)}) and is then copied when written. Heap
 * buffers are Netty's unpooled ones.
 *
 * <p>Thread-safe: buffers may be taken and released on any thread.
 */
public final class RdmaByteBufAllocator extends AbstractByteBufAllocator {

    /** Chunks of 4 MiB. */
    public static final RdmaByteBufAllocator DEFAULT = new RdmaByteBufAllocator(4 << 20);

    /**
     * Every chunk of every allocator, sorted by start address: how a write finds the chunk of a
     * buffer, by a binary search that allocates nothing (a sorted map's {@code floorEntry} boxes
     * the address and returns a new entry: 40 B per message, TransportAllocationTest). Replaced
     * whole, under {@link #INDEX_LOCK}, when a chunk comes or goes (rarely); read without a lock.
     */
    private static volatile ChunkIndex index = new ChunkIndex(new long[0], new Chunk[0]);
    private static final Object INDEX_LOCK = new Object();

    private record ChunkIndex(long[] starts, Chunk[] chunks) {
    }

    /** Adds {@code chunk} to the index, or removes it. */
    private static void index(Chunk chunk, boolean add) {
        synchronized (INDEX_LOCK) {
            ChunkIndex x = index;
            int n = x.starts().length;
            int i = Arrays.binarySearch(x.starts(), chunk.segment.address());
            if (add == i >= 0) {
                return; // already there, or not there to remove
            }
            int at = add ? -i - 1 : i;
            int m = add ? n + 1 : n - 1;
            long[] starts = new long[m];
            Chunk[] chunks = new Chunk[m];
            System.arraycopy(x.starts(), 0, starts, 0, at);
            System.arraycopy(x.chunks(), 0, chunks, 0, at);
            int from = add ? at : at + 1;
            int to = add ? at + 1 : at;
            System.arraycopy(x.starts(), from, starts, to, n - from);
            System.arraycopy(x.chunks(), from, chunks, to, n - from);
            if (add) {
                starts[at] = chunk.segment.address();
                chunks[at] = chunk;
            }
            index = new ChunkIndex(starts, chunks);
        }
    }

    private static final int ALIGN = 64;

    private final int chunkSize;
    private final ArrayDeque<Chunk> reusable = new ArrayDeque<>();
    private Chunk current;

    /**
     * An allocator of chunks of {@code chunkSize} bytes (4 KiB..1 GiB); a buffer larger than a
     * chunk gets a chunk of its own.
     */
    public RdmaByteBufAllocator(int chunkSize) {
        super(true);
        if (chunkSize < 4096 || chunkSize > (1 << 30)) {
            throw new IllegalArgumentException("chunkSize must be within 4096..1 GiB, got " + chunkSize);
        }
        this.chunkSize = chunkSize;
    }

    @Override
    protected ByteBuf newHeapBuffer(int initialCapacity, int maxCapacity) {
        return new UnpooledHeapByteBuf(this, initialCapacity, maxCapacity);
    }

    @Override
    protected ByteBuf newDirectBuffer(int initialCapacity, int maxCapacity) {
        int size = Math.max(initialCapacity, 1);
        Chunk chunk;
        long offset;
        synchronized (this) {
            int aligned = (size + ALIGN - 1) & -ALIGN;
            if (aligned > chunkSize) {
                chunk = newChunk(aligned);
            } else {
                if (current == null || current.used + aligned > current.size) {
                    Chunk next = reusable.pollFirst();
                    if (current != null && current.live == 0) {
                        current.used = 0; // nothing of it is held: keep it for later
                        reusable.addLast(current);
                    }
                    current = next != null ? next : newChunk(chunkSize);
                }
                chunk = current;
            }
            offset = chunk.used;
            chunk.used += aligned;
            chunk.live++;
        }
        ByteBuffer carve = chunk.segment.asSlice(offset, initialCapacity).asByteBuffer();
        return new RegisteredByteBuf(this, carve, maxCapacity, chunk);
    }

    private Chunk newChunk(int size) {
        MemorySegment segment = Arena.ofAuto().allocate(size, 4096);
        Chunk chunk = new Chunk(segment, size, size > chunkSize);
        index(chunk, true);
        return chunk;
    }

    /** A buffer of {@code chunk} was released. */
    private synchronized void released(Chunk chunk) {
        if (--chunk.live > 0 || chunk == current) {
            return;
        }
        if (chunk.oversized) {
            index(chunk, false);
            chunk.deregister(); // its memory goes with the automatic arena once unreachable
        } else {
            chunk.used = 0;
            reusable.addLast(chunk);
        }
    }

    @Override
    public boolean isDirectBufferPooled() {
        return true;
    }

    /**
     * The chunk that holds {@code length} bytes at {@code address}, or {@code null} when they lie
     * in no chunk of any allocator.
     */
    static Chunk chunkOf(long address, int length) {
        ChunkIndex x = index;
        // the last start at or below address (starts are unsigned addresses; user space keeps them positive)
        int i = Arrays.binarySearch(x.starts(), address);
        if (i < 0) {
            i = -i - 2;
        }
        if (i < 0) {
            return null;
        }
        Chunk c = x.chunks()[i];
        return address + length <= x.starts()[i] + c.size ? c : null;
    }

    /** Whether any allocator has a chunk: when none has, no write looks for one. */
    static boolean anyChunks() {
        return index.starts().length > 0;
    }

    /** Deregisters every chunk's region on {@code pd}: its loop ends, and the domain with it. */
    static void forget(ProtectionDomain pd) {
        for (Chunk c : index.chunks()) {
            MemoryRegion r = c.regions.remove(pd);
            if (r != null) {
                r.close();
            }
        }
    }

    /** Memory registered lazily on each protection domain that sends from it. */
    static final class Chunk {
        final MemorySegment segment;
        final int size;
        final boolean oversized;
        final Map<ProtectionDomain, MemoryRegion> regions = new ConcurrentHashMap<>();
        // under the allocator's lock
        int used;
        int live;

        Chunk(MemorySegment segment, int size, boolean oversized) {
            this.segment = segment;
            this.size = size;
            this.oversized = oversized;
        }

        long address() {
            return segment.address();
        }

        /** The chunk's region on {@code pd}, registered on first use. On the loop that owns {@code pd}. */
        MemoryRegion region(ProtectionDomain pd) {
            MemoryRegion r = regions.get(pd);
            if (r == null) {
                r = pd.register(segment);
                regions.put(pd, r);
            }
            return r;
        }

        void deregister() {
            for (ProtectionDomain pd : regions.keySet()) {
                MemoryRegion r = regions.remove(pd);
                if (r != null) {
                    r.close();
                }
            }
        }
    }

    /** A direct buffer over part of a chunk; its release gives that part back. */
    static final class RegisteredByteBuf extends UnpooledDirectByteBuf {
        private final Chunk chunk;

        RegisteredByteBuf(RdmaByteBufAllocator alloc, ByteBuffer carve, int maxCapacity, Chunk chunk) {
            super(alloc, carve, maxCapacity);
            this.chunk = chunk;
            writerIndex(0); // a new buffer: empty, as every allocator's
        }

        @Override
        protected void deallocate() {
            super.deallocate(); // the carve is not freed (a view): the chunk is the allocator's
            ((RdmaByteBufAllocator) alloc()).released(chunk);
        }
    }
}
