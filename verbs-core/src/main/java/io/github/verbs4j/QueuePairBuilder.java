package io.github.verbs4j;

import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.ExtendedOps;
import io.github.verbs4j.raw.QpCap;
import io.github.verbs4j.raw.QpInitAttr;
import io.github.verbs4j.raw.VerbsFunctions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * Collects the creation attributes of a queue pair ({@code struct ibv_qp_init_attr}).
 * Defaults: 16 send and 16 receive requests, 1 scatter/gather entry each, no inline data,
 * only signaled requests complete.
 */
public final class QueuePairBuilder {
    final ProtectionDomain pd;
    final QpType type;
    CompletionQueue sendCq;
    CompletionQueue recvCq;
    SharedReceiveQueue srq;
    private int maxSendWr = 16;
    private int maxRecvWr = 16;
    private int maxSendSge = 1;
    private int maxRecvSge = 1;
    private int maxInline;
    private boolean signalAll;
    private long sendOps;

    QueuePairBuilder(ProtectionDomain pd, QpType type) {
        this.pd = pd;
        this.type = type;
    }

    /** The completion queue of send requests (required). */
    public QueuePairBuilder sendCq(CompletionQueue cq) {
        this.sendCq = cq;
        return this;
    }

    /** The completion queue of receive requests (required, except for XRC_SEND, which receives nothing). */
    public QueuePairBuilder recvCq(CompletionQueue cq) {
        this.recvCq = cq;
        return this;
    }

    /** Both completion queues. */
    public QueuePairBuilder cq(CompletionQueue cq) {
        return sendCq(cq).recvCq(cq);
    }

    /** Receive from a shared receive queue instead of the QP's own. */
    public QueuePairBuilder srq(SharedReceiveQueue srq) {
        this.srq = srq;
        return this;
    }

    /** Send requests the QP holds at once (default 16). */
    public QueuePairBuilder maxSendWr(int n) {
        this.maxSendWr = positive("maxSendWr", n);
        return this;
    }

    /** Receive requests the QP holds at once (default 16; ignored with an SRQ). */
    public QueuePairBuilder maxRecvWr(int n) {
        this.maxRecvWr = positive("maxRecvWr", n);
        return this;
    }

    /** Scatter/gather entries per send request (default 1). */
    public QueuePairBuilder maxSendSge(int n) {
        this.maxSendSge = positive("maxSendSge", n);
        return this;
    }

    /** Scatter/gather entries per receive request (default 1; ignored with an SRQ). */
    public QueuePairBuilder maxRecvSge(int n) {
        this.maxRecvSge = positive("maxRecvSge", n);
        return this;
    }

    /** Bytes that may be sent inline ({@link SendRequest#inline(boolean)}). */
    public QueuePairBuilder maxInline(int bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("maxInline must not be negative: " + bytes);
        }
        this.maxInline = bytes;
        return this;
    }

    /** Whether every send request completes ({@code sq_sig_all}), signaled or not. */
    public QueuePairBuilder signalAll(boolean all) {
        this.signalAll = all;
        return this;
    }

    /**
     * Creates an extended QP ({@code ibv_create_qp_ex} with
     * {@code IBV_QP_INIT_ATTR_SEND_OPS_FLAGS}) that can post through the post-send API
     * ({@link QueuePair#startPosting()}) for these operations; the classic
     * {@link QueuePair#postSend} works on it too. The device refuses (EOPNOTSUPP) an
     * operation it cannot do on the QP type.
     */
    public QueuePairBuilder sendOps(SendOp... ops) {
        long f = 0;
        for (SendOp op : ops) {
            f |= op.flag();
        }
        if (f == 0) {
            throw new IllegalArgumentException("sendOps needs at least one operation");
        }
        this.sendOps = f;
        return this;
    }

    private static int positive(String what, int n) {
        if (n < 1) {
            throw new IllegalArgumentException(what + " must be at least 1, got " + n);
        }
        return n;
    }

    /**
     * Creates the queue pair ({@code ibv_create_qp}), in state RESET.
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} when a completion queue is missing or
     * belongs to another context, or the SRQ to another protection domain;
     * {@link IllegalStateException} when one of them is closed; {@link VerbsException}
     * (EINVAL: capabilities beyond the device's, ENOMEM, EOPNOTSUPP for an unsupported type).
     */
    public QueuePair build() {
        pd.life.ensureOpen(pd);
        if (sendCq == null) {
            throw new IllegalArgumentException("QueuePairBuilder: sendCq is required");
        }
        boolean xrc = type == QpType.XRC_SEND;
        if (recvCq == null && !xrc) {
            throw new IllegalArgumentException("QueuePairBuilder: recvCq is required");
        }
        if (xrc && (recvCq != null || srq != null)) {
            throw new IllegalArgumentException("an XRC_SEND QP receives nothing: no recvCq, no srq"
                    + " (its messages land in XRC SRQs of the target's domain)");
        }
        for (CompletionQueue cq : xrc ? new CompletionQueue[] {sendCq} : new CompletionQueue[] {sendCq, recvCq}) {
            cq.life.ensureOpen(cq);
            if (cq.context != pd.context) {
                throw new IllegalArgumentException(cq + " belongs to another context than " + pd);
            }
        }
        if (srq != null) {
            srq.life.ensureOpen(srq);
            if (srq.pd != pd) {
                throw new IllegalArgumentException(srq + " belongs to another protection domain than " + pd);
            }
        }
        Iwarp.checkQpType(pd.context, type);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            QpInitAttr attr = initAttr();
            if (sendOps != 0) {
                return buildExtended(arena, errno, attr);
            }
            MemorySegment init = attr.write(arena);
            MemorySegment qp = (MemorySegment) VerbsFunctions.need(VerbsFunctions.CREATE_QP, "ibv_create_qp").invokeExact(errno, pd.pd, init);
            if (Downcalls.isNull(qp)) {
                throw new VerbsException("ibv_create_qp", Downcalls.errno(errno), type + " with " + maxSendWr
                        + "/" + maxRecvWr + " requests, " + maxSendSge + "/" + maxRecvSge + " SGEs, " + maxInline
                        + " inline bytes");
            }
            QpCapabilities granted = QpCapabilities.of(QpInitAttr.grantedCap(init));
            return QueuePair.register(new QueuePair(this, qp, granted),
                    () -> Lifecycle.destroyVerb("ibv_destroy_qp", VerbsFunctions.DESTROY_QP, qp));
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_create_qp", t);
        }
    }

    /** The collected attributes, as the raw layer encodes them. */
    private QpInitAttr initAttr() {
        return new QpInitAttr(sendCq.handle.pointer(), recvCq == null ? MemorySegment.NULL : recvCq.handle.pointer(),
                srq == null ? MemorySegment.NULL : srq.handle.pointer(),
                new QpCap(maxSendWr, maxRecvWr, maxSendSge, maxRecvSge, maxInline), type.value(), signalAll);
    }

    /** ibv_create_qp_ex through verbs_context->create_qp_ex, with the post-send operations. */
    private QueuePair buildExtended(Arena arena, MemorySegment errno, QpInitAttr attr) throws Throwable {
        MemorySegment create = ExtendedOps.createQpEx(pd.context.ctx);
        if (create == null) {
            throw new VerbsException("ibv_create_qp_ex", Errno.EOPNOTSUPP, "the provider has no extended QPs");
        }
        MemorySegment init = attr.writeExtended(arena, pd.pd, sendOps);
        MemorySegment qp = (MemorySegment) ExtendedOps.CREATE_QP_EX.invokeExact(create, errno, pd.context.ctx, init);
        if (Downcalls.isNull(qp)) {
            throw new VerbsException("ibv_create_qp_ex", Downcalls.errno(errno), type + " with send ops 0x"
                    + Long.toHexString(sendOps) + ", " + maxSendWr + "/" + maxRecvWr + " requests, " + maxSendSge
                    + "/" + maxRecvSge + " SGEs, " + maxInline + " inline bytes");
        }
        Lifecycle.Destroy undo = () -> Lifecycle.destroyVerb("ibv_destroy_qp", VerbsFunctions.DESTROY_QP, qp);
        MemorySegment qpx = (MemorySegment) ExtendedOps.qpToQpEx().invokeExact(qp);
        if (qpx.address() != qp.address()) {
            undo.destroy();
            throw new IllegalStateException("ibv_qp_to_qp_ex returned " + qpx + " for " + qp
                    + ": the provider's ibv_qp_ex does not start with its ibv_qp");
        }
        QpCapabilities granted = QpCapabilities.of(QpInitAttr.grantedCapExtended(init));
        QueuePair result;
        try {
            result = new QueuePair(this, qp, granted, null, sendOps);
        } catch (RuntimeException e) {
            undo.destroy(); // the provider's ibv_qp_ex lacks what PostSession needs
            throw e;
        }
        return QueuePair.register(result, undo);
    }
}
