package io.github.verbs4j;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_data_buf;
import io.github.verbs4j.ffi.ibv_sge;
import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.raw.ExtendedOps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * A batch of send work requests built through rdma-core's post-send API over
 * {@code struct ibv_qp_ex}: {@code ibv_wr_start}, the operation builders ({@code ibv_wr_send},
 * {@code ibv_wr_rdma_write}, ...), their setters ({@code ibv_wr_set_sge},
 * {@code ibv_wr_set_inline_data}, {@code ibv_wr_set_ud_addr}, ...) and {@code ibv_wr_complete},
 * which posts the whole batch with one doorbell, or {@code ibv_wr_abort}, which drops it.
 *
 * <pre>{@code
 * try (PostSession s = qp.startPosting()) {            // ibv_wr_start
 *     s.id(1).signaled(true).rdmaWrite(peer.address(), peer.rkey()).sge(mr.slice(0, 4096));
 *     s.id(2).send().inlineData(header);
 * }                                                    // ibv_wr_complete: posts both, or throws
 * }</pre>
 *
 * <p><b>Building</b>: each operation method starts a new work request, taking the id and the
 * flags ({@link #signaled}, {@link #solicited}, {@link #fence}) set last; {@link #sge} and
 * {@link #inlineData} then give its local data (several calls gather in order, through
 * {@code ibv_wr_set_sge_list} / {@code ibv_wr_set_inline_data_list}), {@link #udAddress} its UD
 * destination. Inline data are copied by the provider when set: the buffer may be reused at
 * once. An operation the QP was not created for ({@link QueuePair.Builder#sendOps}) is refused.
 *
 * <p><b>Ending</b>: {@link #commit()} (or {@link #close()}, which commits a session not yet
 * ended) calls {@code ibv_wr_complete}; {@link #abort()} calls {@code ibv_wr_abort}. Every
 * check of this class runs before the provider sees the request; when one fails the batch is
 * aborted (nothing of it is posted) and the exception thrown. {@link #close()} cannot see an
 * exception of your own code thrown inside the {@code try} block: to drop a batch for a reason
 * of your own, call {@link #abort()} (for instance in a {@code catch}) before it closes.
 *
 * <p><b>Errors</b>: {@link IllegalStateException} for a method after the session ended, a
 * setter before any operation, an operation the QP was not created for, a closed or freed memory
 * region or a closed address handle; {@link IllegalArgumentException} for a region of another
 * protection domain, more entries than {@code maxSendSge}, more inline bytes than
 * {@code maxInline}, an atomic whose local buffer is not 8 bytes or whose remote address is not
 * 8-byte aligned; {@link VerbsException} from {@code ibv_wr_complete} with the provider's errno
 * (rxe and softrdma: ENOSPC when the batch overflows the send queue or a request has too many
 * entries or inline bytes, EINVAL when the QP is not in a state that sends, ENOMEM when the
 * send queue is full); nothing of a batch that fails there is posted.
 *
 * <p><b>Hot path</b>: every call goes through a function pointer of {@code struct ibv_qp_ex},
 * read once at QP creation, with a critical downcall; nothing is allocated.
 *
 * <p><b>Thread-safety</b>: a QP has one session object, reused by every
 * {@link QueuePair#startPosting()}; rdma-core's post-send API keeps one open batch per QP, so
 * one thread at a time may build (start to commit); other threads must not post on the QP
 * meanwhile through this API. Not to be used after the QP is closed.
 */
public final class PostSession implements AutoCloseable {

    private static final boolean LITTLE = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN;
    private static final int SIGNALED = RdmaCore.IBV_SEND_SIGNALED();
    private static final int SOLICITED = RdmaCore.IBV_SEND_SOLICITED();
    private static final int FENCE = RdmaCore.IBV_SEND_FENCE();
    private static final long SGE_SIZE = ibv_sge.layout().byteSize();
    private static final long BUF_SIZE = ibv_data_buf.layout().byteSize();
    private static final long SGE_ADDR = ibv_sge.addr$offset();
    private static final long SGE_LENGTH = ibv_sge.length$offset();
    private static final long SGE_LKEY = ibv_sge.lkey$offset();
    private static final long BUF_ADDR = ibv_data_buf.addr$offset();
    private static final long BUF_LENGTH = ibv_data_buf.length$offset();
    /** Inline pieces gathered in one request at most (their total is bounded by maxInline anyway). */
    private static final int MAX_INLINE_PIECES = 16;

    private static final int NONE = 0;
    private static final int DATA = 1;   // an operation that takes local data
    private static final int ATOMIC = 2; // one 8-byte local buffer
    private static final int NO_DATA = 3; // LOCAL_INV

    private final QueuePair qp;
    private final long ops;
    private final int maxSge;
    private final int maxInline;
    private final MemorySegment start, complete, abort;
    private final MemorySegment send, sendImm, sendInv, write, writeImm, read, cmpSwp, fetchAdd, localInv;
    private final MemorySegment setSge, setSgeList, setInline, setInlineList, setUd, setXrcSrqn;
    private final MemorySegment sges;
    private final MemorySegment bufs;

    private boolean open;
    private int kind = NONE;
    private int nSge;
    private int nInline;
    private long inlineBytes;
    private long sgeBytes;
    private long id;
    private int flags = SIGNALED;

    PostSession(QueuePair qp, MemorySegment qpx, long ops, int maxSge, int maxInline) {
        this.qp = qp;
        this.ops = ops;
        this.maxSge = maxSge;
        this.maxInline = maxInline;
        this.start = fn(qpx, ExtendedOps.WR_START);
        this.complete = fn(qpx, ExtendedOps.WR_COMPLETE);
        this.abort = fn(qpx, ExtendedOps.WR_ABORT);
        this.send = fn(qpx, ExtendedOps.WR_SEND);
        this.sendImm = fn(qpx, ExtendedOps.WR_SEND_IMM);
        this.sendInv = fn(qpx, ExtendedOps.WR_SEND_INV);
        this.write = fn(qpx, ExtendedOps.WR_RDMA_WRITE);
        this.writeImm = fn(qpx, ExtendedOps.WR_RDMA_WRITE_IMM);
        this.read = fn(qpx, ExtendedOps.WR_RDMA_READ);
        this.cmpSwp = fn(qpx, ExtendedOps.WR_ATOMIC_CMP_SWP);
        this.fetchAdd = fn(qpx, ExtendedOps.WR_ATOMIC_FETCH_ADD);
        this.localInv = fn(qpx, ExtendedOps.WR_LOCAL_INV);
        this.setSge = fn(qpx, ExtendedOps.WR_SET_SGE);
        this.setSgeList = fn(qpx, ExtendedOps.WR_SET_SGE_LIST);
        this.setInline = fn(qpx, ExtendedOps.WR_SET_INLINE_DATA);
        this.setInlineList = fn(qpx, ExtendedOps.WR_SET_INLINE_DATA_LIST);
        this.setUd = fn(qpx, ExtendedOps.WR_SET_UD_ADDR);
        this.setXrcSrqn = fn(qpx, io.github.verbs4j.ffi.ibv_qp_ex.wr_set_xrc_srqn$offset());
        if (start == null || complete == null || abort == null || setSge == null) {
            throw new UnsupportedOperationException("ibv_create_qp_ex: the provider's ibv_qp_ex of " + qp
                    + " lacks wr_start/wr_complete/wr_abort/wr_set_sge");
        }
        // one arena per QP, freed with the session by the GC: the lists setters read
        Arena arena = Arena.ofAuto();
        this.sges = arena.allocate(SGE_SIZE * Math.max(1, maxSge), 8);
        this.bufs = arena.allocate(BUF_SIZE * MAX_INLINE_PIECES, 8);
    }

    private static MemorySegment fn(MemorySegment qpx, long offset) {
        MemorySegment f = qpx.get(ValueLayout.ADDRESS, offset);
        return f.equals(MemorySegment.NULL) ? null : f;
    }

    /** ibv_wr_start; called by {@link QueuePair#startPosting()}. */
    PostSession begin() {
        if (open) {
            throw new IllegalStateException("a posting session is already open on " + qp
                    + ": commit or abort it first (one batch per QP at a time)");
        }
        MemorySegment q = qp.handle.segment();
        try {
            ExtendedOps.QP_VOID.invokeExact(start, q);
        } catch (Throwable t) {
            throw qp.handle.failure(qp, "ibv_wr_start", t);
        }
        open = true;
        kind = NONE;
        return this;
    }

    /** Whether the batch is still being built (started, neither committed nor aborted). */
    public boolean isOpen() {
        return open;
    }

    /** The work request id of the operations built from now on ({@code ibv_qp_ex.wr_id}). */
    public PostSession id(long wrId) {
        this.id = wrId;
        return this;
    }

    /** Whether the operations built from now on complete ({@code IBV_SEND_SIGNALED}; default true). */
    public PostSession signaled(boolean on) {
        flags = on ? flags | SIGNALED : flags & ~SIGNALED;
        return this;
    }

    /** Whether the operations built from now on are solicited ({@code IBV_SEND_SOLICITED}). */
    public PostSession solicited(boolean on) {
        flags = on ? flags | SOLICITED : flags & ~SOLICITED;
        return this;
    }

    /** Whether the operations built from now on wait for earlier READs and atomics ({@code IBV_SEND_FENCE}). */
    public PostSession fence(boolean on) {
        flags = on ? flags | FENCE : flags & ~FENCE;
        return this;
    }

    // ---------------------------------------------------------------- operations

    /** {@code ibv_wr_send}: a SEND; give its data with {@link #sge} or {@link #inlineData}. */
    public PostSession send() {
        MemorySegment q = operation(SendOp.SEND, send, DATA);
        try {
            ExtendedOps.QP_VOID.invokeExact(send, q);
        } catch (Throwable t) {
            throw failed("ibv_wr_send", t);
        }
        return this;
    }

    /** {@code ibv_wr_send_imm}: a SEND with immediate data (host order; the receiver reads it back equal). */
    public PostSession sendImm(int immediate) {
        MemorySegment q = operation(SendOp.SEND_WITH_IMM, sendImm, DATA);
        try {
            ExtendedOps.QP_INT.invokeExact(sendImm, q, htonl(immediate));
        } catch (Throwable t) {
            throw failed("ibv_wr_send_imm", t);
        }
        return this;
    }

    /** {@code ibv_wr_send_inv}: a SEND that invalidates {@code rkey} at the receiver. */
    public PostSession sendInv(int rkey) {
        MemorySegment q = operation(SendOp.SEND_WITH_INV, sendInv, DATA);
        try {
            ExtendedOps.QP_INT.invokeExact(sendInv, q, rkey);
        } catch (Throwable t) {
            throw failed("ibv_wr_send_inv", t);
        }
        return this;
    }

    /** {@code ibv_wr_rdma_write}: writes the local data to {@code remoteAddress} under {@code rkey}. */
    public PostSession rdmaWrite(long remoteAddress, int rkey) {
        MemorySegment q = operation(SendOp.RDMA_WRITE, write, DATA);
        try {
            ExtendedOps.QP_RDMA.invokeExact(write, q, rkey, remoteAddress);
        } catch (Throwable t) {
            throw failed("ibv_wr_rdma_write", t);
        }
        return this;
    }

    /** {@link #rdmaWrite(long, int)} to the start of {@code remote}. */
    public PostSession rdmaWrite(RemoteBuffer remote) {
        return rdmaWrite(remote.address(), remote.rkey());
    }

    /** {@code ibv_wr_rdma_write_imm}: a WRITE that also consumes a receive at the peer, carrying {@code immediate}. */
    public PostSession rdmaWriteImm(long remoteAddress, int rkey, int immediate) {
        MemorySegment q = operation(SendOp.RDMA_WRITE_WITH_IMM, writeImm, DATA);
        try {
            ExtendedOps.QP_RDMA_IMM.invokeExact(writeImm, q, rkey, remoteAddress, htonl(immediate));
        } catch (Throwable t) {
            throw failed("ibv_wr_rdma_write_imm", t);
        }
        return this;
    }

    /** {@code ibv_wr_rdma_read}: reads from {@code remoteAddress} under {@code rkey} into the local buffers. */
    public PostSession rdmaRead(long remoteAddress, int rkey) {
        MemorySegment q = operation(SendOp.RDMA_READ, read, DATA);
        try {
            ExtendedOps.QP_RDMA.invokeExact(read, q, rkey, remoteAddress);
        } catch (Throwable t) {
            throw failed("ibv_wr_rdma_read", t);
        }
        return this;
    }

    /** {@link #rdmaRead(long, int)} from the start of {@code remote}. */
    public PostSession rdmaRead(RemoteBuffer remote) {
        return rdmaRead(remote.address(), remote.rkey());
    }

    /**
     * {@code ibv_wr_atomic_cmp_swp}: at the 8-byte aligned {@code remoteAddress}, swaps in
     * {@code swap} when the value equals {@code compare}; the old value lands in the 8-byte
     * {@link #sge} that must follow.
     */
    public PostSession atomicCmpSwp(long remoteAddress, int rkey, long compare, long swap) {
        MemorySegment q = operation(SendOp.ATOMIC_CMP_AND_SWP, cmpSwp, ATOMIC);
        aligned(remoteAddress);
        try {
            ExtendedOps.QP_CMP_SWP.invokeExact(cmpSwp, q, rkey, remoteAddress, compare, swap);
        } catch (Throwable t) {
            throw failed("ibv_wr_atomic_cmp_swp", t);
        }
        return this;
    }

    /** {@code ibv_wr_atomic_fetch_add}: adds {@code add} at {@code remoteAddress}; the old value lands in the 8-byte {@link #sge}. */
    public PostSession atomicFetchAdd(long remoteAddress, int rkey, long add) {
        MemorySegment q = operation(SendOp.ATOMIC_FETCH_AND_ADD, fetchAdd, ATOMIC);
        aligned(remoteAddress);
        try {
            ExtendedOps.QP_FETCH_ADD.invokeExact(fetchAdd, q, rkey, remoteAddress, add);
        } catch (Throwable t) {
            throw failed("ibv_wr_atomic_fetch_add", t);
        }
        return this;
    }

    /** {@code ibv_wr_local_inv}: invalidates the local {@code rkey} (memory windows, fast registration). */
    public PostSession localInv(int rkey) {
        MemorySegment q = operation(SendOp.LOCAL_INV, localInv, NO_DATA);
        try {
            ExtendedOps.QP_INT.invokeExact(localInv, q, rkey);
        } catch (Throwable t) {
            throw failed("ibv_wr_local_inv", t);
        }
        return this;
    }

    // ---------------------------------------------------------------- setters

    /** {@link #sge(MemoryRegion, long, int)} of a slice. */
    public PostSession sge(MemoryRegion.Slice slice) {
        return sge(slice.region(), slice.offset(), slice.length());
    }

    /**
     * Adds {@code length} bytes at {@code offset} of {@code region} to the current request's
     * local data ({@code ibv_wr_set_sge} for the first entry, {@code ibv_wr_set_sge_list} for
     * the gathered list after).
     */
    public PostSession sge(MemoryRegion region, long offset, int length) {
        MemorySegment q = setter("ibv_wr_set_sge");
        if (kind == NO_DATA) {
            throw fail(new IllegalStateException("the current request takes no local data"));
        }
        if (nInline > 0) {
            throw fail(new IllegalStateException("the current request already carries inline data"));
        }
        try {
            region.ensureUsable();
        } catch (IllegalStateException e) {
            throw fail(e);
        }
        if (region.pd != qp.pd) {
            throw fail(new IllegalArgumentException(region + " is registered in another protection domain than " + qp));
        }
        if (offset < 0 || length < 0 || offset > region.length() || length > region.length() - offset) {
            throw fail(new IndexOutOfBoundsException("[" + offset + ", " + (offset + length) + ") is outside " + region));
        }
        if (nSge == maxSge) {
            throw fail(new IllegalArgumentException("more than " + maxSge + " scatter/gather entries (maxSendSge of " + qp + ")"));
        }
        if (kind == ATOMIC && (nSge > 0 || length != 8)) {
            throw fail(new IllegalArgumentException("an atomic operation needs exactly one local buffer of 8 bytes, got "
                    + (nSge > 0 ? "a second entry" : length + " bytes")));
        }
        udFits(sgeBytes + length);
        long addr = region.address + offset;
        long at = nSge * SGE_SIZE;
        sges.set(ValueLayout.JAVA_LONG, at + SGE_ADDR, addr);
        sges.set(ValueLayout.JAVA_INT, at + SGE_LENGTH, length);
        sges.set(ValueLayout.JAVA_INT, at + SGE_LKEY, region.lkey);
        nSge++;
        sgeBytes += length;
        try {
            if (nSge == 1) {
                ExtendedOps.QP_SET_SGE.invokeExact(setSge, q, region.lkey, addr, length);
            } else {
                ExtendedOps.QP_SET_LIST.invokeExact(setSgeList, q, (long) nSge, sges);
            }
        } catch (Throwable t) {
            throw failed("ibv_wr_set_sge", t);
        }
        return this;
    }

    /**
     * Adds {@code data} (native memory, registered or not) to the current request as inline
     * data, copied now ({@code ibv_wr_set_inline_data} for the first piece,
     * {@code ibv_wr_set_inline_data_list} for up to 16 gathered pieces). SEND and WRITE only.
     */
    public PostSession inlineData(MemorySegment data) {
        MemorySegment q = setter("ibv_wr_set_inline_data");
        if (kind != DATA) {
            throw fail(new IllegalStateException("only SEND and RDMA WRITE requests carry inline data"));
        }
        if (nSge > 0) {
            throw fail(new IllegalStateException("the current request already has scatter/gather entries"));
        }
        if (!data.isNative() || !data.scope().isAlive()) {
            throw fail(new IllegalArgumentException("inline data must be live native memory: " + data));
        }
        if (inlineBytes + data.byteSize() > maxInline) {
            throw fail(new IllegalArgumentException("inline data of " + (inlineBytes + data.byteSize())
                    + " bytes exceed maxInline " + maxInline + " of " + qp));
        }
        if (nInline == MAX_INLINE_PIECES) {
            throw fail(new IllegalArgumentException("more than " + MAX_INLINE_PIECES + " inline pieces in one request"));
        }
        udFits(inlineBytes + data.byteSize());
        long at = nInline * BUF_SIZE;
        bufs.set(ValueLayout.ADDRESS, at + BUF_ADDR, data);
        bufs.set(ValueLayout.JAVA_LONG, at + BUF_LENGTH, data.byteSize());
        nInline++;
        inlineBytes += data.byteSize();
        try {
            if (nInline == 1) {
                ExtendedOps.QP_SET_INLINE.invokeExact(setInline, q, data, data.byteSize());
            } else {
                ExtendedOps.QP_SET_LIST.invokeExact(setInlineList, q, (long) nInline, bufs);
            }
        } catch (Throwable t) {
            throw failed("ibv_wr_set_inline_data", t);
        }
        return this;
    }

    /** {@code ibv_wr_set_ud_addr}: the current UD request's destination. */
    public PostSession udAddress(AddressHandle ah, int remoteQpn, int qkey) {
        MemorySegment q = setter("ibv_wr_set_ud_addr");
        if (qp.type() != QpType.UD) {
            throw fail(new IllegalStateException("udAddress is for UD QPs; " + qp + " is " + qp.type()));
        }
        if (ah.life.isClosed()) {
            throw fail(Lifecycle.closedException(ah));
        }
        if (ah.pd != qp.pd) {
            throw fail(new IllegalArgumentException(ah + " belongs to another protection domain than " + qp));
        }
        try {
            ExtendedOps.QP_SET_UD_ADDR.invokeExact(setUd, q, ah.ah, remoteQpn, qkey);
        } catch (Throwable t) {
            throw failed("ibv_wr_set_ud_addr", t);
        }
        return this;
    }

    /**
     * The remote XRC SRQ of the operation just built ({@code ibv_wr_set_xrc_srqn}), on an
     * {@link QpType#XRC_SEND} QP, whose every operation needs one: the
     * {@link SharedReceiveQueue#srqNumber()} of an SRQ in the target QP's domain.
     */
    public PostSession xrcRemoteSrqn(int srqn) {
        MemorySegment q = setter("ibv_wr_set_xrc_srqn");
        if (qp.type() != QpType.XRC_SEND) {
            throw fail(new IllegalStateException("xrcRemoteSrqn is for XRC_SEND QPs; " + qp + " is " + qp.type()));
        }
        if (setXrcSrqn == null) {
            throw fail(new UnsupportedOperationException("the provider's ibv_qp_ex of " + qp + " has no wr_set_xrc_srqn"));
        }
        try {
            ExtendedOps.QP_INT.invokeExact(setXrcSrqn, q, srqn);
        } catch (Throwable t) {
            throw failed("ibv_wr_set_xrc_srqn", t);
        }
        return this;
    }

    // ---------------------------------------------------------------- ending

    /**
     * Posts the batch ({@code ibv_wr_complete}): all its requests, or, when the provider
     * refuses, none. Ends the session.
     *
     * @throws VerbsException with the provider's errno (the batch is dropped)
     * @throws IllegalStateException when the session already ended
     */
    public void commit() {
        int rc = tryCommit();
        if (rc != 0) {
            throw new VerbsException("ibv_wr_complete", rc, "on " + qp + ": the batch was not posted");
        }
    }

    /** {@link #commit()} returning the provider's errno (0 when posted) instead of throwing {@link VerbsException}. */
    public int tryCommit() {
        if (!open) {
            throw new IllegalStateException("the posting session on " + qp + " already ended");
        }
        open = false;
        kind = NONE;
        int rc;
        try {
            rc = (int) ExtendedOps.QP_COMPLETE.invokeExact(complete, qp.handle.segment());
        } catch (Throwable t) {
            throw qp.handle.failure(qp, "ibv_wr_complete", t);
        }
        return Math.abs(rc);
    }

    /** Drops the batch ({@code ibv_wr_abort}): nothing of it is posted. Ends the session; no-op when already ended. */
    public void abort() {
        if (!open) {
            return;
        }
        open = false;
        kind = NONE;
        try {
            ExtendedOps.QP_VOID.invokeExact(abort, qp.handle.segment());
        } catch (Throwable t) {
            throw qp.handle.failure(qp, "ibv_wr_abort", t);
        }
    }

    /** Commits a session not yet ended ({@link #commit()}); nothing after commit or abort. */
    @Override
    public void close() {
        if (open) {
            commit();
        }
    }

    // ---------------------------------------------------------------- checks

    private MemorySegment operation(SendOp op, MemorySegment fn, int newKind) {
        if (!open) {
            throw new IllegalStateException("the posting session on " + qp + " has ended: start another with startPosting()");
        }
        if (fn == null || (ops & op.flag()) == 0) {
            throw fail(new IllegalStateException(qp + " was not created for " + op
                    + " (QueuePair.Builder.sendOps)"));
        }
        kind = newKind;
        nSge = 0;
        sgeBytes = 0;
        nInline = 0;
        inlineBytes = 0;
        MemorySegment q = qp.handle.segment();
        try {
            q.set(ValueLayout.JAVA_LONG, ExtendedOps.QP_WR_ID, id);
            q.set(ValueLayout.JAVA_INT, ExtendedOps.QP_WR_FLAGS, flags);
        } catch (IllegalStateException closed) {
            open = false;
            throw new IllegalStateException(qp + " is closed", closed);
        }
        return q;
    }

    private MemorySegment setter(String verb) {
        if (!open) {
            throw new IllegalStateException("the posting session on " + qp + " has ended: " + verb + " refused");
        }
        if (kind == NONE) {
            throw fail(new IllegalStateException(verb + " before any operation: build one first (send(), rdmaWrite(), ...)"));
        }
        return qp.handle.segment();
    }

    private void aligned(long remoteAddress) {
        if ((remoteAddress & 7) != 0) {
            throw fail(new IllegalArgumentException("an atomic operation needs an 8-byte aligned remote address, got 0x"
                    + Long.toHexString(remoteAddress)));
        }
    }

    /** Aborts the batch and returns {@code e} to throw. */
    /**
     * A UD message must fit the port's active MTU: the device would complete a longer send
     * successfully and emit nothing (IBA C10-93.1.1, rxe), so it is refused here, as
     * {@link SendRequest} refuses it at post.
     */
    private void udFits(long bytes) {
        if (qp.type() == QpType.UD && bytes > qp.udMaxMessage()) {
            throw fail(new IllegalArgumentException("request " + id + " would send " + bytes + " bytes on " + qp
                    + ": a UD message must fit the port's active MTU (" + qp.udMaxMessage() + " bytes);"
                    + " a longer one is dropped silently by the device"));
        }
    }

    private RuntimeException fail(RuntimeException e) {
        try {
            abort();
        } catch (RuntimeException suppressed) {
            e.addSuppressed(suppressed);
        }
        return e;
    }

    private RuntimeException failed(String verb, Throwable t) {
        open = false;
        return qp.handle.failure(qp, verb, t);
    }

    private static int htonl(int v) {
        return LITTLE ? Integer.reverseBytes(v) : v;
    }

    @Override
    public String toString() {
        return "PostSession[" + qp + (open ? ", open" : ", ended") + "]";
    }
}
