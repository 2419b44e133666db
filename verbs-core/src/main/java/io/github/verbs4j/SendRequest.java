package io.github.verbs4j;

import io.github.verbs4j.internal.InFlight;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.Objects;

import static io.github.verbs4j.raw.WorkRequestLayout.SEND_ATOMIC_COMPARE_ADD;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_ATOMIC_REMOTE_ADDR;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_ATOMIC_RKEY;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_ATOMIC_SWAP;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_BIND_MW_ACCESS;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_BIND_MW_ADDR;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_BIND_MW_LENGTH;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_BIND_MW_MR;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_BIND_MW_MW;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_BIND_MW_RKEY;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_FENCE;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_FLAGS;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_IMM_DATA;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_INLINE;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_INVALIDATE_RKEY;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_NEXT;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_NUM_SGE;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_OPCODE;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_RDMA_REMOTE_ADDR;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_RDMA_RKEY;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_SG_LIST;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_SIGNALED;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_SOLICITED;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_UD_AH;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_UD_REMOTE_QKEY;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_UD_REMOTE_QPN;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_WR_ID;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_WR_SIZE;
import static io.github.verbs4j.raw.WorkRequestLayout.SEND_XRC_REMOTE_SRQN;

/**
 * A reusable send work request ({@code struct ibv_send_wr} with its scatter/gather array, in one
 * native segment). Setters write straight into the native struct and return {@code this}, so a
 * request is set up once and re-posted with only {@link #id(long)} changing: no allocation per
 * post.
 *
 * <pre>{@code
 * SendRequest write = SendRequest.rdmaWrite().local(mr, 0, 4096).remote(peerBuffer).signaled(true);
 * for (long i = 0; ; i++) qp.postSend(write.id(i));
 * }</pre>
 *
 * <p>Inline sends may carry memory that is not registered at all: {@link #inlineData(MemorySegment)}
 * points the request at any native segment, whose bytes the provider copies when the request is
 * posted ({@code IBV_SEND_INLINE} ignores lkeys).
 *
 * <p>The request keeps references to the memory regions and address handle it names, and
 * {@link QueuePair#postSend} checks them (open, same protection domain, memory alive) before
 * the device sees the request. Ranges are checked when set. Requests chain with
 * {@link #next(SendRequest)} and post with one call.
 *
 * <p><b>Checked once</b>: a request posted successfully is not checked in full again when it is
 * re-posted to the same QP unchanged: changing only {@link #id(long)}, {@link #signaled},
 * {@link #solicited}, {@link #fence}, {@link #immediate}, {@link #compareAdd}, {@link #swap} or
 * the chain keeps it checked. Every other setter, and the close of any memory region or address
 * handle, makes the next post check it in full again, so a changed request gets exactly the
 * errors a new one would. Caller-owned memory (a region over the caller's segment, inline data)
 * is checked alive at every post. A chain re-posted unchanged to the same QP is not even walked:
 * its head remembers the check of the whole chain, so the post costs the same for 16 requests as
 * for one; a setter the checks read on any member, or relinking any member ({@link #next(SendRequest)}),
 * makes the next post walk the chain again.
 *
 * <p>The native memory is freed by the garbage collector once the request is unreachable; the
 * device copies a request when it is posted, so a request may be changed or dropped as soon as
 * {@code postSend} returns. Not thread-safe: one thread sets and posts a given request.
 */
public final class SendRequest {

    /** Scatter/gather entries of requests made by the factory methods. */
    public static final int DEFAULT_MAX_SGE = 4;

    /** {@code __be32 imm_data}: written big-endian ({@code htonl}). */
    private static final ValueLayout.OfInt NETWORK_INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    /** Longest chain {@code postSend} accepts: longer ones are taken for a cycle. */
    private static final int MAX_CHAIN = 1 << 16;

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
    /** Unregistered memory sent inline as the only entry ({@link #inlineData}), or {@code null}. */
    private MemorySegment inlineData;
    private final ScatterGatherList sgl;
    private int sgeCount;
    private SendOpcode opcode;
    private int flags;
    private long remoteAddress;
    private int rkey;
    private boolean remoteSet;
    private long compareAdd;
    private long swap;
    private AddressHandle ah;
    private int udQpn;
    private int udQkey;
    private SendRequest next;
    /** BIND_MW: the window and what it binds. */
    private MemoryWindow window;
    private MemoryRegion.Slice bindRange;
    private boolean zeroBased;
    /** The QP this request was last checked for in full, or {@code null}: cleared by every setter the checks read. */
    private QueuePair validFor;
    /** {@link #xrcRemoteSrqn} was given. */
    private boolean xrcSrqnSet;
    /** The {@link Validity#epoch()} of that check. */
    private long validEpoch;
    /** Whether a post must still check caller-owned memory alive (inline data, regions over a caller's segment). */
    private boolean checkLive;
    /*
     * The chain's check, kept by its head, so that an unchanged chain is re-posted in O(1), not
     * O(length): chainFor is the QP the chain starting here was last checked for in full (null
     * when it is not known valid), at chainEpoch; chainCheckLive says whether some member names
     * caller-owned memory (then each post still walks the chain to see that memory alive).
     * Every member remembers in inChainOf the one head whose check covers it; a setter the checks
     * read, or a relink (next), clears that head's chainFor, and a member taken into another
     * head's checked chain clears the previous head's: a request is covered by one head at a time.
     */
    private QueuePair chainFor;
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
    private SendRequest inChainOf;

    private SendRequest(SendOpcode opcode, int maxSge) {
        this.sgl = new ScatterGatherList(SEND_WR_SIZE, SEND_SG_LIST, maxSge);
        this.wr = sgl.wr;
        this.badWr = sgl.badWr;
        this.wrAddress = wr.address();
        this.badWrAddress = badWr.address();
        opcode(opcode);
    }

    /** A request of {@code opcode} with room for {@code maxSge} scatter/gather entries. */
    public static SendRequest of(SendOpcode opcode, int maxSge) {
        return new SendRequest(Objects.requireNonNull(opcode, "opcode"), maxSge);
    }

    /** A SEND. */
    public static SendRequest send() {
        return new SendRequest(SendOpcode.SEND, DEFAULT_MAX_SGE);
    }

    /** A SEND with immediate data. */
    public static SendRequest sendWithImm(int immediate) {
        return new SendRequest(SendOpcode.SEND_WITH_IMM, DEFAULT_MAX_SGE).immediate(immediate);
    }

    /** An RDMA WRITE (set {@link #remote}). */
    public static SendRequest rdmaWrite() {
        return new SendRequest(SendOpcode.RDMA_WRITE, DEFAULT_MAX_SGE);
    }

    /** An RDMA WRITE with immediate data (set {@link #remote}). */
    public static SendRequest rdmaWriteWithImm(int immediate) {
        return new SendRequest(SendOpcode.RDMA_WRITE_WITH_IMM, DEFAULT_MAX_SGE).immediate(immediate);
    }

    /** An RDMA READ (set {@link #remote}; local buffers need {@link Access#LOCAL_WRITE}). */
    public static SendRequest rdmaRead() {
        return new SendRequest(SendOpcode.RDMA_READ, DEFAULT_MAX_SGE);
    }

    /** A 64-bit compare-and-swap: if remote == compare then remote = swap; the old value lands in the local buffer. */
    public static SendRequest compareAndSwap(long compare, long swap) {
        return new SendRequest(SendOpcode.ATOMIC_CMP_AND_SWP, 1).compareAdd(compare).swap(swap);
    }

    /** A 64-bit fetch-and-add: remote += add; the old value lands in the local buffer. */
    public static SendRequest fetchAndAdd(long add) {
        return new SendRequest(SendOpcode.ATOMIC_FETCH_AND_ADD, 1).compareAdd(add);
    }

    /**
     * A BIND_MW request: binds the type 2 {@code window} to {@code range} with {@code rights}
     * ({@link Access#REMOTE_READ}, {@link Access#REMOTE_WRITE}, {@link Access#REMOTE_ATOMIC},
     * and {@link Access#ZERO_BASED} for a window its peers address from offset 0;
     * {@link Access#LOCAL_WRITE} is taken too, as rdma-core's tests bind and the devices accept,
     * and grants a peer nothing). The region must
     * have been registered with {@link Access#MW_BIND} (and {@link Access#LOCAL_WRITE} for remote
     * write or atomic rights), in the QP's protection domain. Each post gives the window the next
     * rkey ({@code ibv_inc_rkey}), which {@link MemoryWindow#rkey()} and
     * {@link MemoryWindow#remote()} report once {@link QueuePair#postSend} returned. The bind
     * completes with {@link WcOpcode#BIND_MW}; a bind the device refuses (region without
     * MW_BIND, range outside the region, zero-based region, a window still bound) completes with
     * {@link WcStatus#MW_BIND_ERROR} and moves the QP to ERR.
     *
     * @throws IllegalArgumentException for a right other than those above
     */
    public static SendRequest bindMemoryWindow(MemoryWindow window, MemoryRegion.Slice range, Access... rights) {
        return new SendRequest(SendOpcode.BIND_MW, 1).bind(window, range, rights);
    }

    /**
     * A LOCAL_INV request: invalidates this side's type 2 memory window with {@code rkey}; from
     * then on the rkey is refused. Completes with {@link WcOpcode#LOCAL_INV}; an rkey that is not
     * a bound type 2 window of the QP's domain (a type 1 window, a memory region) completes with
     * {@link WcStatus#LOCAL_QP_OPERATION_ERROR} and moves the QP to ERR.
     */
    public static SendRequest localInvalidate(int rkey) {
        return new SendRequest(SendOpcode.LOCAL_INV, 1).invalidate(rkey);
    }

    /**
     * A SEND with Invalidate (set the data with {@link #local}): the peer receives the message and
     * its type 2 memory window with {@code rkey} is invalidated; the receive completion reports
     * it ({@link Completion#hasInvalidate()}, {@link Completion#invalidatedRkey()}). An rkey the
     * peer cannot invalidate completes with {@link WcStatus#REMOTE_INVALID_REQUEST_ERROR}.
     */
    public static SendRequest sendWithInvalidate(int rkey) {
        return new SendRequest(SendOpcode.SEND_WITH_INV, DEFAULT_MAX_SGE).invalidate(rkey);
    }

    /** The rkey a SEND_WITH_INV or LOCAL_INV request invalidates ({@code invalidate_rkey}). */
    public SendRequest invalidate(int rkey) {
        changed();
        wr.set(ValueLayout.JAVA_INT, SEND_INVALIDATE_RKEY, rkey);
        return this;
    }

    /**
     * Sets what a BIND_MW request binds; see {@link #bindMemoryWindow}.
     *
     * @throws IllegalArgumentException for a right other than REMOTE_READ, REMOTE_WRITE,
     *         REMOTE_ATOMIC, ZERO_BASED and LOCAL_WRITE
     */
    public SendRequest bind(MemoryWindow window, MemoryRegion.Slice range, Access... rights) {
        Objects.requireNonNull(window, "window");
        Objects.requireNonNull(range, "range");
        java.util.EnumSet<Access> set = Access.setOf(rights);
        for (Access a : set) {
            if (a != Access.REMOTE_READ && a != Access.REMOTE_WRITE && a != Access.REMOTE_ATOMIC && a != Access.ZERO_BASED
                    && a != Access.LOCAL_WRITE) {
                throw new IllegalArgumentException(a + " is not a memory window right (REMOTE_READ, REMOTE_WRITE,"
                        + " REMOTE_ATOMIC, ZERO_BASED, LOCAL_WRITE)");
            }
        }
        changed();
        this.window = window;
        this.bindRange = range;
        this.zeroBased = set.contains(Access.ZERO_BASED);
        wr.set(ValueLayout.ADDRESS, SEND_BIND_MW_MW, window.mw);
        wr.set(ValueLayout.ADDRESS, SEND_BIND_MW_MR, range.region().mr);
        wr.set(ValueLayout.JAVA_LONG, SEND_BIND_MW_ADDR, range.address());
        wr.set(ValueLayout.JAVA_LONG, SEND_BIND_MW_LENGTH, range.length());
        wr.set(ValueLayout.JAVA_INT, SEND_BIND_MW_ACCESS, Access.mask(set));
        return this;
    }

    /** The id reported in this request's completion ({@code wr_id}). */
    public SendRequest id(long id) {
        wr.set(ValueLayout.JAVA_LONG, SEND_WR_ID, id);
        return this;
    }

    /** The id. */
    public long id() {
        return wr.get(ValueLayout.JAVA_LONG, SEND_WR_ID);
    }

    /** Changes the operation. */
    public SendRequest opcode(SendOpcode opcode) {
        this.opcode = Objects.requireNonNull(opcode, "opcode");
        changed();
        wr.set(ValueLayout.JAVA_INT, SEND_OPCODE, opcode.value());
        writeUnion();
        return this;
    }

    /** The operation. */
    public SendOpcode opcode() {
        return opcode;
    }

    /** One local buffer: {@code length} bytes at {@code offset} in {@code region} (replaces all entries). */
    public SendRequest local(MemoryRegion region, long offset, int length) {
        sge(0, region, offset, length);
        return sgeCount(1);
    }

    /** One local buffer (replaces all entries). */
    public SendRequest local(MemoryRegion.Slice slice) {
        return local(slice.region(), slice.offset(), slice.length());
    }

    /**
     * Sets scatter/gather entry {@code index}; {@link #sgeCount(int)} says how many are used.
     *
     * @throws IndexOutOfBoundsException when the range is outside the region or the index beyond maxSge
     */
    public SendRequest sge(int index, MemoryRegion region, long offset, int length) {
        changed();
        sgl.set(index, region, offset, length);
        if (inlineData != null) {
            // the inline entry is gone: nothing is sent until sgeCount (or local) says what is set
            inlineData = null;
            sgeCount = 0;
            wr.set(ValueLayout.JAVA_INT, SEND_NUM_SGE, 0);
        }
        return this;
    }

    /** How many scatter/gather entries are used (0 for a zero-length message). */
    public SendRequest sgeCount(int count) {
        sgl.requireSet(count, inlineData != null);
        changed();
        this.sgeCount = count;
        wr.set(ValueLayout.JAVA_INT, SEND_NUM_SGE, count);
        return this;
    }

    /** The remote address and rkey of an RDMA or atomic operation. */
    public SendRequest remote(long address, int rkey) {
        this.remoteAddress = address;
        this.rkey = rkey;
        this.remoteSet = true;
        changed();
        writeUnion();
        return this;
    }

    /** The start of a peer's buffer as the remote address. */
    public SendRequest remote(RemoteBuffer buffer) {
        return remote(buffer.address(), buffer.rkey());
    }

    /** {@code offset} bytes into a peer's buffer as the remote address. */
    public SendRequest remote(RemoteBuffer buffer, long offset) {
        if (offset < 0 || offset > buffer.length()) {
            throw new IndexOutOfBoundsException("offset " + offset + " outside the remote buffer of " + buffer.length() + " bytes");
        }
        return remote(buffer.address() + offset, buffer.rkey());
    }

    /**
     * The XRC SRQ a request of an {@link QpType#XRC_SEND} QP delivers to
     * ({@code wr.qp_type.xrc.remote_srqn}): the {@link SharedReceiveQueue#srqNumber()} of an SRQ
     * in the target QP's domain. Every request of an XRC_SEND QP needs one.
     */
    public SendRequest xrcRemoteSrqn(int srqn) {
        wr.set(ValueLayout.JAVA_INT, SEND_XRC_REMOTE_SRQN, srqn);
        this.xrcSrqnSet = true;
        validFor = null;
        return this;
    }

    /** The immediate data in host order (sent big-endian, as rdma-core's {@code htonl}). */
    public SendRequest immediate(int value) {
        wr.set(NETWORK_INT, SEND_IMM_DATA, value);
        return this;
    }

    /** The compare value (CAS) or the addend (FAA). */
    public SendRequest compareAdd(long value) {
        this.compareAdd = value;
        writeUnion();
        return this;
    }

    /** The swap value (CAS). */
    public SendRequest swap(long value) {
        this.swap = value;
        writeUnion();
        return this;
    }

    /** Addresses a UD send: the destination, its QP number and Q_Key. */
    public SendRequest ud(AddressHandle ah, int remoteQpn, int remoteQkey) {
        this.ah = Objects.requireNonNull(ah, "ah");
        changed();
        this.udQpn = remoteQpn;
        this.udQkey = remoteQkey;
        writeUnion();
        return this;
    }

    /** Whether the request produces a completion ({@code IBV_SEND_SIGNALED}). */
    public SendRequest signaled(boolean on) {
        return flag(SEND_SIGNALED, on);
    }

    /** {@code signaled(true)}. */
    public SendRequest signaled() {
        return flag(SEND_SIGNALED, true);
    }

    /** Wake a peer waiting with {@code requestNotify(true)} ({@code IBV_SEND_SOLICITED}). */
    public SendRequest solicited(boolean on) {
        return flag(SEND_SOLICITED, on);
    }

    /** Wait for earlier READs/atomics before this one ({@code IBV_SEND_FENCE}). */
    public SendRequest fence(boolean on) {
        return flag(SEND_FENCE, on);
    }

    /**
     * Copy the data into the request at post time ({@code IBV_SEND_INLINE}); up to the QP's
     * maxInline. For memory that is not registered, see {@link #inlineData(MemorySegment)}.
     */
    public SendRequest inline(boolean on) {
        return flag(SEND_INLINE, on);
    }

    /**
     * Sends {@code data} inline: its bytes become the request's only scatter/gather entry, with no
     * lkey, and {@code IBV_SEND_INLINE} is set. The memory need not be registered: the provider
     * copies it when the request is posted, so the segment may be changed or freed as soon as
     * {@code postSend} returns. Replaces all entries; {@link #local} or {@link #sge} replace the
     * inline data in turn. Only SEND, SEND_WITH_IMM, RDMA_WRITE and RDMA_WRITE_WITH_IMM carry
     * inline data.
     *
     * <p>The segment is checked again at every post, where the request refuses to go out when the
     * segment's arena was closed, when {@code inline(false)} was set since, or when the length
     * exceeds the QP's {@link QpCapabilities#maxInlineData()}. Closing a shared arena from
     * another thread while a post of its segment is in progress is the caller's race, as with
     * registered memory.
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} for a heap segment (it has no fixed
     * native address) or one longer than {@code 2^31-1} bytes; {@link IllegalStateException}
     * when the segment's arena is already closed.
     */
    public SendRequest inlineData(MemorySegment data) {
        Objects.requireNonNull(data, "data");
        if (!data.isNative()) {
            throw new IllegalArgumentException("inline data must be a native segment (a heap segment has no fixed address): "
                    + data);
        }
        if (data.byteSize() > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("inline data of " + data.byteSize() + " bytes exceed any QP's maxInline");
        }
        if (!data.scope().isAlive()) {
            throw new IllegalStateException("the arena of the inline data is closed");
        }
        changed();
        sgl.setUnregistered(data);
        inlineData = data;
        sgeCount = 1;
        wr.set(ValueLayout.JAVA_INT, SEND_NUM_SGE, 1);
        return flag(SEND_INLINE, true);
    }

    /** The unregistered memory set by {@link #inlineData(MemorySegment)}, or {@code null}. */
    public MemorySegment inlineData() {
        return inlineData;
    }

    /** The {@code IBV_SEND_*} flags. */
    public int flags() {
        return flags;
    }

    /** Chains {@code next} after this request ({@code null} ends the chain). */
    public SendRequest next(SendRequest next) {
        if (next == this) {
            throw new IllegalArgumentException("a request cannot follow itself");
        }
        chainChanged();
        this.next = next;
        wr.set(ValueLayout.ADDRESS, SEND_NEXT, next == null ? MemorySegment.NULL : next.wr);
        return this;
    }

    /** The next request in the chain, or {@code null}. */
    public SendRequest next() {
        return next;
    }

    /** A setter the checks read ran: this request is checked in full at its next post, as is the chain that covered it. */
    private void changed() {
        validFor = null;
        chainChanged();
    }

    /** The chain that covered this request (if any) is checked again at its next post. */
    private void chainChanged() {
        SendRequest head = inChainOf;
        if (head != null) {
            head.chainFor = null;
            inChainOf = null;
        }
    }

    private SendRequest flag(int bit, boolean on) {
        if (bit == SEND_INLINE) {
            // the only flag the checks read; SIGNALED, SOLICITED and FENCE may change per post for free
            changed();
        }
        flags = on ? flags | bit : flags & ~bit;
        wr.set(ValueLayout.JAVA_INT, SEND_FLAGS, flags);
        return this;
    }

    /** The {@code wr} union depends on the opcode: write the fields the opcode reads. */
    private void writeUnion() {
        if (opcode.isAtomic()) {
            wr.set(ValueLayout.JAVA_LONG, SEND_ATOMIC_REMOTE_ADDR, remoteAddress);
            wr.set(ValueLayout.JAVA_LONG, SEND_ATOMIC_COMPARE_ADD, compareAdd);
            wr.set(ValueLayout.JAVA_LONG, SEND_ATOMIC_SWAP, swap);
            wr.set(ValueLayout.JAVA_INT, SEND_ATOMIC_RKEY, rkey);
        } else if (opcode.isRdma()) {
            wr.set(ValueLayout.JAVA_LONG, SEND_RDMA_REMOTE_ADDR, remoteAddress);
            wr.set(ValueLayout.JAVA_INT, SEND_RDMA_RKEY, rkey);
        } else if (ah != null) {
            wr.set(ValueLayout.ADDRESS, SEND_UD_AH, ah.ah);
            wr.set(ValueLayout.JAVA_INT, SEND_UD_REMOTE_QPN, udQpn);
            wr.set(ValueLayout.JAVA_INT, SEND_UD_REMOTE_QKEY, udQkey);
        }
    }

    /**
     * Whether the chain starting here was checked in full for {@code qp}, nothing it depends on
     * changed since, and no member names caller-owned memory: {@link #validate} would return
     * false at once. The post's inlined fast path ({@link QueuePair#tryPostSend}); everything
     * else goes through {@link #validate}, called out of line, so that the compiled post stays
     * small enough for the JIT to inline it into the caller's loop (docs/measurements/performance.md, "The
     * post inlined into its caller").
     */
    boolean checkedFor(QueuePair qp) {
        return chainFor == qp && quickEpoch == Validity.epoch();
    }

    /**
     * The Java-side checks of {@link QueuePair#postSend}, over the whole chain. Allocates nothing
     * unless it throws. A request checked in full for {@code qp} and not changed since (no setter
     * the checks read, no region or address handle closed anywhere: {@link Validity}) is not
     * checked again; only its caller-owned memory is checked alive, when it names any. A whole
     * chain checked for {@code qp} and unchanged since (no setter the checks read on any member,
     * no relink) is not walked at all, unless some member names caller-owned memory: re-posting
     * it costs the same whatever its length. A BIND_MW request is checked in full on every post: the check gives it the window's next rkey and
     * finds a window closed since. Returns whether the chain binds memory windows ({@link #posted}
     * then records the new rkeys).
     */
    boolean validate(QueuePair qp) {
        long epoch = Validity.epoch();
        if (chainFor == qp && chainEpoch == epoch) {
            // the whole chain checked before and nothing it depends on changed since
            if (chainCheckLive) {
                for (SendRequest r = this; r != null; r = r.next) {
                    if (r.checkLive) {
                        r.ensureLive();
                    }
                }
            }
            return false;
        }
        chainFor = null;
        int chained = 0;
        boolean live = false;
        boolean binds = false;
        for (SendRequest r = this; r != null; r = r.next) {
            if (++chained > MAX_CHAIN) {
                throw new IllegalArgumentException("the chain of send requests is longer than " + MAX_CHAIN
                        + " (a cycle?)");
            }
            if (r.opcode == SendOpcode.BIND_MW) {
                r.validateOne(qp);
                r.validFor = null;
                binds = true;
            } else if (r.validFor != qp || r.validEpoch != epoch) {
                r.validateOne(qp);
                r.checkLive = r.inlineData != null || r.sgl.namesCallerMemory(r.sgeCount);
                r.validEpoch = epoch;
                r.validFor = qp;
            } else if (r.checkLive) {
                r.ensureLive();
            }
            live |= r.checkLive;
            SendRequest covering = r.inChainOf;
            if (covering != this) {
                if (covering != null) {
                    covering.chainFor = null; // one covering head per request
                }
                r.inChainOf = this;
            }
        }
        if (!binds) {
            // a chain with a BIND_MW is checked in full at every post: the bind takes the window's next rkey
            chainCheckLive = live;
            chainEpoch = epoch;
            quickEpoch = live ? NOT_QUICK : epoch;
            chainFor = qp;
        }
        return binds;
    }

    /** After a post of a chain with binds: each window posted (before {@code bad}, when rc != 0) takes its new rkey. */
    void posted(boolean all) {
        long bad = all ? 0 : badWr.get(ValueLayout.ADDRESS, 0).address();
        for (SendRequest r = this; r != null; r = r.next) {
            if (!all && r.wr.address() == bad) {
                return;
            }
            if (r.opcode == SendOpcode.BIND_MW) {
                r.window.posted(r.wr.get(ValueLayout.JAVA_INT, SEND_BIND_MW_RKEY), r.zeroBased ? 0 : r.bindRange.address(),
                        r.bindRange.length());
            }
        }
    }

    /** The per-post part of the checks for a request checked before: caller-owned memory still alive. */
    private void ensureLive() {
        if (inlineData != null && !inlineData.scope().isAlive()) {
            throw new IllegalStateException("request " + id() + ": the arena of its inline data was closed");
        }
        sgl.ensureLive(sgeCount);
    }

    private void validateOne(QueuePair qp) {
        QpType type = qp.type();
        if (!opcode.allowedOn(type)) {
            throw new IllegalArgumentException(opcode + " is not supported on " + type + " QPs (request " + id() + ")");
        }
        if (qp.iwarp && Iwarp.lacks(opcode)) {
            throw Iwarp.opcode(opcode, qp, id());
        }
        if (type == QpType.XRC_SEND && !xrcSrqnSet) {
            throw new IllegalArgumentException("a send on an XRC_SEND QP needs xrcRemoteSrqn(srqNumber) (request "
                    + id() + ")");
        }
        if (type == QpType.UD) {
            if (ah == null) {
                throw new IllegalArgumentException("a send on a UD QP needs ud(addressHandle, remoteQpn, qkey) (request "
                        + id() + ")");
            }
            ah.life.ensureOpen(ah);
            if (ah.pd != qp.pd) {
                throw new IllegalArgumentException(ah + " belongs to another protection domain than " + qp);
            }
        }
        if (opcode == SendOpcode.BIND_MW) {
            if (window == null) {
                throw new IllegalArgumentException("BIND_MW needs bind(window, range, rights...) (request " + id() + ")");
            }
            window.life.ensureOpen(window);
            if (window.type() != MemoryWindow.Type.TYPE_2) {
                throw new IllegalArgumentException(window + " is a type 1 window: bind it with"
                        + " QueuePair.bindMemoryWindow (ibv_bind_mw), not a BIND_MW send request");
            }
            if (window.pd != qp.pd || bindRange.region().pd != qp.pd) {
                throw new IllegalArgumentException(window + " and " + bindRange.region()
                        + " must belong to the protection domain of " + qp);
            }
            bindRange.region().ensureUsable();
            // the next rkey: the window's key with its low 8 bits incremented
            wr.set(ValueLayout.JAVA_INT, SEND_BIND_MW_RKEY, MemoryWindow.incRkey(window.rkey()));
        }
        if ((opcode.isRdma() || opcode.isAtomic()) && !remoteSet) {
            throw new IllegalArgumentException(opcode + " needs remote(address, rkey) (request " + id() + ")");
        }
        if (sgeCount > qp.capabilities().maxSendSge()) {
            throw new IllegalArgumentException("request " + id() + " has " + sgeCount + " scatter/gather entries, "
                    + qp + " takes " + qp.capabilities().maxSendSge());
        }
        if (opcode.isAtomic()) {
            if (sgeCount != 1 || sgl.length(0) != 8) {
                throw new IllegalArgumentException(opcode + " needs exactly one local buffer of 8 bytes (request " + id() + ")");
            }
            if ((remoteAddress & 7) != 0) {
                throw new IllegalArgumentException(opcode + " needs an 8-byte aligned remote address, got 0x"
                        + Long.toHexString(remoteAddress));
            }
        }
        if (inlineData != null && sgeCount > 0) {
            if ((flags & SEND_INLINE) == 0) {
                throw new IllegalArgumentException("request " + id() + " carries unregistered inline data but inline(false)"
                        + " was set: set inline(true) or give it a registered buffer with local(...)");
            }
            if (!opcode.carriesInline()) {
                throw new IllegalArgumentException(opcode + " cannot carry inline data (request " + id()
                        + "): only SEND, SEND_WITH_IMM, RDMA_WRITE and RDMA_WRITE_WITH_IMM do");
            }
            if (!inlineData.scope().isAlive()) {
                throw new IllegalStateException("request " + id() + ": the arena of its inline data was closed");
            }
        }
        // an unregistered entry 0 is inline data, checked above
        long total = sgl.validate(sgeCount, inlineData != null, qp.pd, qp, id());
        if (type == QpType.UD && total > qp.udMaxMessage()) {
            // the device would complete the send successfully and emit nothing (IBA C10-93.1.1, rxe)
            throw new IllegalArgumentException("request " + id() + " sends " + total + " bytes on " + qp
                    + ": a UD message must fit the port's active MTU (" + qp.udMaxMessage() + " bytes);"
                    + " a longer one is dropped silently by the device");
        }
        if ((flags & SEND_INLINE) != 0 && total > qp.capabilities().maxInlineData()) {
            throw new IllegalArgumentException("request " + id() + " inlines " + total + " bytes, " + qp
                    + " takes at most " + qp.capabilities().maxInlineData());
        }
    }

    /** Which request of the chain the provider's {@code bad_wr} names. */
    String describeBad() {
        MemorySegment bad = badWr.get(ValueLayout.ADDRESS, 0);
        for (SendRequest r = this; r != null; r = r.next) {
            if (r.wr.address() == bad.address()) {
                return r.toString();
            }
        }
        return "unknown (bad_wr 0x" + Long.toHexString(bad.address()) + ")";
    }

    @Override
    public String toString() {
        return "SendRequest[" + opcode + ", id " + id() + ", " + sgeCount + " SGE" + (sgeCount == 1 ? "" : "s")
                + (inlineData != null ? " (" + inlineData.byteSize() + " inline bytes, unregistered)" : "")
                + (remoteSet ? ", remote 0x" + Long.toHexString(remoteAddress) + " rkey 0x" + Integer.toHexString(rkey) : "")
                + "]";
    }
}
