package io.github.verbs4j;

import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.ImportOps;
import io.github.verbs4j.raw.VerbsFunctions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.EnumSet;
import java.util.Objects;
import java.util.Set;

/**
 * A protection domain ({@code struct ibv_pd}): memory regions, queue pairs, shared receive
 * queues and address handles made from it may be used together, and only together.
 *
 * <p><b>Lifecycle</b>: {@link #close()} ({@code ibv_dealloc_pd}) refuses while memory regions,
 * memory windows, queue pairs, SRQs or address handles of this domain are open, naming them; it is idempotent.
 * Other methods after close throw {@link IllegalStateException}.
 *
 * <p><b>Thread-safety</b>: thread-safe, except that {@link #close()} must not race with other
 * calls on this domain or its children.
 */
public final class ProtectionDomain implements AutoCloseable {

    final Context context;
    final MemorySegment pd;
    final Lifecycle life = new Lifecycle();
    /** Made by {@code ibv_import_pd}: its close unimports instead of deallocating. */
    private final boolean imported;

    ProtectionDomain(Context context, MemorySegment pd) {
        this(context, pd, false);
    }

    ProtectionDomain(Context context, MemorySegment pd, boolean imported) {
        this.context = context;
        this.pd = pd;
        this.imported = imported;
    }

    /** The context this domain belongs to. */
    public Context context() {
        return context;
    }

    /**
     * The domain's kernel handle ({@code ibv_pd->handle}): what another context on the same
     * command fd passes to {@link Context#importProtectionDomain(int)}. An imported domain has
     * the handle of the domain it names.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} after close.
     */
    public int handle() {
        life.ensureOpen(this);
        return ImportOps.pdHandle(pd);
    }

    /** Whether this domain was imported ({@link Context#importProtectionDomain(int)}) rather than allocated. */
    public boolean isImported() {
        return imported;
    }

    /**
     * Imports the memory region with kernel handle {@code handle} ({@code ibv_import_mr}): a
     * region registered on the domain this one names (or on this domain), as a region of this
     * domain, with the same keys and length. Its {@link MemoryRegion#close()} unimports it
     * ({@code ibv_unimport_mr}); the registration stays. The import reports no address (rdma-core:
     * "the addr field in the imported MR is not applicable") nor rights: name the memory with
     * {@link #importMemoryRegion(int, MemorySegment)} to use the region in local work requests.
     * Without it the region has no segment, {@link MemoryRegion#address()} is 0 and
     * {@link MemoryRegion#access()} is empty: its keys ({@link MemoryRegion#lkey()},
     * {@link MemoryRegion#rkey()}) are what it offers.
     *
     * <p><b>Errors</b>: {@link VerbsException} naming {@code ibv_import_mr}: EINVAL for a handle
     * that names no region of this domain's (a region of another domain, one deregistered),
     * EOPNOTSUPP where the provider cannot import; {@link UnsupportedOperationException} when
     * libibverbs predates IBVERBS_1.10; {@link IllegalStateException} after close.
     *
     * @param handle the original's {@link MemoryRegion#handle()} (a {@code uint32_t})
     */
    public MemoryRegion importMemoryRegion(int handle) {
        return importRegion(handle, null);
    }

    /**
     * As {@link #importMemoryRegion(int)}, naming the memory the region covers (this process's
     * view of it, e.g. the original region's {@link MemoryRegion#segment()}, as rdma-core's
     * test_shared_pd passes the original's buffer): the region then has that segment and
     * address, and slices of it go into work requests as any region's. Work requests naming it
     * are refused once that segment's arena is closed.
     *
     * <p><b>Errors</b>: as {@link #importMemoryRegion(int)}; {@link IllegalArgumentException}
     * for a heap segment or one whose length is not the region's (the import is undone);
     * {@link IllegalStateException} when the segment's arena is closed.
     */
    public MemoryRegion importMemoryRegion(int handle, MemorySegment memory) {
        Objects.requireNonNull(memory, "memory");
        if (!memory.isNative()) {
            throw new IllegalArgumentException("an imported region's memory is native memory (got a heap segment)");
        }
        if (!memory.scope().isAlive()) {
            throw new IllegalStateException("cannot name memory whose arena is closed");
        }
        return importRegion(handle, memory);
    }

    private MemoryRegion importRegion(int handle, MemorySegment memory) {
        life.ensureOpen(this);
        MemorySegment mr;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            mr = (MemorySegment) VerbsFunctions.need(ImportOps.IMPORT_MR, "ibv_import_mr").invokeExact(errno, pd, handle);
            if (Downcalls.isNull(mr)) {
                throw new VerbsException("ibv_import_mr", Downcalls.errno(errno), "handle "
                        + Integer.toUnsignedString(handle) + " in " + this);
            }
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_import_mr", t);
        }
        MemoryRegion region = new MemoryRegion(this, mr, memory);
        if (memory != null && memory.byteSize() != region.length()) {
            region.close();
            throw new IllegalArgumentException("the imported region (handle " + Integer.toUnsignedString(handle) + ") is "
                    + region.length() + " bytes, the memory named for it " + memory.byteSize());
        }
        life.addNewDependent(this, region, region::close);
        return region;
    }

    /**
     * Registers memory the caller owns ({@code ibv_reg_mr_iova2}, iova = the segment's address;
     * {@code ibv_reg_mr} when the library predates IBVERBS_1.8). The region keeps a reference to
     * the segment (so memory of {@link Arena#ofAuto()} stays allocated while it is registered).
     * Posting a request that uses a region whose arena was closed throws instead of reaching the
     * device.
     *
     * <p><b>Remote access needs memory the region keeps alive.</b> A peer's RDMA WRITE, READ or
     * atomic reaches the memory without any local call, so Java cannot refuse it after the
     * caller closed the arena: the device would write into freed memory. With
     * {@link Access#REMOTE_WRITE}, {@link Access#REMOTE_READ} or {@link Access#REMOTE_ATOMIC}
     * this method therefore takes only memory whose lifetime the region controls: a segment of
     * {@link Arena#ofAuto()} (kept reachable by the region) or of {@link Arena#global()}. Use
     * {@link #allocate(long, Access...)} for memory the region owns, or
     * {@link #registerUnsafe(MemorySegment, Access...)} to register memory of a closeable arena
     * when you guarantee that the region is closed before the arena.
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} for a heap segment, an empty segment,
     * REMOTE_WRITE/REMOTE_ATOMIC without LOCAL_WRITE, or remote access to memory of an arena the
     * caller can close (confined or shared); {@link IllegalStateException} when the segment's
     * arena is closed or this domain is closed; {@link VerbsException} from the device (EINVAL,
     * ENOMEM, EFAULT for memory it cannot pin or that is not mapped, EPERM when the locked-memory
     * limit is hit).
     *
     * @param segment a native segment
     * @param access  the exact rights to grant; none given means local access only
     *                ({@link Access#LOCAL_WRITE})
     */
    public MemoryRegion register(MemorySegment segment, Access... access) {
        EnumSet<Access> set = access.length == 0 ? EnumSet.of(Access.LOCAL_WRITE) : Access.setOf(access);
        Objects.requireNonNull(segment, "segment");
        Access.checkConsistent(set, "ibv_reg_mr");
        if (grantsRemoteAccess(set) && callerCanClose(segment)) {
            throw new IllegalArgumentException("remote access " + set + " to memory of an arena the caller can close"
                    + " (" + segment.scope().getClass().getSimpleName() + "): a peer's RDMA operation after that close"
                    + " would reach freed memory. Register memory the region keeps alive (pd.allocate(size, access...),"
                    + " Arena.ofAuto(), Arena.global()), or use registerUnsafe if the arena outlives the region");
        }
        return register(segment, set, null);
    }

    /**
     * As {@link #register(MemorySegment, Access...)}, but also for remote access to memory of an
     * arena the caller can close. <b>The caller guarantees</b> that the region is closed before
     * the arena: a peer's RDMA WRITE or atomic into a closed arena's memory corrupts the process
     * (the JVM cannot intercept it). Local posts naming the region after the arena closed are
     * still refused.
     *
     * <p><b>Errors</b>: as {@link #register(MemorySegment, Access...)}, less the remote-access refusal.
     */
    public MemoryRegion registerUnsafe(MemorySegment segment, Access... access) {
        return register(segment, access.length == 0 ? EnumSet.of(Access.LOCAL_WRITE) : Access.setOf(access), null);
    }

    static boolean grantsRemoteAccess(Set<Access> access) {
        return access.contains(Access.REMOTE_WRITE) || access.contains(Access.REMOTE_READ)
                || access.contains(Access.REMOTE_ATOMIC);
    }

    /**
     * Whether the segment's arena is one its owner can close (confined or shared). The automatic
     * and global arenas cannot be closed: an automatic one frees its memory only once unreachable,
     * and the region holds the segment. FFM offers no public way to ask, so the session's class
     * decides; an unknown kind counts as closeable (the safe answer).
     */
    static boolean callerCanClose(MemorySegment segment) {
        String kind = segment.scope().getClass().getSimpleName();
        return !(kind.equals("GlobalSession") || kind.equals("ImplicitSession"));
    }

    /**
     * Allocates {@code size} bytes of page-aligned, zeroed native memory owned by the region and
     * registers it. The memory is freed when the region is closed.
     *
     * <p><b>Errors</b>: as {@link #register(MemorySegment, Access...)}; {@link OutOfMemoryError}
     * when the memory cannot be allocated.
     *
     * @param access the exact rights; none given means {@link Access#LOCAL_WRITE} only
     */
    public MemoryRegion allocate(long size, Access... access) {
        if (size <= 0) {
            throw new IllegalArgumentException("size must be positive, got " + size);
        }
        life.ensureOpen(this);
        Arena arena = Arena.ofShared();
        try {
            MemorySegment memory = arena.allocate(size, 4096);
            return register(memory, access.length == 0 ? EnumSet.of(Access.LOCAL_WRITE) : Access.setOf(access), arena);
        } catch (RuntimeException | Error e) {
            arena.close();
            throw e;
        }
    }

    private MemoryRegion register(MemorySegment segment, EnumSet<Access> access, Arena owned) {
        Objects.requireNonNull(segment, "segment");
        life.ensureOpen(this);
        if (!segment.isNative()) {
            throw new IllegalArgumentException("only native memory can be registered (got a heap segment)");
        }
        if (segment.byteSize() == 0) {
            throw new IllegalArgumentException("cannot register an empty segment");
        }
        if (!segment.scope().isAlive()) {
            throw new IllegalStateException("cannot register a segment whose arena is closed");
        }
        Access.checkConsistent(access, "ibv_reg_mr");
        int flags = Access.mask(access);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment mr;
            String verb;
            if (VerbsFunctions.REG_MR_IOVA2 != null) {
                verb = "ibv_reg_mr_iova2";
                mr = (MemorySegment) VerbsFunctions.REG_MR_IOVA2.invokeExact(errno, pd, segment, segment.byteSize(),
                        segment.address(), flags);
            } else {
                verb = "ibv_reg_mr";
                mr = (MemorySegment) VerbsFunctions.need(VerbsFunctions.REG_MR, "ibv_reg_mr").invokeExact(errno, pd, segment,
                        segment.byteSize(), flags);
            }
            if (Downcalls.isNull(mr)) {
                throw new VerbsException(verb, Downcalls.errno(errno), segment.byteSize() + " bytes at 0x"
                        + Long.toHexString(segment.address()) + " with " + access);
            }
            MemoryRegion region = new MemoryRegion(this, mr, segment, access, owned);
            life.addDependent(this, region);
            return region;
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_reg_mr", t);
        }
    }

    /**
     * Registers an implicit on-demand region: one region over this process's whole address
     * space ({@code ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND | access)}), nothing
     * pinned or faulted in. Any memory, including memory mapped after this call, is named
     * through its lkey and rkey with its virtual address as the offset
     * ({@link MemoryRegion#slice(MemorySegment)}, {@link MemoryRegion#remote(MemorySegment)}).
     * {@link Access#ON_DEMAND} is added to {@code access}; {@link Access#ZERO_BASED} and
     * {@link Access#MW_BIND} are refused (an implicit region has neither).
     *
     * <p><b>The safety trade-off, stated plainly.</b> Java's bounds checks end at the region,
     * and this region is the address space: a work request may name any address, and a peer
     * holding the rkey of a region with remote rights may read or write <em>any</em> memory of
     * the process (the Java heap included) at an address it chooses. What the device prevents
     * is a crash, not misuse: an address that is unmapped (or mapped without the access the
     * operation needs) fails the operation with a completion error. Memory whose arena was
     * closed may still be mapped (the allocator keeps it) and is then read or written as any
     * other. Grant remote rights on an implicit region only to peers you trust with the
     * whole process, and prefer explicit regions
     * ({@link #register(MemorySegment, Access...)} with {@link Access#ON_DEMAND}) otherwise.
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} for ZERO_BASED or MW_BIND, or
     * REMOTE_WRITE/REMOTE_ATOMIC without LOCAL_WRITE; {@link IllegalStateException} after close;
     * {@link VerbsException} from {@code ibv_reg_mr} (EINVAL or EOPNOTSUPP on a device without
     * implicit ODP: check {@link OdpCapabilities#implicitSupported()} of
     * {@link Context#odpCapabilities()}; rxe on Linux 6.1 and siw have none).
     *
     * @param access the rights (default: {@link Access#LOCAL_WRITE}); ON_DEMAND is implied
     */
    public MemoryRegion registerImplicitOnDemand(Access... access) {
        life.ensureOpen(this);
        EnumSet<Access> set = access.length == 0 ? EnumSet.of(Access.LOCAL_WRITE) : Access.setOf(access);
        set.add(Access.ON_DEMAND);
        if (set.contains(Access.ZERO_BASED) || set.contains(Access.MW_BIND)) {
            throw new IllegalArgumentException("an implicit on-demand region is neither zero-based nor a target of"
                    + " memory windows; asked for " + set);
        }
        Access.checkConsistent(set, "ibv_reg_mr");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment mr = (MemorySegment) VerbsFunctions.need(VerbsFunctions.REG_MR, "ibv_reg_mr").invokeExact(errno,
                    pd, MemorySegment.NULL, -1L, Access.mask(set));
            if (Downcalls.isNull(mr)) {
                throw new VerbsException("ibv_reg_mr", Downcalls.errno(errno), "implicit on-demand region (NULL, SIZE_MAX)"
                        + " with " + set);
            }
            MemoryRegion region = new MemoryRegion(this, mr, null, set, null);
            life.addDependent(this, region);
            return region;
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_reg_mr", t);
        }
    }

    /**
     * Registers memory exported by another driver as a dma-buf ({@code ibv_reg_dmabuf_mr}).
     * The region has no Java segment: it can be addressed remotely ({@link MemoryRegion#remote()})
     * and through its lkey, but not sliced for local work requests.
     *
     * <p><b>Errors</b>: {@link VerbsException} (EOPNOTSUPP when the device cannot map dma-bufs,
     * EBADF, EINVAL); {@link UnsupportedOperationException} when libibverbs predates IBVERBS_1.12.
     *
     * @param offset byte offset into the dma-buf
     * @param length bytes to register
     * @param iova   the address peers use for the first byte
     * @param fd     the dma-buf file descriptor
     */
    public MemoryRegion registerDmabuf(long offset, long length, long iova, int fd, Access... access) {
        life.ensureOpen(this);
        EnumSet<Access> set = access.length == 0 ? EnumSet.of(Access.LOCAL_WRITE) : Access.setOf(access);
        Access.checkConsistent(set, "ibv_reg_dmabuf_mr");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment mr = (MemorySegment) VerbsFunctions.need(VerbsFunctions.REG_DMABUF_MR, "ibv_reg_dmabuf_mr")
                    .invokeExact(errno, pd, offset, length, iova, fd, Access.mask(set));
            if (Downcalls.isNull(mr)) {
                throw new VerbsException("ibv_reg_dmabuf_mr", Downcalls.errno(errno), "fd " + fd + ", " + length + " bytes");
            }
            MemoryRegion region = new MemoryRegion(this, mr, null, set, null);
            life.addDependent(this, region);
            return region;
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_reg_dmabuf_mr", t);
        }
    }

    /**
     * Allocates a memory window of {@code type} ({@code ibv_alloc_mw}, through the provider's
     * {@code context->ops.alloc_mw}). It starts unbound: type 1 windows are bound with
     * {@link QueuePair#bindMemoryWindow}, type 2 windows with
     * {@link SendRequest#bindMemoryWindow}. See {@link MemoryWindow}.
     *
     * <p><b>Errors</b>: {@link UnsupportedOperationException} when the provider has no memory
     * windows (its {@code alloc_mw} op is NULL: siw); {@link VerbsException} (EOPNOTSUPP or EINVAL
     * when the device lacks that type, ENOMEM); {@link IllegalStateException} after close.
     */
    public MemoryWindow allocateMemoryWindow(MemoryWindow.Type type) {
        Objects.requireNonNull(type, "type");
        life.ensureOpen(this);
        MemoryWindow mw = MemoryWindow.allocate(this, type);
        life.addNewDependent(this, mw, () -> mw.close());
        return mw;
    }

    /** Starts a queue pair of {@code type} in this domain; see {@link QueuePairBuilder}. */
    public QueuePairBuilder queuePair(QpType type) {
        life.ensureOpen(this);
        return new QueuePairBuilder(this, Objects.requireNonNull(type, "type"));
    }

    /**
     * Creates a shared receive queue ({@code ibv_create_srq}).
     *
     * <p><b>Errors</b>: {@link VerbsException} (EINVAL beyond the device's max_srq_wr/max_srq_sge,
     * ENOMEM, EOPNOTSUPP without SRQ support).
     *
     * @param maxWr  the number of receive requests it holds
     * @param maxSge scatter entries per receive request
     */
    public SharedReceiveQueue createSrq(int maxWr, int maxSge) {
        life.ensureOpen(this);
        SharedReceiveQueue srq = SharedReceiveQueue.create(this, maxWr, maxSge);
        life.addDependent(this, srq);
        context.addChild(srq.handle.pointer(), srq);
        return srq;
    }

    /**
     * Creates an address handle for UD sends ({@code ibv_create_ah}).
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} when the port is RoCE and the address
     * has no GRH; {@link VerbsException} (EINVAL, ENOMEM).
     */
    public AddressHandle createAh(AddressVector address) {
        life.ensureOpen(this);
        AddressHandle ah = AddressHandle.create(this, address);
        life.addDependent(this, ah);
        return ah;
    }

    /**
     * Creates an address handle that replies to the sender of a UD receive
     * ({@code ibv_create_ah_from_wc}): the path back is read from the completion and the GRH
     * the receive buffer starts with (on RoCE v2 over IPv4, the IPv4 header in its last 20 bytes).
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} for a failed completion, one without a
     * GRH, or a GRH segment shorter than 40 bytes; {@link VerbsException} (EINVAL, ENOMEM).
     *
     * @param wc   the receive's completion (read now; the batch may be polled again afterwards)
     * @param grh  the first 40 bytes of the receive buffer
     * @param port the local port the receive came in on
     */
    public AddressHandle createAhFromCompletion(Completion wc, MemorySegment grh, int port) {
        life.ensureOpen(this);
        AddressHandle ah = AddressHandle.fromCompletion(this, wc, grh, port);
        life.addDependent(this, ah);
        return ah;
    }

    /**
     * Deallocates the domain ({@code ibv_dealloc_pd}), or for an imported one ends the import
     * ({@code ibv_unimport_pd}, which leaves the domain it names allocated). Idempotent.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} naming the regions, queue pairs, SRQs and
     * address handles still open (the domain stays open); {@link VerbsException} (EBUSY) when
     * the device refuses: softrdma also while another context still has the domain imported.
     */
    @Override
    public void close() {
        life.close(this, imported
                ? () -> {
                    // void, as rdma-core's: a statement, so that invokeExact's type is (MemorySegment)void
                    VerbsFunctions.need(ImportOps.UNIMPORT_PD, "ibv_unimport_pd").invokeExact(pd);
                }
                : () -> Lifecycle.destroyVerb("ibv_dealloc_pd", VerbsFunctions.DEALLOC_PD, pd),
                () -> context.life.removeDependent(this));
    }

    /** Whether {@link #close()} completed. */
    public boolean isClosed() {
        return life.isClosed();
    }

    @Override
    public String toString() {
        return "ProtectionDomain[" + context.device().name() + ", 0x" + Long.toHexString(pd.address())
                + (imported ? ", imported" : "") + "]";
    }
}
