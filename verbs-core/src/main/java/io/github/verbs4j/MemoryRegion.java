package io.github.verbs4j;

import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.ImportOps;
import io.github.verbs4j.raw.MrFields;
import io.github.verbs4j.raw.OdpOps;
import io.github.verbs4j.raw.VerbsConstants;
import io.github.verbs4j.raw.VerbsFunctions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Collections;
import java.util.EnumSet;
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
 * <p><b>On-demand paging</b>: a region registered with {@link Access#ON_DEMAND} is neither
 * pinned nor faulted in; the device faults pages in as it touches them, and {@link #advise}
 * prefetches ranges ({@code ibv_advise_mr}). An <em>implicit</em> on-demand region
 * ({@link ProtectionDomain#registerImplicitOnDemand}) covers the whole address space: see
 * {@link #isImplicit()} for how its offsets, bounds and slices work. A fault the device cannot
 * resolve (memory unmapped, or without the access the operation needs) fails the operation
 * with a completion error ({@link WcStatus#REMOTE_ACCESS_ERROR} for a peer's WRITE, READ or atomic,
 * {@link WcStatus#LOCAL_PROTECTION_ERROR} for local buffers), never a crash. See
 * {@link Context#odpCapabilities()} for what a device supports.
 *
 * <p><b>Lifecycle</b>: {@link #close()} ({@code ibv_dereg_mr}) is idempotent; work requests that
 * still name a closed region are refused when posted ({@link IllegalStateException}), as are
 * those whose caller-owned segment's arena was closed.
 *
 * <p><b>Re-registration</b>: {@link #reregister()} ({@code ibv_rereg_mr}) changes the memory, the
 * protection domain or the rights of the region in place; the accessors answer the new values
 * afterwards, and work requests built before follow it (see {@link Reregistration}).
 *
 * <p><b>Thread-safety</b>: thread-safe; {@link #close()} and {@link #reregister()} must not race
 * with posts using the region.
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

    // volatile: a re-registration changes them (not racing posts that name the region, see reregister)
    volatile ProtectionDomain pd;
    final MemorySegment mr;
    final Lifecycle life = new Lifecycle();
    private volatile MemorySegment segment;
    private volatile Set<Access> access;
    private volatile Arena owned;
    volatile int lkey;
    volatile int rkey;
    volatile long address;
    volatile long length;
    private volatile boolean implicit;
    /** Made by {@code ibv_import_mr}: its close unimports instead of deregistering. */
    private final boolean imported;

    MemoryRegion(ProtectionDomain pd, MemorySegment mr, MemorySegment segment, Set<Access> access, Arena owned) {
        this(pd, mr, segment, access, owned, false);
    }

    /**
     * An imported region ({@link ProtectionDomain#importMemoryRegion(int, MemorySegment)}): the
     * import reports neither address nor rights, so the address is {@code memory}'s (0 without it)
     * and the rights are empty.
     */
    MemoryRegion(ProtectionDomain pd, MemorySegment mr, MemorySegment memory) {
        this(pd, mr, memory, EnumSet.noneOf(Access.class), null, true);
    }

    private MemoryRegion(ProtectionDomain pd, MemorySegment mr, MemorySegment segment, Set<Access> access, Arena owned,
            boolean imported) {
        this.pd = pd;
        this.mr = MrFields.of(mr);
        this.segment = segment;
        this.access = Collections.unmodifiableSet(access);
        this.owned = owned;
        this.imported = imported;
        readKeysAndRange();
    }

    /** Reads lkey, rkey, address and length from the {@code struct ibv_mr}. */
    private void readKeysAndRange() {
        MrFields fields = MrFields.read(this.mr);
        this.lkey = fields.lkey();
        this.rkey = fields.rkey();
        // an imported region's addr is NULL (ibv_import_mr(3)): the memory named for it says where it is
        this.address = imported && segment != null ? segment.address() : fields.address();
        // an implicit ODP region: addr NULL, length SIZE_MAX (read as -1)
        this.implicit = segment == null && this.address == 0 && fields.length() == -1L;
        this.length = implicit ? Long.MAX_VALUE : fields.length();
    }

    /**
     * How a device prefetches on-demand memory ({@code enum ibv_advise_mr_advice}).
     */
    public enum Advice {
        /** {@code IBV_ADVISE_MR_ADVICE_PREFETCH}: make the pages present, readable. */
        PREFETCH(VerbsConstants.IBV_ADVISE_MR_ADVICE_PREFETCH),
        /** {@code IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE}: make the pages present, readable and writable. */
        PREFETCH_WRITE(VerbsConstants.IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE),
        /** {@code IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT}: map the pages already present, fault none in. */
        PREFETCH_NO_FAULT(VerbsConstants.IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT);

        private final int value;

        Advice(int value) {
            this.value = value;
        }

        /** The C value. */
        public int value() {
            return value;
        }
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

    /**
     * The registered length in bytes; {@link Long#MAX_VALUE} for an implicit region (registered
     * with length {@code SIZE_MAX}).
     */
    public long length() {
        return length;
    }

    /** Whether the region was registered with {@link Access#ON_DEMAND} (explicit or implicit). */
    public boolean isOnDemand() {
        return access.contains(Access.ON_DEMAND);
    }

    /**
     * Whether this is an implicit on-demand region: one registration over the whole address
     * space ({@code ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND | ...)}). Its
     * {@link #address()} is 0, so an offset into it <em>is</em> a virtual address, and
     * {@link #length()} is {@link Long#MAX_VALUE}: slices, scatter/gather entries and
     * {@link #remote()} accept any address. Java cannot check that such an address lies in
     * memory of the caller's: the device reaches whatever is mapped there (an unmapped address
     * fails with a completion error). Name memory through {@link #slice(MemorySegment)} and
     * {@link #remote(MemorySegment)}, which take the address from a segment.
     */
    public boolean isImplicit() {
        return implicit;
    }

    /**
     * The region's kernel handle ({@code ibv_mr->handle}): what another context sharing this
     * region's protection domain passes to {@link ProtectionDomain#importMemoryRegion(int)}.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} after close.
     */
    public int handle() {
        life.ensureOpen(this);
        return MrFields.handle(mr);
    }

    /** Whether this region was imported ({@link ProtectionDomain#importMemoryRegion(int)}) rather than registered. */
    public boolean isImported() {
        return imported;
    }

    /** The rights the region was registered (or last re-registered) with. */
    public Set<Access> access() {
        return access;
    }

    /** The protection domain the region belongs to (since its last re-registration). */
    public ProtectionDomain protectionDomain() {
        return pd;
    }

    /**
     * The registered memory.
     *
     * @throws IllegalStateException after close, or for a dma-buf or implicit on-demand region (which have no segment)
     */
    public MemorySegment segment() {
        life.ensureOpen(this);
        if (segment == null) {
            throw new IllegalStateException(this + (implicit ? " is an implicit on-demand region"
                    : imported ? " was imported without naming its memory" : " is a dma-buf region") + ": it has no Java segment");
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

    /**
     * The part of this region that {@code memory} covers, for a work request: for an implicit
     * region any native segment (its address is the offset), otherwise a segment inside the
     * region.
     *
     * @throws IllegalArgumentException for a heap segment or one of 2 GiB or more
     * @throws IndexOutOfBoundsException when the segment is not inside the region
     */
    public Slice slice(MemorySegment memory) {
        long offset = offsetOf(memory);
        if (memory.byteSize() > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("a scatter/gather entry names at most 2 GiB - 1 bytes, got " + memory.byteSize());
        }
        return new Slice(this, offset, (int) memory.byteSize());
    }

    /**
     * What a peer needs to address {@code memory} inside this region: its address and length
     * and the region's rkey. For an implicit region, the way to hand a peer one buffer.
     *
     * @throws IllegalArgumentException for a heap segment
     * @throws IndexOutOfBoundsException when the segment is not inside the region
     */
    public RemoteBuffer remote(MemorySegment memory) {
        life.ensureOpen(this);
        offsetOf(memory);
        return new RemoteBuffer(memory.address(), memory.byteSize(), rkey);
    }

    private long offsetOf(MemorySegment memory) {
        Objects.requireNonNull(memory, "memory");
        if (!memory.isNative()) {
            throw new IllegalArgumentException("only native memory can be named (got a heap segment)");
        }
        long offset = memory.address() - address;
        checkRange(offset, memory.byteSize());
        return offset;
    }

    /**
     * Prefetches {@code [offset, offset + length)} of this on-demand region
     * ({@code ibv_advise_mr}, through {@code verbs_context->advise_mr}), so that the device
     * finds the pages present. With {@code flush} ({@code IBV_ADVISE_MR_FLAG_FLUSH}) the call
     * returns when the pages are present and fails when they cannot be made so; without it the
     * device may do the work later and report nothing. For an implicit region the offset is the
     * virtual address.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} after close or for a region without
     * {@link Access#ON_DEMAND}; {@link IllegalArgumentException} for {@link Advice#PREFETCH_WRITE}
     * on a region without {@link Access#LOCAL_WRITE}; {@link IndexOutOfBoundsException} when the
     * range is not inside the region; {@link VerbsException} naming {@code ibv_advise_mr} and the
     * errno: EFAULT (with flush: memory in the range is unmapped or lacks the access),
     * EOPNOTSUPP (the device has no {@code advise_mr}: rxe, siw), EINVAL.
     *
     * <p><b>Thread-safety</b>: thread-safe.
     *
     * @param advice what to prefetch
     * @param offset the byte offset from the region's start (an address for an implicit region)
     * @param length the number of bytes (at most 2 GiB - 1: one scatter/gather entry)
     * @param flush  whether to wait for the prefetch and report its failure
     */
    public void advise(Advice advice, long offset, int length, boolean flush) {
        Objects.requireNonNull(advice, "advice");
        ensureUsable();
        if (!isOnDemand()) {
            throw new IllegalStateException("ibv_advise_mr: " + this + " is not an on-demand region (registered with " + access + ")");
        }
        if (advice == Advice.PREFETCH_WRITE && !access.contains(Access.LOCAL_WRITE)) {
            throw new IllegalArgumentException("ibv_advise_mr: PREFETCH_WRITE needs LOCAL_WRITE, and " + this
                    + " was registered with " + access + " (the device would answer EFAULT)");
        }
        checkRange(offset, length);
        MemorySegment fn = OdpOps.adviseMr(pd.context.ctx);
        if (fn == null) {
            throw new VerbsException("ibv_advise_mr", Errno.EOPNOTSUPP.code(), "the device's provider has no advise_mr");
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment sge = OdpOps.adviseRange(arena, address + offset, length, lkey);
            int rc = (int) OdpOps.ADVISE_MR.invokeExact(fn, pd.pd, advice.value(),
                    flush ? VerbsConstants.IBV_ADVISE_MR_FLAG_FLUSH : 0, sge, 1);
            if (rc != 0) {
                throw new VerbsException("ibv_advise_mr", rc, advice + " of [0x" + Long.toHexString(address + offset)
                        + ", +" + length + ") in " + this + (flush ? " with FLUSH" : ""));
            }
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_advise_mr", t);
        }
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
     * Starts a re-registration of this region ({@code ibv_rereg_mr}): name what changes on the
     * returned {@link Reregistration} and {@link Reregistration#apply() apply} it.
     *
     * <pre>{@code
     * mr.reregister().memory(other).apply();                       // IBV_REREG_MR_CHANGE_TRANSLATION
     * mr.reregister().protectionDomain(pd2).apply();               // IBV_REREG_MR_CHANGE_PD
     * mr.reregister().access(Access.LOCAL_WRITE).apply();          // IBV_REREG_MR_CHANGE_ACCESS
     * }</pre>
     *
     * @throws IllegalStateException when the region is closed
     */
    public Reregistration reregister() {
        life.ensureOpen(this);
        return new Reregistration(this);
    }

    /**
     * One {@code ibv_rereg_mr} call: the changes to make, applied together or not at all.
     *
     * <p><b>What follows the region</b>: its {@link #address()}, {@link #length()},
     * {@link #lkey()}, {@link #rkey()} (read back from the {@code struct ibv_mr}: softrdma and rxe
     * keep both keys, other devices may hand out new ones), {@link #segment()},
     * {@link #access()} and {@link #protectionDomain()}; the region moves from the old protection
     * domain's dependents to the new one's (the old one can close once nothing else uses it).
     * {@link SendRequest}s and {@link ReceiveRequest}s that name the region by offset are checked
     * again in full at their next post, their entries then pointing at the same offset of the new
     * memory (an entry beyond the new length is refused with {@link IndexOutOfBoundsException}).
     * Memory the region owned ({@link ProtectionDomain#allocate}) is freed when a translation
     * replaces it. {@link Slice}s made before keep their offset and length.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} when the region, the new protection domain or
     * the new memory's arena is closed, or for a translation of a dma-buf region;
     * {@link IllegalArgumentException} for nothing to change, a protection domain of another
     * context, a heap or empty segment, REMOTE_WRITE/REMOTE_ATOMIC without LOCAL_WRITE, or remote
     * rights over memory of an arena the caller can close unless given through
     * {@link Reregistration#unsafe()}; {@link VerbsException} naming {@code ibv_rereg_mr}, its
     * {@code enum ibv_rereg_mr_err_code} and errno: IBV_REREG_MR_ERR_CMD with EBUSY while memory
     * windows are bound to the region (softrdma), EFAULT for memory that is not mapped,
     * EOPNOTSUPP where the provider has no re-registration (the rxe and siw providers), EINVAL for
     * what the device refuses. A failed call leaves the region as it was.
     *
     * <p>Not thread-safe; {@link #apply()} must not race with posts naming the region or with its
     * {@link MemoryRegion#close()}.
     */
    public static final class Reregistration {
        private final MemoryRegion region;
        private MemorySegment memory;
        private boolean unsafeMemory;
        private ProtectionDomain newPd;
        private EnumSet<Access> newAccess;

        private Reregistration(MemoryRegion region) {
            this.region = region;
        }

        /**
         * Re-registers over {@code segment} instead ({@code IBV_REREG_MR_CHANGE_TRANSLATION},
         * iova = its address). With remote rights (the region's, or those given to
         * {@link #access}), the segment must be memory the region keeps alive, as for
         * {@link ProtectionDomain#register}.
         */
        public Reregistration memory(MemorySegment segment) {
            this.memory = Objects.requireNonNull(segment, "segment");
            return this;
        }

        /**
         * Allows remote rights over memory of an arena the caller can close (a new segment's, or
         * the region's own when only the rights change): the caller guarantees the region is
         * closed (or re-registered elsewhere) before that arena, as for
         * {@link ProtectionDomain#registerUnsafe}.
         */
        public Reregistration unsafe() {
            this.unsafeMemory = true;
            return this;
        }

        /** Moves the region into {@code pd} ({@code IBV_REREG_MR_CHANGE_PD}), a domain of the same context. */
        public Reregistration protectionDomain(ProtectionDomain pd) {
            this.newPd = Objects.requireNonNull(pd, "pd");
            return this;
        }

        /**
         * Replaces the region's rights with exactly {@code access} ({@code IBV_REREG_MR_CHANGE_ACCESS});
         * none given means {@link Access#LOCAL_WRITE} only.
         */
        public Reregistration access(Access... access) {
            this.newAccess = access.length == 0 ? EnumSet.of(Access.LOCAL_WRITE) : Access.setOf(access);
            return this;
        }

        /**
         * Calls {@code ibv_rereg_mr} with the changes named; see {@link Reregistration} for what
         * follows and the errors.
         */
        public void apply() {
            region.apply(this);
        }
    }

    private synchronized void apply(Reregistration r) {
        life.ensureOpen(this);
        int flags = 0;
        if (r.memory != null) {
            flags |= REREG_TRANSLATION;
        }
        if (r.newPd != null) {
            flags |= REREG_PD;
        }
        if (r.newAccess != null) {
            flags |= REREG_ACCESS;
        }
        if (flags == 0) {
            throw new IllegalArgumentException("nothing to re-register: name memory, protectionDomain or access");
        }
        Set<Access> rights = r.newAccess != null ? r.newAccess : access;
        if (r.newAccess != null) {
            Access.checkConsistent(r.newAccess, "ibv_rereg_mr");
        }
        MemorySegment seg = r.memory;
        if (seg != null) {
            if (segment == null) {
                throw new IllegalStateException(this + " is a dma-buf region: ibv_rereg_mr cannot give it new memory");
            }
            if (!seg.isNative()) {
                throw new IllegalArgumentException("only native memory can be registered (got a heap segment)");
            }
            if (seg.byteSize() == 0) {
                throw new IllegalArgumentException("cannot register an empty segment");
            }
            if (!seg.scope().isAlive()) {
                throw new IllegalStateException("cannot register a segment whose arena is closed");
            }
        }
        // the memory registered afterwards, when the caller (not the region) decides when it is freed
        MemorySegment after = seg != null ? seg : owned == null ? segment : null;
        if (!r.unsafeMemory && after != null && (seg != null || r.newAccess != null)
                && ProtectionDomain.grantsRemoteAccess(rights) && ProtectionDomain.callerCanClose(after)) {
            throw new IllegalArgumentException("remote access " + rights + " to memory of an arena the caller can close"
                    + " (" + after.scope().getClass().getSimpleName() + "): a peer's RDMA operation after that"
                    + " close would reach freed memory. Use memory the region keeps alive (Arena.ofAuto(),"
                    + " Arena.global()), or unsafe() if the arena outlives the region");
        }
        ProtectionDomain oldPd = pd;
        ProtectionDomain target = r.newPd;
        if (target != null) {
            if (target.context != oldPd.context) {
                throw new IllegalArgumentException(target + " belongs to another context than " + this
                        + ": ibv_rereg_mr moves a region only between domains of one context");
            }
            if (target != oldPd) {
                // registered with the new parent first: a domain closed meanwhile refuses here
                target.life.addDependent(target, this);
            }
        }
        boolean done = false;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment pdArg = target != null ? target.pd : MemorySegment.NULL;
            MemorySegment addrArg = seg != null ? seg : MemorySegment.NULL;
            long lengthArg = seg != null ? seg.byteSize() : 0L;
            int accessArg = r.newAccess != null ? Access.mask(r.newAccess) : 0;
            int rc = (int) VerbsFunctions.need(VerbsFunctions.REREG_MR, "ibv_rereg_mr").invokeExact(errno, mr, flags,
                    pdArg, addrArg, lengthArg, accessArg);
            if (rc != 0) {
                throw new VerbsException("ibv_rereg_mr", Downcalls.errno(errno), reregErrorName(rc) + " for " + this
                        + (seg != null ? ", new memory " + seg.byteSize() + " bytes at 0x" + Long.toHexString(seg.address()) : "")
                        + (target != null ? ", new " + target : "") + (r.newAccess != null ? ", new access " + r.newAccess : ""));
            }
            done = true;
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_rereg_mr", t);
        } finally {
            if (!done && target != null && target != oldPd) {
                target.life.removeDependent(this);
            }
        }
        Arena freed = null;
        if (seg != null) {
            freed = owned;
            owned = null;
            segment = seg;
        }
        if (r.newAccess != null) {
            access = Collections.unmodifiableSet(EnumSet.copyOf(r.newAccess));
        }
        if (target != null && target != oldPd) {
            pd = target;
            oldPd.life.removeDependent(this);
        }
        readKeysAndRange();
        // requests checked against the old range, keys or domain are checked in full at their next post
        Validity.advance();
        if (freed != null) {
            freed.close();
        }
    }

    private static final int REREG_TRANSLATION = VerbsConstants.IBV_REREG_MR_CHANGE_TRANSLATION;
    private static final int REREG_PD = VerbsConstants.IBV_REREG_MR_CHANGE_PD;
    private static final int REREG_ACCESS = VerbsConstants.IBV_REREG_MR_CHANGE_ACCESS;

    /** The name of an {@code enum ibv_rereg_mr_err_code}. */
    static String reregErrorName(int rc) {
        if (rc == VerbsConstants.IBV_REREG_MR_ERR_INPUT) {
            return "IBV_REREG_MR_ERR_INPUT";
        } else if (rc == VerbsConstants.IBV_REREG_MR_ERR_DONT_FORK_NEW) {
            return "IBV_REREG_MR_ERR_DONT_FORK_NEW";
        } else if (rc == VerbsConstants.IBV_REREG_MR_ERR_DO_FORK_OLD) {
            return "IBV_REREG_MR_ERR_DO_FORK_OLD";
        } else if (rc == VerbsConstants.IBV_REREG_MR_ERR_CMD) {
            return "IBV_REREG_MR_ERR_CMD";
        } else if (rc == VerbsConstants.IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW) {
            return "IBV_REREG_MR_ERR_CMD_AND_DO_FORK_NEW";
        }
        return "return code " + rc;
    }

    /**
     * Deregisters the region ({@code ibv_dereg_mr}) and frees memory it owns; for an imported
     * region ends the import ({@code ibv_unimport_mr}: the registration stays). Idempotent.
     *
     * <p><b>Errors</b>: {@link VerbsException} (EINVAL on softrdma and rxe while memory windows are
     * bound to it: close or invalidate them first).
     */
    @Override
    public void close() {
        life.close(this, imported
                ? () -> {
                    // void, as rdma-core's: a statement, so that invokeExact's type is (MemorySegment)void
                    VerbsFunctions.need(ImportOps.UNIMPORT_MR, "ibv_unimport_mr").invokeExact(mr);
                }
                : () -> Lifecycle.destroyVerb("ibv_dereg_mr", VerbsFunctions.DEREG_MR, mr), () -> {
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
        if (implicit) {
            return "MemoryRegion[implicit on-demand, lkey 0x" + Integer.toHexString(lkey) + ", rkey 0x"
                    + Integer.toHexString(rkey) + "]";
        }
        return "MemoryRegion[0x" + Long.toHexString(address) + "+" + length + ", lkey 0x" + Integer.toHexString(lkey)
                + ", rkey 0x" + Integer.toHexString(rkey) + (imported ? ", imported" : "") + "]";
    }
}
