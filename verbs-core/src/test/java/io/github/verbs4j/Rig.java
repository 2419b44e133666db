package io.github.verbs4j;

import java.time.Duration;

import org.junit.jupiter.api.Assumptions;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Two queue pairs of one type on one device, connected to each other, each with its own
 * completion queue and a 64 KiB memory region: the fixture most data-path tests share.
 */
final class Rig implements AutoCloseable {

    static final int SIZE = 64 * 1024;

    final Context ctx;
    final ProtectionDomain pd;
    final CompletionQueue cqA;
    final CompletionQueue cqB;
    final QueuePair a;
    final QueuePair b;
    final MemoryRegion mrA;
    final MemoryRegion mrB;
    final Completions wcs = new Completions(16);

    private Rig(Context ctx, ProtectionDomain pd, CompletionQueue cqA, CompletionQueue cqB, QueuePair a, QueuePair b,
                MemoryRegion mrA, MemoryRegion mrB) {
        this.ctx = ctx;
        this.pd = pd;
        this.cqA = cqA;
        this.cqB = cqB;
        this.a = a;
        this.b = b;
        this.mrA = mrA;
        this.mrB = mrB;
    }

    /** Whether the tests run on softrdma (rather than the system's rdma-core, e.g. kernel rxe). */
    static boolean onSoftrdma() {
        try {
            io.github.verbs4j.raw.NativeLibraries.verbs(); // loads it when this is the first question
        } catch (UnsatisfiedLinkError e) {
            return false;
        }
        return io.github.verbs4j.raw.NativeLibraries.verbsPath().map(p -> p.toString().contains("softrdma"))
                .orElse(false);
    }

    /** {@code enum ibv_transport_type}: {@code IBV_TRANSPORT_IWARP}. */
    static final int TRANSPORT_IWARP = 1;

    /** Whether {@code ctx}'s device reports the iWARP transport (e.g. the kernel's siw0). */
    static boolean iwarp(Context ctx) {
        return ctx.device().transport() == TransportType.IWARP;
    }

    /**
     * Skips the calling test (never passes it) on a device that reports the iWARP transport:
     * iWARP connects queue pairs only through rdma_cm, and the test connects them by hand
     * (INIT, RTR, RTS from the peer's QP number). Call it before creating the queue pairs.
     */
    static void assumeHandConnect(Context ctx) {
        Assumptions.assumeFalse(iwarp(ctx), () -> ctx.device().name() + " reports the iWARP transport, which"
                + " connects queue pairs only through rdma_cm; this test connects them by hand (RTR/RTS from"
                + " the peer's QP number)");
    }

    /** Skips the calling test on an iWARP device, {@code why} it cannot apply there (e.g. "it has no UD queue pairs"). */
    static void assumeNotIwarp(Context ctx, String why) {
        Assumptions.assumeFalse(iwarp(ctx), () -> ctx.device().name() + " reports the iWARP transport: " + why);
    }

    static Context open() {
        assertTrue(Verbs.isAvailable(), () -> "RDMA (softrdma) is not available: " + Verbs.unavailabilityCause());
        return Verbs.openFirst();
    }

    /** RC pair, both regions with every right, connected with the default options. */
    static Rig rc() {
        return create(QpType.RC, ConnectOptions.defaults(), Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ,
                Access.REMOTE_ATOMIC);
    }

    static Rig create(QpType type, ConnectOptions options, Access... access) {
        Context ctx = open();
        if (iwarp(ctx)) {
            ctx.close();
            assumeHandConnect(ctx);
        }
        ProtectionDomain pd = null;
        CompletionQueue cqA = null;
        CompletionQueue cqB = null;
        QueuePair a = null;
        QueuePair b = null;
        MemoryRegion mrA = null;
        MemoryRegion mrB = null;
        try {
            pd = ctx.allocatePd();
            cqA = ctx.createCq(64);
            cqB = ctx.createCq(64);
            a = pd.queuePair(type).cq(cqA).maxSendWr(32).maxRecvWr(32).maxSendSge(4).maxRecvSge(4).maxInline(64).build();
            b = pd.queuePair(type).cq(cqB).maxSendWr(32).maxRecvWr(32).maxSendSge(4).maxRecvSge(4).maxInline(64).build();
            mrA = pd.allocate(SIZE, access);
            mrB = pd.allocate(SIZE, access);
            if (type == QpType.UD) {
                a.activate(options);
                b.activate(options);
            } else {
                Endpoint ea = a.endpoint();
                Endpoint eb = b.endpoint();
                a.connect(eb, options);
                b.connect(ea, options);
            }
            return new Rig(ctx, pd, cqA, cqB, a, b, mrA, mrB);
        } catch (RuntimeException | Error e) {
            closeQuietly(mrB, mrA, b, a, cqB, cqA, pd, ctx);
            throw e;
        }
    }

    /** Waits up to 5 s for one completion on {@code cq} and returns it (a view valid until the next poll). */
    Completion next(CompletionQueue cq) {
        return next(cq, Duration.ofSeconds(5));
    }

    Completion next(CompletionQueue cq, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            if (cq.poll(one) == 1) {
                return one.get(0);
            }
            Thread.onSpinWait();
        }
        fail("no completion on " + cq + " within " + timeout);
        return null;
    }

    private final Completions one = new Completions(1);

    /** Waits for one successful completion and returns it. */
    Completion ok(CompletionQueue cq) {
        Completion wc = next(cq);
        if (!wc.ok()) {
            throw wc.error();
        }
        return wc;
    }

    /**
     * Waits up to {@code timeout} for one completion on {@code cq}, polled into {@code wcs}, and
     * returns it (a view valid until the next poll); a failed one is thrown as its error.
     */
    static Completion okWithin(CompletionQueue cq, Completions wcs, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            if (cq.poll(wcs) > 0) {
                Completion wc = wcs.get(0);
                if (!wc.ok()) {
                    throw wc.error();
                }
                return wc;
            }
            Thread.onSpinWait();
        }
        throw new AssertionError("no completion within " + timeout.toSeconds() + " s");
    }

    static void closeQuietly(AutoCloseable... all) {
        for (AutoCloseable c : all) {
            if (c != null) {
                try {
                    c.close();
                } catch (Exception ignored) {
                    // best effort in the failure path of a fixture
                }
            }
        }
    }

    @Override
    public void close() {
        mrB.close();
        mrA.close();
        b.close();
        a.close();
        cqB.close();
        cqA.close();
        pd.close();
        ctx.close();
    }
}
