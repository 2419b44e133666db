package io.github.verbs4j;

import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.internal.NativeHandle;
import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.ExtendedOps;
import io.github.verbs4j.raw.QpAttrFields;
import io.github.verbs4j.raw.QpFields;
import io.github.verbs4j.raw.QpInitAttr;
import io.github.verbs4j.raw.QpOpenAttr;
import io.github.verbs4j.raw.VerbsFunctions;
import io.github.verbs4j.raw.XrcOps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;
import java.util.concurrent.ThreadLocalRandom;

/**
 * An XRC target queue pair ({@code IBV_QPT_XRC_RECV}) of an {@link XrcDomain}: the receiving
 * end of a connection from an {@link QpType#XRC_SEND} queue pair. It has no send queue, no
 * receive queue and no protection domain: each message names an XRC SRQ of the domain
 * ({@link SendRequest#xrcRemoteSrqn}), which supplies the receive request, the protection
 * domain its memory is checked against and the CQ its completion goes to. A message naming an
 * SRQ of another domain fails at the sender with {@link WcStatus#REMOTE_ACCESS_ERROR} (an
 * unknown SRQ number with {@link WcStatus#REMOTE_INVALID_REQUEST_ERROR}) and moves the target
 * QP to ERR.
 *
 * <p><b>Creation</b>: {@link XrcDomain#createTarget()} ({@code ibv_create_qp_ex}) or
 * {@link XrcDomain#openTarget(int)} ({@code ibv_open_qp}, a second handle to an existing one).
 * {@link #connect} does INIT, RTR and RTS ({@code ibv_modify_qp}; RTR needs the address vector,
 * path MTU, remote QP number and PSN, responder resources and RNR timer; RTS the timeout and
 * SQ PSN, as the kernel's table for XRC_RECV).
 *
 * <p><b>Lifecycle</b>: {@link #close()} ({@code ibv_destroy_qp}) is idempotent; closing the
 * created QP while {@code ibv_open_qp} handles of it are open fails with
 * {@link VerbsException} EBUSY. The target keeps its domain open.
 *
 * <p><b>Thread-safety</b>: transitions must not run concurrently; close must not race with other use.
 */
public final class XrcTarget implements AutoCloseable {

    final XrcDomain domain;
    final NativeHandle handle;
    final Lifecycle life = new Lifecycle();
    private final int qpNum;
    private final boolean opened;
    private final int initialPsn = ThreadLocalRandom.current().nextInt(1 << 24);
    private volatile QpState state;
    private volatile int advertisedGidIndex = -1;

    private XrcTarget(XrcDomain domain, MemorySegment qp, boolean opened) {
        this.domain = domain;
        this.handle = new NativeHandle(qp, QpFields.SIZE);
        this.qpNum = QpFields.qpNum(handle.pointer());
        this.opened = opened;
        this.state = QpState.of(QpFields.state(handle.pointer()));
    }

    static XrcTarget create(XrcDomain domain) {
        MemorySegment create = ExtendedOps.createQpEx(domain.context.ctx);
        if (create == null) {
            throw new VerbsException("ibv_create_qp_ex", Errno.EOPNOTSUPP, "the provider has no extended QPs");
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment init = QpInitAttr.writeXrcReceive(arena, domain.handle.pointer());
            MemorySegment qp = (MemorySegment) ExtendedOps.CREATE_QP_EX.invokeExact(create, errno, domain.context.ctx, init);
            if (Downcalls.isNull(qp)) {
                throw new VerbsException("ibv_create_qp_ex", Downcalls.errno(errno), "XRC_RECV in " + domain);
            }
            return new XrcTarget(domain, qp, false);
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_create_qp_ex", t);
        }
    }

    static XrcTarget open(XrcDomain domain, int qpNumber) {
        MemorySegment openFn = XrcOps.openQp(domain.context.ctx);
        if (openFn == null) {
            throw new VerbsException("ibv_open_qp", Errno.EOPNOTSUPP, "the provider cannot open QPs");
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment attr = new QpOpenAttr(qpNumber, domain.handle.pointer()).write(arena);
            MemorySegment qp = (MemorySegment) XrcOps.CREATE.invokeExact(openFn, errno, domain.context.ctx, attr);
            if (Downcalls.isNull(qp)) {
                throw new VerbsException("ibv_open_qp", Downcalls.errno(errno), "QP 0x" + Integer.toHexString(qpNumber)
                        + " in " + domain);
            }
            return new XrcTarget(domain, qp, true);
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_open_qp", t);
        }
    }

    void destroyNative() throws Throwable {
        Lifecycle.destroyVerb("ibv_destroy_qp", VerbsFunctions.DESTROY_QP, handle.pointer());
    }

    /** The QP number, which the sender connects to. */
    public int qpNumber() {
        return qpNum;
    }

    /** Whether this is a handle of {@link XrcDomain#openTarget(int)} rather than the QP's creation. */
    public boolean isOpened() {
        return opened;
    }

    /** The domain. */
    public XrcDomain domain() {
        return domain;
    }

    /** The state after the last transition made through this object (no native call). */
    public QpState trackedState() {
        return state;
    }

    /**
     * The endpoint the sender connects to: the port's LID, this QP's number and initial PSN
     * (random, 24 bits), the GID at {@code gidIndex}, which {@link #connect} then uses as source.
     *
     * <p><b>Errors</b>: {@link VerbsException} from {@code ibv_query_port}/{@code ibv_query_gid}.
     */
    public Endpoint endpoint(int port, int gidIndex) {
        life.ensureOpen(this);
        Port p = domain.context.port(port);
        advertisedGidIndex = gidIndex;
        return new Endpoint(p.query().lid(), qpNum, initialPsn, p.gid(gidIndex));
    }

    /** {@link #endpoint(int, int)} on port 1 with the GID index {@link QueuePair#endpoint()} would choose. */
    public Endpoint endpoint() {
        return endpoint(1, QueuePair.defaultGidIndex(domain.context.port(1)));
    }

    /** {@link #connect(Endpoint, ConnectOptions)} with {@link ConnectOptions#defaults()}. */
    public void connect(Endpoint remote) {
        connect(remote, ConnectOptions.defaults());
    }

    /**
     * Connects to the XRC_SEND QP at {@code remote}: RESET to INIT (port, P_Key index, access),
     * RTR (address vector, path MTU, remote QP number and PSN, responder resources, RNR timer),
     * RTS (timeout, SQ PSN), each by {@code ibv_modify_qp}.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} unless in RESET; {@link VerbsException}
     * from {@code ibv_modify_qp} naming the transition.
     */
    public synchronized void connect(Endpoint remote, ConnectOptions options) {
        Objects.requireNonNull(remote, "remote");
        Objects.requireNonNull(options, "options");
        life.ensureOpen(this);
        if (state != QpState.RESET) {
            throw new IllegalStateException("connect needs " + this + " in RESET, it is in " + state);
        }
        modify("toInit", QpState.INIT, new QpAttr().port(options.port()).pkeyIndex(options.pkeyIndex())
                .access(options.accessArray()));
        Mtu mtu = options.mtu() != null ? options.mtu() : domain.context.queryPort(options.port()).activeMtu();
        int gidIndex = options.gidIndex() >= 0 ? options.gidIndex() : Math.max(0, advertisedGidIndex);
        AddressVector av = AddressVector.to(remote).port(options.port()).sgidIndex(gidIndex)
                .serviceLevel(options.serviceLevel());
        av.validate(domain.context, "connect");
        modify("toRtr", QpState.RTR, new QpAttr().addressVector(av).pathMtu(mtu).destQpNum(remote.qpn())
                .rqPsn(remote.psn()).maxDestRdAtomic(options.maxDestRdAtomic()).minRnrTimer(options.minRnrTimer()));
        modify("toRts", QpState.RTS, new QpAttr().timeout(options.timeout()).sqPsn(initialPsn));
    }

    /** Moves the QP to ERR ({@code ibv_modify_qp}). */
    public synchronized void toError() {
        life.ensureOpen(this);
        modify("toError", QpState.ERR, new QpAttr());
    }

    private void modify(String name, QpState to, QpAttr attr) {
        attr.modify(handle.segment(), to, name, this, state);
        state = to;
    }

    /**
     * The state as the device reports it ({@code ibv_query_qp}): ERR after a request named an SRQ
     * of another domain, for example.
     *
     * <p><b>Errors</b>: {@link VerbsException} with the provider's errno.
     */
    public QpState state() {
        life.ensureOpen(this);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment a = QpAttrFields.forState(arena, 0);
            MemorySegment init = QpInitAttr.allocate(arena);
            int rc = (int) VerbsFunctions.need(VerbsFunctions.QUERY_QP, "ibv_query_qp").invokeExact(errno, handle.segment(), a,
                    QpAttr.STATE, init);
            if (rc != 0) {
                throw new VerbsException("ibv_query_qp", Downcalls.errnoOf(rc, errno), toString());
            }
            return QpState.of(QpAttrFields.read(a).state());
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_query_qp", t);
        }
    }

    /**
     * Destroys the QP, or closes the handle of an opened one ({@code ibv_destroy_qp}). Idempotent.
     *
     * <p><b>Errors</b>: {@link VerbsException} (EBUSY: handles of {@link XrcDomain#openTarget} are
     * still open on this QP; it stays open).
     */
    @Override
    public void close() {
        life.close(this, handle, this::destroyNative, () -> domain.life.removeDependent(this));
    }

    /** Whether {@link #close()} completed. */
    public boolean isClosed() {
        return life.isClosed();
    }

    @Override
    public String toString() {
        return "XrcTarget[0x" + Integer.toHexString(qpNum) + (opened ? " opened" : "") + "]";
    }
}
