package io.github.verbs4j;

import io.github.verbs4j.internal.CoreAccess;
import io.github.verbs4j.internal.Lifecycle;

import java.lang.foreign.MemorySegment;
import java.util.List;

/** verbs-core's side of {@link CoreAccess}: reaches the package-private parts verbs-cm needs. */
final class CoreAccessImpl extends CoreAccess {

    static {
        CoreAccess.install(new CoreAccessImpl());
    }

    private CoreAccessImpl() {
    }

    @Override
    public Context borrowContext(MemorySegment ibvContext) {
        return Context.borrow(ibvContext);
    }

    @Override
    public MemorySegment handle(Context context) {
        context.life.ensureOpen(context);
        return context.ctx;
    }

    @Override
    public MemorySegment handle(ProtectionDomain pd) {
        pd.life.ensureOpen(pd);
        return pd.pd;
    }

    @Override
    public MemorySegment handle(CompletionQueue cq) {
        cq.life.ensureOpen(cq);
        return cq.handle.segment();
    }

    @Override
    public QueuePair adoptQueuePair(ProtectionDomain pd, MemorySegment qp, QpType type, CompletionQueue sendCq,
            CompletionQueue recvCq, QpCapabilities capabilities, QpState state, Runnable destroyer) {
        return QueuePair.adopt(pd, qp, type, sendCq, recvCq, capabilities, state, destroyer);
    }

    @Override
    public MemorySegment handle(SharedReceiveQueue srq) {
        srq.life.ensureOpen(srq);
        return srq.handle.segment();
    }

    @Override
    public QueuePair adoptQueuePair(ProtectionDomain pd, MemorySegment qp, QpType type, CompletionQueue sendCq,
            CompletionQueue recvCq, SharedReceiveQueue srq, QpCapabilities capabilities, QpState state,
            Runnable destroyer) {
        return QueuePair.adopt(pd, qp, type, sendCq, recvCq, srq, capabilities, state, destroyer);
    }

    @Override
    public List<Object> dependents(Object owner) {
        Lifecycle life = switch (owner) {
            case Context c -> c.life;
            case ProtectionDomain pd -> pd.life;
            case CompletionQueue cq -> cq.life;
            case CompletionChannel ch -> ch.life;
            case SharedReceiveQueue srq -> srq.life;
            case QueuePair qp -> qp.life;
            case MemoryRegion mr -> mr.life;
            case AddressHandle ah -> ah.life;
            case MemoryWindow mw -> mw.life;
            case XrcDomain xrcd -> xrcd.life;
            case XrcTarget target -> target.life;
            default -> null;
        };
        return life == null ? List.of() : life.dependents();
    }

    @Override
    public void track(QueuePair qp, QpState state) {
        qp.track(state);
    }
}
