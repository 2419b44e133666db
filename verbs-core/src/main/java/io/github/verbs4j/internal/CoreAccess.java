package io.github.verbs4j.internal;

import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Context;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QpCapabilities;
import io.github.verbs4j.QpState;
import io.github.verbs4j.QpType;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.SharedReceiveQueue;

import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * What verbs-cm needs from verbs-core beyond its public API: librdmacm opens the device itself
 * ({@code cm_id->verbs}) and creates queue pairs ({@code rdma_create_qp}), so verbs-cm wraps
 * those native objects in verbs-core's owners and passes verbs-core's owners back as pointers.
 * Visible only to io.github.verbs4j.cm and io.github.verbs4j.test (qualified export; the test
 * harness reads {@link #dependents} for its leak check); implemented in io.github.verbs4j.
 */
public abstract class CoreAccess {

    private static volatile CoreAccess instance;

    /** The implementation (loading the class that installs it on first use). */
    public static CoreAccess get() {
        CoreAccess access = instance;
        if (access == null) {
            try {
                Class.forName("io.github.verbs4j.CoreAccessImpl", true, CoreAccess.class.getClassLoader());
            } catch (ClassNotFoundException e) {
                throw new IllegalStateException("verbs4j: io.github.verbs4j.CoreAccessImpl is missing", e);
            }
            access = instance;
        }
        return access;
    }

    /** Called once, by io.github.verbs4j.CoreAccessImpl's initializer. */
    public static synchronized void install(CoreAccess access) {
        if (instance != null) {
            throw new IllegalStateException("CoreAccess is already installed");
        }
        instance = access;
    }

    /** A {@link Context} over an {@code ibv_context} someone else opened; its close leaves the device open. */
    public abstract Context borrowContext(MemorySegment ibvContext);

    /** The {@code ibv_context *} of an open context. */
    public abstract MemorySegment handle(Context context);

    /** The {@code ibv_pd *} of an open domain. */
    public abstract MemorySegment handle(ProtectionDomain pd);

    /** The {@code ibv_cq *} of an open queue. */
    public abstract MemorySegment handle(CompletionQueue cq);

    /**
     * A {@link QueuePair} over an {@code ibv_qp} created by librdmacm on {@code pd} with these
     * queues, in {@code state}; its close runs {@code destroyer} ({@code rdma_destroy_qp}).
     */
    public abstract QueuePair adoptQueuePair(ProtectionDomain pd, MemorySegment qp, QpType type,
            CompletionQueue sendCq, CompletionQueue recvCq, QpCapabilities capabilities, QpState state,
            Runnable destroyer);

    /** The {@code ibv_srq *} of an open shared receive queue. */
    public abstract MemorySegment handle(SharedReceiveQueue srq);

    /**
     * As {@link #adoptQueuePair(ProtectionDomain, MemorySegment, QpType, CompletionQueue,
     * CompletionQueue, QpCapabilities, QpState, Runnable)} for a QP created to receive from
     * {@code srq} ({@code null}: its own receive queue).
     */
    public abstract QueuePair adoptQueuePair(ProtectionDomain pd, MemorySegment qp, QpType type,
            CompletionQueue sendCq, CompletionQueue recvCq, SharedReceiveQueue srq, QpCapabilities capabilities,
            QpState state, Runnable destroyer);

    /**
     * The open owners made from {@code owner} (a context's domains, queues and channels, a
     * domain's regions, queue pairs, SRQs and address handles, ...): empty for an owner that
     * has none or is not a verbs-core owner.
     */
    public abstract List<Object> dependents(Object owner);

    /** Records a state change librdmacm made on the QP (RTS on connect, ERR on disconnect). */
    public abstract void track(QueuePair qp, QpState state);
}
