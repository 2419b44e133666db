package io.github.verbs4j.jmh;

import io.github.verbs4j.Access;
import io.github.verbs4j.Completion;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Completions;
import io.github.verbs4j.Context;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QpType;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.ReceiveRequest;
import io.github.verbs4j.RemoteBuffer;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.Verbs;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * The Java side of every benchmark pair: verbs4j objects set up exactly as {@code baseline.c}
 * sets up its own (one PD, two CQs of 64, two RC QPs with 32 requests, 4 SGEs and 64 inline
 * bytes connected to each other, two 64 KiB regions with every right), and one method per verb
 * sequence doing what the matching C loop does once per iteration.
 *
 * <p>Requests and completion batches are made once in {@link #setUp()}; an operation only
 * changes {@code wr_id}, posts and polls, which is what {@code -prof gc} checks (0 B/op).
 */
@State(Scope.Thread)
public class JavaRig {

    static final int SIZE = 64 * 1024;
    static final int MESSAGE = 64;
    static final int CHAIN = 16;

    private Context ctx;
    private ProtectionDomain pd;
    private CompletionQueue cqA;
    private CompletionQueue cqB;
    private QueuePair a;
    private QueuePair b;
    private MemoryRegion mrA;
    private MemoryRegion mrB;

    private SendRequest send;
    private ReceiveRequest recv;
    private SendRequest write;
    private SendRequest read;
    private SendRequest fetchAdd;
    private SendRequest chainHead;
    private SendRequest chainTail;
    private Completions oneA;
    private Completions oneB;
    private Completions batch16;
    private long id;

    @Setup(Level.Trial)
    public void setUp() {
        Verbs.ensureAvailability();
        ctx = Verbs.openFirst();
        try {
            pd = ctx.allocatePd();
            cqA = ctx.createCq(64);
            cqB = ctx.createCq(64);
            a = pd.queuePair(QpType.RC).cq(cqA).maxSendWr(32).maxRecvWr(32).maxSendSge(4).maxRecvSge(4).maxInline(64).build();
            b = pd.queuePair(QpType.RC).cq(cqB).maxSendWr(32).maxRecvWr(32).maxSendSge(4).maxRecvSge(4).maxInline(64).build();
            Access[] all = {Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC};
            mrA = pd.allocate(SIZE, all);
            mrB = pd.allocate(SIZE, all);
            a.connect(b.endpoint());
            b.connect(a.endpoint());
        } catch (RuntimeException | Error e) {
            tearDown();
            throw e;
        }
        RemoteBuffer remote = mrB.remote();
        send = SendRequest.send().local(mrA, 0, MESSAGE).signaled();
        recv = ReceiveRequest.create().local(mrB, 1024, MESSAGE);
        write = SendRequest.rdmaWrite().local(mrA, 0, MESSAGE).remote(remote, 4096).signaled();
        read = SendRequest.rdmaRead().local(mrA, 0, MESSAGE).remote(remote, 4096).signaled();
        fetchAdd = SendRequest.fetchAndAdd(1).local(mrA, 8192, 8).remote(remote, 8192).signaled();
        // 16 WRITEs to consecutive slots, one post_send, only the last one signaled
        SendRequest next = null;
        for (int k = CHAIN - 1; k >= 0; k--) {
            SendRequest r = SendRequest.rdmaWrite().local(mrA, (long) k * MESSAGE, MESSAGE)
                    .remote(remote, 4096 + (long) k * MESSAGE).signaled(k == CHAIN - 1).next(next);
            if (k == CHAIN - 1) {
                chainTail = r;
            }
            next = r;
        }
        chainHead = next;
        oneA = cqA.completions(1);
        oneB = cqB.completions(1);
        batch16 = cqA.completions(16);
    }

    /**
     * Confines both QPs and both CQs to the calling thread ({@code QueuePair.confine()},
     * {@code CompletionQueue.confine()}): their posts and polls then skip the close guard's mark
     * ({@link ConfinedJavaRig}, {@link VerbRowsProbe}'s confined ways).
     */
    void confine() {
        a.confine();
        b.confine();
        cqA.confine();
        cqB.confine();
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        IllegalStateException failure = null;
        for (AutoCloseable c : new AutoCloseable[] {mrB, mrA, b, a, cqB, cqA, pd, ctx}) {
            if (c != null) {
                try {
                    c.close();
                } catch (Exception e) {
                    if (failure == null) {
                        failure = new IllegalStateException("closing " + c, e);
                    } else {
                        failure.addSuppressed(e);
                    }
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    /**
     * Spins until one completion arrives and returns {@code wr_id + byte_len}; throws when it
     * failed. softrdma completed the operation inside post_send, so the first poll finds it.
     */
    private static long awaitOne(CompletionQueue cq, Completions batch) {
        while (cq.poll(batch) == 0) {
            // spin exactly as the C twin does (no pause instruction there either)
        }
        Completion wc = batch.get(0);
        if (!wc.ok()) {
            throw wc.error();
        }
        return wc.wrId() + wc.byteLength();
    }

    /** SEND + RECV ping: post_recv on B, post_send (signaled) on A, poll A's CQ, poll B's CQ. */
    long sendRecv() {
        long i = id++;
        b.postRecv(recv.id(i));
        a.postSend(send.id(i));
        return awaitOne(cqA, oneA) + awaitOne(cqB, oneB);
    }

    /** RDMA WRITE of 64 bytes, signaled, then poll. */
    long write() {
        a.postSend(write.id(id++));
        return awaitOne(cqA, oneA);
    }

    /** RDMA READ of 64 bytes, signaled, then poll. */
    long read() {
        a.postSend(read.id(id++));
        return awaitOne(cqA, oneA);
    }

    /** 64-bit FETCH_AND_ADD of 1, signaled, then poll. */
    long fetchAdd() {
        a.postSend(fetchAdd.id(id++));
        return awaitOne(cqA, oneA);
    }

    /** 16 chained RDMA WRITEs in one post_send, the last one signaled; one completion polled. */
    long chain16Write() {
        chainTail.id(id++);
        a.postSend(chainHead);
        return awaitOne(cqA, oneA);
    }

    /** poll_cq for up to 16 completions on an empty CQ. */
    int pollEmpty() {
        return cqA.poll(batch16);
    }
}
