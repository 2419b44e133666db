package io.github.verbs4j;

import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.raw.ContextOps;
import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.MwFields;
import io.github.verbs4j.raw.VerbsConstants;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A memory window ({@code struct ibv_mw}): a remote key for a part of a registered region, with
 * its own rights, that can be bound, moved and revoked without re-registering memory. The region
 * must have been registered with {@link Access#MW_BIND}.
 *
 * <ul>
 * <li><b>Type 1</b> ({@link Type#TYPE_1}): bound with {@link QueuePair#bindMemoryWindow}
 * ({@code ibv_bind_mw}); any queue pair of the protection domain answers requests through it.
 * Binding it again (or with an empty range) replaces the binding; it cannot be invalidated.</li>
 * <li><b>Type 2</b> ({@link Type#TYPE_2}, type 2B): bound by a send request
 * ({@link SendRequest#bindMemoryWindow}) on a queue pair of its domain, and then answers only
 * that queue pair; it must be invalidated ({@link SendRequest#localInvalidate},
 * or the peer's {@link SendRequest#sendWithInvalidate}) before it can be bound again.</li>
 * </ul>
 *
 * <p>Every bind gives the window a new rkey ({@code ibv_inc_rkey}: the low 8 bits change), so a
 * peer holding the previous rkey is refused: its RDMA operations complete with
 * {@link WcStatus#REMOTE_ACCESS_ERROR}, as do those through an invalidated window or outside the
 * bound range. {@link #rkey()} is the rkey of the latest bind posted.
 *
 * <p><b>Lifecycle</b>: a child of its {@link ProtectionDomain} (which refuses to close while the
 * window is open); {@link #close()} ({@code ibv_dealloc_mw}) unbinds it and is idempotent. A
 * region with bound windows refuses deregistration (EINVAL on softrdma and rxe): close or
 * invalidate the windows first.
 *
 * <p><b>Thread-safety</b>: the accessors are thread-safe; binds of one window must not race
 * each other, and {@link #close()} must not race with posts naming the window.
 */
public final class MemoryWindow implements AutoCloseable {

    /** The kind of window ({@code enum ibv_mw_type}). */
    public enum Type {
        /** {@code IBV_MW_TYPE_1}: bound by {@code ibv_bind_mw}, not tied to a queue pair. */
        TYPE_1(VerbsConstants.IBV_MW_TYPE_1),
        /** {@code IBV_MW_TYPE_2}: bound by a BIND_MW send request, tied to that queue pair. */
        TYPE_2(VerbsConstants.IBV_MW_TYPE_2);

        private final int value;

        Type(int value) {
            this.value = value;
        }

        /** The C enum value. */
        public int value() {
            return value;
        }
    }

    final ProtectionDomain pd;
    final MemorySegment mw;
    final Lifecycle life = new Lifecycle();
    private final Type type;
    private final MemorySegment deallocFn;
    private volatile long boundAddress;
    private volatile long boundLength;

    MemoryWindow(ProtectionDomain pd, MemorySegment mw, Type type) {
        this.pd = pd;
        this.mw = MwFields.of(mw);
        this.type = type;
        this.deallocFn = ContextOps.function(pd.context.ctx, ContextOps.DEALLOC_MW_OFFSET, "ibv_dealloc_mw");
    }

    static MemoryWindow allocate(ProtectionDomain pd, Type type) {
        MemorySegment fn = ContextOps.function(pd.context.ctx, ContextOps.ALLOC_MW_OFFSET, "ibv_alloc_mw");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment mw = (MemorySegment) ContextOps.ALLOC_MW.invokeExact(fn, errno, pd.pd, type.value());
            if (Downcalls.isNull(mw)) {
                throw new VerbsException("ibv_alloc_mw", Downcalls.errno(errno), type + " in " + pd);
            }
            return new MemoryWindow(pd, mw, type);
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_alloc_mw", t);
        }
    }

    /** The window's type. */
    public Type type() {
        return type;
    }

    /** The protection domain the window belongs to. */
    public ProtectionDomain protectionDomain() {
        return pd;
    }

    /** The remote key of the latest bind posted (before any bind: the key it was allocated with). */
    public int rkey() {
        return MwFields.rkey(mw);
    }

    /**
     * What a peer needs to address the window as last bound: the range's address (0 for a
     * {@link Access#ZERO_BASED} window, whose peers address offsets), its length and the rkey.
     *
     * @throws IllegalStateException after close
     */
    public RemoteBuffer remote() {
        life.ensureOpen(this);
        return new RemoteBuffer(boundAddress, boundLength, rkey());
    }

    /** Records a bind just posted: the new rkey (in the native struct, as ibv_bind_mw does) and the range. */
    void posted(int newRkey, long address, long length) {
        MwFields.rkey(mw, newRkey);
        boundAddress = address;
        boundLength = length;
    }

    /** {@code ibv_inc_rkey}: the next rkey, its low 8 bits incremented. */
    static int incRkey(int rkey) {
        return (rkey & ~0xff) | ((rkey + 1) & 0xff);
    }

    /**
     * Deallocates the window ({@code ibv_dealloc_mw}), which unbinds it. Idempotent.
     *
     * <p><b>Errors</b>: {@link VerbsException} when the device refuses.
     */
    @Override
    public void close() {
        life.close(this, () -> {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment errno = Downcalls.errnoSegment(arena);
                int rc = (int) ContextOps.DEALLOC_MW.invokeExact(deallocFn, errno, mw);
                if (rc != 0) {
                    throw VerbsException.of("ibv_dealloc_mw", Downcalls.errnoOf(rc, errno));
                }
            }
        }, () -> pd.life.removeDependent(this));
    }

    /** Whether {@link #close()} completed. */
    public boolean isClosed() {
        return life.isClosed();
    }

    @Override
    public String toString() {
        return "MemoryWindow[" + type + ", rkey 0x" + Integer.toHexString(rkey()) + "]";
    }
}
