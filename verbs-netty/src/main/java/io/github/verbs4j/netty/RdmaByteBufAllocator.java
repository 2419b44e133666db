package io.github.verbs4j.netty;

import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.ProtectionDomain;
import io.netty.buffer.AbstractByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledHeapByteBuf;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A {@code ByteBufAllocator} whose direct buffers lie in chunks of memory that an RDMA channel can
 * send from without a copy. It is the default allocator of {@link RdmaSocketChannel} (accepted
 * channels included): what the application writes from {@code ctx.alloc()} is posted in place
 * (the payload's scatter/gather entry points into the chunk), the buffer released once its send
 * completed, and reads are copied into its buffers. Any other buffer is copied into the channel's
 * send ring. Another allocator is set as usual, with {@code ChannelOption.ALLOCATOR}.
 *
 * <p>Each chunk is registered lazily, once per protection domain that sends from it (each event
 * loop has its own per device), and the region is cached on the chunk; a loop that ends
 * deregisters its domain's regions. Chunks are cut into blocks of power-of-two size classes
 * (64 B up to the chunk size); each block has one buffer object for good, which its release puts
 * back on its class's free list for the next allocation of that class: in steady state neither
 * an allocation nor a release allocates (TransportAllocationTest), as with Netty's pooled
 * allocator. The chunks stay allocated (the pool's high-water mark, per size class). A buffer
 * larger than a chunk gets a chunk of its own, deregistered and dropped on release. A buffer
 * grown past its block moves to ordinary direct memory (Netty's {@code capacity(int)}) and is
 * then copied when written. Heap buffers are Netty's unpooled ones.
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

    /** The smallest block: size class 0. Blocks are powers of two from here, 64-byte aligned in their chunk. */
    private static final int MIN_BLOCK = 64;

    private final int chunkSize;
    /** Per size class ({@code MIN_BLOCK << class} bytes, up to the chunk size): its released buffers. */
    private final FreeList[] free;
    /** The chunk new blocks are carved from; under this allocator's lock. */
    private Chunk current;

    /**
     * An allocator of chunks of {@code chunkSize} bytes (4 KiB..1 GiB); a buffer larger than a
     * chunk's largest block gets a chunk of its own.
     */
    public RdmaByteBufAllocator(int chunkSize) {
        super(true);
        if (chunkSize < 4096 || chunkSize > (1 << 30)) {
            throw new IllegalArgumentException("chunkSize must be within 4096..1 GiB, got " + chunkSize);
        }
        this.chunkSize = chunkSize;
        int classes = 32 - Integer.numberOfLeadingZeros(chunkSize / MIN_BLOCK); // blocks up to chunkSize
        free = new FreeList[classes];
        for (int i = 0; i < classes; i++) {
            free[i] = new FreeList();
        }
    }

    /** The size class of a block of at least {@code size} bytes. */
    private static int sizeClass(int size) {
        return size <= MIN_BLOCK ? 0 : 32 - Integer.numberOfLeadingZeros(size - 1) - Integer.numberOfTrailingZeros(MIN_BLOCK);
    }

    @Override
    protected ByteBuf newHeapBuffer(int initialCapacity, int maxCapacity) {
        return new UnpooledHeapByteBuf(this, initialCapacity, maxCapacity);
    }

    @Override
    protected ByteBuf newDirectBuffer(int initialCapacity, int maxCapacity) {
        int sizeClass = sizeClass(initialCapacity);
        RegisteredByteBuf buf;
        if (sizeClass >= free.length) {
            // a chunk of its own, deregistered and dropped with the buffer's release
            int size = (initialCapacity + MIN_BLOCK - 1) & -MIN_BLOCK;
            buf = new RegisteredByteBuf(this, newChunk(size), 0, size, -1);
        } else {
            buf = free[sizeClass].poll();
            if (buf == null) {
                buf = carve(sizeClass);
            }
        }
        return buf.reuse(initialCapacity, maxCapacity);
    }

    /** A new block of {@code sizeClass}, from the current chunk or a new one. */
    private synchronized RegisteredByteBuf carve(int sizeClass) {
        int size = MIN_BLOCK << sizeClass;
        if (current == null || current.used + size > current.size) {
            current = newChunk(chunkSize); // the old one's tail, smaller than this block, stays unused
        }
        long offset = current.used;
        current.used += size;
        return new RegisteredByteBuf(this, current, offset, size, sizeClass);
    }

    private static Chunk newChunk(int size) {
        MemorySegment segment = Arena.ofAuto().allocate(size, 4096);
        Chunk chunk = new Chunk(segment, size);
        index(chunk, true);
        return chunk;
    }

    /** A chunk of one buffer, released: it goes, and its regions with it. */
    private static void releasedOversized(Chunk chunk) {
        index(chunk, false);
        chunk.deregister(); // its memory goes with the automatic arena once unreachable
    }

    /**
     * The released buffers of one size class: a stack linked through the buffers themselves, so
     * that neither a release nor an allocation allocates; a lock, not a lock-free stack, as the
     * same buffer comes back again and again (a CAS on the top would suffer ABA).
     */
    private static final class FreeList {
        private RegisteredByteBuf top;

        synchronized RegisteredByteBuf poll() {
            RegisteredByteBuf b = top;
            if (b != null) {
                top = b.nextFree;
                b.nextFree = null;
            }
            return b;
        }

        synchronized void push(RegisteredByteBuf b) {
            b.nextFree = top;
            top = b;
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
        final Map<ProtectionDomain, MemoryRegion> regions = new ConcurrentHashMap<>();
        /** Bytes carved into blocks so far; under the allocator's lock. */
        int used;

        Chunk(MemorySegment segment, int size) {
            this.segment = segment;
            this.size = size;
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

    /**
     * A direct buffer over one block of a chunk. The buffer object belongs to its block for good:
     * its last release pushes it onto its size class's free list, and the next allocation of that
     * class takes it (reference count 1, indices and marks 0, capacity and maximum as asked), as
     * Netty's pooled allocator recycles its buffer objects; no object is made per allocation.
     * Until then it refuses access ({@code IllegalReferenceCountException}, its count is 0); a
     * reference kept past the release and used after the object was taken again reaches the new
     * holder's bytes, as with Netty's pooled buffers (nothing can tell a stale reference to a
     * reused object from a current one). Its capacity is what was asked, checked on every access
     * ({@link BlockByteBuf}); grown past its block, its release frees the memory it grew into and
     * gives the block back under a new buffer object.
     */
    static final class RegisteredByteBuf extends BlockByteBuf {
        private final RdmaByteBufAllocator owner;
        private final Chunk chunk;
        private final long offset;
        /** Its size class, or -1 for a chunk of its own. */
        private final int sizeClass;
        /** The next released buffer of its size class; under the free list's lock. */
        RegisteredByteBuf nextFree;

        RegisteredByteBuf(RdmaByteBufAllocator owner, Chunk chunk, long offset, int blockSize, int sizeClass) {
            super(owner, chunk.segment.asSlice(offset, blockSize).asByteBuffer());
            this.owner = owner;
            this.chunk = chunk;
            this.offset = offset;
            this.sizeClass = sizeClass;
        }

        /** Makes it a new buffer of {@code capacity} bytes (at most its block) and {@code maxCapacity}. */
        RegisteredByteBuf reuse(int capacity, int maxCapacity) {
            reuse(capacity, maxCapacity, 0); // empty, as every allocator's new buffer
            return this;
        }

        @Override
        protected void deallocate() {
            if (sizeClass < 0) {
                super.deallocate(); // frees grown memory; the chunk is the allocator's
                releasedOversized(chunk);
            } else if (inBlock()) {
                owner.free[sizeClass].push(this); // its ByteBuffer stays: the block, for the next holder
            } else {
                super.deallocate(); // frees the memory it grew into
                owner.free[sizeClass].push(new RegisteredByteBuf(owner, chunk, offset, blockSize(), sizeClass));
            }
        }
    }
}
