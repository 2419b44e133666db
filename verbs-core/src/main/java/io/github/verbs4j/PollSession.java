package io.github.verbs4j;

import io.github.verbs4j.internal.InFlight;
import io.github.verbs4j.raw.ExtendedOps;
import io.github.verbs4j.raw.WorkCompletionLayout;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.ref.Reference;
import java.nio.ByteOrder;

/**
 * A pass over the completions of an extended completion queue ({@code struct ibv_cq_ex}):
 * {@code ibv_start_poll}, {@code ibv_next_poll} and {@code ibv_end_poll}, each completion's
 * fields read through the provider's {@code ibv_wc_read_*} accessors.
 *
 * <pre>{@code
 * try (PollSession p = cq.startPoll()) {        // ibv_start_poll (ENOENT: nothing to take)
 *     while (p.next()) {                        // the first completion, then ibv_next_poll
 *         if (p.status() != WcStatus.SUCCESS) throw new IllegalStateException(p.status() + " for " + p.wrId());
 *         total += p.byteLen();                 // ibv_wc_read_byte_len
 *     }
 * }                                             // ibv_end_poll (only after a successful start)
 * }</pre>
 *
 * <p>Each completion is consumed when {@link #next()} moves past it. The accessors read the
 * current one: {@link #wrId()} and {@link #status()} are fields of {@code struct ibv_cq_ex};
 * {@link #opcode()}, {@link #vendorError()} and {@link #wcFlags()} always have an accessor;
 * the others exist only for the {@link WcField}s the queue was created with.
 *
 * <p><b>Errors</b>: {@link IllegalStateException} for an accessor without a current completion
 * (before the first {@code next()}, after it returned false, after close), for a field the queue
 * was not created with, for {@link CompletionQueue#startPoll()} while a pass is open, or after
 * the queue is closed; {@link VerbsException} when the provider's start_poll or next_poll
 * returns an errno other than ENOENT.
 *
 * <p><b>rxe with rdma-core before 55</b> (Debian 12 ships 44): the provider's {@code cq_end_poll}
 * advances the consumer index once more after a {@code cq_next_poll} that answered ENOENT
 * (fixed upstream by "rxe: fix completion queue consumer index overrun"), so a pass that ends
 * with {@link #next()} returning false leaves the queue one entry past its producer: the next
 * pass reads a stale entry and the kernel then sees the queue as full. There, end each pass
 * before asking past the completions you expect (for instance one completion per pass).
 * docs/substrates.md has the details.
 *
 * <p><b>Hot path</b>: every call goes through a function pointer of {@code struct ibv_cq_ex},
 * read once at creation, with a critical downcall taking the queue's address as a {@code long};
 * nothing is allocated. An empty queue costs one call ({@code start_poll} answering ENOENT).
 * From a successful {@code ibv_start_poll} to {@link #close()} the session marks the queue
 * in use (the close guard's session record, no atomic update): a
 * {@link CompletionQueue#close()} on another thread that has got past its own check waits for
 * the pass to end before the queue is destroyed (and within the pass, closing the queue is
 * refused, as said below).
 *
 * <p><b>Thread-safety</b>: a queue has one session object, reused by every
 * {@link CompletionQueue#startPoll()}; between start and end the provider holds the queue's
 * lock (rxe, softrdma), so one thread polls at a time and the pass should be short: do not
 * block inside it, and do not close the queue from inside.
 */
public final class PollSession implements AutoCloseable {

    private static final boolean LITTLE = ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN;
    private static final int ENOENT = 2;

    private static final int CLOSED = 0;
    private static final int FIRST = 1;   // start_poll succeeded; next() returns the first
    private static final int CURRENT = 2; // a completion is current
    private static final int DRAINED = 3; // next_poll answered ENOENT; end_poll still due
    private static final int EMPTY = 4;   // start_poll answered ENOENT; no end_poll

    /** Empty passes, for the safepoint and yield of {@link CompletionQueue#afterEmptyPolls}; wraps. */
    private int emptyPolls;

    private final CompletionQueue cq;
    /** The queue's {@code struct ibv_cq_ex}: its address, passed to every call, and a view to read wr_id and status. */
    private final long cqx;
    private final MemorySegment cqxView;
    private final long fields;
    private final MemorySegment startPoll, nextPoll, endPoll;
    private final MemorySegment readOpcode, readVendorErr, readWcFlags, readByteLen, readImm, readQpNum, readSrcQp,
            readSlid, readSl, readDlidPathBits, readTimestamp;
    private final MemorySegment attr;
    private final long attrAddress;
    private int state = CLOSED;
    /** The CQ handle's session mark while a pass is open (from a successful start_poll to close); a close waits for it. */
    private InFlight mark;

    PollSession(CompletionQueue cq, MemorySegment cqx, long fields) {
        this.cq = cq;
        this.cqx = cqx.address();
        this.cqxView = MemorySegment.ofAddress(cqx.address()).reinterpret(ExtendedOps.CQ_EX_SIZE);
        this.fields = fields;
        this.startPoll = fn(cqx, ExtendedOps.START_POLL);
        this.nextPoll = fn(cqx, ExtendedOps.NEXT_POLL);
        this.endPoll = fn(cqx, ExtendedOps.END_POLL);
        this.readOpcode = fn(cqx, ExtendedOps.READ_OPCODE);
        this.readVendorErr = fn(cqx, ExtendedOps.READ_VENDOR_ERR);
        this.readWcFlags = fn(cqx, ExtendedOps.READ_WC_FLAGS);
        this.readByteLen = fn(cqx, ExtendedOps.READ_BYTE_LEN);
        this.readImm = fn(cqx, ExtendedOps.READ_IMM_DATA);
        this.readQpNum = fn(cqx, ExtendedOps.READ_QP_NUM);
        this.readSrcQp = fn(cqx, ExtendedOps.READ_SRC_QP);
        this.readSlid = fn(cqx, ExtendedOps.READ_SLID);
        this.readSl = fn(cqx, ExtendedOps.READ_SL);
        this.readDlidPathBits = fn(cqx, ExtendedOps.READ_DLID_PATH_BITS);
        this.readTimestamp = fn(cqx, ExtendedOps.READ_COMPLETION_TS);
        if (startPoll == null || nextPoll == null || endPoll == null || readOpcode == null) {
            throw new UnsupportedOperationException("ibv_create_cq_ex: the provider's ibv_cq_ex of " + cq
                    + " lacks start_poll/next_poll/end_poll/read_opcode");
        }
        this.attr = Arena.ofAuto().allocate(WorkCompletionLayout.POLL_CQ_ATTR_SIZE,
                WorkCompletionLayout.POLL_CQ_ATTR_ALIGNMENT);
        this.attrAddress = attr.address();
    }

    private static MemorySegment fn(MemorySegment cqx, long offset) {
        MemorySegment f = cqx.get(ValueLayout.ADDRESS, offset);
        return f.equals(MemorySegment.NULL) ? null : f;
    }

    /** ibv_start_poll; called by {@link CompletionQueue#startPoll()}. */
    PollSession begin() {
        if (state != CLOSED) {
            throw new IllegalStateException("a polling session is already open on " + cq + ": close it first");
        }
        InFlight mark = cq.handle.enterSession(cq, "ibv_start_poll");
        int rc;
        try {
            rc = (int) ExtendedOps.CQ_START_POLL_BY_ADDRESS.invokeExact(startPoll, cqx, attrAddress);
        } catch (Throwable t) {
            mark.exit();
            throw cq.handle.failure(cq, "ibv_start_poll", t);
        } finally {
            // attr's arena (held by this session) stays reachable until the provider returned
            Reference.reachabilityFence(this);
        }
        if (rc == 0) {
            this.mark = mark;
            state = FIRST; // marked until close()
        } else {
            mark.exit(); // no end_poll is due: nothing more to call
            if (Math.abs(rc) == ENOENT) {
                state = EMPTY;
                int empty = ++emptyPolls;
                if ((empty & CompletionQueue.SAFEPOINT_EVERY_EMPTY_POLLS_MASK) == 0) {
                    CompletionQueue.afterEmptyPolls(empty); // as CompletionQueue.poll's empty path, and why
                }
            } else {
                throw VerbsException.of("ibv_start_poll", Math.abs(rc));
            }
        }
        return this;
    }

    /**
     * Moves to the next completion: the first one {@code ibv_start_poll} found, then
     * {@code ibv_next_poll}.
     *
     * @return whether there is a current completion (false: the queue had no more)
     */
    public boolean next() {
        switch (state) {
            case FIRST -> {
                state = CURRENT;
                return true;
            }
            case CURRENT -> {
                int rc;
                try {
                    rc = (int) ExtendedOps.CQ_INT_BY_ADDRESS.invokeExact(nextPoll, cqx);
                } catch (Throwable t) {
                    throw cq.handle.failure(cq, "ibv_next_poll", t);
                }
                if (rc == 0) {
                    return true;
                }
                state = DRAINED;
                if (Math.abs(rc) != ENOENT) {
                    throw VerbsException.of("ibv_next_poll", Math.abs(rc));
                }
                return false;
            }
            case DRAINED, EMPTY -> {
                return false;
            }
            default -> throw new IllegalStateException("the polling session on " + cq + " is closed");
        }
    }

    /** Whether the pass found nothing ({@code ibv_start_poll} answered ENOENT). */
    public boolean isEmpty() {
        return state == EMPTY;
    }

    /** The current completion's work request id ({@code ibv_cq_ex.wr_id}). */
    public long wrId() {
        current();
        return cqxView.get(ValueLayout.JAVA_LONG, ExtendedOps.CQ_WR_ID);
    }

    /** The current completion's status ({@code ibv_cq_ex.status}). */
    public WcStatus status() {
        return WcStatus.of(statusCode());
    }

    /** The current completion's status as the C enum value. */
    public int statusCode() {
        current();
        return cqxView.get(ValueLayout.JAVA_INT, ExtendedOps.CQ_STATUS);
    }

    /** Whether the current completion succeeded. */
    public boolean ok() {
        return statusCode() == 0;
    }

    /** {@code ibv_wc_read_opcode}. */
    public WcOpcode opcode() {
        return WcOpcode.of(readInt(readOpcode, null, "ibv_wc_read_opcode"));
    }

    /** {@code ibv_wc_read_vendor_err}. */
    public int vendorError() {
        return readInt(readVendorErr, null, "ibv_wc_read_vendor_err");
    }

    /** {@code ibv_wc_read_wc_flags}: {@code IBV_WC_GRH}, {@code IBV_WC_WITH_IMM}, ... */
    public int wcFlags() {
        return readInt(readWcFlags, null, "ibv_wc_read_wc_flags");
    }

    /** {@code ibv_wc_read_byte_len} ({@link WcField#BYTE_LEN}). */
    public int byteLen() {
        return readInt(readByteLen, WcField.BYTE_LEN, "ibv_wc_read_byte_len");
    }

    /**
     * {@code ibv_wc_read_imm_data} ({@link WcField#IMM}) in host order: the value the sender gave
     * ({@link PostSession#sendImm}, {@link SendRequest#immediate(int)}). Meaningful when
     * {@link #wcFlags()} has {@code IBV_WC_WITH_IMM}.
     */
    public int immediate() {
        int be = readInt(readImm, WcField.IMM, "ibv_wc_read_imm_data");
        return LITTLE ? Integer.reverseBytes(be) : be;
    }

    /** {@code ibv_wc_read_qp_num} ({@link WcField#QP_NUM}): the local QP. */
    public int qpNumber() {
        return readInt(readQpNum, WcField.QP_NUM, "ibv_wc_read_qp_num");
    }

    /** {@code ibv_wc_read_src_qp} ({@link WcField#SRC_QP}): the sending QP of a receive. */
    public int sourceQp() {
        return readInt(readSrcQp, WcField.SRC_QP, "ibv_wc_read_src_qp");
    }

    /** {@code ibv_wc_read_slid} ({@link WcField#SLID}). */
    public int slid() {
        return readInt(readSlid, WcField.SLID, "ibv_wc_read_slid");
    }

    /** {@code ibv_wc_read_sl} ({@link WcField#SL}). */
    public int sl() {
        return Byte.toUnsignedInt(readByte(readSl, WcField.SL, "ibv_wc_read_sl"));
    }

    /** {@code ibv_wc_read_dlid_path_bits} ({@link WcField#DLID_PATH_BITS}). */
    public int dlidPathBits() {
        return Byte.toUnsignedInt(readByte(readDlidPathBits, WcField.DLID_PATH_BITS, "ibv_wc_read_dlid_path_bits"));
    }

    /** {@code ibv_wc_read_completion_ts} ({@link WcField#COMPLETION_TIMESTAMP}): device clock ticks. */
    public long completionTimestamp() {
        current();
        MemorySegment fn = accessor(readTimestamp, WcField.COMPLETION_TIMESTAMP);
        try {
            return (long) ExtendedOps.CQ_LONG_BY_ADDRESS.invokeExact(fn, cqx);
        } catch (Throwable t) {
            throw cq.handle.failure(cq, "ibv_wc_read_completion_ts", t);
        }
    }

    /** Ends the pass ({@code ibv_end_poll}, when {@code ibv_start_poll} had succeeded). Idempotent. */
    @Override
    public void close() {
        int s = state;
        if (s == CLOSED) {
            return;
        }
        state = CLOSED;
        if (s != EMPTY) {
            try {
                ExtendedOps.CQ_VOID_BY_ADDRESS.invokeExact(endPoll, cqx);
            } catch (Throwable t) {
                throw cq.handle.failure(cq, "ibv_end_poll", t);
            } finally {
                mark.exit();
                mark = null;
            }
        }
    }

    /** Whether a pass is open (started and not closed). */
    public boolean isOpen() {
        return state != CLOSED;
    }

    /** Throws unless a completion is current (so the queue is marked in use). */
    private void current() {
        if (state != CURRENT) {
            throw new IllegalStateException("no current completion on " + cq + " (call next() and check it returned true)");
        }
    }

    private MemorySegment accessor(MemorySegment fn, WcField field) {
        if (fn == null || (field != null && (fields & field.flag()) == 0)) {
            throw new IllegalStateException(cq + " was not created with WcField." + field
                    + " (Context.createExtendedCq)");
        }
        return fn;
    }

    private int readInt(MemorySegment fn, WcField field, String verb) {
        current();
        MemorySegment f = accessor(fn, field);
        try {
            return (int) ExtendedOps.CQ_INT_BY_ADDRESS.invokeExact(f, cqx);
        } catch (Throwable t) {
            throw cq.handle.failure(cq, verb, t);
        }
    }

    private byte readByte(MemorySegment fn, WcField field, String verb) {
        current();
        MemorySegment f = accessor(fn, field);
        try {
            return (byte) ExtendedOps.CQ_BYTE_BY_ADDRESS.invokeExact(f, cqx);
        } catch (Throwable t) {
            throw cq.handle.failure(cq, verb, t);
        }
    }

    @Override
    public String toString() {
        return "PollSession[" + cq + (state == CLOSED ? ", closed" : ", open") + "]";
    }
}
