package io.github.verbs4j;

import io.github.verbs4j.internal.Fds;
import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.internal.Telemetry;
import io.github.verbs4j.internal.Timeouts;
import io.github.verbs4j.raw.AsyncEventFields;
import io.github.verbs4j.raw.ContextFields;
import io.github.verbs4j.raw.ContextOps;
import io.github.verbs4j.raw.CqInitAttrEx;
import io.github.verbs4j.raw.DeviceAttr;
import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.FileDescriptors;
import io.github.verbs4j.raw.ExtendedOps;
import io.github.verbs4j.raw.GidEntryFields;
import io.github.verbs4j.raw.ImportOps;
import io.github.verbs4j.raw.OdpOps;
import io.github.verbs4j.raw.PortAttr;
import io.github.verbs4j.raw.QpFields;
import io.github.verbs4j.raw.VerbsFunctions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * An open RDMA device ({@code struct ibv_context}): the root of every other owner.
 *
 * <pre>{@code
 * try (Context ctx = Verbs.open("softrdma0");
 *      ProtectionDomain pd = ctx.allocatePd();
 *      CompletionQueue cq = ctx.createCq(256)) {
 *     ...
 * }
 * }</pre>
 *
 * <p><b>Lifecycle</b>: {@link #close()} ({@code ibv_close_device}) refuses while protection
 * domains, completion queues or completion channels made from this context are open, naming
 * them. It is idempotent. Any other method after close throws {@link IllegalStateException}.
 *
 * <p><b>Thread-safety</b>: thread-safe, except that {@link #close()} must not race with other
 * calls on this context or its children.
 */
public final class Context implements AutoCloseable {

    final MemorySegment ctx;
    final Lifecycle life = new Lifecycle();
    private final Device device;
    /** {@code verbs_context->query_port}, or {@code null} when the context has no extended ops. */
    private final MemorySegment queryPortEx;
    private volatile Thread asyncListener;
    /**
     * The open completion queues, queue pairs and SRQs made from this context, by native
     * address: async events name their object by pointer, and this resolves it without reading
     * native memory the provider may already have freed.
     */
    private final Map<Long, Object> children = new ConcurrentHashMap<>();
    /** Opened by someone else (librdmacm): {@link #close()} leaves the device open. */
    private final boolean borrowed;

    private Context(MemorySegment ctx, Device device, boolean borrowed) {
        this.ctx = ctx;
        this.device = device;
        this.queryPortEx = ContextOps.extendedQueryPort(ctx);
        this.borrowed = borrowed;
        if (!borrowed) {
            life.opened(this); // a root; one librdmacm opened is librdmacm's, kept for the process
        }
    }

    /**
     * Wraps an {@code ibv_context} that another library opened and will close (librdmacm's
     * {@code cm_id->verbs}). Closing the wrapper checks its children as usual but does not call
     * {@code ibv_close_device}.
     */
    static Context borrow(MemorySegment context) {
        return wrap(context, true);
    }

    /** A Context over {@code context}, its device described from {@code context->device}. */
    private static Context wrap(MemorySegment context, boolean borrowed) {
        MemorySegment ctx = ContextFields.of(context);
        MemorySegment dev = ContextFields.device(ctx);
        try {
            return new Context(ctx, Verbs.describe(dev), borrowed);
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_get_device_name", t);
        }
    }

    /**
     * Opens the device called {@code name} ({@code ibv_get_device_list} then
     * {@code ibv_open_device}).
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} when no device has that name (the
     * message lists those present); {@link VerbsException} from {@code ibv_open_device} (ENOMEM,
     * ENODEV, EACCES on the uverbs char device) or {@code ibv_get_device_list} (ENOSYS: no RDMA
     * in the kernel).
     */
    static Context open(String name) {
        Objects.requireNonNull(name, "name");
        return Verbs.scanDevices(devices -> {
            StringBuilder names = new StringBuilder();
            for (MemorySegment dev : devices) {
                Device device = Verbs.describe(dev);
                if (device.name().equals(name)) {
                    try (Arena arena = Arena.ofConfined()) {
                        MemorySegment errno = Downcalls.errnoSegment(arena);
                        MemorySegment ctx = (MemorySegment) VerbsFunctions.need(VerbsFunctions.OPEN_DEVICE, "ibv_open_device")
                                .invokeExact(errno, dev);
                        if (Downcalls.isNull(ctx)) {
                            throw new VerbsException("ibv_open_device", Downcalls.errno(errno), "device " + name);
                        }
                        Telemetry.LOG.log(System.Logger.Level.DEBUG, "opened device {0} (node GUID {1})", name,
                                device.guidString());
                        return new Context(ContextFields.of(ctx), device, false);
                    }
                }
                names.append(names.isEmpty() ? "" : ", ").append(device.name());
            }
            throw new IllegalArgumentException("no RDMA device named " + name + " (devices: "
                    + (names.isEmpty() ? "none" : names) + ")");
        });
    }

    /**
     * Opens a second context on the ucontext whose command fd {@code commandFd} is (a dup of)
     * ({@code ibv_import_device}); see {@link Verbs#importContext(int)}. On success the new
     * context owns the descriptor ({@code ibv_close_device} closes it).
     */
    static Context importDevice(int commandFd) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment c = (MemorySegment) VerbsFunctions.need(ImportOps.IMPORT_DEVICE, "ibv_import_device")
                    .invokeExact(errno, commandFd);
            if (Downcalls.isNull(c)) {
                throw new VerbsException("ibv_import_device", Downcalls.errno(errno), "command fd " + commandFd);
            }
            try {
                return wrap(c, false);
            } catch (RuntimeException | Error e) {
                Lifecycle.destroyVerb("ibv_close_device", VerbsFunctions.CLOSE_DEVICE, c);
                throw e;
            }
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_import_device", t);
        }
    }

    /**
     * This context's command file descriptor ({@code ibv_context->cmd_fd}): what rdma-core's
     * shared-PD model hands to {@code ibv_import_device}, as a dup (this context keeps and
     * closes its own). A kernel command fd may be passed to another process (SCM_RIGHTS);
     * softrdma's names objects of this process only.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} after close.
     */
    public int commandFd() {
        life.ensureOpen(this);
        return ContextFields.cmdFd(ctx);
    }

    /**
     * Opens a second context that shares this one's objects: {@code ibv_import_device} of a dup
     * of {@link #commandFd()}, as rdma-core's tests/test_shared_pd.py does. The new context
     * owns the dup; each context is closed on its own, in any order. Its
     * {@link #importProtectionDomain(int)} then names this context's protection domains by
     * {@link ProtectionDomain#handle()}.
     *
     * <p><b>Errors</b>: {@link VerbsException} naming {@code ibv_import_device}: EOPNOTSUPP where
     * the provider cannot import (rdma-core's rxe and siw providers: only mlx5 imports),
     * EMFILE from {@code dup}; {@link UnsupportedOperationException} when libibverbs predates
     * IBVERBS_1.10; {@link IllegalStateException} after close.
     */
    public Context importContext() {
        int fd = commandFd();
        int dup;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            dup = (int) FileDescriptors.DUP.invokeExact(errno, fd);
            if (dup < 0) {
                throw new VerbsException("dup", Downcalls.errno(errno), "command fd " + fd + " of " + this);
            }
        } catch (Throwable t) {
            throw Downcalls.unexpected("dup", t);
        }
        try {
            return importDevice(dup);
        } catch (VerbsException e) {
            // libibverbs (and softrdma) leave the fd to the caller when they refuse it before a
            // provider took it (EBADF, EINVAL, ENODEV, EOPNOTSUPP); after any other failure the
            // provider may have closed it already, and closing a reused number would close
            // someone else's descriptor: then it is left open
            if (e.is(Errno.EBADF) || e.is(Errno.EINVAL) || e.is(Errno.ENODEV) || e.is(Errno.EOPNOTSUPP)) {
                closeFd(dup, e);
            }
            throw e;
        } catch (RuntimeException | Error e) {
            closeFd(dup, e);
            throw e;
        }
    }

    private static void closeFd(int fd, Throwable failure) {
        try (Arena arena = Arena.ofConfined()) {
            int errno = FileDescriptors.close(Downcalls.errnoSegment(arena), fd);
            if (errno != 0) {
                failure.addSuppressed(new VerbsException("close", errno, "fd " + fd));
            }
        } catch (RuntimeException | Error e) {
            failure.addSuppressed(e);
        }
    }

    /**
     * Imports the protection domain with kernel handle {@code handle} of this context's ucontext
     * ({@code ibv_import_pd}): a {@link ProtectionDomain} of this context naming a domain that
     * another context on the same command fd allocated (see {@link #importContext()}). Queue
     * pairs, regions and windows made from it share everything with the original domain's. Its
     * {@link ProtectionDomain#close()} unimports it ({@code ibv_unimport_pd}) and leaves the
     * original allocated.
     *
     * <p><b>Errors</b>: {@link VerbsException} naming {@code ibv_import_pd}: EINVAL for a handle
     * the ucontext does not hold (a domain of an unrelated context, one already deallocated),
     * EOPNOTSUPP where the provider cannot import; {@link UnsupportedOperationException} when
     * libibverbs predates IBVERBS_1.10; {@link IllegalStateException} after close.
     *
     * @param handle the original's {@link ProtectionDomain#handle()} (a {@code uint32_t})
     */
    public ProtectionDomain importProtectionDomain(int handle) {
        life.ensureOpen(this);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment pd = (MemorySegment) VerbsFunctions.need(ImportOps.IMPORT_PD, "ibv_import_pd")
                    .invokeExact(errno, ctx, handle);
            if (Downcalls.isNull(pd)) {
                throw new VerbsException("ibv_import_pd", Downcalls.errno(errno), "handle "
                        + Integer.toUnsignedString(handle) + " on " + this);
            }
            ProtectionDomain result = new ProtectionDomain(this, pd, true);
            life.addNewDependent(this, result, () -> {
                ImportOps.UNIMPORT_PD.invokeExact(pd);
            });
            return result;
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_import_pd", t);
        }
    }

    /** The device this context was opened on. */
    public Device device() {
        return device;
    }

    /** The {@code async_fd} of the context: readable when an async event is pending. */
    public int asyncFd() {
        life.ensureOpen(this);
        return ContextFields.asyncFd(ctx);
    }

    /** The number of completion vectors ({@code num_comp_vectors}). */
    public int completionVectorCount() {
        life.ensureOpen(this);
        return ContextFields.compVectorCount(ctx);
    }

    /** Whether this context has the extended {@code query_port} op ({@code verbs_context}). */
    public boolean hasExtendedQueryPort() {
        return queryPortEx != null;
    }

    /**
     * Queries the device ({@code ibv_query_device}).
     *
     * <p><b>Errors</b>: {@link VerbsException} with the provider's errno (ENOMEM, EIO);
     * {@link IllegalStateException} after close.
     */
    public DeviceAttributes queryDevice() {
        life.ensureOpen(this);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment a = DeviceAttr.allocate(arena);
            int rc = (int) VerbsFunctions.need(VerbsFunctions.QUERY_DEVICE, "ibv_query_device").invokeExact(errno, ctx, a);
            if (rc != 0) {
                throw VerbsException.of("ibv_query_device", rc > 0 ? rc : Downcalls.errno(errno));
            }
            DeviceAttr d = DeviceAttr.read(a);
            return new DeviceAttributes(d.fwVer(), d.nodeGuid(), d.sysImageGuid(), d.maxMrSize(), d.pageSizeCap(),
                    d.vendorId(), d.vendorPartId(), d.hwVer(), d.maxQp(), d.maxQpWr(), d.deviceCapFlags(), d.maxSge(),
                    d.maxSgeRd(), d.maxCq(), d.maxCqe(), d.maxMr(), d.maxPd(), d.maxQpRdAtom(), d.maxQpInitRdAtom(),
                    d.atomicCap(), d.maxAh(), d.maxSrq(), d.maxSrqWr(), d.maxSrqSge(), d.maxPkeys(), d.localCaAckDelay(),
                    d.physPortCnt(), d.maxMw());
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_query_device", t);
        }
    }

    /**
     * The GID tables of all the device's ports in one call ({@code ibv_query_gid_table}): the
     * valid entries, each with its port, index, type and network interface, in the order the
     * device lists them. Where libibverbs predates IBVERBS_1.11 (no {@code _ibv_query_gid_table}),
     * the ports' {@link Port#gids()} in port order. On siw (iWARP) the table holds the one GID
     * made from the MAC, with type {@link GidType#IB} and no network interface.
     *
     * <p><b>Errors</b>: {@link VerbsException} naming {@code ibv_query_gid_table} with the errno the
     * library returns (EINVAL, ENOMEM, EOPNOTSUPP); {@link IllegalStateException} after close.
     *
     * <p>Thread-safe.
     */
    public java.util.List<GidEntry> gidTable() {
        life.ensureOpen(this);
        int ports = queryDevice().physicalPortCount();
        if (VerbsFunctions.QUERY_GID_TABLE == null) {
            java.util.List<GidEntry> all = new java.util.ArrayList<>();
            for (int p = 1; p <= ports; p++) {
                all.addAll(port(p).gids());
            }
            return java.util.List.copyOf(all);
        }
        long max = 0;
        for (int p = 1; p <= ports; p++) {
            max += queryPort(p).gidTableLength();
        }
        if (max == 0) {
            return java.util.List.of();
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment entries = GidEntryFields.allocate(arena, max);
            long n = (long) VerbsFunctions.QUERY_GID_TABLE.invokeExact(errno, ctx, entries, max, 0, GidEntryFields.SIZE);
            if (n < 0) {
                // the library returns the negative errno
                throw new VerbsException("ibv_query_gid_table", (int) -n, max + " entries of " + device().name());
            }
            java.util.List<GidEntry> result = new java.util.ArrayList<>((int) n);
            for (long i = 0; i < n; i++) {
                result.add(gidEntry(GidEntryFields.read(entries, i)));
            }
            return java.util.List.copyOf(result);
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_query_gid_table", t);
        }
    }

    /** A {@code struct ibv_gid_entry} as a {@link GidEntry}. */
    static GidEntry gidEntry(GidEntryFields e) {
        return new GidEntry(e.gidIndex(), Gid.of(e.gid()), GidType.of(e.gidType()), e.portNum(), e.ndevIfindex());
    }

    /**
     * What the device pages on demand: the {@code odp_caps} of {@code ibv_query_device_ex}
     * (through {@code verbs_context->query_device_ex}). {@link OdpCapabilities#NONE} when the
     * provider has no {@code query_device_ex}. Check it before registering {@link Access#ON_DEMAND}
     * memory: a device without ODP refuses such a region (EINVAL or EOPNOTSUPP).
     *
     * <p><b>Errors</b>: {@link VerbsException} with the provider's errno; {@link IllegalStateException}
     * after close.
     */
    public OdpCapabilities odpCapabilities() {
        life.ensureOpen(this);
        MemorySegment fn = OdpOps.queryDeviceEx(ctx);
        if (fn == null) {
            return OdpCapabilities.NONE;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = DeviceAttr.OdpCaps.allocateExtended(arena);
            int rc = (int) OdpOps.QUERY_DEVICE_EX.invokeExact(fn, ctx, MemorySegment.NULL, a, a.byteSize());
            if (rc != 0) {
                throw VerbsException.of("ibv_query_device_ex", rc);
            }
            DeviceAttr.OdpCaps odp = DeviceAttr.OdpCaps.read(a);
            return new OdpCapabilities(odp.generalCaps(), odp.rcCaps(), odp.ucCaps(), odp.udCaps(), odp.xrcCaps());
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_query_device_ex", t);
        }
    }

    /**
     * A port of this device (numbered from 1). No native call happens until the port is queried.
     *
     * @throws IllegalArgumentException when {@code number} is outside 1..255
     */
    public Port port(int number) {
        life.ensureOpen(this);
        if (number < 1 || number > 255) {
            throw new IllegalArgumentException("port numbers run from 1 to 255, got " + number);
        }
        return new Port(this, number);
    }

    /**
     * {@code ibv_query_port}: through {@code verbs_context->query_port} when present (rdma-core's
     * inline {@code ___ibv_query_port} does the same), else the compat 3-argument export.
     */
    PortAttributes queryPort(int number) {
        return queryPort(number, queryPortEx != null);
    }

    /**
     * {@link #queryPort(int)} through the path chosen by {@code extended}: the compat export even
     * when the context has the extended op (so tests can run the fallback on any provider).
     *
     * @throws IllegalStateException when {@code extended} is asked of a context without the op
     */
    PortAttributes queryPort(int number, boolean extended) {
        life.ensureOpen(this);
        if (extended && queryPortEx == null) {
            throw new IllegalStateException(this + " has no extended query_port (verbs_context)");
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = PortAttr.allocate(arena);
            int rc;
            String verb;
            if (extended) {
                verb = "ibv_query_port";
                rc = (int) ContextOps.QUERY_PORT_EX.invokeExact(queryPortEx, ctx, (byte) number, a, a.byteSize());
            } else {
                verb = "ibv_query_port (compat)";
                MemorySegment errno = Downcalls.errnoSegment(arena);
                rc = (int) VerbsFunctions.need(VerbsFunctions.QUERY_PORT, "ibv_query_port").invokeExact(errno, ctx, (byte) number, a);
                if (rc < 0) {
                    rc = Downcalls.errno(errno);
                }
            }
            if (rc != 0) {
                throw new VerbsException(verb, rc, "port " + number + " of " + device.name());
            }
            PortAttr p = PortAttr.read(a);
            return new PortAttributes(PortState.of(p.state()), Mtu.of(p.maxMtu()), Mtu.of(p.activeMtu()),
                    p.gidTblLen(), p.portCapFlags(), p.maxMsgSz(), p.pkeyTblLen(), p.lid(), p.smLid(), p.lmc(),
                    p.activeWidth(), p.activeSpeed(), p.physState(), LinkLayer.of(p.linkLayer()), extended);
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_query_port", t);
        }
    }

    /**
     * Opens the XRC domain of {@code file} ({@code ibv_open_xrcd} over a descriptor of the file,
     * created if missing and closed again once the domain is open): every process of this node
     * that opens the same file shares the domain. With {@link XrcDomain.OpenFlag#CREATE} a
     * domain is created when no process holds one for the file; without it, that is EINVAL;
     * with {@link XrcDomain.OpenFlag#EXCLUSIVE}, a file that has a domain is EINVAL.
     *
     * <p><b>Errors</b>: {@link VerbsException} from {@code open} (the file) or
     * {@code ibv_open_xrcd} (EINVAL as above, EOPNOTSUPP on a device without XRC: rxe and siw);
     * {@link IllegalStateException} after close.
     */
    public XrcDomain openXrcDomain(java.nio.file.Path file, XrcDomain.OpenFlag... flags) {
        life.ensureOpen(this);
        return XrcDomain.open(this, file, flagSet(flags));
    }

    /**
     * Opens the XRC domain of the file open at descriptor {@code fd} ({@code ibv_open_xrcd}); the
     * caller keeps the descriptor. {@code fd} -1 opens a domain of this handle alone (it needs
     * {@link XrcDomain.OpenFlag#CREATE}).
     *
     * <p><b>Errors</b>: as {@link #openXrcDomain(java.nio.file.Path, XrcDomain.OpenFlag...)};
     * EBADF for a descriptor that is not open.
     */
    public XrcDomain openXrcDomain(int fd, XrcDomain.OpenFlag... flags) {
        life.ensureOpen(this);
        return XrcDomain.open(this, fd, flagSet(flags), null);
    }

    private static java.util.Set<XrcDomain.OpenFlag> flagSet(XrcDomain.OpenFlag... flags) {
        java.util.Set<XrcDomain.OpenFlag> set = java.util.EnumSet.noneOf(XrcDomain.OpenFlag.class);
        for (XrcDomain.OpenFlag f : flags) {
            set.add(Objects.requireNonNull(f, "flag"));
        }
        return set;
    }

    /**
     * Allocates a protection domain ({@code ibv_alloc_pd}).
     *
     * <p><b>Errors</b>: {@link VerbsException} (ENOMEM); {@link IllegalStateException} after close.
     */
    public ProtectionDomain allocatePd() {
        life.ensureOpen(this);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment pd = (MemorySegment) VerbsFunctions.need(VerbsFunctions.ALLOC_PD, "ibv_alloc_pd").invokeExact(errno, ctx);
            if (Downcalls.isNull(pd)) {
                throw VerbsException.of("ibv_alloc_pd", Downcalls.errno(errno));
            }
            return register(new ProtectionDomain(this, pd));
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_alloc_pd", t);
        }
    }

    /**
     * Creates a completion channel ({@code ibv_create_comp_channel}) for event-driven completion
     * handling.
     *
     * <p><b>Errors</b>: {@link VerbsException} (EMFILE, ENOMEM); {@link IllegalStateException}
     * after close.
     */
    public CompletionChannel createCompletionChannel() {
        life.ensureOpen(this);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment ch = (MemorySegment) VerbsFunctions.need(VerbsFunctions.CREATE_COMP_CHANNEL, "ibv_create_comp_channel")
                    .invokeExact(errno, ctx);
            if (Downcalls.isNull(ch)) {
                throw VerbsException.of("ibv_create_comp_channel", Downcalls.errno(errno));
            }
            return register(new CompletionChannel(this, ch));
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_create_comp_channel", t);
        }
    }

    /**
     * Creates an extended completion queue ({@code ibv_create_cq_ex}, through
     * {@code verbs_context->create_cq_ex}) reporting the {@code fields} beyond status, id,
     * opcode, vendor error and wc flags. It polls both ways: {@link CompletionQueue#poll} and
     * {@link CompletionQueue#startPoll()}; channels, notification and resize work as for a
     * classic queue.
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} for {@code entries < 1} or a channel of
     * another context; {@link VerbsException} (EOPNOTSUPP: a field the device cannot report,
     * such as {@link WcField#COMPLETION_TIMESTAMP} on rxe and softrdma, or a provider without
     * extended CQs; EINVAL: more entries than {@code max_cqe}); {@link IllegalStateException}
     * when this context or the channel is closed.
     *
     * @param entries minimum number of entries
     * @param channel the channel that receives its completion events, or {@code null}
     * @param vector  the completion vector
     * @param fields  the fields the completions carry ({@code wc_flags})
     */
    public CompletionQueue createExtendedCq(int entries, CompletionChannel channel, int vector, WcField... fields) {
        life.ensureOpen(this);
        if (entries < 1) {
            throw new IllegalArgumentException("a completion queue needs at least 1 entry, asked for " + entries);
        }
        MemorySegment ch = MemorySegment.NULL;
        if (channel != null) {
            if (channel.context != this) {
                throw new IllegalArgumentException(channel + " belongs to another context");
            }
            channel.life.ensureOpen(channel);
            ch = channel.handle.segment();
        }
        long flags = 0;
        for (WcField f : fields) {
            flags |= f.flag();
        }
        MemorySegment create = ExtendedOps.createCqEx(ctx);
        if (create == null) {
            throw new VerbsException("ibv_create_cq_ex", Errno.EOPNOTSUPP, "the provider has no extended CQs");
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment attr = new CqInitAttrEx(entries, ch, vector, flags).write(arena);
            MemorySegment cq = (MemorySegment) ExtendedOps.CREATE_CQ_EX.invokeExact(create, errno, ctx, attr);
            if (Downcalls.isNull(cq)) {
                throw new VerbsException("ibv_create_cq_ex", Downcalls.errno(errno), entries + " entries, wc_flags 0x"
                        + Long.toHexString(flags));
            }
            CompletionQueue result = new CompletionQueue(this, cq, channel, flags);
            life.addDependent(this, result, result.life);
            addChild(result.handle.pointer(), result);
            if (channel != null) {
                channel.attach(result);
            }
            return result;
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_create_cq_ex", t);
        }
    }

    /**
     * Creates a completion queue with at least {@code entries} entries, without a channel.
     *
     * @see #createCq(int, CompletionChannel, int)
     */
    public CompletionQueue createCq(int entries) {
        return createCq(entries, null, 0);
    }

    /**
     * Creates a completion queue ({@code ibv_create_cq}).
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} for {@code entries < 1} or a channel of
     * another context; {@link VerbsException} (EINVAL: more entries than {@code max_cqe}, ENOMEM);
     * {@link IllegalStateException} when this context or the channel is closed.
     *
     * @param entries       minimum number of entries (the device may round up)
     * @param channel       the channel that receives its completion events, or {@code null}
     * @param vector        the completion vector, 0..{@link #completionVectorCount()}-1
     */
    public CompletionQueue createCq(int entries, CompletionChannel channel, int vector) {
        life.ensureOpen(this);
        if (entries < 1) {
            throw new IllegalArgumentException("a completion queue needs at least 1 entry, asked for " + entries);
        }
        MemorySegment ch = MemorySegment.NULL;
        if (channel != null) {
            if (channel.context != this) {
                throw new IllegalArgumentException(channel + " belongs to another context");
            }
            channel.life.ensureOpen(channel);
            ch = channel.handle.segment();
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment cq = (MemorySegment) VerbsFunctions.need(VerbsFunctions.CREATE_CQ, "ibv_create_cq")
                    .invokeExact(errno, ctx, entries, MemorySegment.NULL, ch, vector);
            if (Downcalls.isNull(cq)) {
                throw new VerbsException("ibv_create_cq", Downcalls.errno(errno), entries + " entries");
            }
            CompletionQueue result = new CompletionQueue(this, cq, channel);
            life.addDependent(this, result, result.life);
            addChild(result.handle.pointer(), result);
            if (channel != null) {
                channel.attach(result);
            }
            return result;
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_create_cq", t);
        }
    }

    private <T> T register(T child) {
        life.addDependent(this, child);
        return child;
    }

    /** Records an open CQ, QP or SRQ under its native address, for {@link #pollAsyncEvent}. */
    void addChild(MemorySegment handle, Object child) {
        children.put(handle.address(), child);
    }

    /** Forgets {@code child} after its native destroy (only if the address still maps to it). */
    void removeChild(MemorySegment handle, Object child) {
        children.remove(handle.address(), child);
    }

    /** The open child of {@code type} at {@code handle}'s address, or {@code null}. */
    private <T> T child(MemorySegment handle, Class<T> type) {
        if (Downcalls.isNull(handle)) {
            return null;
        }
        Object o = children.get(handle.address());
        return type.isInstance(o) ? type.cast(o) : null;
    }

    /**
     * Reads one asynchronous event ({@code ibv_get_async_event}), waiting at most
     * {@code timeout}; the event is acknowledged ({@code ibv_ack_async_event}) before this returns.
     * The event names the {@link QueuePair}, {@link CompletionQueue} or {@link SharedReceiveQueue}
     * it concerns when that object is still open (see {@link AsyncEvent}).
     *
     * <p><b>Errors</b>: {@link VerbsException} from {@code poll} or {@code ibv_get_async_event};
     * {@link IllegalStateException} after close, also when another thread closes the context
     * during the wait; {@link NullPointerException} for a {@code null} timeout,
     * {@link IllegalArgumentException} for a negative one.
     *
     * @param timeout how long to wait; {@link Duration#ZERO} takes a pending event without waiting
     * @return the event, or {@code null} when none arrived in time
     */
    public AsyncEvent pollAsyncEvent(Duration timeout) {
        long millis = Timeouts.millis(timeout);
        life.ensureOpen(this);
        if (!Fds.awaitReadable(asyncFd(), millis, "an async event of " + this, life, this)) {
            return null;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment event = AsyncEventFields.allocate(arena);
            int rc = (int) VerbsFunctions.need(VerbsFunctions.GET_ASYNC_EVENT, "ibv_get_async_event").invokeExact(errno, ctx, event);
            if (rc != 0) {
                throw VerbsException.of("ibv_get_async_event", Downcalls.errno(errno));
            }
            AsyncEventFields fields = AsyncEventFields.read(event);
            AsyncEventType type = AsyncEventType.of(fields.eventType());
            int port = type.isPortEvent() ? fields.portNum() : -1;
            int qpNum = -1;
            QueuePair queuePair = null;
            CompletionQueue cq = null;
            SharedReceiveQueue srq = null;
            if (type.isQpEvent()) {
                MemorySegment qp = fields.qp();
                queuePair = child(qp, QueuePair.class);
                if (queuePair != null) {
                    qpNum = queuePair.qpNumber();
                } else if (!Downcalls.isNull(qp)) {
                    // the QP cannot be destroyed before the event is acked: reading it now is safe
                    qpNum = QpFields.qpNum(QpFields.of(qp));
                }
            } else if (type.isCqEvent()) {
                cq = child(fields.cq(), CompletionQueue.class);
            } else if (type.isSrqEvent()) {
                srq = child(fields.srq(), SharedReceiveQueue.class);
            }
            VerbsFunctions.need(VerbsFunctions.ACK_ASYNC_EVENT, "ibv_ack_async_event").invokeExact(errno, event);
            Telemetry.asyncEvent(device.name(), type, port, qpNum);
            return new AsyncEvent(type, port, qpNum, openOrNull(queuePair), openOrNull(cq), openOrNull(srq));
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_get_async_event", t);
        }
    }

    /** {@code owner} unless its close has begun: events about closing objects name none. */
    private static <T extends AutoCloseable> T openOrNull(T owner) {
        if (owner instanceof QueuePair q && q.isClosed()
                || owner instanceof CompletionQueue c && c.isClosed()
                || owner instanceof SharedReceiveQueue s && s.isClosed()) {
            return null;
        }
        return owner;
    }

    /**
     * Starts a daemon thread that delivers every asynchronous event of this context to
     * {@code listener}. The listener gets a copy: each event is acknowledged before it is
     * delivered. The thread stops when the context closes (within 100 ms: it polls the async fd
     * with that timeout). One listener per context; exceptions thrown by the listener end the thread.
     *
     * @throws IllegalStateException when a listener is already running, or after close
     */
    public synchronized void onAsyncEvent(Consumer<AsyncEvent> listener) {
        Objects.requireNonNull(listener, "listener");
        life.ensureOpen(this);
        if (asyncListener != null) {
            throw new IllegalStateException(this + " already has an async event listener");
        }
        Thread t = new Thread(() -> {
            while (!life.isClosed() && !Thread.currentThread().isInterrupted()) {
                AsyncEvent e;
                try {
                    e = pollAsyncEvent(Duration.ofMillis(100));
                } catch (IllegalStateException closed) {
                    return;
                }
                if (e != null) {
                    listener.accept(e);
                }
            }
        }, "verbs4j-async-" + device.name());
        t.setDaemon(true);
        asyncListener = t;
        t.start();
    }

    /**
     * Closes the device ({@code ibv_close_device}) after stopping the async event listener.
     * Idempotent.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} naming the protection domains, completion
     * queues and channels still open (the context stays open); {@link VerbsException} when
     * {@code ibv_close_device} fails.
     */
    @Override
    public void close() {
        life.close(this, () -> {
            Thread listener = asyncListener;
            if (listener != null) {
                listener.interrupt();
                try {
                    listener.join(5_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            if (!borrowed) {
                Lifecycle.destroyVerb("ibv_close_device", VerbsFunctions.CLOSE_DEVICE, ctx);
            }
        }, () -> { });
    }

    /** Whether {@link #close()} completed. */
    public boolean isClosed() {
        return life.isClosed();
    }

    @Override
    public String toString() {
        return "Context[" + device.name() + "]";
    }
}
