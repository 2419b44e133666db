package io.github.verbs4j.jmh;

import io.github.verbs4j.Access;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Context;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.PollSession;
import io.github.verbs4j.PostSession;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QpType;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.SendOp;
import io.github.verbs4j.Verbs;
import io.github.verbs4j.WcField;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * {@link JavaRig}'s objects, extended: CQs from {@code ibv_create_cq_ex}, QPs from
 * {@code ibv_create_qp_ex}; the WRITE posts through a {@link PostSession} and polls through a
 * {@link PollSession} ({@code extended.c}'s {@code blx_write} is its C twin).
 */
@State(Scope.Thread)
public class ExtendedRig {

    static final int SIZE = 64 * 1024;
    static final int MESSAGE = 64;

    private Context ctx;
    private ProtectionDomain pd;
    private CompletionQueue cqA;
    private CompletionQueue cqB;
    private QueuePair a;
    private QueuePair b;
    private MemoryRegion mrA;
    private MemoryRegion mrB;
    private long remote;
    private int rkey;
    private long id;

    @Setup(Level.Trial)
    public void setUp() {
        Verbs.ensureAvailability();
        ctx = Verbs.openFirst();
        try {
            pd = ctx.allocatePd();
            cqA = ctx.createExtendedCq(64, null, 0, WcField.BYTE_LEN);
            cqB = ctx.createExtendedCq(64, null, 0, WcField.BYTE_LEN);
            SendOp[] ops = {SendOp.RDMA_WRITE, SendOp.SEND, SendOp.RDMA_READ};
            a = pd.queuePair(QpType.RC).cq(cqA).maxSendWr(32).maxRecvWr(32).maxSendSge(4).maxRecvSge(4).maxInline(64)
                    .sendOps(ops).build();
            b = pd.queuePair(QpType.RC).cq(cqB).maxSendWr(32).maxRecvWr(32).maxSendSge(4).maxRecvSge(4).maxInline(64)
                    .sendOps(ops).build();
            Access[] all = {Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC};
            mrA = pd.allocate(SIZE, all);
            mrB = pd.allocate(SIZE, all);
            a.connect(b.endpoint());
            b.connect(a.endpoint());
        } catch (RuntimeException | Error e) {
            tearDown();
            throw e;
        }
        remote = mrB.address() + 4096;
        rkey = mrB.rkey();
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        for (AutoCloseable c : new AutoCloseable[] {mrB, mrA, b, a, cqB, cqA, pd, ctx}) {
            if (c != null) {
                try {
                    c.close();
                } catch (Exception e) {
                    throw new IllegalStateException("closing " + c, e);
                }
            }
        }
    }

    /** RDMA WRITE of 64 bytes through the post-send API, then one completion through start/end_poll. */
    long write() {
        try (PostSession s = a.startPosting()) {
            s.id(id++).rdmaWrite(remote, rkey).sge(mrA, 0, MESSAGE);
        }
        return awaitOne();
    }

    private long awaitOne() {
        while (true) {
            try (PollSession p = cqA.startPoll()) {
                if (p.next()) {
                    if (!p.ok()) {
                        throw new IllegalStateException("completion " + p.status() + " for " + p.wrId());
                    }
                    return p.wrId() + p.byteLen();
                }
            }
        }
    }

    /** One pass over an empty extended CQ (start_poll answering ENOENT). */
    boolean pollEmpty() {
        try (PollSession p = cqA.startPoll()) {
            return p.next();
        }
    }
}
