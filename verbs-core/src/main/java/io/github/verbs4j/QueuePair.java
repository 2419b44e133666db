package io.github.verbs4j;

import io.github.verbs4j.internal.InFlight;
import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.internal.NativeHandle;
import io.github.verbs4j.internal.Telemetry;
import io.github.verbs4j.raw.ContextOps;
import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.ExtendedOps;
import io.github.verbs4j.raw.MwBind;
import io.github.verbs4j.raw.QpAttrFields;
import io.github.verbs4j.raw.QpFields;
import io.github.verbs4j.raw.QpInitAttr;
import io.github.verbs4j.raw.VerbsConstants;
import io.github.verbs4j.raw.VerbsFunctions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.ref.Reference;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ThreadLocalRandom;

/**
 * A queue pair ({@code struct ibv_qp}) of type RC, UC, UD or XRC_SEND (the sending end of an XRC
 * connection: no receive queue, every request names the remote XRC SRQ; its receiving end is an
 * {@link XrcTarget}).
 *
 * <p><b>Creation and states</b>: {@link ProtectionDomain#queuePair(QpType)} returns a
 * {@link QueuePairBuilder}; {@link QueuePairBuilder#build()} creates the QP in {@link QpState#RESET}. The typed
 * transitions {@link #toInit}, {@link #toRtr}, {@link #toRts}, {@link #toError()} and
 * {@link #reset()} check the current state and the attributes each transition needs for the QP's
 * type before {@code ibv_modify_qp}; {@link #connect(Endpoint)} does INIT, RTR and RTS in one
 * call for RC/UC, {@link #activate()} the same for UD.
 *
 * <p><b>Posting</b>: {@link #postSend(SendRequest)} ({@code ibv_post_send}) and
 * {@link #postRecv(ReceiveRequest)} ({@code ibv_post_recv}) call the provider's
 * {@code ops.post_send}/{@code ops.post_recv} (read once, at creation) through critical
 * downcalls, after checking in Java that every buffer lies in an open memory region of this QP's
 * protection domain, and that the opcode suits the QP type. They allocate nothing. They throw
 * {@link VerbsException} when the provider refuses (ENOMEM: queue full; EINVAL); the
 * {@code tryPost...} variants return that errno instead, for callers that treat a full queue as
 * back-pressure.
 *
 * <p><b>iWARP</b>: on a device whose reported transport is iWARP, a UD or UC QP, a move to RTR
 * by hand (connect through rdma_cm instead) and atomic or immediate-data opcodes are refused
 * with {@link UnsupportedOperationException} naming iWARP, before the provider is asked.
 *
 * <p><b>Lifecycle</b>: {@link #close()} ({@code ibv_destroy_qp}) is idempotent; posting after
 * close throws {@link IllegalStateException}.
 *
 * <p><b>Thread-safety</b>: posts may come from several threads, each with its own requests (the
 * providers lock their queues); state transitions must not run concurrently with each other;
 * a close waits for the posts in flight on other threads (the close guard). A QP used by one
 * thread only can be {@linkplain #confine() confined} to it: its posts then skip the guard's
 * mark, and other threads' posts and closes are refused.
 */
public final class QueuePair implements AutoCloseable {

    final ProtectionDomain pd;
    /** The {@code ibv_qp}: every call passes {@code handle.segment()}, so close waits for calls in flight. */
    final NativeHandle handle;
    /**
     * {@code handle.id()} and {@code handle.address()}, fixed for the handle's life, kept here so
     * that a post reads them from the QP it already holds (NativeHandle.enterUnchecked(InFlight, long)).
     */
    private final long handleId;
    private final long address;
    final Lifecycle life = new Lifecycle();
    private final QpType type;
    private final int qpNum;
    private final CompletionQueue sendCq;
    private final CompletionQueue recvCq;
    private final SharedReceiveQueue srq;
    private final QpCapabilities capabilities;
    private final MemorySegment postSendFn;
    private final MemorySegment postRecvFn;
    private final int initialPsn;
    /** The device reports iWARP: decided once here, read by the posting checks (see {@link Iwarp}). */
    final boolean iwarp;
    private volatile QpState state = QpState.RESET;
    /**
     * What a post may do with no further check of the QP's own: {@link #POSTS_SENDS} and
     * {@link #POSTS_RECEIVES}, derived from {@link #state}, the owner's open state ({@link #life})
     * and the QP's shape (an SRQ, XRC_SEND) by {@link #refreshPostable}, which runs at every state
     * change and when a close begins and ends. A post reads this one field where it read the
     * owner's state and the QP state (and, to receive, the SRQ and the type); when its bit is
     * clear, the post takes the slow path, which makes the full checks and throws what they
     * always threw. Volatile so that a posting loop never keeps a stale copy: a plain load on x86.
     */
    private volatile int postable;
    /** {@link #postable}: open and in RTS, SQD, SQE or ERR (a send posted in ERR completes flushed). */
    private static final int POSTS_SENDS = 1;
    /** {@link #postable}: open, not in RESET, with a receive queue of its own. */
    private static final int POSTS_RECEIVES = 2;
    /**
     * The thread this QP is confined to ({@link #confine()}), or null: shared. A post reads it
     * first: null takes the shared path with the close guard's mark; the owner thread posts with
     * no mark; any other thread is refused. Volatile: a plain load on x86, and a thread that
     * reads it null a moment after the confinement posts with its mark, which the owner's close
     * waits for.
     */
    private volatile Thread confinedTo;
    /**
     * What a post reads first, for sends ({@link #postable}'s send bit) and receives: null for a
     * shared QP, which posts down the shared path; {@link #confinedTo} while a confined QP takes
     * the post, where the owner thread finds itself and posts with no further state check; and
     * {@link Lifecycle#NOT_TAKING_CALLS} while a confined QP does not (a state that refuses the
     * post, a close begun or done), where no thread finds itself. A thread that does not find
     * itself takes the confined slow path: a thread other than the owner gets
     * {@link WrongThreadException} in every state, the owner what the state refuses. Derived by
     * {@link #refreshPostable}.
     */
    private volatile Thread sendOwner;
    private volatile Thread recvOwner;
    private volatile int advertisedGidIndex = -1;
    /** UD: the longest message the port carries (its active MTU in bytes), learnt at the first check; 0 until then. */
    private volatile int udMaxMessage;
    /** The post-send API's session of an extended QP, or null. */
    private final PostSession postSession;
    /** Destroys a QP another library created (librdmacm's {@code rdma_destroy_qp}); null: ibv_destroy_qp. */
    private final Runnable destroyer;

    QueuePair(QueuePairBuilder b, MemorySegment qp, QpCapabilities capabilities) {
        this(b, qp, capabilities, null);
    }

    QueuePair(QueuePairBuilder b, MemorySegment qp, QpCapabilities capabilities, Runnable destroyer) {
        this(b, qp, capabilities, destroyer, 0);
    }

    QueuePair(QueuePairBuilder b, MemorySegment qp, QpCapabilities capabilities, Runnable destroyer, long sendOps) {
        this.destroyer = destroyer;
        this.pd = b.pd;
        this.handle = new NativeHandle(qp, sendOps == 0 ? QpFields.SIZE : ExtendedOps.QP_EX_SIZE);
        this.handleId = handle.id();
        this.address = handle.address();
        this.type = b.type;
        this.qpNum = QpFields.qpNum(handle.pointer());
        this.sendCq = b.sendCq;
        this.recvCq = b.recvCq;
        this.srq = b.srq;
        this.capabilities = capabilities;
        this.postSendFn = ContextOps.function(pd.context.ctx, ContextOps.POST_SEND_OFFSET, "ibv_post_send");
        this.postRecvFn = ContextOps.function(pd.context.ctx, ContextOps.POST_RECV_OFFSET, "ibv_post_recv");
        this.initialPsn = ThreadLocalRandom.current().nextInt(1 << 24);
        this.iwarp = Iwarp.is(pd.context);
        this.postSession = sendOps == 0 ? null : new PostSession(this, handle.pointer(), sendOps,
                capabilities.maxSendSge(), capabilities.maxInlineData());
        life.watch(this::refreshPostable); // a close clears postable before it retires the handle
    }

    /**
     * Wraps an {@code ibv_qp} created by another library on {@code pd} with these queues (librdmacm's
     * {@code rdma_create_qp}), tracked as being in {@code state}; {@link #close()} runs
     * {@code destroyer} instead of {@code ibv_destroy_qp}.
     */
    static QueuePair adopt(ProtectionDomain pd, MemorySegment qp, QpType type, CompletionQueue sendCq,
            CompletionQueue recvCq, QpCapabilities capabilities, QpState state, Runnable destroyer) {
        return adopt(pd, qp, type, sendCq, recvCq, null, capabilities, state, destroyer);
    }

    /** As above, for a QP that receives from {@code srq} (or from its own queue when {@code null}). */
    static QueuePair adopt(ProtectionDomain pd, MemorySegment qp, QpType type, CompletionQueue sendCq,
            CompletionQueue recvCq, SharedReceiveQueue srq, QpCapabilities capabilities, QpState state,
            Runnable destroyer) {
        QueuePairBuilder b = new QueuePairBuilder(pd, type).sendCq(sendCq).recvCq(recvCq).srq(srq);
        QueuePair result = new QueuePair(b, qp, capabilities, Objects.requireNonNull(destroyer, "destroyer"));
        result.state = state;
        result.refreshPostable();
        return register(result, destroyer::run);
    }

    /** Records a transition another library made on this QP (librdmacm on connect and disconnect). */
    void track(QpState newState) {
        QpState from = state;
        state = newState;
        refreshPostable();
        if (from != newState) {
            Telemetry.qpStateChange(pd.context.device().name(), qpNum, type.toString(), from, newState);
        }
    }

    /** The QP number. */
    public int qpNumber() {
        return qpNum;
    }

    /** The transport type. */
    public QpType type() {
        return type;
    }

    /** The protection domain. */
    public ProtectionDomain protectionDomain() {
        return pd;
    }

    /** The queue sizes the device granted. */
    public QpCapabilities capabilities() {
        return capabilities;
    }

    /** The initial send PSN this QP advertises in its {@link Endpoint} (random, 24 bits). */
    public int initialPsn() {
        return initialPsn;
    }

    /** The state after the last transition made through this object (no native call). */
    public QpState trackedState() {
        return state;
    }

    /**
     * The state as the device reports it ({@code ibv_query_qp} with {@code IBV_QP_STATE}); it
     * differs from {@link #trackedState()} when the device moved the QP to ERR on its own.
     */
    public QpState state() {
        return query().state();
    }

    /**
     * The endpoint peers need to connect here: the port's LID, this QP's number and initial
     * PSN, and the GID at {@code gidIndex}. {@link #connect} then uses {@code gidIndex} as the
     * GRH source unless its options say otherwise.
     *
     * <p><b>Errors</b>: {@link VerbsException} from {@code ibv_query_port}/{@code ibv_query_gid}.
     */
    public Endpoint endpoint(int port, int gidIndex) {
        life.ensureOpen(this);
        Port p = pd.context.port(port);
        int lid = p.query().lid();
        Gid gid = p.gid(gidIndex);
        advertisedGidIndex = gidIndex;
        return new Endpoint(lid, qpNum, initialPsn, gid);
    }

    /**
     * {@link #endpoint(int, int)} on port 1: GID index 0 on a port without GRH needs (InfiniBand);
     * on one with them, index 1 (RoCE v2 on rxe, the IPv4 address on softrdma) when the table holds
     * it, else the first non-empty entry (siw's table has index 0 only), else 0.
     */
    public Endpoint endpoint() {
        return endpoint(1, defaultGidIndex(pd.context.port(1)));
    }

    static int defaultGidIndex(Port p) {
        PortAttributes a = p.query();
        if (!a.needsGrh()) {
            return 0;
        }
        if (a.gidTableLength() > 1) {
            try {
                if (!p.gid(1).isZero()) {
                    return 1;
                }
            } catch (VerbsException e) {
                if (!e.is(Errno.EINVAL) && !e.is(Errno.ENODATA)) {
                    throw e;
                }
            }
        }
        List<GidEntry> gids = p.gids();
        return gids.isEmpty() ? 0 : gids.getFirst().index();
    }

    /**
     * RESET to INIT ({@code ibv_modify_qp}). RC/UC need {@code port}, {@code pkeyIndex} and
     * {@code access}; UD needs {@code port}, {@code pkeyIndex} and {@code qkey}.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} unless the QP is in RESET;
     * {@link IllegalArgumentException} naming missing or unexpected attributes;
     * {@link VerbsException} from {@code ibv_modify_qp} (EINVAL).
     */
    public void toInit(QpAttr attr) {
        transition("toInit", QpState.RESET, QpState.INIT, attr,
                QpAttr.PORT | QpAttr.PKEY_INDEX | (type == QpType.UD ? QpAttr.QKEY : QpAttr.ACCESS_FLAGS), 0);
    }

    /**
     * INIT to RTR ({@code ibv_modify_qp}). RC needs {@code addressVector}, {@code pathMtu},
     * {@code destQpNum}, {@code rqPsn}, {@code maxDestRdAtomic}, {@code minRnrTimer}; UC the first
     * four; UD nothing (optionally {@code qkey}, {@code pkeyIndex}). On a RoCE port the address
     * vector must carry a GRH.
     *
     * <p><b>Errors</b>: as {@link #toInit}, from INIT.
     */
    public void toRtr(QpAttr attr) {
        int required = switch (type) {
            case RC -> QpAttr.AV | QpAttr.PATH_MTU | QpAttr.DEST_QPN | QpAttr.RQ_PSN | QpAttr.MAX_DEST_RD_ATOMIC
                    | QpAttr.MIN_RNR_TIMER;
            case UC, XRC_SEND -> QpAttr.AV | QpAttr.PATH_MTU | QpAttr.DEST_QPN | QpAttr.RQ_PSN;
            case UD -> 0;
        };
        int optional = type == QpType.UD ? QpAttr.QKEY | QpAttr.PKEY_INDEX : QpAttr.ACCESS_FLAGS | QpAttr.PKEY_INDEX;
        transition("toRtr", QpState.INIT, QpState.RTR, attr, required, optional);
    }

    /**
     * RTR to RTS ({@code ibv_modify_qp}). RC needs {@code sqPsn}, {@code timeout},
     * {@code retryCount}, {@code rnrRetry}, {@code maxRdAtomic}; UC and UD need {@code sqPsn}.
     *
     * <p><b>Errors</b>: as {@link #toInit}, from RTR.
     */
    public void toRts(QpAttr attr) {
        int required = type == QpType.RC || type == QpType.XRC_SEND
                ? QpAttr.SQ_PSN | QpAttr.TIMEOUT | QpAttr.RETRY_CNT | QpAttr.RNR_RETRY | QpAttr.MAX_QP_RD_ATOMIC
                : QpAttr.SQ_PSN;
        int optional = switch (type) {
            case RC -> QpAttr.ACCESS_FLAGS | QpAttr.MIN_RNR_TIMER;
            case UC, XRC_SEND -> QpAttr.ACCESS_FLAGS;
            case UD -> QpAttr.QKEY;
        };
        transition("toRts", QpState.RTR, QpState.RTS, attr, required, optional);
    }

    /**
     * Moves the QP to ERR from any state ({@code ibv_modify_qp}): outstanding and later work
     * requests complete with {@link WcStatus#WR_FLUSH_ERROR}.
     */
    public void toError() {
        transition("toError", null, QpState.ERR, new QpAttr(), 0, 0);
    }

    /** Moves the QP to RESET from any state ({@code ibv_modify_qp}); its queues are emptied. */
    public void reset() {
        transition("reset", null, QpState.RESET, new QpAttr(), 0, 0);
    }

    private synchronized void transition(String name, QpState from, QpState to, QpAttr attr, int required, int optional) {
        Objects.requireNonNull(attr, "attr");
        life.ensureOpen(this);
        if (from != null && state != from) {
            throw new IllegalStateException(name + " needs " + this + " in " + from + ", it is in " + state);
        }
        int missing = required & ~attr.mask;
        if (missing != 0) {
            throw new IllegalArgumentException(name + " of a " + type + " QP needs " + QpAttr.names(missing));
        }
        int unexpected = attr.mask & ~(required | optional);
        if (unexpected != 0) {
            throw new IllegalArgumentException(name + " of a " + type + " QP does not take " + QpAttr.names(unexpected));
        }
        if ((attr.mask & QpAttr.AV) != 0) {
            attr.addressVector.validate(pd.context, name);
        }
        if (iwarp && to == QpState.RTR) {
            throw Iwarp.handConnect(this, name);
        }
        attr.modify(handle.segment(), to, name, this, state);
        QpState previous = state;
        state = to;
        refreshPostable();
        if (to == QpState.INIT) {
            udMaxMessage = 0; // the port may have changed: learnt again at the next check
        }
        Telemetry.qpStateChange(pd.context.device().name(), qpNum, type.toString(), previous, to);
    }

    /** {@link #init(ConnectOptions)} with {@link ConnectOptions#defaults()}. */
    public void init() {
        init(ConnectOptions.defaults());
    }

    /**
     * RESET to INIT with the port, P_Key index and access (RC/UC) or Q_Key (UD) of
     * {@code options}: receives can then be posted before {@link #connect} (which continues
     * from INIT), so the first message from the peer finds one.
     *
     * <p><b>Errors</b>: as {@link #toInit}.
     */
    public void init(ConnectOptions options) {
        QpAttr attr = new QpAttr().port(options.port()).pkeyIndex(options.pkeyIndex());
        toInit(type == QpType.UD ? attr.qkey(options.qkey()) : attr.access(options.accessArray()));
    }

    /** {@link #connect(Endpoint, ConnectOptions)} with {@link ConnectOptions#defaults()}. */
    public void connect(Endpoint remote) {
        connect(remote, ConnectOptions.defaults());
    }

    /**
     * Connects an RC or UC QP to {@code remote}: INIT (if in RESET), RTR, RTS with the
     * attributes from {@code remote} and {@code options}.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} for a UD QP (use {@link #activate}) or a
     * QP past INIT; {@link VerbsException} from {@code ibv_modify_qp} or the port queries.
     */
    public void connect(Endpoint remote, ConnectOptions options) {
        Objects.requireNonNull(remote, "remote");
        if (type == QpType.UD) {
            throw new IllegalStateException("UD QPs are not connected: call activate(), then address each send with an AddressHandle");
        }
        if (iwarp) {
            throw Iwarp.handConnect(this, "connect");
        }
        if (state != QpState.RESET && state != QpState.INIT) {
            throw new IllegalStateException("connect needs " + this + " in RESET or INIT, it is in " + state);
        }
        if (state == QpState.RESET) {
            init(options);
        }
        Mtu mtu = options.mtu() != null ? options.mtu() : pd.context.queryPort(options.port()).activeMtu();
        int gidIndex = options.gidIndex() >= 0 ? options.gidIndex()
                : advertisedGidIndex >= 0 ? advertisedGidIndex : sourceGidIndexFor(options.port(), remote.gid());
        AddressVector av = AddressVector.to(remote).port(options.port()).sgidIndex(gidIndex)
                .serviceLevel(options.serviceLevel());
        QpAttr rtr = new QpAttr().addressVector(av).pathMtu(mtu).destQpNum(remote.qpn()).rqPsn(remote.psn());
        if (type == QpType.RC) {
            rtr.maxDestRdAtomic(options.maxDestRdAtomic()).minRnrTimer(options.minRnrTimer());
        }
        toRtr(rtr);
        QpAttr rts = new QpAttr().sqPsn(initialPsn);
        if (type == QpType.RC || type == QpType.XRC_SEND) {
            rts.timeout(options.timeout()).retryCount(options.retryCount()).rnrRetry(options.rnrRetry())
                    .maxRdAtomic(options.maxRdAtomic());
        }
        toRts(rts);
    }

    /**
     * The local GID to send from when neither the options nor {@link #endpoint} said: on a port
     * without GRH needs, 0; else the first entry of the remote GID's family (IPv4-mapped or
     * IPv6), RoCE v2 preferred, because devices refuse a path whose source and destination
     * differ in family (rxe: EINVAL at RTR); 0 when none matches.
     */
    private int sourceGidIndexFor(int port, Gid remote) {
        Port p = pd.context.port(port);
        if (!p.query().needsGrh() && remote.isZero()) {
            return 0;
        }
        int fallback = -1;
        for (GidEntry e : p.gids()) {
            if (e.gid().isIpv4Mapped() == remote.isIpv4Mapped()) {
                if (e.type() == GidType.ROCE_V2 || e.type() == null) {
                    return e.index();
                }
                if (fallback < 0) {
                    fallback = e.index();
                }
            }
        }
        return Math.max(0, fallback);
    }

    /** {@link #activate(ConnectOptions)} with {@link ConnectOptions#defaults()}. */
    public void activate() {
        activate(ConnectOptions.defaults());
    }

    /**
     * Brings a UD QP to RTS: INIT (port, P_Key index, Q_Key) unless already there, RTR, RTS
     * (its initial PSN).
     *
     * <p><b>Errors</b>: {@link IllegalStateException} for RC/UC QPs or a QP not in RESET or INIT;
     * {@link VerbsException} from {@code ibv_modify_qp}.
     */
    public void activate(ConnectOptions options) {
        if (type != QpType.UD) {
            throw new IllegalStateException("activate is for UD QPs; connect " + type + " QPs to an Endpoint");
        }
        if (state == QpState.RESET) {
            init(options);
        }
        toRtr(new QpAttr());
        toRts(new QpAttr().sqPsn(initialPsn));
    }

    /**
     * UD: the longest message a send may carry, the active MTU of the QP's port in bytes (IBA
     * C10-93.1.1: a longer one is dropped without an error, the send completing successfully).
     * Asked of the device once per move to INIT (also for a QP that verbs-cm moved), then kept.
     */
    int udMaxMessage() {
        int m = udMaxMessage;
        if (m == 0) {
            int port = query().portNumber();
            if (port == 0) {
                return Integer.MAX_VALUE; // before INIT: no port yet (the post itself is refused)
            }
            Mtu mtu = pd.context.queryPort(port).activeMtu();
            m = mtu != null ? mtu.bytes() : Integer.MAX_VALUE;
            udMaxMessage = m;
        }
        return m;
    }

    /**
     * Queries the QP ({@code ibv_query_qp}).
     *
     * <p><b>Errors</b>: {@link VerbsException} with the provider's errno; {@link IllegalStateException} after close.
     */
    public QpAttributes query() {
        life.ensureOpen(this);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment a = QpAttrFields.forState(arena, 0);
            MemorySegment init = QpInitAttr.allocate(arena);
            int mask = QpAttr.STATE | QpAttr.PKEY_INDEX | QpAttr.PORT | QpAttr.ACCESS_FLAGS | QpAttr.PATH_MTU
                    | QpAttr.RQ_PSN | QpAttr.SQ_PSN | QpAttr.DEST_QPN | QpAttr.TIMEOUT | QpAttr.RETRY_CNT
                    | QpAttr.RNR_RETRY | QpAttr.MAX_QP_RD_ATOMIC | QpAttr.MAX_DEST_RD_ATOMIC | QpAttr.MIN_RNR_TIMER
                    | (type == QpType.UD ? QpAttr.QKEY : 0) | QpAttrFields.CAP;
            int rc = (int) VerbsFunctions.need(VerbsFunctions.QUERY_QP, "ibv_query_qp").invokeExact(errno, handle.segment(), a, mask, init);
            if (rc != 0) {
                throw new VerbsException("ibv_query_qp", Downcalls.errnoOf(rc, errno), toString());
            }
            QpAttrFields f = QpAttrFields.read(a);
            int mtu = f.pathMtu();
            return new QpAttributes(QpState.of(f.state()), mtu >= 1 && mtu <= 5 ? Mtu.of(mtu) : null, f.qkey(),
                    f.rqPsn(), f.sqPsn(), f.destQpNum(), Access.fromMask(f.accessFlags()), QpCapabilities.of(f.cap()),
                    f.portNum(), f.pkeyIndex(), f.maxRdAtomic(), f.maxDestRdAtomic(), f.minRnrTimer(), f.timeout(),
                    f.retryCount(), f.rnrRetry());
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_query_qp", t);
        }
    }

    /**
     * Posts a chain of send requests ({@code ibv_post_send} through {@code ops.post_send}) with
     * one doorbell.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} when this QP is closed or not yet in RTS
     * (RESET, INIT, RTR), or when a request names a closed memory region, a region whose memory
     * was freed, a closed address handle, or {@linkplain SendRequest#inlineData(MemorySegment) inline
     * data} whose arena was closed; {@link IllegalArgumentException} when a region
     * belongs to another protection domain, the opcode does not suit the QP type, a UD request
     * has no address handle, an RDMA/atomic request has no remote address, an atomic request is
     * not one 8-byte buffer with an 8-byte aligned remote address, inline data exceed
     * {@code maxInline}, or unregistered inline data go with an opcode other than SEND/WRITE (with
     * or without immediate) or without {@code inline(true)}; {@link VerbsException} with the provider's errno (ENOMEM: send queue
     * full, EINVAL), naming the first request not posted.
     */
    public void postSend(SendRequest request) {
        int rc = postSendReturning(request);
        if (rc != 0) {
            throw new VerbsException("ibv_post_send", Math.abs(rc), "on " + this + ", first request not posted: "
                    + request.describeBad());
        }
    }

    /**
     * Binds the type 1 memory {@code window} to {@code range} ({@code ibv_bind_mw}, through the
     * provider's {@code context->ops.bind_mw}): a BIND_MW work request on this QP's send queue,
     * completing with {@link WcOpcode#BIND_MW} (when {@code signaled}, or on error). The window
     * takes the next rkey ({@code ibv_inc_rkey}) at once; the previous one is refused from the
     * bind's execution on. Binding again moves the window (an empty range, as rdma-core's tests
     * invalidate a type 1 window, leaves it answering nothing); peers address it through
     * {@link MemoryWindow#remote()}. {@link Access#LOCAL_WRITE} may be among the rights, as
     * rdma-core's tests bind (REMOTE_WRITE | LOCAL_WRITE) and the devices take it; a peer's
     * operation only ever asks for a remote right.
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} for a type 2 window (bound with
     * {@link SendRequest#bindMemoryWindow}), a window or region of another protection domain
     * ({@code ibv_bind_mw}'s EPERM), or a right other than REMOTE_READ, REMOTE_WRITE,
     * REMOTE_ATOMIC and LOCAL_WRITE (a type 1 window cannot be zero-based); {@link IllegalStateException} when
     * this QP, the window or the region is closed, or the QP is not in RTS;
     * {@link VerbsException} with the provider's errno (ENOMEM: send queue full). A bind the
     * device refuses when it executes it (region without {@link Access#MW_BIND}, range outside
     * the region, zero-based region) completes with {@link WcStatus#MW_BIND_ERROR} and moves
     * the QP to ERR. <b>Thread-safety</b>: as {@link #postSend}.
     *
     * @param wrId     the id of the bind's completion
     * @param signaled whether a successful bind produces a completion
     * @param rights   the window's remote rights
     * @return the window's new rkey
     */
    public int bindMemoryWindow(MemoryWindow window, MemoryRegion.Slice range, long wrId, boolean signaled,
                                Access... rights) {
        Objects.requireNonNull(window, "window");
        Objects.requireNonNull(range, "range");
        life.ensureOpen(this);
        window.life.ensureOpen(window);
        if (window.type() != MemoryWindow.Type.TYPE_1) {
            throw new IllegalArgumentException(window + " is a type 2 window: bind it with a send request"
                    + " (SendRequest.bindMemoryWindow), not ibv_bind_mw");
        }
        MemoryRegion mr = range.region();
        mr.ensureUsable();
        if (window.pd != pd || mr.pd != pd) {
            throw new IllegalArgumentException(window + " and " + mr + " must belong to the protection domain of " + this
                    + " (ibv_bind_mw: EPERM)");
        }
        java.util.EnumSet<Access> set = Access.setOf(rights);
        for (Access a : set) {
            if (a != Access.REMOTE_READ && a != Access.REMOTE_WRITE && a != Access.REMOTE_ATOMIC && a != Access.LOCAL_WRITE) {
                throw new IllegalArgumentException(a + " is not a right of a type 1 memory window (REMOTE_READ,"
                        + " REMOTE_WRITE, REMOTE_ATOMIC, LOCAL_WRITE)");
            }
        }
        QpState s = state;
        if (s != QpState.RTS && s != QpState.SQD) {
            throw new IllegalStateException("cannot bind a memory window on " + this + " in state " + s
                    + ": binds go through the send queue, which needs RTS");
        }
        MemorySegment fn = ContextOps.function(pd.context.ctx, ContextOps.BIND_MW_OFFSET, "ibv_bind_mw");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment bind = new MwBind(wrId, signaled ? VerbsConstants.IBV_SEND_SIGNALED : 0, mr.mr, range.address(),
                    range.length(), Access.mask(set)).write(arena);
            int rc;
            try {
                rc = (int) ContextOps.BIND_MW.invokeExact(fn, errno, handle.segment(), window.mw, bind);
            } catch (Throwable t) {
                throw handle.failure(this, "ibv_bind_mw", t);
            }
            if (rc != 0) {
                throw new VerbsException("ibv_bind_mw", Math.abs(rc), window + " to " + range + " on " + this);
            }
            // the provider stored the new rkey in the window (ibv_inc_rkey of the old one)
            window.posted(window.rkey(), range.address(), range.length());
            return window.rkey();
        }
    }

    /**
     * {@link #postSend} returning the provider's errno (0 when posted) instead of throwing
     * {@link VerbsException}; the Java-side checks still throw.
     */
    public int tryPostSend(SendRequest request) {
        return Math.abs(postSendReturning(request));
    }

    /**
     * The post of {@link #postSend} and {@link #tryPostSend}, returning what the provider returned
     * (0, or an errno that some providers negate): the callers normalise it only where they use it,
     * so that {@link #postSend}'s fast path tests the value as it comes.
     */
    private int postSendReturning(SendRequest request) {
        Thread owner = sendOwner;
        if (owner != null) {
            return postSendConfined(owner, request); // confine(): the owner's post publishes no mark
        }
        // the mark first, then one load for the owner's state, the QP state and the close (the
        // postable field, cleared before a close retires the handle: it stands in for the handle's
        // retired flag, see InFlight); a chain checked before and unchanged costs one branch more.
        // Anything else (a state that refuses, a chain to check) takes the former path, out of line
        InFlight cached = request.mark;
        InFlight mark = NativeHandle.enterUnchecked(cached, handleId);
        if (mark != cached) {
            request.mark = mark; // another thread used it last (or none): keep this thread's record
        }
        if ((postable & POSTS_SENDS) == 0 || !request.checkedFor(this)) {
            mark.exit();
            return postSendChecked(request);
        }
        int rc;
        // every pointer by address: a close waits for the mark, and the segments' checks and
        // session handling would cost more than the call (ContextOps)
        try {
            rc = (int) ContextOps.POST_ADDRESSES.invokeExact(postSendFn, address, request.wrAddress,
                    request.badWrAddress);
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_post_send", t);
        } finally {
            mark.exit();
            // the request (and the arena of its memory) stays reachable until the provider returned
            Reference.reachabilityFence(request);
        }
        return rc;
    }

    /**
     * {@link #postSendReturning} on a confined QP that takes sends ({@link #sendOwner}): on the
     * owner thread, the request's check, then the provider, with no mark (only this thread can
     * close the QP, and it is here: see {@link #confine()}).
     */
    private int postSendConfined(Thread owner, SendRequest request) {
        if (owner != Thread.currentThread() || !request.checkedFor(this)) {
            return postSendConfinedChecked(request);
        }
        return postUnmarked(postSendFn, "ibv_post_send", request.wrAddress, request.badWrAddress, request);
    }

    /**
     * {@link #postSendConfined} when its quick test failed: the thread first (the owner recorded
     * by {@link #confine()}, in every state), then as {@link #postSendChecked} without the mark.
     */
    private int postSendConfinedChecked(SendRequest request) {
        Thread owner = confinedTo;
        if (owner != Thread.currentThread()) {
            throw Lifecycle.wrongThread(this, owner, "ibv_post_send");
        }
        if ((postable & POSTS_SENDS) == 0) {
            checkSendable();
        }
        boolean binds = !request.checkedFor(this) && request.validate(this);
        int rc = postUnmarked(postSendFn, "ibv_post_send", request.wrAddress, request.badWrAddress, request);
        if (binds) {
            request.posted(rc == 0);
        }
        return rc;
    }

    /**
     * {@link #postSendReturning} when its quick test failed: the state checks (refused from the moment
     * a close begins, so that close() never waits on a stream of new calls, and outside RTS), the
     * chain's full checks, and the mark with the handle's own retired check.
     */
    private int postSendChecked(SendRequest request) {
        if ((postable & POSTS_SENDS) == 0) {
            checkSendable();
        }
        boolean binds = !request.checkedFor(this) && request.validate(this);
        int rc;
        InFlight cached = request.mark;
        InFlight mark = handle.enter(cached, this, "ibv_post_send");
        if (mark != cached) {
            request.mark = mark;
        }
        try {
            rc = (int) ContextOps.POST_ADDRESSES.invokeExact(postSendFn, handle.address(), request.wrAddress,
                    request.badWrAddress);
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_post_send", t);
        } finally {
            mark.exit();
            Reference.reachabilityFence(request);
        }
        if (binds) {
            request.posted(rc == 0);
        }
        return rc;
    }

    /**
     * The checks {@link #postable} stands for, when its send bit is clear: throws what a post
     * outside RTS, after close or during one always threw; returns when they pass (the state
     * changed since the bit was read), so the post goes on under the close guard as before.
     */
    private void checkSendable() {
        life.ensureOpen(this);
        QpState s = state;
        if (!sendsIn(s)) {
            throw new IllegalStateException("cannot post a send request to " + this + " in state " + s
                    + ": sends need RTS (connect() or toRts() first)");
        }
    }

    /** As {@link #checkSendable}, for the receive bit. */
    private void checkReceivable() {
        life.ensureOpen(this);
        if (state == QpState.RESET) {
            throw new IllegalStateException("cannot post a receive request to " + this
                    + " in state RESET: move it to INIT first");
        }
        if (srq != null) {
            throw new IllegalStateException(this + " receives from " + srq + ": post receives there");
        }
        if (type == QpType.XRC_SEND) {
            throw new IllegalStateException(this + " has no receive queue: XRC messages land in the XRC SRQs"
                    + " of the target's domain");
        }
    }

    /** Whether a QP in state {@code s} takes sends: RTS, SQD, SQE and ERR (a send posted in ERR completes flushed). */
    private static boolean sendsIn(QpState s) {
        return s != QpState.RESET && s != QpState.INIT && s != QpState.RTR;
    }

    /**
     * Derives {@link #postable} from the owner's state, the QP state and the QP's shape. Under the
     * QP's lock, so that of two threads changing one of those (a transition, a close), the one that
     * writes last read both changes.
     */
    private synchronized void refreshPostable() {
        int bits = 0;
        if (life.isOpen()) {
            QpState s = state;
            if (sendsIn(s)) {
                bits |= POSTS_SENDS;
            }
            if (s != QpState.RESET && srq == null && type != QpType.XRC_SEND) {
                bits |= POSTS_RECEIVES;
            }
        }
        Thread owner = confinedTo;
        Thread refusing = owner == null ? null : Lifecycle.NOT_TAKING_CALLS;
        sendOwner = (bits & POSTS_SENDS) != 0 ? owner : refusing;
        recvOwner = (bits & POSTS_RECEIVES) != 0 ? owner : refusing;
        postable = bits;
    }

    /** Whether the QP was created with {@link QueuePairBuilder#sendOps} ({@code ibv_create_qp_ex}): it can {@link #startPosting()}. */
    public boolean isExtended() {
        return postSession != null;
    }

    /**
     * Starts a batch of send requests through the post-send API ({@code ibv_wr_start} on this
     * QP's {@code ibv_qp_ex}); see {@link PostSession}. Returns this QP's one session object:
     * nothing is allocated.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} when the QP was not created with
     * {@link QueuePairBuilder#sendOps}, is closed, is not yet in RTS (RESET, INIT, RTR), or has a session
     * open already.
     */
    public PostSession startPosting() {
        Thread owner = confinedTo;
        if (owner != null && owner != Thread.currentThread()) {
            throw Lifecycle.wrongThread(this, owner, "startPosting");
        }
        life.ensureOpen(this);
        if (postSession == null) {
            throw new IllegalStateException(this + " is a classic QP: create it with QueuePairBuilder.sendOps(...)"
                    + " to post through ibv_qp_ex");
        }
        checkSendable(); // not yet in RTS: the message a classic post gives
        return postSession.begin();
    }

    /**
     * Posts a chain of receive requests ({@code ibv_post_recv} through {@code ops.post_recv}).
     *
     * <p><b>Errors</b>: {@link IllegalStateException} when this QP is closed, in RESET, or uses
     * an SRQ, or a request names a closed region or freed memory; {@link IllegalArgumentException}
     * for a region of another protection domain or more entries than {@code maxRecvSge};
     * {@link VerbsException} with the provider's errno (ENOMEM: receive queue full).
     */
    public void postRecv(ReceiveRequest request) {
        int rc = postRecvReturning(request);
        if (rc != 0) {
            throw new VerbsException("ibv_post_recv", Math.abs(rc), "on " + this + ", first request not posted: "
                    + request.describeBad());
        }
    }

    /** {@link #postRecv} returning the provider's errno (0 when posted) instead of throwing. */
    public int tryPostRecv(ReceiveRequest request) {
        return Math.abs(postRecvReturning(request));
    }

    /** The post of {@link #postRecv} and {@link #tryPostRecv}, returning what the provider returned (see {@link #postSendReturning}). */
    private int postRecvReturning(ReceiveRequest request) {
        Thread owner = recvOwner;
        if (owner != null) {
            return postRecvConfined(owner, request); // confine(): the owner's post publishes no mark
        }
        // the mark, then one load for the owner's state, the QP state, its shape and the close (see tryPostSend)
        InFlight cached = request.mark;
        InFlight mark = NativeHandle.enterUnchecked(cached, handleId);
        if (mark != cached) {
            request.mark = mark; // another thread used it last (or none): keep this thread's record
        }
        if ((postable & POSTS_RECEIVES) == 0 || !request.checkedFor(this)) {
            mark.exit();
            return postRecvChecked(request);
        }
        int rc;
        try {
            rc = (int) ContextOps.POST_ADDRESSES.invokeExact(postRecvFn, address, request.wrAddress,
                    request.badWrAddress);
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_post_recv", t);
        } finally {
            mark.exit();
            Reference.reachabilityFence(request);
        }
        return rc;
    }

    /** {@link #postRecvReturning} on a confined QP: as {@link #postSendConfined}. */
    private int postRecvConfined(Thread owner, ReceiveRequest request) {
        if (owner != Thread.currentThread() || !request.checkedFor(this)) {
            return postRecvConfinedChecked(request);
        }
        return postUnmarked(postRecvFn, "ibv_post_recv", request.wrAddress, request.badWrAddress, request);
    }

    /** {@link #postRecvConfined} when its quick test failed: as {@link #postSendConfinedChecked}. */
    private int postRecvConfinedChecked(ReceiveRequest request) {
        Thread owner = confinedTo;
        if (owner != Thread.currentThread()) {
            throw Lifecycle.wrongThread(this, owner, "ibv_post_recv");
        }
        if ((postable & POSTS_RECEIVES) == 0) {
            checkReceivable();
        }
        if (!request.checkedFor(this)) {
            request.validate(pd, capabilities.maxRecvSge(), this);
        }
        return postUnmarked(postRecvFn, "ibv_post_recv", request.wrAddress, request.badWrAddress, request);
    }

    /**
     * The provider's post with no mark, for the confined paths once they checked the thread (only
     * the owner thread can close the QP, and it is here: see {@link #confine()}); every pointer by
     * address. Returns what the provider returned.
     */
    private int postUnmarked(MemorySegment fn, String verb, long wrAddress, long badWrAddress, Object request) {
        try {
            return (int) ContextOps.POST_ADDRESSES.invokeExact(fn, address, wrAddress, badWrAddress);
        } catch (Throwable t) {
            throw Downcalls.unexpected(verb, t);
        } finally {
            // the request (and the arena of its memory) stays reachable until the provider returned
            Reference.reachabilityFence(request);
        }
    }

    /** {@link #postRecvReturning} when its quick test failed: as {@link #postSendChecked}. */
    private int postRecvChecked(ReceiveRequest request) {
        if ((postable & POSTS_RECEIVES) == 0) {
            checkReceivable();
        }
        if (!request.checkedFor(this)) {
            request.validate(pd, capabilities.maxRecvSge(), this);
        }
        int rc;
        InFlight cached = request.mark;
        InFlight mark = handle.enter(cached, this, "ibv_post_recv");
        if (mark != cached) {
            request.mark = mark;
        }
        try {
            rc = (int) ContextOps.POST_ADDRESSES.invokeExact(postRecvFn, handle.address(), request.wrAddress,
                    request.badWrAddress);
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_post_recv", t);
        } finally {
            mark.exit();
            Reference.reachabilityFence(request);
        }
        return rc;
    }

    /**
     * Confines this QP to the calling thread, as {@link Arena#ofConfined()} confines a segment:
     * from now on that thread's posts ({@link #postSend}, {@link #tryPostSend}, {@link #postRecv},
     * {@link #tryPostRecv}, chains included) call the provider without the close guard's mark (a
     * load of the owner, which the QP keeps only while its state takes the post, compared with
     * {@link Thread#currentThread()}, the request's check, the downcall), and only that thread may
     * close the QP. The fast form for a thread that owns its
     * QP and its completion queues ({@link CompletionQueue#confine()}): a poller-poster loop.
     * The control path (the transitions, {@link #query()}, {@link #connect}) stays open to every
     * thread. Calling it again on the owner thread does nothing. Irreversible.
     *
     * <p>Not for a QP that a layer or another thread closes: {@code RdmaConnection}'s and the
     * channel and transfer layers' QPs, which their own close (on whichever thread closes
     * the layer) destroys, must stay shared (the netty transport's event loop creates, posts,
     * polls and destroys its connections' QPs alone, and confines them). A QP of an rdma_cm id ({@code CmId.createQueuePair})
     * may be confined if the owner thread also closes the id: {@code CmId.close()} on another
     * thread then throws {@link WrongThreadException} and leaves the id and the QP open.
     *
     * <p><b>Errors</b>: {@link WrongThreadException} when the QP is confined to another thread;
     * {@link IllegalStateException} when it is closed or being closed. After the confinement:
     * {@link WrongThreadException} naming this QP and the owner thread from a post in any state
     * (before the state's own refusal: outside RTS, after a close), a
     * {@link #startPosting()} or a {@link #close()} on any other thread (the QP stays open and
     * nothing is posted), and from the close of its protection domain, completion queues or SRQ
     * on another thread while the QP is open (nothing is closed). When the owner thread has
     * ended, any thread may close the QP.
     *
     * @return this QP
     */
    public QueuePair confine() {
        if (life.confine(this)) {
            confinedTo = Thread.currentThread();
            refreshPostable();
        }
        return this;
    }

    /** The thread this QP is {@linkplain #confine() confined} to, or empty when it is shared (the default). */
    public java.util.Optional<Thread> confinedTo() {
        return java.util.Optional.ofNullable(confinedTo);
    }

    /**
     * Destroys the QP ({@code ibv_destroy_qp}). Idempotent. A {@link PostSession} open on
     * another thread is waited for (up to 10 s) before the QP is destroyed.
     *
     * <p><b>Errors</b>: {@link VerbsException} with the provider's errno (the QP stays open);
     * {@link WrongThreadException} on a thread other than the one a {@linkplain #confine() confined}
     * QP belongs to, while that thread lives (the QP stays open);
     * {@link IllegalStateException} on the thread that has a {@link PostSession} open on this
     * QP (commit or abort it first), or when another thread's session has not ended in 10 s.
     */
    @Override
    public void close() {
        if (postSession != null && postSession.isOpenOnThisThread() && !life.isClosed()) {
            throw new IllegalStateException("cannot close " + this + " inside a posting session: commit or abort the"
                    + " PostSession first");
        }
        life.close(this, handle, () -> {
            if (destroyer != null) {
                destroyer.run();
            } else {
                Lifecycle.destroyVerb("ibv_destroy_qp", VerbsFunctions.DESTROY_QP, handle.pointer());
            }
        }, this::unregister);
    }

    /** Leaves every parent's books: after a close, or when registering a new QP failed half way. */
    private void unregister() {
        pd.context.removeChild(handle.pointer(), this);
        pd.life.removeDependent(this);
        sendCq.life.removeDependent(this);
        if (recvCq != null) {
            recvCq.life.removeDependent(this);
        }
        if (srq != null) {
            srq.life.removeDependent(this);
        }
    }

    /**
     * Enters the books of every parent of a QP whose native object was just created: all of them
     * or none. When a parent is no longer open (a close raced the creation) the registrations
     * made so far are undone, {@code undo} destroys the native QP, and the
     * {@link IllegalStateException} is thrown: no half-registered QP is left behind.
     */
    static QueuePair register(QueuePair qp, Lifecycle.Destroy undo) {
        try {
            qp.pd.life.addDependent(qp.pd, qp, qp.life);
            qp.sendCq.life.addDependent(qp.sendCq, qp, qp.life);
            if (qp.recvCq != null) {
                qp.recvCq.life.addDependent(qp.recvCq, qp, qp.life);
            }
            if (qp.srq != null) {
                qp.srq.life.addDependent(qp.srq, qp, qp.life);
            }
            qp.pd.context.addChild(qp.handle.pointer(), qp);
            return qp;
        } catch (RuntimeException e) {
            qp.unregister();
            try {
                undo.destroy();
            } catch (Throwable t) {
                e.addSuppressed(t);
            }
            throw e;
        }
    }

    /** Whether {@link #close()} completed. */
    public boolean isClosed() {
        return life.isClosed();
    }

    @Override
    public String toString() {
        return "QueuePair[" + type + " 0x" + Integer.toHexString(qpNum) + "]";
    }
}
