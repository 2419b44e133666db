package io.github.verbs4j;

import io.github.verbs4j.internal.InFlight;
import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.internal.NativeHandle;
import io.github.verbs4j.raw.ContextOps;
import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.SrqAttr;
import io.github.verbs4j.raw.SrqFields;
import io.github.verbs4j.raw.SrqInitAttr;
import io.github.verbs4j.raw.VerbsConstants;
import io.github.verbs4j.raw.VerbsFunctions;
import io.github.verbs4j.raw.XrcOps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.ref.Reference;

/**
 * A shared receive queue ({@code struct ibv_srq}): receive requests that several queue pairs
 * of one protection domain consume.
 *
 * <p><b>Hot path</b>: {@link #postRecv} calls {@code ops.post_srq_recv} (read once) through a
 * critical downcall, after the same Java checks as {@link QueuePair#postRecv}; no allocation.
 *
 * <p><b>Lifecycle</b>: {@link #close()} ({@code ibv_destroy_srq}) refuses while queue pairs use
 * the SRQ; idempotent; posting after close throws {@link IllegalStateException}.
 *
 * <p><b>Thread-safety</b>: as {@link QueuePair}.
 */
public final class SharedReceiveQueue implements AutoCloseable {

    private static final int ATTR_MAX_WR = VerbsConstants.IBV_SRQ_MAX_WR;
    private static final int ATTR_LIMIT = VerbsConstants.IBV_SRQ_LIMIT;

    /**
     * What {@code ibv_query_srq} reports.
     *
     * @param maxWr  capacity in receive requests
     * @param maxSge entries per request
     * @param limit  the low-water mark that raises {@link AsyncEventType#SRQ_LIMIT_REACHED} (0: disarmed)
     */
    public record Attributes(int maxWr, int maxSge, int limit) {
    }

    final ProtectionDomain pd;
    /** The {@code ibv_srq}: every call passes {@code handle.segment()}, so close waits for calls in flight. */
    final NativeHandle handle;
    final Lifecycle life = new Lifecycle();
    private final MemorySegment postFn;
    private final int maxSge;
    /** An XRC SRQ's domain and completion queue; null for a basic SRQ. */
    final XrcDomain xrcDomain;
    final CompletionQueue xrcCq;
    private final int srqNum;

    private SharedReceiveQueue(ProtectionDomain pd, MemorySegment srq, int maxSge) {
        this(pd, srq, maxSge, null, null, -1);
    }

    private SharedReceiveQueue(ProtectionDomain pd, MemorySegment srq, int maxSge, XrcDomain domain,
            CompletionQueue cq, int srqNum) {
        this.xrcDomain = domain;
        this.xrcCq = cq;
        this.srqNum = srqNum;
        this.pd = pd;
        this.handle = new NativeHandle(srq, SrqFields.SIZE);
        this.maxSge = maxSge;
        this.postFn = ContextOps.function(pd.context.ctx, ContextOps.POST_SRQ_RECV_OFFSET, "ibv_post_srq_recv");
    }

    static SharedReceiveQueue create(ProtectionDomain pd, int maxWr, int maxSge) {
        if (maxWr < 1 || maxSge < 1) {
            throw new IllegalArgumentException("an SRQ needs maxWr >= 1 and maxSge >= 1, got " + maxWr + " and " + maxSge);
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment init = new SrqInitAttr(new SrqAttr(maxWr, maxSge, 0)).write(arena);
            MemorySegment srq = (MemorySegment) VerbsFunctions.need(VerbsFunctions.CREATE_SRQ, "ibv_create_srq").invokeExact(errno, pd.pd, init);
            if (Downcalls.isNull(srq)) {
                throw new VerbsException("ibv_create_srq", Downcalls.errno(errno), maxWr + " requests of " + maxSge + " SGEs");
            }
            return new SharedReceiveQueue(pd, srq, SrqInitAttr.granted(init).maxSge());
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_create_srq", t);
        }
    }

    /** ibv_create_srq_ex with IBV_SRQT_XRC through verbs_context->create_srq_ex, then ibv_get_srq_num. */
    static SharedReceiveQueue createXrc(ProtectionDomain pd, XrcDomain domain, CompletionQueue cq, int maxWr, int maxSge) {
        if (maxWr < 1 || maxSge < 1) {
            throw new IllegalArgumentException("an SRQ needs maxWr >= 1 and maxSge >= 1, got " + maxWr + " and " + maxSge);
        }
        MemorySegment create = XrcOps.createSrqEx(pd.context.ctx);
        MemorySegment getNum = XrcOps.getSrqNum(pd.context.ctx);
        if (create == null || getNum == null) {
            throw new VerbsException("ibv_create_srq_ex", Errno.EOPNOTSUPP, pd.context.device().name() + " has no XRC SRQs");
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment init = new SrqInitAttr(new SrqAttr(maxWr, maxSge, 0)).writeXrc(arena, pd.pd,
                    domain.handle.pointer(), cq.handle.pointer());
            MemorySegment srq = (MemorySegment) XrcOps.CREATE.invokeExact(create, errno, pd.context.ctx, init);
            if (Downcalls.isNull(srq)) {
                throw new VerbsException("ibv_create_srq_ex", Downcalls.errno(errno), "XRC, " + maxWr + " requests of "
                        + maxSge + " SGEs in " + domain);
            }
            MemorySegment num = arena.allocate(java.lang.foreign.ValueLayout.JAVA_INT);
            int rc = (int) XrcOps.GET_SRQ_NUM.invokeExact(getNum, errno, srq, num);
            if (rc != 0) {
                int e = Downcalls.errnoOf(rc, errno);
                Lifecycle.destroyVerb("ibv_destroy_srq", VerbsFunctions.DESTROY_SRQ, srq);
                throw VerbsException.of("ibv_get_srq_num", e);
            }
            return new SharedReceiveQueue(pd, srq, SrqInitAttr.grantedExtended(init).maxSge(), domain, cq,
                    num.get(java.lang.foreign.ValueLayout.JAVA_INT, 0));
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_create_srq_ex", t);
        }
    }

    /**
     * The number XRC senders name this SRQ by ({@link SendRequest#xrcRemoteSrqn(int)}), as
     * {@code ibv_get_srq_num} reported it at creation.
     *
     * @throws IllegalStateException for an SRQ that is not an XRC SRQ
     */
    public int srqNumber() {
        if (xrcDomain == null) {
            throw new IllegalStateException(this + " is not an XRC SRQ: create one with XrcDomain.createSrq");
        }
        return srqNum;
    }

    /** The XRC domain of an XRC SRQ, or {@code null}. */
    public XrcDomain xrcDomain() {
        return xrcDomain;
    }

    /** The protection domain. */
    public ProtectionDomain protectionDomain() {
        return pd;
    }

    /**
     * Posts a chain of receive requests ({@code ibv_post_srq_recv} through {@code ops.post_srq_recv}).
     *
     * <p><b>Errors</b>: as {@link QueuePair#postRecv}; {@link VerbsException} (ENOMEM: full).
     */
    public void postRecv(ReceiveRequest request) {
        int rc = tryPostRecv(request);
        if (rc != 0) {
            throw new VerbsException("ibv_post_srq_recv", rc, "on " + this + ", first request not posted: "
                    + request.describeBad());
        }
    }

    /** {@link #postRecv} returning the provider's errno (0 when posted) instead of throwing. */
    public int tryPostRecv(ReceiveRequest request) {
        // refused from the moment a close begins, so that close() never waits on a stream of new calls
        life.ensureOpen(this);
        if (!request.checkedFor(this)) {
            request.validate(pd, maxSge, this); // out of line: a chain checked before costs one branch
        }
        int rc;
        // every pointer by address: a close waits for the mark (NativeHandle.enter), and the
        // segments' checks and session handling would cost more than the call (ContextOps)
        InFlight cached = request.mark;
        InFlight mark = handle.enter(cached, this, "ibv_post_srq_recv");
        if (mark != cached) {
            request.mark = mark; // another thread used it last (or none): keep this thread's record
        }
        try {
            rc = (int) ContextOps.POST_ADDRESSES.invokeExact(postFn, handle.address(), request.wrAddress,
                    request.badWrAddress);
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_post_srq_recv", t);
        } finally {
            mark.exit();
            Reference.reachabilityFence(request);
        }
        return Math.abs(rc);
    }

    /**
     * Arms the low-water mark ({@code ibv_modify_srq} with {@code IBV_SRQ_LIMIT}): when fewer
     * than {@code limit} requests remain, the device raises {@link AsyncEventType#SRQ_LIMIT_REACHED}
     * once.
     *
     * <p><b>Errors</b>: {@link VerbsException} (EINVAL when the limit exceeds the capacity).
     */
    public void limit(int limit) {
        modify(0, limit, ATTR_LIMIT);
    }

    /**
     * Grows the SRQ ({@code ibv_modify_srq} with {@code IBV_SRQ_MAX_WR}).
     *
     * <p><b>Errors</b>: {@link VerbsException} (EINVAL, EOPNOTSUPP without
     * {@code IBV_DEVICE_SRQ_RESIZE}).
     */
    public void resize(int maxWr) {
        modify(maxWr, 0, ATTR_MAX_WR);
    }

    private void modify(int maxWr, int limit, int mask) {
        life.ensureOpen(this);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment attr = new SrqAttr(maxWr, 0, limit).write(arena);
            int rc = (int) VerbsFunctions.need(VerbsFunctions.MODIFY_SRQ, "ibv_modify_srq").invokeExact(errno, handle.segment(), attr, mask);
            if (rc != 0) {
                throw new VerbsException("ibv_modify_srq", Downcalls.errnoOf(rc, errno),
                        mask == ATTR_LIMIT ? "limit " + limit : "max_wr " + maxWr);
            }
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_modify_srq", t);
        }
    }

    /**
     * Queries the SRQ ({@code ibv_query_srq}).
     *
     * <p><b>Errors</b>: {@link VerbsException} with the provider's errno.
     */
    public Attributes query() {
        life.ensureOpen(this);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment attr = SrqAttr.allocate(arena);
            int rc = (int) VerbsFunctions.need(VerbsFunctions.QUERY_SRQ, "ibv_query_srq").invokeExact(errno, handle.segment(), attr);
            if (rc != 0) {
                throw VerbsException.of("ibv_query_srq", Downcalls.errnoOf(rc, errno));
            }
            SrqAttr a = SrqAttr.read(attr);
            return new Attributes(a.maxWr(), a.maxSge(), a.srqLimit());
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_query_srq", t);
        }
    }

    /**
     * Destroys the SRQ ({@code ibv_destroy_srq}). Idempotent.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} naming queue pairs still using it;
     * {@link VerbsException} (EBUSY).
     */
    @Override
    public void close() {
        life.close(this, handle, () -> Lifecycle.destroyVerb("ibv_destroy_srq", VerbsFunctions.DESTROY_SRQ, handle.pointer()), () -> {
            pd.context.removeChild(handle.pointer(), this);
            pd.life.removeDependent(this);
            if (xrcDomain != null) {
                xrcDomain.life.removeDependent(this);
                xrcCq.life.removeDependent(this);
            }
        });
    }

    /** Whether {@link #close()} completed. */
    public boolean isClosed() {
        return life.isClosed();
    }

    @Override
    public String toString() {
        return "SharedReceiveQueue[0x" + Long.toHexString(handle.pointer().address())
                + (xrcDomain != null ? " XRC " + srqNum : "") + "]";
    }
}
