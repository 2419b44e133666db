package io.github.verbs4j;

import io.github.verbs4j.internal.InFlight;
import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.raw.ExtendedOps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.ref.Reference;
import java.nio.ByteOrder;

import static io.github.verbs4j.raw.WorkRequestLayout.SEND_FENCE;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_INLINE;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_SIGNALED;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_SOLICITED;
import static io.github.verbs4j.raw.WorkRequestLayout.SGE_ADDR;
import static io.github.verbs4j.raw.WorkRequestLayout.SGE_LENGTH;
import static io.github.verbs4j.raw.WorkRequestLayout.SGE_LKEY;
import static io.github.verbs4j.raw.WorkRequestLayout.SGE_SIZE;

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
 * {@link #inlineData} then give its local data (several calls gather in order), {@link #udAddress}
 * its UD destination. Inline data are copied when set: the buffer may be reused at once. An
 * operation the QP was not created for ({@link QueuePairBuilder#sendOps}) is refused.
 *
 * <p>A request reaches the provider whole, when the next operation starts or at commit: its
 * builder with {@code wr_id} and {@code wr_flags} ({@code IBV_SEND_INLINE} added when its data
 * are inline, which rxe's provider needs), then one data setter, called once as the
 * {@code ibv_wr_post} man page asks: {@code ibv_wr_set_sge} for one entry,
 * {@code ibv_wr_set_sge_list} for several, {@code ibv_wr_set_inline_data} for the inline pieces
 * gathered into one buffer of {@code maxInline} bytes, then {@code ibv_wr_set_ud_addr} and
 * {@code ibv_wr_set_xrc_srqn}. On rxe with rdma-core before 64, {@code ibv_wr_set_sge_list}
 * counts the first entry's length once per entry (a list of unequal lengths sends the wrong
 * number of bytes): use one entry, or entries of one length, there (docs/substrates.md).
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
 * read once at QP creation, with a critical downcall taking the QP's and the buffers' addresses
 * as {@code long}s; nothing is allocated. The operation methods and setters only record and
 * check in Java: the provider sees a request when the next one starts or at commit, so a
 * one-request batch makes three calls (start; builder and data setter at commit, then
 * {@code ibv_wr_complete}) plus one per further setter.
 *
 * <p><b>Closing the QP</b>: from {@code ibv_wr_start} to the end of the session, the session
 * marks the QP in use (the close guard's session record, no atomic update):
 * {@link QueuePair#close()} on another thread waits for the session to end (commit or abort)
 * before the QP is destroyed, and then the QP refuses new sessions. Closing the QP
 * on the thread that has the session open is refused with {@link IllegalStateException}:
 * commit or abort first.
 *
 * <p><b>Thread-safety</b>: a QP has one session object, reused by every
 * {@link QueuePair#startPosting()}; rdma-core's post-send API keeps one open batch per QP, so
 * one thread at a time may build (start to commit); other threads must not post on the QP
 * meanwhile through this API. Not to be used after the QP is closed.
 */
public final class PostSession implements AutoCloseable {

    private static final boolean LITTLE = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN;

    private static final int NONE = 0;
    private static final int DATA = 1;   // an operation that takes local data
    private static final int ATOMIC = 2; // one 8-byte local buffer
    private static final int NO_DATA = 3; // LOCAL_INV

    // the operation built last, handed to the provider when the next one starts or at commit
    private static final int OP_NONE = 0;
    private static final int OP_SEND = 1;
    private static final int OP_SEND_IMM = 2;
    private static final int OP_SEND_INV = 3;
    private static final int OP_WRITE = 4;
    private static final int OP_WRITE_IMM = 5;
    private static final int OP_READ = 6;
    private static final int OP_CMP_SWP = 7;
    private static final int OP_FETCH_ADD = 8;
    private static final int OP_LOCAL_INV = 9;

    private final QueuePair qp;
    /** The QP's {@code struct ibv_qp_ex}: its address, passed to every call, and a view to write wr_id and wr_flags. */
    private final long qpx;
    private final MemorySegment qpxView;
    private final long ops;
    private final int maxSge;
    private final int maxInline;
    private final MemorySegment start, complete, abort;
    private final MemorySegment send, sendImm, sendInv, write, writeImm, read, cmpSwp, fetchAdd, localInv;
    private final MemorySegment setSge, setSgeList, setInline, setUd, setXrcSrqn;
    // the lists setters read: kept reachable by this session, passed by address
    private final MemorySegment sges;
    private final MemorySegment staging;
    private final MemorySegment sgesView;
    private final long sgesAddress;
    private final long stagingAddress;

    /** The QP handle's session mark while a session is open (from wr_start to its end); a close waits for it. */
    private InFlight mark;
    /** The thread that started the open session; null when none is open. */
    private Thread thread;

    private boolean open;
    private int kind = NONE;
    private int nSge;
    private int nInline;
    private long inlineBytes;
    private long sgeBytes;
    // the first scatter/gather entry, kept in fields: one entry needs no list in memory
    private long sge0Address;
    private int sge0Length;
    private int sge0Lkey;
    private long id;
    private int flags = SEND_SIGNALED;

    private int pendingOp = OP_NONE;
    private long pendingId;
    private int pendingFlags;
    private int pendingInt;   // rkey, or the immediate of SEND_IMM
    private int pendingImm;   // WRITE_IMM's immediate
    private long pendingAddr;
    private long pendingA;    // compare or add
    private long pendingB;    // swap
    private AddressHandle pendingAh;
    private int pendingQpn;
    private int pendingQkey;
    private int pendingSrqn;
    private boolean hasSrqn;

    PostSession(QueuePair qp, MemorySegment qpx, long ops, int maxSge, int maxInline) {
        this.qp = qp;
        this.qpx = qpx.address();
        this.qpxView = MemorySegment.ofAddress(qpx.address()).reinterpret(ExtendedOps.QP_EX_SIZE);
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
        this.setUd = fn(qpx, ExtendedOps.WR_SET_UD_ADDR);
        this.setXrcSrqn = fn(qpx, ExtendedOps.WR_SET_XRC_SRQN);
        if (start == null || complete == null || abort == null || setSge == null) {
            throw new UnsupportedOperationException("ibv_create_qp_ex: the provider's ibv_qp_ex of " + qp
                    + " lacks wr_start/wr_complete/wr_abort/wr_set_sge");
        }
        // one arena per QP, freed with the session by the GC: the lists setters read
        Arena arena = Arena.ofAuto();
        this.sges = arena.allocate(SGE_SIZE * Math.max(1, maxSge), 8);
        this.staging = arena.allocate(Math.max(1, maxInline), 8);
        // views without the arena's scope: written only while this session (which holds the arena) is reachable
        this.sgesView = MemorySegment.ofAddress(sges.address()).reinterpret(sges.byteSize());
        this.sgesAddress = sges.address();
        this.stagingAddress = staging.address();
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
        InFlight m = qp.handle.enterSession(qp, "ibv_wr_start");
        try {
            ExtendedOps.QP_VOID_BY_ADDRESS.invokeExact(start, qpx);
        } catch (Throwable t) {
            m.exit();
            throw qp.handle.failure(qp, "ibv_wr_start", t);
        }
        mark = m;
        thread = Thread.currentThread();
        open = true;
        kind = NONE;
        pendingOp = OP_NONE;
        return this;
    }

    /** Whether a session is open on the calling thread: closing the QP there would wait for itself. */
    boolean isOpenOnThisThread() {
        return open && thread == Thread.currentThread();
    }

    /** Ends the session: no more calls on the QP through it; clears the QP's session mark. */
    private void end() {
        open = false;
        kind = NONE;
        pendingOp = OP_NONE;
        if (mark != null) {
            InFlight m = mark;
            mark = null;
            thread = null;
            m.exit();
        }
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
        flags = on ? flags | SEND_SIGNALED : flags & ~SEND_SIGNALED;
        return this;
    }

    /** Whether the operations built from now on are solicited ({@code IBV_SEND_SOLICITED}). */
    public PostSession solicited(boolean on) {
        flags = on ? flags | SEND_SOLICITED : flags & ~SEND_SOLICITED;
        return this;
    }

    /** Whether the operations built from now on wait for earlier READs and atomics ({@code IBV_SEND_FENCE}). */
    public PostSession fence(boolean on) {
        flags = on ? flags | SEND_FENCE : flags & ~SEND_FENCE;
        return this;
    }

    // ---------------------------------------------------------------- operations

    /** {@code ibv_wr_send}: a SEND; give its data with {@link #sge} or {@link #inlineData}. */
    public PostSession send() {
        operation(SendOp.SEND, send, DATA, OP_SEND);
        return this;
    }

    /** {@code ibv_wr_send_imm}: a SEND with immediate data (host order; the receiver reads it back equal). */
    public PostSession sendImm(int immediate) {
        operation(SendOp.SEND_WITH_IMM, sendImm, DATA, OP_SEND_IMM);
        pendingInt = htonl(immediate);
        return this;
    }

    /** {@code ibv_wr_send_inv}: a SEND that invalidates {@code rkey} at the receiver. */
    public PostSession sendInv(int rkey) {
        operation(SendOp.SEND_WITH_INV, sendInv, DATA, OP_SEND_INV);
        pendingInt = rkey;
        return this;
    }

    /** {@code ibv_wr_rdma_write}: writes the local data to {@code remoteAddress} under {@code rkey}. */
    public PostSession rdmaWrite(long remoteAddress, int rkey) {
        operation(SendOp.RDMA_WRITE, write, DATA, OP_WRITE);
        pendingInt = rkey;
        pendingAddr = remoteAddress;
        return this;
    }

    /** {@link #rdmaWrite(long, int)} to the start of {@code remote}. */
    public PostSession rdmaWrite(RemoteBuffer remote) {
        return rdmaWrite(remote.address(), remote.rkey());
    }

    /** {@code ibv_wr_rdma_write_imm}: a WRITE that also consumes a receive at the peer, carrying {@code immediate}. */
    public PostSession rdmaWriteImm(long remoteAddress, int rkey, int immediate) {
        operation(SendOp.RDMA_WRITE_WITH_IMM, writeImm, DATA, OP_WRITE_IMM);
        pendingInt = rkey;
        pendingAddr = remoteAddress;
        pendingImm = htonl(immediate);
        return this;
    }

    /** {@code ibv_wr_rdma_read}: reads from {@code remoteAddress} under {@code rkey} into the local buffers. */
    public PostSession rdmaRead(long remoteAddress, int rkey) {
        operation(SendOp.RDMA_READ, read, DATA, OP_READ);
        pendingInt = rkey;
        pendingAddr = remoteAddress;
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
        operation(SendOp.ATOMIC_CMP_AND_SWP, cmpSwp, ATOMIC, OP_CMP_SWP);
        aligned(remoteAddress);
        pendingInt = rkey;
        pendingAddr = remoteAddress;
        pendingA = compare;
        pendingB = swap;
        return this;
    }

    /** {@code ibv_wr_atomic_fetch_add}: adds {@code add} at {@code remoteAddress}; the old value lands in the 8-byte {@link #sge}. */
    public PostSession atomicFetchAdd(long remoteAddress, int rkey, long add) {
        operation(SendOp.ATOMIC_FETCH_AND_ADD, fetchAdd, ATOMIC, OP_FETCH_ADD);
        aligned(remoteAddress);
        pendingInt = rkey;
        pendingAddr = remoteAddress;
        pendingA = add;
        return this;
    }

    /** {@code ibv_wr_local_inv}: invalidates the local {@code rkey} (memory windows, fast registration). */
    public PostSession localInv(int rkey) {
        operation(SendOp.LOCAL_INV, localInv, NO_DATA, OP_LOCAL_INV);
        pendingInt = rkey;
        return this;
    }

    // ---------------------------------------------------------------- setters

    /** {@link #sge(MemoryRegion, long, int)} of a slice. */
    public PostSession sge(MemoryRegion.Slice slice) {
        return sge(slice.region(), slice.offset(), slice.length());
    }

    /**
     * Adds {@code length} bytes at {@code offset} of {@code region} to the current request's
     * local data ({@code ibv_wr_set_sge} for a single entry, {@code ibv_wr_set_sge_list} for the
     * gathered list).
     */
    public PostSession sge(MemoryRegion region, long offset, int length) {
        setter("ibv_wr_set_sge");
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
        int n = nSge;
        if (n == 0) {
            sge0Address = addr;
            sge0Length = length;
            sge0Lkey = region.lkey;
        } else {
            if (n == 1) {
                putSge(0, sge0Address, sge0Length, sge0Lkey);
            }
            putSge(n, addr, length, region.lkey);
        }
        nSge = n + 1;
        sgeBytes += length;
        return this;
    }

    private void putSge(int index, long addr, int length, int lkey) {
        long at = index * SGE_SIZE;
        sgesView.set(ValueLayout.JAVA_LONG, at + SGE_ADDR, addr);
        sgesView.set(ValueLayout.JAVA_INT, at + SGE_LENGTH, length);
        sgesView.set(ValueLayout.JAVA_INT, at + SGE_LKEY, lkey);
    }

    /**
     * Adds {@code data} (native memory, registered or not) to the current request as inline
     * data, copied now into the session's staging buffer; the pieces of one request are given to
     * the provider as one {@code ibv_wr_set_inline_data}, with {@code IBV_SEND_INLINE} in the
     * request's flags. SEND and WRITE only.
     */
    public PostSession inlineData(MemorySegment data) {
        setter("ibv_wr_set_inline_data");
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
        udFits(inlineBytes + data.byteSize());
        // copied now, so the caller may reuse its buffer at once; handed to the provider in one piece
        MemorySegment.copy(data, 0, staging, inlineBytes, data.byteSize());
        nInline++;
        inlineBytes += data.byteSize();
        return this;
    }

    /** {@code ibv_wr_set_ud_addr}: the current UD request's destination. */
    public PostSession udAddress(AddressHandle ah, int remoteQpn, int qkey) {
        setter("ibv_wr_set_ud_addr");
        if (qp.type() != QpType.UD) {
            throw fail(new IllegalStateException("udAddress is for UD QPs; " + qp + " is " + qp.type()));
        }
        if (ah.life.isClosed()) {
            throw fail(Lifecycle.closedException(ah));
        }
        if (ah.pd != qp.pd) {
            throw fail(new IllegalArgumentException(ah + " belongs to another protection domain than " + qp));
        }
        pendingAh = ah;
        pendingQpn = remoteQpn;
        pendingQkey = qkey;
        return this;
    }

    /**
     * The remote XRC SRQ of the operation just built ({@code ibv_wr_set_xrc_srqn}), on an
     * {@link QpType#XRC_SEND} QP, whose every operation needs one: the
     * {@link SharedReceiveQueue#srqNumber()} of an SRQ in the target QP's domain.
     */
    public PostSession xrcRemoteSrqn(int srqn) {
        setter("ibv_wr_set_xrc_srqn");
        if (qp.type() != QpType.XRC_SEND) {
            throw fail(new IllegalStateException("xrcRemoteSrqn is for XRC_SEND QPs; " + qp + " is " + qp.type()));
        }
        if (setXrcSrqn == null) {
            throw fail(new UnsupportedOperationException("the provider's ibv_qp_ex of " + qp + " has no wr_set_xrc_srqn"));
        }
        pendingSrqn = srqn;
        hasSrqn = true;
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
        flush();
        int rc;
        try {
            rc = (int) ExtendedOps.QP_COMPLETE_BY_ADDRESS.invokeExact(complete, qpx);
        } catch (Throwable t) {
            throw qp.handle.failure(qp, "ibv_wr_complete", t);
        } finally {
            end();
        }
        return Math.abs(rc);
    }

    /** Drops the batch ({@code ibv_wr_abort}): nothing of it is posted. Ends the session; no-op when already ended. */
    public void abort() {
        if (!open) {
            return;
        }
        try {
            ExtendedOps.QP_VOID_BY_ADDRESS.invokeExact(abort, qpx);
        } catch (Throwable t) {
            throw qp.handle.failure(qp, "ibv_wr_abort", t);
        } finally {
            end();
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

    private void operation(SendOp op, MemorySegment fn, int newKind, int code) {
        if (!open) {
            throw new IllegalStateException("the posting session on " + qp + " has ended: start another with startPosting()");
        }
        if (fn == null || (ops & op.flag()) == 0) {
            throw fail(new IllegalStateException(qp + " was not created for " + op
                    + " (QueuePairBuilder.sendOps)"));
        }
        flush();
        kind = newKind;
        nSge = 0;
        sgeBytes = 0;
        nInline = 0;
        inlineBytes = 0;
        pendingOp = code;
        pendingId = id;
        pendingFlags = flags;
        pendingAh = null;
        hasSrqn = false;
    }

    /**
     * Hands the operation built last to the provider: its builder with {@code wr_id} and
     * {@code wr_flags} set first ({@code IBV_SEND_INLINE} added when its data are inline: rxe's
     * provider copies {@code wr_flags} into the work request in the builder, and its kernel
     * sends the inline bytes only under that flag), then exactly one data setter (the man page
     * of {@code ibv_wr_post}: one of them, called once), its inline pieces gathered here into
     * one {@code ibv_wr_set_inline_data} (rxe's {@code wr_set_inline_data_list} before
     * rdma-core 64 leaves the length 0 and sends nothing), then the UD address and XRC SRQ.
     */
    private void flush() {
        int op = pendingOp;
        if (op == OP_NONE) {
            return;
        }
        pendingOp = OP_NONE;
        AddressHandle ah = pendingAh;
        if (ah != null && ah.life.isClosed()) {
            throw fail(Lifecycle.closedException(ah));
        }
        // the session holds the QP's session mark (open): its address stays valid across these calls
        long q = qpx;
        qpxView.set(ValueLayout.JAVA_LONG, ExtendedOps.QP_WR_ID, pendingId);
        qpxView.set(ValueLayout.JAVA_INT, ExtendedOps.QP_WR_FLAGS, nInline > 0 ? pendingFlags | SEND_INLINE : pendingFlags);
        String verb = "ibv_wr_post";
        try {
            switch (op) {
                case OP_WRITE -> ExtendedOps.QP_RDMA_BY_ADDRESS.invokeExact(write, q, pendingInt, pendingAddr);
                case OP_SEND -> ExtendedOps.QP_VOID_BY_ADDRESS.invokeExact(send, q);
                case OP_SEND_IMM -> ExtendedOps.QP_INT_BY_ADDRESS.invokeExact(sendImm, q, pendingInt);
                case OP_SEND_INV -> ExtendedOps.QP_INT_BY_ADDRESS.invokeExact(sendInv, q, pendingInt);
                case OP_WRITE_IMM -> ExtendedOps.QP_RDMA_IMM_BY_ADDRESS.invokeExact(writeImm, q, pendingInt, pendingAddr, pendingImm);
                case OP_READ -> ExtendedOps.QP_RDMA_BY_ADDRESS.invokeExact(read, q, pendingInt, pendingAddr);
                case OP_CMP_SWP -> ExtendedOps.QP_CMP_SWP_BY_ADDRESS.invokeExact(cmpSwp, q, pendingInt, pendingAddr, pendingA, pendingB);
                case OP_FETCH_ADD -> ExtendedOps.QP_FETCH_ADD_BY_ADDRESS.invokeExact(fetchAdd, q, pendingInt, pendingAddr, pendingA);
                default -> ExtendedOps.QP_INT_BY_ADDRESS.invokeExact(localInv, q, pendingInt);
            }
            if (nSge == 1) {
                verb = "ibv_wr_set_sge";
                ExtendedOps.QP_SET_SGE_BY_ADDRESS.invokeExact(setSge, q, sge0Lkey, sge0Address, sge0Length);
            } else if (nSge > 1) {
                verb = "ibv_wr_set_sge_list";
                ExtendedOps.QP_SET_LIST_BY_ADDRESS.invokeExact(setSgeList, q, (long) nSge, sgesAddress);
            } else if (nInline > 0) {
                verb = "ibv_wr_set_inline_data";
                ExtendedOps.QP_SET_INLINE_BY_ADDRESS.invokeExact(setInline, q, stagingAddress, inlineBytes);
            }
            if (ah != null) {
                verb = "ibv_wr_set_ud_addr";
                pendingAh = null;
                ExtendedOps.QP_SET_UD_ADDR_BY_ADDRESS.invokeExact(setUd, q, ah.ah.address(), pendingQpn, pendingQkey);
            }
            if (hasSrqn) {
                verb = "ibv_wr_set_xrc_srqn";
                hasSrqn = false;
                ExtendedOps.QP_INT_BY_ADDRESS.invokeExact(setXrcSrqn, q, pendingSrqn);
            }
        } catch (Throwable t) {
            throw failed(verb, t);
        } finally {
            // the lists' arena (held by this session) and the address handle stay reachable until the provider returned
            Reference.reachabilityFence(this);
            Reference.reachabilityFence(ah);
        }
    }

    private void setter(String verb) {
        if (!open) {
            throw new IllegalStateException("the posting session on " + qp + " has ended: " + verb + " refused");
        }
        if (kind == NONE) {
            throw fail(new IllegalStateException(verb + " before any operation: build one first (send(), rdmaWrite(), ...)"));
        }
    }

    private void aligned(long remoteAddress) {
        if ((remoteAddress & 7) != 0) {
            throw fail(new IllegalArgumentException("an atomic operation needs an 8-byte aligned remote address, got 0x"
                    + Long.toHexString(remoteAddress)));
        }
    }

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

    /** Aborts the batch and returns {@code e} to throw. */
    private RuntimeException fail(RuntimeException e) {
        try {
            abort();
        } catch (RuntimeException suppressed) {
            e.addSuppressed(suppressed);
        }
        return e;
    }

    private RuntimeException failed(String verb, Throwable t) {
        end();
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
