package io.github.verbs4j;

import io.github.verbs4j.internal.InFlight;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static io.github.verbs4j.raw.WorkRequestLayout.RECV_NEXT;
import static io.github.verbs4j.raw.WorkRequestLayout.RECV_NUM_SGE;
import static io.github.verbs4j.raw.WorkRequestLayout.RECV_SG_LIST;
import static io.github.verbs4j.raw.WorkRequestLayout.RECV_WR_ID;
import static io.github.verbs4j.raw.WorkRequestLayout.RECV_WR_SIZE;

/**
 * A reusable receive work request ({@code struct ibv_recv_wr} with its scatter/gather array, in
 * one native segment), for {@link QueuePair#postRecv} and {@link SharedReceiveQueue#postRecv}.
 * Setters write through to native memory; re-posting allocates nothing. Buffers are checked
 * against their region when set; regions are checked (open, same protection domain, memory
 * alive) when posted; a request posted successfully and re-posted unchanged to the same QP or
 * SRQ is not checked in full again (only {@link #id(long)} or the chain changed, and no region
 * closed since: see {@link SendRequest}). Chains with {@link #next(ReceiveRequest)}.
 *
 * <p>The native memory is freed by the garbage collector once the request is unreachable. Not
 * thread-safe.
 */
public final class ReceiveRequest {

    /** Scatter/gather entries of {@link #create()}. */
    public static final int DEFAULT_MAX_SGE = 4;

    private static final int MAX_CHAIN = 1 << 16;

    private final ScatterGatherList sgl;
    final MemorySegment wr;
    final MemorySegment badWr;
    /**
     * {@code wr.address()} and {@code badWr.address()}, kept as numbers: the post passes them to
     * the provider, and a field of the request is one load where the segment's address is two
     * (the segment, then its address). The segments stay reachable through the fields above.
     */
    final long wrAddress;
    final long badWrAddress;
    /**
     * The close guard's record of the thread that posted this request last
     * ({@code NativeHandle.enter(InFlight, ...)}): reused while the same thread posts it, so a post
     * does not look the record up in a thread-local each time. Any thread may overwrite it. Starts as the creating thread's record
     * (why: {@code InFlight}'s class comment).
     */
    InFlight mark = InFlight.of(null);
    private int sgeCount;
    private ReceiveRequest next;
    /** The QP or SRQ this request was last checked for in full, or {@code null}: cleared by the setters the checks read. */
    private Object validFor;
    /** The {@link Validity#epoch()} of that check. */
    private long validEpoch;
    /** Whether a post must still check caller-owned memory alive. */
    private boolean checkLive;
    /*
     * The chain's check, kept by its head (as SendRequest does): the target the chain starting
     * here was last checked for in full (null when not known valid) and at which epoch, whether
     * some member names caller-owned memory, and in every member the one head whose check covers it.
     */
    private Object chainFor;
    private long chainEpoch;
    private boolean chainCheckLive;
    /**
     * {@link #chainEpoch} when the chain names no caller-owned memory, else {@link #NOT_QUICK}: the
     * epoch and the liveness test of {@link #checkedFor} in one comparison (one load and one
     * branch fewer per post).
     */
    private long quickEpoch = NOT_QUICK;
    /** An epoch {@link Validity#epoch()} never reaches (it counts up from 0). */
    private static final long NOT_QUICK = Long.MIN_VALUE;
    private ReceiveRequest inChainOf;

    private ReceiveRequest(int maxSge) {
        this.sgl = new ScatterGatherList(RECV_WR_SIZE, RECV_SG_LIST, maxSge);
        this.wr = sgl.wr;
        this.badWr = sgl.badWr;
        this.wrAddress = wr.address();
        this.badWrAddress = badWr.address();
    }

    /** A request with room for {@value #DEFAULT_MAX_SGE} entries. */
    public static ReceiveRequest create() {
        return new ReceiveRequest(DEFAULT_MAX_SGE);
    }

    /** A request with room for {@code maxSge} entries. */
    public static ReceiveRequest withMaxSge(int maxSge) {
        return new ReceiveRequest(maxSge);
    }

    /** The id reported in the completion ({@code wr_id}). */
    public ReceiveRequest id(long id) {
        wr.set(ValueLayout.JAVA_LONG, RECV_WR_ID, id);
        return this;
    }

    /** The id. */
    public long id() {
        return wr.get(ValueLayout.JAVA_LONG, RECV_WR_ID);
    }

    /** One buffer (replaces all entries); the region needs {@link Access#LOCAL_WRITE} or the device reports LOCAL_PROTECTION_ERROR. */
    public ReceiveRequest local(MemoryRegion region, long offset, int length) {
        sge(0, region, offset, length);
        return sgeCount(1);
    }

    /** One buffer (replaces all entries). */
    public ReceiveRequest local(MemoryRegion.Slice slice) {
        return local(slice.region(), slice.offset(), slice.length());
    }

    /** Sets entry {@code index}; see {@link #sgeCount(int)}. */
    public ReceiveRequest sge(int index, MemoryRegion region, long offset, int length) {
        changed();
        sgl.set(index, region, offset, length);
        return this;
    }

    /** How many entries are used. */
    public ReceiveRequest sgeCount(int count) {
        sgl.requireSet(count, false);
        changed();
        this.sgeCount = count;
        wr.set(ValueLayout.JAVA_INT, RECV_NUM_SGE, count);
        return this;
    }

    /** Chains {@code next} after this request ({@code null} ends the chain). */
    public ReceiveRequest next(ReceiveRequest next) {
        if (next == this) {
            throw new IllegalArgumentException("a request cannot follow itself");
        }
        chainChanged();
        this.next = next;
        wr.set(ValueLayout.ADDRESS, RECV_NEXT, next == null ? MemorySegment.NULL : next.wr);
        return this;
    }

    /** The next request in the chain, or {@code null}. */
    public ReceiveRequest next() {
        return next;
    }

    /** A setter the checks read ran: this request is checked in full at its next post, as is the chain that covered it. */
    private void changed() {
        validFor = null;
        chainChanged();
    }

    /** The chain that covered this request (if any) is checked again at its next post. */
    private void chainChanged() {
        ReceiveRequest head = inChainOf;
        if (head != null) {
            head.chainFor = null;
            inChainOf = null;
        }
    }

    /**
     * Whether the chain starting here was checked in full for {@code target} in the current epoch
     * and names no caller-owned memory: the post's hot test, the one {@link #validate} begins with.
     * When it holds, a re-post skips {@link #validate}, which then stays out of line (its walk of
     * the chain, inlined into every post, made the post's compiled code as large as the rest of a
     * caller's loop: the SEND + RECV row's, docs/performance.md).
     */
    boolean checkedFor(Object target) {
        return chainFor == target && quickEpoch == Validity.epoch();
    }

    /**
     * The Java-side checks of a post to {@code target} (a QP or an SRQ of {@code pd} taking
     * {@code maxSgeAllowed} entries), over the chain; a request checked in full for that target
     * and not changed since is not checked again (see {@link Validity}), only its caller-owned
     * memory alive; a whole chain checked for that target and not changed since (no setter of any
     * member, no relink) is not walked at all unless it names caller-owned memory.
     */
    void validate(ProtectionDomain pd, int maxSgeAllowed, Object target) {
        long epoch = Validity.epoch();
        if (chainFor == target && chainEpoch == epoch) {
            // the whole chain checked before and nothing it depends on changed since: O(1)
            if (chainCheckLive) {
                for (ReceiveRequest r = this; r != null; r = r.next) {
                    if (r.checkLive) {
                        r.sgl.ensureLive(r.sgeCount);
                    }
                }
            }
            return;
        }
        chainFor = null;
        int chained = 0;
        boolean live = false;
        for (ReceiveRequest r = this; r != null; r = r.next) {
            if (++chained > MAX_CHAIN) {
                throw new IllegalArgumentException("the chain of receive requests is longer than " + MAX_CHAIN
                        + " (a cycle?)");
            }
            if (r.validFor == target && r.validEpoch == epoch) {
                if (r.checkLive) {
                    r.sgl.ensureLive(r.sgeCount);
                }
            } else {
                if (r.sgeCount > maxSgeAllowed) {
                    throw new IllegalArgumentException("request " + r.id() + " has " + r.sgeCount
                            + " scatter/gather entries, " + target + " takes " + maxSgeAllowed);
                }
                r.sgl.validate(r.sgeCount, false, pd, target, r.id());
                r.checkLive = r.sgl.namesCallerMemory(r.sgeCount);
                r.validEpoch = epoch;
                r.validFor = target;
            }
            live |= r.checkLive;
            ReceiveRequest covering = r.inChainOf;
            if (covering != this) {
                if (covering != null) {
                    covering.chainFor = null; // one covering head per request
                }
                r.inChainOf = this;
            }
        }
        chainCheckLive = live;
        chainEpoch = epoch;
        quickEpoch = live ? NOT_QUICK : epoch;
        chainFor = target;
    }

    String describeBad() {
        MemorySegment bad = badWr.get(ValueLayout.ADDRESS, 0);
        for (ReceiveRequest r = this; r != null; r = r.next) {
            if (r.wr.address() == bad.address()) {
                return r.toString();
            }
        }
        return "unknown (bad_wr 0x" + Long.toHexString(bad.address()) + ")";
    }

    @Override
    public String toString() {
        return "ReceiveRequest[id " + id() + ", " + sgeCount + " SGE" + (sgeCount == 1 ? "" : "s") + "]";
    }
}
