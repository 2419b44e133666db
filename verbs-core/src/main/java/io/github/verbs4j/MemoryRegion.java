package io.github.verbs4j;

import io.github.verbs4j.ffi.ibv_mr;
import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.raw.VerbsFunctions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Collections;
import java.util.Objects;
import java.util.Set;

/**
 * Registered memory ({@code struct ibv_mr}): a range the device may access with the rights it
 * was registered with, named locally by its lkey and remotely by its rkey.
 *
 * <p>A region made with {@link ProtectionDomain#register} holds a reference to the caller's
 * segment (so an automatic arena stays reachable while it is registered); one made with
 * {@link ProtectionDomain#allocate} owns its memory and frees it on {@link #close()}.
 *
 * <p><b>Lifecycle</b>: {@link #close()} ({@code ibv_dereg_mr}) is idempotent; work requests that
 * still name a closed region are refused when posted ({@link IllegalStateException}), as are
 * those whose caller-owned segment's arena was closed.
 *
 * <p><b>Thread-safety</b>: thread-safe; {@link #close()} must not race with posts using it.
 */
public final class MemoryRegion implements AutoCloseable {

    /**
     * A part of a region: what one scatter/gather entry ({@code struct ibv_sge}) names.
     *
     * @param region the region
     * @param offset the byte offset from the region's start
     * @param length the number of bytes
     */
    public record Slice(MemoryRegion region, long offset, int length) {
        /** Checks that the part lies inside the region. */
        public Slice {
            Objects.requireNonNull(region, "region");
            region.checkRange(offset, length);
        }

        /** The slice's memory (a view of the region's segment). */
        public MemorySegment segment() {
            return region.segment().asSlice(offset, length);
        }

        /** The address of the slice's first byte. */
        public long address() {
            return region.address() + offset;
        }
    }

    final ProtectionDomain pd;
    final MemorySegment mr;
    final Lifecycle life = new Lifecycle();
    private final MemorySegment segment;
    private final Set<Access> access;
    private final Arena owned;
    final int lkey;
    final int rkey;
    final long address;
    final long length;

    MemoryRegion(ProtectionDomain pd, MemorySegment mr, MemorySegment segment, Set<Access> access, Arena owned) {
        this.pd = pd;
        this.mr = mr.reinterpret(ibv_mr.layout().byteSize());
        this.segment = segment;
        this.access = Collections.unmodifiableSet(access);
        this.owned = owned;
        this.lkey = ibv_mr.lkey(this.mr);
        this.rkey = ibv_mr.rkey(this.mr);
        this.address = ibv_mr.addr(this.mr).address();
        this.length = ibv_mr.length(this.mr);
    }

    /** The local key, for scatter/gather entries. */
    public int lkey() {
        return lkey;
    }

    /** The remote key, for peers' RDMA READ/WRITE/atomics. */
    public int rkey() {
        return rkey;
    }

    /** The address of the first byte (as registered; also the iova peers use). */
    public long address() {
        return address;
    }

    /** The registered length in bytes. */
    public long length() {
        return length;
    }

    /** The rights the region was registered with. */
    public Set<Access> access() {
        return access;
    }

    /** The protection domain the region belongs to. */
    public ProtectionDomain protectionDomain() {
        return pd;
    }

    /**
     * The registered memory.
     *
     * @throws IllegalStateException after close, or for a dma-buf region (which has no segment)
     */
    public MemorySegment segment() {
        life.ensureOpen(this);
        if (segment == null) {
            throw new IllegalStateException(this + " is a dma-buf region: it has no Java segment");
        }
        return segment;
    }

    /**
     * The part {@code [offset, offset + length)} for a work request.
     *
     * @throws IndexOutOfBoundsException when the part is not inside the region
     */
    public Slice slice(long offset, int length) {
        return new Slice(this, offset, length);
    }

    /** The whole region as one slice (regions up to 2 GiB - 1; larger ones must be sliced). */
    public Slice all() {
        if (length > Integer.MAX_VALUE) {
            throw new IllegalStateException(this + " is larger than one scatter/gather entry can name: slice it");
        }
        return new Slice(this, 0, (int) length);
    }

    /** What a peer needs to address this region: address, length and rkey. */
    public RemoteBuffer remote() {
        life.ensureOpen(this);
        return new RemoteBuffer(address, length, rkey);
    }

    void checkRange(long offset, long len) {
        if (offset < 0 || len < 0 || offset > length || len > length - offset) {
            throw new IndexOutOfBoundsException("[" + offset + ", " + (offset + len) + ") is outside " + this
                    + " (" + length + " bytes)");
        }
    }

    /** Whether the region's memory is a caller's segment, whose arena may close while the region is registered. */
    boolean callerMemory() {
        return segment != null && owned == null;
    }

    /**
     * Whether the region can be handed to the device now: open, and its memory alive.
     * Throws {@link IllegalStateException} naming the problem.
     */
    void ensureUsable() {
        if (life.isClosed()) {
            throw Lifecycle.closedException(this);
        }
        if (segment != null && !segment.scope().isAlive()) {
            throw new IllegalStateException(this + ": the arena of its memory was closed while it was registered");
        }
    }

    /**
     * Deregisters the region ({@code ibv_dereg_mr}) and frees memory it owns. Idempotent.
     *
     * <p><b>Errors</b>: {@link VerbsException} (EINVAL on softrdma and rxe while memory windows are
     * bound to it: close or invalidate them first).
     */
    @Override
    public void close() {
        life.close(this, () -> Lifecycle.destroyVerb("ibv_dereg_mr", VerbsFunctions.DEREG_MR, mr), () -> {
            if (owned != null) {
                owned.close();
            }
            pd.life.removeDependent(this);
            // requests checked while the region was open are checked in full at their next post
            Validity.advance();
        });
    }

    /** Whether {@link #close()} completed. */
    public boolean isClosed() {
        return life.isClosed();
    }

    @Override
    public String toString() {
        return "MemoryRegion[0x" + Long.toHexString(address) + "+" + length + ", lkey 0x" + Integer.toHexString(lkey)
                + ", rkey 0x" + Integer.toHexString(rkey) + "]";
    }
}
