package io.github.verbs4j;

import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.internal.NativeHandle;
import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.FileDescriptors;
import io.github.verbs4j.raw.XrcOps;
import io.github.verbs4j.raw.XrcdInitAttr;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Objects;
import java.util.Set;

/**
 * An XRC domain ({@code struct ibv_xrcd}, {@code ibv_open_xrcd}): the scope in which XRC
 * shared receive queues and XRC target queue pairs meet. Opened over a file, it is that file's
 * domain: every process of the node that opens the same file shares it (the kernel keys it on
 * the file's inode; softrdma on its device and inode), which is how the processes of one node
 * share receive queues across one connection.
 *
 * <p><b>Contents</b>: {@link #createSrq} makes an XRC SRQ ({@code ibv_create_srq_ex} with
 * {@code IBV_SRQT_XRC}) whose number ({@link SharedReceiveQueue#srqNumber()},
 * {@code ibv_get_srq_num}) senders name with {@link SendRequest#xrcRemoteSrqn(int)};
 * {@link #createTarget()} makes an XRC target QP ({@code IBV_QPT_XRC_RECV}) and
 * {@link #openTarget(int)} opens one by number ({@code ibv_open_qp}). Senders are
 * {@link QpType#XRC_SEND} queue pairs of any protection domain.
 *
 * <p><b>Lifecycle</b>: {@link #close()} ({@code ibv_close_xrcd}) refuses with
 * {@link IllegalStateException} while SRQs or target QPs made here are open (the device would
 * answer EBUSY); idempotent. The domain keeps its {@link Context} open.
 *
 * <p><b>Thread-safety</b>: creation and close are control-path calls, safe from any thread;
 * close must not race with other use.
 */
public final class XrcDomain implements AutoCloseable {

    /** How {@link Context#openXrcDomain} treats a file that has no domain yet, or has one. */
    public enum OpenFlag {
        /** {@code O_CREAT}: create the domain when no process holds one for the file (else EINVAL). */
        CREATE,
        /** {@code O_EXCL} (with CREATE): fail with EINVAL when the file has a domain already. */
        EXCLUSIVE
    }

    // Linux open(2) flags (x86-64 and aarch64 share them)
    private static final int O_RDONLY = 0;
    private static final int O_CREAT = 0100;
    private static final int O_EXCL = 0200;
    private static final int O_CLOEXEC = 02000000;

    final Context context;
    final NativeHandle handle;
    final Lifecycle life = new Lifecycle();
    private final Path file;
    private final MemorySegment closeFn;

    private XrcDomain(Context context, MemorySegment xrcd, Path file, MemorySegment closeFn) {
        this.context = context;
        this.handle = new NativeHandle(xrcd, XrcOps.XRCD_SIZE);
        this.file = file;
        this.closeFn = closeFn;
    }

    static XrcDomain open(Context context, Path file, Set<OpenFlag> flags) {
        Objects.requireNonNull(file, "file");
        int fd;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            fd = (int) FileDescriptors.OPEN.invokeExact(errno, arena.allocateFrom(file.toString()), O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
            if (fd < 0) {
                throw new VerbsException("open", Downcalls.errno(errno), "the XRC domain file " + file);
            }
        } catch (Throwable t) {
            throw Downcalls.unexpected("open", t);
        }
        try {
            return open(context, fd, flags, file);
        } finally {
            // the domain is the file's, not the descriptor's: it stays when the descriptor closes
            try (Arena arena = Arena.ofConfined()) {
                FileDescriptors.close(Downcalls.errnoSegment(arena), fd);
            }
        }
    }

    static XrcDomain open(Context context, int fd, Set<OpenFlag> flags, Path file) {
        context.life.ensureOpen(context);
        MemorySegment openFn = XrcOps.openXrcd(context.ctx);
        MemorySegment closeFn = XrcOps.closeXrcd(context.ctx);
        if (openFn == null || closeFn == null) {
            throw new VerbsException("ibv_open_xrcd", Errno.EOPNOTSUPP, context.device().name() + " has no XRC");
        }
        int oflags = (flags.contains(OpenFlag.CREATE) ? O_CREAT : 0) | (flags.contains(OpenFlag.EXCLUSIVE) ? O_EXCL : 0);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment attr = new XrcdInitAttr(fd, oflags).write(arena);
            MemorySegment xrcd = (MemorySegment) XrcOps.CREATE.invokeExact(openFn, errno, context.ctx, attr);
            if (Downcalls.isNull(xrcd)) {
                throw new VerbsException("ibv_open_xrcd", Downcalls.errno(errno), (file != null ? "file " + file : "fd " + fd)
                        + " with " + flags);
            }
            XrcDomain d = new XrcDomain(context, xrcd, file, closeFn);
            context.life.addNewDependent(context, d, d::destroy);
            return d;
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_open_xrcd", t);
        }
    }

    private void destroy() throws Throwable {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            int rc = (int) XrcOps.CLOSE.invokeExact(closeFn, errno, handle.pointer());
            if (rc != 0) {
                throw new VerbsException("ibv_close_xrcd", Downcalls.errnoOf(rc, errno), toString());
            }
        }
    }

    /** The context. */
    public Context context() {
        return context;
    }

    /** The file the domain was opened over, or {@code null} when opened over a descriptor. */
    public Path file() {
        return file;
    }

    /**
     * Creates an XRC shared receive queue in this domain ({@code ibv_create_srq_ex} with
     * {@code IBV_SRQT_XRC}): its receive requests take messages that XRC senders address to its
     * {@linkplain SharedReceiveQueue#srqNumber() number} through any target QP of the domain;
     * their receive completions go to {@code cq}, and the memory they name is checked against
     * {@code pd}.
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} when {@code pd} or {@code cq} belongs to
     * another context; {@link IllegalStateException} when one of them or the domain is closed;
     * {@link VerbsException} (EINVAL beyond the device's limits, ENOMEM, EOPNOTSUPP).
     */
    public SharedReceiveQueue createSrq(ProtectionDomain pd, CompletionQueue cq, int maxWr, int maxSge) {
        life.ensureOpen(this);
        Objects.requireNonNull(pd, "pd");
        Objects.requireNonNull(cq, "cq");
        pd.life.ensureOpen(pd);
        cq.life.ensureOpen(cq);
        if (pd.context != context || cq.context != context) {
            throw new IllegalArgumentException(pd + " and " + cq + " must belong to the context of " + this);
        }
        SharedReceiveQueue srq = SharedReceiveQueue.createXrc(pd, this, cq, maxWr, maxSge);
        pd.life.addDependent(pd, srq);
        cq.life.addDependent(cq, srq);
        life.addDependent(this, srq);
        context.addChild(srq.handle.pointer(), srq);
        return srq;
    }

    /**
     * Creates an XRC target QP in this domain ({@code ibv_create_qp_ex}, {@code IBV_QPT_XRC_RECV}):
     * no PD, no queues of its own, in state RESET.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} after close; {@link VerbsException}
     * (EINVAL, ENOMEM, EOPNOTSUPP).
     */
    public XrcTarget createTarget() {
        life.ensureOpen(this);
        XrcTarget t = XrcTarget.create(this);
        life.addNewDependent(this, t, t::destroyNative);
        return t;
    }

    /**
     * Opens the XRC target QP numbered {@code qpNumber} of this domain ({@code ibv_open_qp}): a
     * second handle to it, through which it can be moved and queried; closing the handle leaves
     * the QP to its creator, whose close is refused (EBUSY) while handles are open.
     *
     * <p><b>Errors</b>: {@link VerbsException} (EINVAL: no target QP of that number in the domain).
     * The QP may be another process's: on softrdma the handle then reaches it through that process
     * (docs/softrdma.md).
     */
    public XrcTarget openTarget(int qpNumber) {
        life.ensureOpen(this);
        XrcTarget t = XrcTarget.open(this, qpNumber);
        life.addNewDependent(this, t, t::destroyNative);
        return t;
    }

    /**
     * Closes the domain handle ({@code ibv_close_xrcd}). Idempotent.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} naming the SRQs and target QPs still open;
     * {@link VerbsException} with the provider's errno (EBUSY).
     */
    @Override
    public void close() {
        life.close(this, handle, this::destroy, () -> context.life.removeDependent(this));
    }

    /** Whether {@link #close()} completed. */
    public boolean isClosed() {
        return life.isClosed();
    }

    @Override
    public String toString() {
        return "XrcDomain[" + (file != null ? file : "0x" + Long.toHexString(handle.pointer().address())) + "]";
    }
}
