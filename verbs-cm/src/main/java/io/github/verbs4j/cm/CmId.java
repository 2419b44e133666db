package io.github.verbs4j.cm;

import io.github.verbs4j.Access;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Context;
import io.github.verbs4j.Mtu;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QpAttr;
import io.github.verbs4j.QpCapabilities;
import io.github.verbs4j.QpState;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.SharedReceiveQueue;
import io.github.verbs4j.Errno;
import io.github.verbs4j.VerbsException;
import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.internal.Timeouts;
import io.github.verbs4j.raw.CmFunctions;
import io.github.verbs4j.raw.CmStructs;
import io.github.verbs4j.raw.ConnParam;
import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.QpAttrFields;
import io.github.verbs4j.raw.QpCap;
import io.github.verbs4j.raw.QpInitAttr;
import io.github.verbs4j.raw.SocketAddresses;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Objects;
import java.util.Set;

/**
 * A connection-manager id ({@code struct rdma_cm_id}): rdma_cm's socket. An active id resolves
 * an address and a route, then connects; a passive id binds and listens, and each connection
 * request hands over a new id (the {@link CmEventType#CONNECT_REQUEST} event's {@link CmEvent#id()})
 * to accept or reject.
 *
 * <p><b>Blocking with timeouts</b>: {@link #resolveAddress}, {@link #resolveRoute},
 * {@link #connect}, {@link #accept}, {@link #getRequest} and {@link #awaitEvent} issue the
 * rdma_* call and wait on the id's {@link EventChannel} for the event that ends the step, never
 * longer than their timeout: an error event (ADDR_ERROR, ROUTE_ERROR, REJECTED, UNREACHABLE,
 * CONNECT_ERROR) throws {@link CmEventException} carrying the event (status, private data);
 * no event in time throws {@link VerbsException} with {@code ETIMEDOUT} naming the verb.
 *
 * <p><b>Without blocking</b>: {@link #startResolveAddress}, {@link #startResolveRoute},
 * {@link #startConnect} and {@link #startAccept} issue the same rdma_* call and return at once;
 * the event that ends the step arrives on the id's {@link EventChannel}, for an event loop that
 * polls the channel's {@link EventChannel#fd()} and reads it with {@code next(Duration.ZERO)}.
 *
 * <p><b>Queue pair</b>: {@link #createQueuePair} ({@code rdma_create_qp}) makes a verbs-core
 * {@link QueuePair} on the device the id is bound to ({@link #context()}), with verbs-core's
 * protection domain and completion queues; rdma_cm moves it through its states while
 * connecting. The id owns it: {@link #close()} destroys it first if it is still open. A queue
 * pair the application made with verbs-core connects with {@link #connect(QueuePair,
 * ConnectParameters, Duration)} and {@link #accept(QueuePair, ConnectParameters, Duration)}
 * instead: the id moves it with {@link #qpAttributes} ({@code rdma_init_qp_attr}) and leaves it
 * to the application.
 *
 * <p><b>Lifecycle</b>: {@link #close()} ({@code rdma_destroy_id}) is idempotent; any other
 * method after close throws {@link IllegalStateException}.
 *
 * <p><b>Thread-safety</b>: calls on one id must not run concurrently; different ids may be used
 * from different threads.
 */
public final class CmId implements AutoCloseable {

    private final MemorySegment id;
    private final PortSpace portSpace;
    private volatile EventChannel channel;
    private volatile QueuePair qp;
    private final Lifecycle life = new Lifecycle();
    private volatile boolean disconnected;
    private volatile boolean disconnectedEvent;
    /** rdma_disconnect was called on this id (apart from a DISCONNECTED event arriving). */
    private volatile boolean disconnectCalled;

    CmId(EventChannel channel, MemorySegment id, PortSpace portSpace) {
        this.channel = channel;
        this.id = id.reinterpret(CmStructs.ID_SIZE);
        this.portSpace = portSpace;
    }

    long address() {
        return id.address();
    }

    /** The port space this id was created in. */
    public PortSpace portSpace() {
        return portSpace;
    }

    /** The channel this id's events arrive on. */
    public EventChannel channel() {
        return channel;
    }

    /**
     * The device this id is bound to ({@code id->verbs}), as a verbs-core {@link Context} shared by
     * every id on that device; {@code null} before the id is bound to a device (an unbound
     * listener, an active id before {@link #resolveAddress}). librdmacm opened the device and
     * keeps it open: closing this context releases nothing.
     */
    public Context context() {
        ensureOpen();
        return Cm.context(CmStructs.idVerbs(id));
    }

    /** The port number of the device this id is bound to (0 when unbound). */
    public int portNumber() {
        ensureOpen();
        return CmStructs.idPortNum(id);
    }

    /** The local address ({@code rdma_get_local_addr}), or {@code null} before one is known. */
    public InetSocketAddress localAddress() {
        ensureOpen();
        return SocketAddresses.decode(id.asSlice(CmStructs.ID_SRC_ADDR, SocketAddresses.STORAGE_SIZE));
    }

    /** The peer's address ({@code rdma_get_peer_addr}), or {@code null} before one is known. */
    public InetSocketAddress remoteAddress() {
        ensureOpen();
        return SocketAddresses.decode(id.asSlice(CmStructs.ID_DST_ADDR, SocketAddresses.STORAGE_SIZE));
    }

    /** The queue pair made by {@link #createQueuePair}, or {@code null}. */
    public QueuePair queuePair() {
        return qp;
    }

    /** Whether a DISCONNECTED event arrived for this id, or {@link #disconnect()} was called. */
    public boolean isDisconnected() {
        return disconnected;
    }

    /** Whether a DISCONNECTED event for this id was read from its channel. */
    boolean hasDisconnectedEvent() {
        return disconnectedEvent;
    }

    /**
     * Whether {@link #disconnect()} was called on this id. Not the same as {@link #isDisconnected()}:
     * the side that receives DISCONNECTED must still call {@code rdma_disconnect} to answer the
     * peer's request (the kernel's CM sends the DREP then), or the peer only learns of it when
     * this id is destroyed.
     */
    boolean hasCalledDisconnect() {
        return disconnectCalled;
    }

    /**
     * Binds to a local address and port ({@code rdma_bind_addr}); port 0 picks one, the wildcard
     * address listens on every device.
     *
     * <p><b>Errors</b>: {@link VerbsException} (EADDRINUSE, EADDRNOTAVAIL for an address of no
     * RDMA device, EINVAL when already bound).
     */
    public void bind(InetSocketAddress address) {
        Objects.requireNonNull(address, "address");
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            int rc = (int) CmFunctions.BIND_ADDR.invokeExact(errno, id, SocketAddresses.encode(arena, address));
            Cm.check(rc, errno, "rdma_bind_addr", address);
        } catch (Throwable t) {
            throw Downcalls.unexpected("rdma_bind_addr", t);
        }
    }

    /**
     * Listens for connection requests ({@code rdma_listen}); they arrive as CONNECT_REQUEST
     * events ({@link #getRequest}).
     *
     * <p><b>Errors</b>: {@link VerbsException} (EINVAL when not bound, EADDRINUSE).
     */
    public void listen(int backlog) {
        if (backlog < 0) {
            throw new IllegalArgumentException("backlog must not be negative, got " + backlog);
        }
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            int rc = (int) CmFunctions.LISTEN.invokeExact(errno, id, backlog);
            Cm.check(rc, errno, "rdma_listen", this);
        } catch (Throwable t) {
            throw Downcalls.unexpected("rdma_listen", t);
        }
    }

    /**
     * Resolves {@code destination} to a device and port ({@code rdma_resolve_addr}) and waits for
     * ADDR_RESOLVED. The id is then bound to a device ({@link #context()}).
     *
     * @param source      the local address to use, or {@code null} for the routing's choice
     * @param destination the peer's IP address and rdma_cm port
     * @param timeout     how long resolution and the wait may take together
     *
     * <p><b>Errors</b>: {@link CmEventException} on ADDR_ERROR (its errno: ENODEV, ENETUNREACH...);
     * {@link VerbsException} from {@code rdma_resolve_addr}, or ETIMEDOUT when no event came in time.
     */
    public CmEvent resolveAddress(InetSocketAddress source, InetSocketAddress destination, Duration timeout) {
        long deadline = Timeouts.deadline(timeout);
        startResolveAddress(source, destination, timeout);
        return expect("rdma_resolve_addr", deadline, timeout, EnumSet.of(CmEventType.ADDR_RESOLVED),
                EnumSet.of(CmEventType.ADDR_ERROR), "resolving " + destination);
    }

    /**
     * Starts resolving {@code destination} ({@code rdma_resolve_addr}) and returns without waiting:
     * ADDR_RESOLVED, or ADDR_ERROR (its status {@code -errno}: ENODEV, ENETUNREACH...), arrives on
     * {@link #channel()} within about {@code timeout}. The non-blocking form of {@link #resolveAddress}.
     *
     * @param source      the local address to use, or {@code null} for the routing's choice
     * @param destination the peer's IP address and rdma_cm port
     * @param timeout     rdma_cm's own limit on the resolution (whole milliseconds, at least 1)
     *
     * <p><b>Errors</b>: {@link VerbsException} from {@code rdma_resolve_addr} (EADDRNOTAVAIL for a
     * source address of no RDMA device, EINVAL when the id was resolved already);
     * {@link IllegalStateException} after close.
     */
    public void startResolveAddress(InetSocketAddress source, InetSocketAddress destination, Duration timeout) {
        Objects.requireNonNull(destination, "destination");
        Objects.requireNonNull(timeout, "timeout");
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment src = source == null ? MemorySegment.NULL : SocketAddresses.encode(arena, source);
            int rc = (int) CmFunctions.RESOLVE_ADDR.invokeExact(errno, id, src, SocketAddresses.encode(arena, destination), clampMillis(timeout));
            Cm.check(rc, errno, "rdma_resolve_addr", destination);
        } catch (Throwable t) {
            throw Downcalls.unexpected("rdma_resolve_addr", t);
        }
    }

    /**
     * Resolves the route to the peer ({@code rdma_resolve_route}) and waits for ROUTE_RESOLVED.
     *
     * <p><b>Errors</b>: {@link CmEventException} on ROUTE_ERROR; {@link VerbsException} from
     * {@code rdma_resolve_route} (EINVAL before the address is resolved) or ETIMEDOUT.
     */
    public CmEvent resolveRoute(Duration timeout) {
        long deadline = Timeouts.deadline(timeout);
        startResolveRoute(timeout);
        return expect("rdma_resolve_route", deadline, timeout, EnumSet.of(CmEventType.ROUTE_RESOLVED),
                EnumSet.of(CmEventType.ROUTE_ERROR), null);
    }

    /**
     * Starts resolving the route to the peer ({@code rdma_resolve_route}) and returns without
     * waiting: ROUTE_RESOLVED or ROUTE_ERROR arrives on {@link #channel()}. The non-blocking form
     * of {@link #resolveRoute}.
     *
     * <p><b>Errors</b>: {@link VerbsException} from {@code rdma_resolve_route} (EINVAL before the
     * address is resolved); {@link IllegalStateException} after close.
     */
    public void startResolveRoute(Duration timeout) {
        Objects.requireNonNull(timeout, "timeout");
        ensureOpen();
        requireDevice("rdma_resolve_route");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            int rc = (int) CmFunctions.RESOLVE_ROUTE.invokeExact(errno, id, clampMillis(timeout));
            Cm.check(rc, errno, "rdma_resolve_route", this);
        } catch (Throwable t) {
            throw Downcalls.unexpected("rdma_resolve_route", t);
        }
    }

    /**
     * Creates the id's queue pair ({@code rdma_create_qp}) on {@code pd} with the given
     * completion queues: RC for {@link PortSpace#TCP}, UD for {@link PortSpace#UDP}. librdmacm
     * moves an RC QP to INIT (receives may be posted at once) and a UD QP to RTS.
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} when the domain or a queue belongs to
     * another device than {@link #context()}; {@link IllegalStateException} before the id is bound
     * to a device, when it already has a queue pair, or after close; {@link VerbsException}
     * (EINVAL for sizes beyond the device's, ENOMEM).
     */
    public QueuePair createQueuePair(ProtectionDomain pd, CompletionQueue sendCq, CompletionQueue recvCq, QpInit init) {
        return createQueuePair(pd, sendCq, recvCq, null, init);
    }

    /**
     * As {@link #createQueuePair(ProtectionDomain, CompletionQueue, CompletionQueue, QpInit)}, for a
     * queue pair that receives from {@code srq} ({@code ibv_qp_init_attr.srq}; {@code null}: its
     * own receive queue). With an SRQ, {@code init}'s receive sizes are not used (receives are
     * posted to the SRQ, and {@link QueuePair#postRecv} on the QP is refused); many ids may share
     * one SRQ and one completion queue, which is how a server keeps one pool of receive buffers
     * for all its connections.
     *
     * <p><b>Errors</b>: as the other overload; {@link IllegalArgumentException} when {@code srq}
     * belongs to another protection domain than {@code pd}.
     */
    public QueuePair createQueuePair(ProtectionDomain pd, CompletionQueue sendCq, CompletionQueue recvCq,
            SharedReceiveQueue srq, QpInit init) {
        Objects.requireNonNull(pd, "pd");
        if (srq != null && srq.protectionDomain() != pd) {
            throw new IllegalArgumentException(srq + " belongs to another protection domain than " + pd);
        }
        Objects.requireNonNull(sendCq, "sendCq");
        Objects.requireNonNull(recvCq, "recvCq");
        Objects.requireNonNull(init, "init");
        Context context = context();
        if (context == null) {
            throw new IllegalStateException(this + " is not bound to a device yet: resolve an address first, "
                    + "or take the id from a connection request");
        }
        if (qp != null && !qp.isClosed()) {
            throw new IllegalStateException(this + " already has " + qp);
        }
        if (pd.context() != context) {
            throw new IllegalArgumentException(pd + " belongs to another device than " + this + " (" + context + ")");
        }
        var core = Cm.core();
        MemorySegment pdPtr = core.handle(pd);
        MemorySegment sendPtr = core.handle(sendCq);
        MemorySegment recvPtr = core.handle(recvCq);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment attr = new QpInitAttr(sendPtr, recvPtr, srq == null ? MemorySegment.NULL : core.handle(srq),
                    new QpCap(init.maxSendWr(), init.maxRecvWr(), init.maxSendSge(), init.maxRecvSge(),
                            init.maxInlineData()),
                    portSpace.qpType().value(), init.signalAll()).write(arena);
            int rc = (int) CmFunctions.CREATE_QP.invokeExact(errno, id, pdPtr, attr);
            Cm.check(rc, errno, "rdma_create_qp", this + " with " + init);
            QpCap cap = QpInitAttr.grantedCap(attr);
            QpCapabilities granted = new QpCapabilities(cap.maxSendWr(), cap.maxRecvWr(), cap.maxSendSge(),
                    cap.maxRecvSge(), cap.maxInlineData());
            MemorySegment qpPtr = CmStructs.idQp(id);
            QpState state = portSpace == PortSpace.UDP ? QpState.RTS : QpState.INIT;
            QueuePair created = core.adoptQueuePair(pd, qpPtr, portSpace.qpType(), sendCq, recvCq, srq, granted, state,
                    this::destroyQp);
            qp = created;
            return created;
        } catch (Throwable t) {
            throw Downcalls.unexpected("rdma_create_qp", t);
        }
    }

    private void destroyQp() {
        try {
            CmFunctions.DESTROY_QP.invokeExact(Downcalls.errnoSegment(Arena.ofAuto()), id);
        } catch (Throwable t) {
            throw Downcalls.unexpected("rdma_destroy_qp", t);
        }
    }

    /**
     * Connects ({@code rdma_connect}) after {@link #resolveRoute}, and waits for ESTABLISHED:
     * the queue pair (if any) is then in RTS. For a UDP id this is the SIDR exchange: the
     * ESTABLISHED event carries the peer's QP number and Q_Key.
     *
     * @return the ESTABLISHED event, with the private data of the peer's accept
     *
     * <p><b>Errors</b>: {@link CmEventException} on REJECTED (the event has the reason and the
     * peer's private data), UNREACHABLE (no answer within the CM's timeout) and CONNECT_ERROR;
     * {@link VerbsException} from {@code rdma_connect} (EINVAL for private data longer than 56
     * bytes, or before the route is resolved) or ETIMEDOUT when {@code timeout} passed first
     * (close the id then: the attempt is abandoned).
     */
    public CmEvent connect(ConnectParameters parameters, Duration timeout) {
        long deadline = Timeouts.deadline(timeout);
        startConnect(parameters);
        return expect("rdma_connect", deadline, timeout, EnumSet.of(CmEventType.ESTABLISHED),
                EnumSet.of(CmEventType.REJECTED, CmEventType.UNREACHABLE, CmEventType.CONNECT_ERROR,
                        CmEventType.CONNECT_RESPONSE, CmEventType.DISCONNECTED, CmEventType.DEVICE_REMOVAL),
                remoteAddress() == null ? null : "connecting to " + remoteAddress());
    }

    /**
     * Starts connecting ({@code rdma_connect}, with the id's own queue pair if it has one) after
     * the route is resolved, and returns without waiting: ESTABLISHED (its private data the
     * peer's accept's), or REJECTED, UNREACHABLE or CONNECT_ERROR, arrives on {@link #channel()}.
     * The non-blocking form of {@link #connect(ConnectParameters, Duration)}; closing the id
     * abandons the attempt.
     *
     * <p><b>Errors</b>: {@link VerbsException} from {@code rdma_connect} (EINVAL for private data
     * longer than 56 bytes, or before the route is resolved); {@link IllegalStateException} after close.
     */
    public void startConnect(ConnectParameters parameters) {
        Objects.requireNonNull(parameters, "parameters");
        ensureOpen();
        call("rdma_connect", CmFunctions.CONNECT, parameters);
    }

    /**
     * Accepts the connection request this id came from ({@code rdma_accept}). For a TCP id it waits
     * for ESTABLISHED (the peer's RTU) and returns that event; a UDP id gets no ESTABLISHED (the
     * SIDR reply is all there is) and this returns {@code null} at once.
     *
     * <p><b>Errors</b>: {@link CmEventException} on UNREACHABLE (the peer vanished), CONNECT_ERROR
     * or DISCONNECTED before ESTABLISHED; {@link VerbsException} from {@code rdma_accept}
     * (EINVAL: private data longer than 196 bytes, an id that is not a request) or ETIMEDOUT.
     */
    public CmEvent accept(ConnectParameters parameters, Duration timeout) {
        long deadline = Timeouts.deadline(timeout);
        startAccept(parameters);
        if (portSpace == PortSpace.UDP) {
            return null;
        }
        return expect("rdma_accept", deadline, timeout, EnumSet.of(CmEventType.ESTABLISHED),
                EnumSet.of(CmEventType.UNREACHABLE, CmEventType.CONNECT_ERROR, CmEventType.REJECTED,
                        CmEventType.DISCONNECTED, CmEventType.DEVICE_REMOVAL), null);
    }

    /**
     * Starts accepting the connection request this id came from ({@code rdma_accept}) and returns
     * without waiting: for a TCP id, ESTABLISHED (the peer's RTU), or UNREACHABLE, CONNECT_ERROR,
     * REJECTED or DISCONNECTED, arrives on {@link #channel()}; a UDP id's SIDR reply is all there
     * is, no event follows. The non-blocking form of {@link #accept(ConnectParameters, Duration)}.
     *
     * <p><b>Errors</b>: {@link VerbsException} from {@code rdma_accept} (EINVAL: private data longer
     * than 196 bytes, an id that is not a request); {@link IllegalStateException} after close.
     */
    public void startAccept(ConnectParameters parameters) {
        Objects.requireNonNull(parameters, "parameters");
        ensureOpen();
        call("rdma_accept", CmFunctions.ACCEPT, parameters);
    }

    /**
     * The attributes rdma_cm has for moving a queue pair of this id to {@code state}
     * ({@code rdma_init_qp_attr}): INIT (port, P_Key index, access), RTR (the peer's address, QP
     * number and PSN, MTU, READ depth) or RTS (PSN, timeouts, retries). For a queue pair made
     * with verbs-core ({@link ProtectionDomain#queuePair}) that the application moves itself:
     * {@code qp.toRtr(id.qpAttributes(QpState.RTR))}.
     *
     * <p><b>Errors</b>: {@link VerbsException} from {@code rdma_init_qp_attr} (EINVAL when the id
     * is not far enough: RTR needs the peer's reply or request).
     */
    public QpAttr qpAttributes(QpState state) {
        Objects.requireNonNull(state, "state");
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment attr = QpAttrFields.forState(arena, state.value());
            MemorySegment mask = arena.allocate(ValueLayout.JAVA_INT);
            int rc = (int) CmFunctions.INIT_QP_ATTR.invokeExact(errno, id, attr, mask);
            Cm.check(rc, errno, "rdma_init_qp_attr", this + " for " + state);
            return qpAttr(QpAttrFields.read(attr), mask.get(ValueLayout.JAVA_INT, 0));
        } catch (Throwable t) {
            throw Downcalls.unexpected("rdma_init_qp_attr", t);
        }
    }

    /** The {@code struct ibv_qp_attr} fields named by {@code mask}, as a {@link QpAttr}. */
    private static QpAttr qpAttr(QpAttrFields a, int mask) {
        QpAttr q = new QpAttr();
        if ((mask & QpAttrFields.PORT) != 0) {
            q.port(a.portNum());
        }
        if ((mask & QpAttrFields.PKEY_INDEX) != 0) {
            q.pkeyIndex(a.pkeyIndex());
        }
        if ((mask & QpAttrFields.ACCESS_FLAGS) != 0) {
            q.access(Access.fromMask(a.accessFlags()).toArray(new Access[0]));
        }
        if ((mask & QpAttrFields.QKEY) != 0) {
            q.qkey(a.qkey());
        }
        if ((mask & QpAttrFields.AV) != 0) {
            UdAddress av = UdAddress.of(a.ahAttr(), 0, 0);
            if (av != null) {
                q.addressVector(av.addressVector());
            }
        }
        if ((mask & QpAttrFields.PATH_MTU) != 0) {
            q.pathMtu(Mtu.of(a.pathMtu()));
        }
        if ((mask & QpAttrFields.DEST_QPN) != 0) {
            q.destQpNum(a.destQpNum());
        }
        if ((mask & QpAttrFields.RQ_PSN) != 0) {
            q.rqPsn(a.rqPsn());
        }
        if ((mask & QpAttrFields.SQ_PSN) != 0) {
            q.sqPsn(a.sqPsn());
        }
        if ((mask & QpAttrFields.MAX_DEST_RD_ATOMIC) != 0) {
            q.maxDestRdAtomic(a.maxDestRdAtomic());
        }
        if ((mask & QpAttrFields.MAX_QP_RD_ATOMIC) != 0) {
            q.maxRdAtomic(a.maxRdAtomic());
        }
        if ((mask & QpAttrFields.MIN_RNR_TIMER) != 0) {
            q.minRnrTimer(a.minRnrTimer());
        }
        if ((mask & QpAttrFields.TIMEOUT) != 0) {
            q.timeout(a.timeout());
        }
        if ((mask & QpAttrFields.RETRY_CNT) != 0) {
            q.retryCount(a.retryCount());
        }
        if ((mask & QpAttrFields.RNR_RETRY) != 0) {
            q.rnrRetry(a.rnrRetry());
        }
        return q;
    }

    /** Checks a queue pair the application made for use with this id. */
    private void checkUserQp(QueuePair userQp, String verb) {
        Objects.requireNonNull(userQp, "qp");
        if (portSpace != PortSpace.TCP || userQp.type() != io.github.verbs4j.QpType.RC) {
            throw new IllegalArgumentException(verb + " with the application's queue pair takes an RC queue pair on a "
                    + "TCP id, got " + userQp.type() + " on " + portSpace);
        }
        if (qp != null && !qp.isClosed()) {
            throw new IllegalStateException(this + " already has " + qp + " (rdma_create_qp)");
        }
        Context context = context();
        if (context == null || userQp.protectionDomain().context() != context) {
            throw new IllegalArgumentException(userQp + " is not on the device of " + this + " (" + context + ")");
        }
    }

    /**
     * Connects with a queue pair the application made ({@code rdma_connect} with its QP number,
     * as librdmacm does for an id without a QP): moves it to INIT when it is in RESET, connects,
     * waits for the peer's reply (CONNECT_RESPONSE), moves it to RTR and RTS with
     * {@link #qpAttributes} and completes the handshake ({@code rdma_establish}). The queue pair
     * stays the application's: this id does not destroy it.
     *
     * @return the CONNECT_RESPONSE event, with the private data of the peer's accept
     *
     * <p><b>Errors</b>: as {@link #connect(ConnectParameters, Duration)};
     * {@link IllegalArgumentException} for a queue pair that is not RC or on another device;
     * {@link IllegalStateException} when the id has a queue pair of its own.
     */
    public CmEvent connect(QueuePair userQp, ConnectParameters parameters, Duration timeout) {
        Objects.requireNonNull(parameters, "parameters");
        long deadline = Timeouts.deadline(timeout);
        ensureOpen();
        checkUserQp(userQp, "rdma_connect");
        if (userQp.trackedState() == QpState.RESET) {
            userQp.toInit(qpAttributes(QpState.INIT));
        }
        call("rdma_connect", CmFunctions.CONNECT, parameters, userQp.qpNumber());
        CmEvent response = expect("rdma_connect", deadline, timeout, EnumSet.of(CmEventType.CONNECT_RESPONSE),
                EnumSet.of(CmEventType.REJECTED, CmEventType.UNREACHABLE, CmEventType.CONNECT_ERROR,
                        CmEventType.DISCONNECTED, CmEventType.DEVICE_REMOVAL),
                remoteAddress() == null ? null : "connecting to " + remoteAddress());
        userQp.toRtr(qpAttributes(QpState.RTR));
        userQp.toRts(qpAttributes(QpState.RTS));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            int rc = (int) CmFunctions.ESTABLISH.invokeExact(errno, id);
            Cm.check(rc, errno, "rdma_establish", this);
        } catch (Throwable t) {
            throw Downcalls.unexpected("rdma_establish", t);
        }
        return response;
    }

    /**
     * Accepts the connection request this id came from with a queue pair the application made:
     * moves it through INIT (from RESET), RTR and RTS with {@link #qpAttributes}, then
     * {@code rdma_accept} with its QP number, and waits for ESTABLISHED. The queue pair stays the
     * application's: this id does not destroy it.
     *
     * <p><b>Errors</b>: as {@link #accept(ConnectParameters, Duration)} and
     * {@link #connect(QueuePair, ConnectParameters, Duration)}.
     */
    public CmEvent accept(QueuePair userQp, ConnectParameters parameters, Duration timeout) {
        Objects.requireNonNull(parameters, "parameters");
        long deadline = Timeouts.deadline(timeout);
        ensureOpen();
        checkUserQp(userQp, "rdma_accept");
        if (userQp.trackedState() == QpState.RESET) {
            userQp.toInit(qpAttributes(QpState.INIT));
        }
        userQp.toRtr(qpAttributes(QpState.RTR));
        userQp.toRts(qpAttributes(QpState.RTS));
        call("rdma_accept", CmFunctions.ACCEPT, parameters, userQp.qpNumber());
        return expect("rdma_accept", deadline, timeout, EnumSet.of(CmEventType.ESTABLISHED),
                EnumSet.of(CmEventType.UNREACHABLE, CmEventType.CONNECT_ERROR, CmEventType.REJECTED,
                        CmEventType.DISCONNECTED, CmEventType.DEVICE_REMOVAL), null);
    }

    private void call(String verb, java.lang.invoke.MethodHandle handle, ConnectParameters p) {
        call(verb, handle, p, 0);
    }

    /** {@code rdma_connect}/{@code rdma_accept} with {@code p}; {@code qpNum}: the application's QP (0: the id's own). */
    private void call(String verb, java.lang.invoke.MethodHandle handle, ConnectParameters p, int qpNum) {
        requireDevice(verb);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment cp = new ConnParam(p.privateData(), p.responderResources(), p.initiatorDepth(),
                    p.retryCount(), p.rnrRetryCount(), qpNum).write(arena);
            int rc = (int) handle.invokeExact(errno, id, cp);
            Cm.check(rc, errno, verb, this + " with " + p);
        } catch (Throwable t) {
            throw Downcalls.unexpected(verb, t);
        }
    }

    /**
     * Refuses {@code verb} on an id bound to no device yet (no address resolved, not a request):
     * rdma-core's librdmacm reads the id's device in rdma_resolve_route, rdma_connect and
     * rdma_accept before any check of its own, so there such a call dereferences a null pointer
     * (the JVM died of it on siw's kernel stack); the errno is the one softrdma's librdmacm gives.
     */
    private void requireDevice(String verb) {
        if (CmStructs.idVerbs(id).address() == 0) {
            throw new VerbsException(verb, Errno.EINVAL, this + ": bound to no device yet (resolve an address first,"
                    + " or accept a connection request)");
        }
    }

    /**
     * Rejects the connection request this id came from ({@code rdma_reject}); the peer gets
     * REJECTED with status {@link CmEvent#REJECT_CONSUMER} and {@code privateData} (at most 148
     * bytes arrive). Close the id afterwards.
     *
     * <p><b>Errors</b>: {@link VerbsException} (EINVAL: too much private data, not a request).
     */
    public void reject(byte[] privateData) {
        ensureOpen();
        byte[] data = privateData == null ? new byte[0] : privateData;
        if (data.length > 255) {
            throw new IllegalArgumentException("rdma_reject takes at most 255 bytes of private data, got " + data.length);
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            int rc = (int) CmFunctions.REJECT.invokeExact(errno, id, Cm.bytes(arena, data), (byte) data.length);
            Cm.check(rc, errno, "rdma_reject", this);
        } catch (Throwable t) {
            throw Downcalls.unexpected("rdma_reject", t);
        }
    }

    /**
     * Disconnects ({@code rdma_disconnect}): the queue pair goes to ERR (posted requests flush)
     * and the peer gets DISCONNECTED. Does not wait for this side's DISCONNECTED event
     * ({@link #awaitEvent}).
     *
     * <p><b>Errors</b>: {@link VerbsException} (EINVAL when not connected).
     */
    public void disconnect() {
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            int rc = (int) CmFunctions.DISCONNECT.invokeExact(errno, id);
            Cm.check(rc, errno, "rdma_disconnect", this);
        } catch (Throwable t) {
            throw Downcalls.unexpected("rdma_disconnect", t);
        }
        disconnected = true;
        disconnectCalled = true;
        QueuePair q = qp;
        if (q != null && !q.isClosed()) {
            Cm.core().track(q, QpState.ERR);
        }
    }

    /**
     * On a listening id: the next connection request, or {@code null} when none came within
     * {@code timeout}. The returned event's {@link CmEvent#id()} is a new id that the caller owns.
     */
    public CmEvent getRequest(Duration timeout) {
        long deadline = Timeouts.deadline(timeout);
        ensureOpen();
        return channel.await(e -> e.type() == CmEventType.CONNECT_REQUEST && e.listenId() == this, deadline);
    }

    /** The next event of this id, or {@code null} when none came within {@code timeout}. */
    public CmEvent awaitEvent(Duration timeout) {
        long deadline = Timeouts.deadline(timeout);
        ensureOpen();
        return channel.await(e -> e.id() == this && e.type() != CmEventType.CONNECT_REQUEST, deadline);
    }

    /**
     * Moves this id, and the events kept for it, to another channel ({@code rdma_migrate_id}).
     *
     * <p><b>Errors</b>: {@link VerbsException} from {@code rdma_migrate_id}.
     */
    public void migrate(EventChannel target) {
        Objects.requireNonNull(target, "target");
        ensureOpen();
        target.ensureOpen();
        EventChannel from = channel;
        if (from == target) {
            return;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            int rc = (int) CmFunctions.MIGRATE_ID.invokeExact(errno, id, target.channel);
            Cm.check(rc, errno, "rdma_migrate_id", this + " to " + target);
        } catch (Throwable t) {
            throw Downcalls.unexpected("rdma_migrate_id", t);
        }
        target.moveIn(this, from.moveOut(this));
        channel = target;
    }

    /** Called by the channel for each event of this id, before anyone sees it. */
    void observe(CmEvent event) {
        CmTelemetry.observed(this, event);
        switch (event.type()) {
            case ESTABLISHED -> {
                QueuePair q = qp;
                if (q != null && !q.isClosed() && portSpace == PortSpace.TCP) {
                    Cm.core().track(q, QpState.RTS);
                }
            }
            case DISCONNECTED -> {
                disconnected = true;
                disconnectedEvent = true;
            }
            default -> {
            }
        }
    }

    private CmEvent expect(String verb, long deadline, Duration timeout, Set<CmEventType> success,
            Set<CmEventType> failure, String detail) {
        CmEvent e = channel.await(ev -> ev.id() == this && ev.type() != CmEventType.CONNECT_REQUEST, deadline);
        if (e == null) {
            throw VerbsException.timedOut(verb, "a " + success + " event" + (detail == null ? "" : " (" + detail + ")"),
                    timeout);
        }
        if (success.contains(e.type())) {
            return e;
        }
        throw new CmEventException(verb, e, failure.contains(e.type()) ? detail : "expected " + success);
    }

    private static int clampMillis(Duration timeout) {
        return (int) Math.max(1, Math.min(Integer.MAX_VALUE, Timeouts.millis(timeout)));
    }

    private void ensureOpen() {
        life.ensureOpen(this);
    }

    /**
     * Destroys the queue pair if it is still open ({@code rdma_destroy_qp}), then the id
     * ({@code rdma_destroy_id}); a connected id disconnects its peer. Idempotent.
     *
     * <p><b>Errors</b>: {@link VerbsException} from {@code rdma_destroy_id} (the id stays open);
     * {@link WrongThreadException} on any thread but the owner when the id's queue pair is
     * confined ({@link QueuePair#confine()}): nothing is destroyed, the id and its queue pair stay
     * open and connected (the id never reads as closing), and the owner thread's close destroys both.
     */
    @Override
    public synchronized void close() {
        if (!life.isOpen()) {
            return; // closed (only this method, synchronized, changes the id's state)
        }
        // the queue pair first, before the id's state changes: its close refuses a thread other than
        // a confined QP's owner (under the QP's lifecycle lock, which its confine() takes too) or
        // another failure before anything changed, so no thread sees the id closing and then open again
        QueuePair q = qp;
        if (q != null) {
            q.close();
        }
        life.close(this, () -> {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment errno = Downcalls.errnoSegment(arena);
                int rc = (int) CmFunctions.DESTROY_ID.invokeExact(errno, id);
                Cm.check(rc, errno, "rdma_destroy_id", this);
            }
        }, () -> channel.forget(this));
    }

    /** Whether {@link #close()} completed. */
    public boolean isClosed() {
        return life.isClosed();
    }

    @Override
    public String toString() {
        return "CmId[" + portSpace + " 0x" + Long.toHexString(id.address()) + "]";
    }
}
