package io.github.verbs4j;

import io.github.verbs4j.internal.InFlight;
import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.internal.NativeHandle;
import io.github.verbs4j.internal.Telemetry;
import io.github.verbs4j.internal.Tuning;
import io.github.verbs4j.raw.ContextOps;
import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.ExtendedOps;
import io.github.verbs4j.raw.VerbsFunctions;
import io.github.verbs4j.raw.WorkCompletionLayout;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.ref.Reference;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A completion queue ({@code struct ibv_cq}), classic or extended ({@code struct ibv_cq_ex},
 * from {@link Context#createExtendedCq}, which also polls through {@link #startPoll()}).
 *
 * <pre>{@code
 * Completions wcs = cq.completions(16);
 * int n = cq.poll(wcs);                       // ibv_poll_cq: no allocation
 * for (int i = 0; i < n; i++) {
 *     Completion wc = wcs.get(i);
 *     if (!wc.ok()) throw wc.error();
 * }
 * }</pre>
 *
 * <p><b>Hot path</b>: {@link #poll} and {@link #requestNotify} call the provider's
 * {@code ops.poll_cq} / {@code ops.req_notify_cq} (read once, at creation) through critical
 * downcalls; they allocate nothing.
 *
 * <p><b>Lifecycle</b>: {@link #close()} ({@code ibv_destroy_cq}) first acknowledges the events
 * taken from its channel, and refuses while queue pairs or SRQs use the queue. Idempotent;
 * {@link #poll} after close throws {@link IllegalStateException}.
 *
 * <p><b>Thread-safety</b>: {@code poll} from one thread at a time per batch; rdma-core providers
 * lock the queue, so several threads may poll into their own batches. A close waits for the
 * polls in flight on other threads (the close guard). A queue polled by one thread only can be
 * {@linkplain #confine() confined} to it: its polls then skip the guard's mark.
 */
public final class CompletionQueue implements AutoCloseable {

    /** Acknowledge channel events in batches of this size (ibv_ack_cq_events takes a mutex). */
    private static final int ACK_BATCH = 16;

    final Context context;
    /** The {@code ibv_cq}: every call passes {@code handle.segment()}, so close waits for calls in flight. */
    final NativeHandle handle;
    final Lifecycle life = new Lifecycle();
    private final CompletionChannel channel;
    private final MemorySegment pollFn;
    private final MemorySegment notifyFn;
    /** The close guard's record of the thread that armed this queue last (requestNotify). */
    private InFlight notifyMark = InFlight.of(null); // the creating thread's record (why: InFlight's class comment)
    private final AtomicInteger unackedEvents = new AtomicInteger();
    /**
     * The thread this queue is confined to ({@link #confine()}), or null: shared. Read first by
     * {@link #poll} and {@link #requestNotify}, as {@code QueuePair}'s.
     */
    private volatile Thread confinedTo;
    /**
     * What {@link #poll} and {@link #requestNotify} read first: null for a shared queue, whose
     * calls take the shared path; {@link #confinedTo} while a confined queue is open, where the
     * owner thread finds itself and calls with no mark; {@link Lifecycle#NOT_TAKING_CALLS} once
     * a close of a confined queue began (set by the lifecycle's watcher), where no thread finds
     * itself. A thread that does not find itself takes the confined slow path: a thread other
     * than the owner gets {@link WrongThreadException} in every state, the owner "is closed".
     */
    private volatile Thread pollOwner;
    /** {@code handle.address()}, for the confined path (one load fewer). */
    private final long address;

    /** The extended polling interface ({@code ibv_create_cq_ex}), or null for a classic queue. */
    private final PollSession pollSession;

    CompletionQueue(Context context, MemorySegment cq, CompletionChannel channel) {
        this(context, cq, channel, -1L);
    }

    /** {@code wcFields} &lt; 0: a classic queue; else the {@code IBV_WC_EX_WITH_*} bits of an extended one. */
    CompletionQueue(Context context, MemorySegment cq, CompletionChannel channel, long wcFields) {
        this.context = context;
        this.handle = new NativeHandle(cq, wcFields < 0 ? WorkCompletionLayout.CQ_SIZE : ExtendedOps.CQ_EX_SIZE);
        this.channel = channel;
        this.pollFn = ContextOps.function(context.ctx, ContextOps.POLL_CQ_OFFSET, "ibv_poll_cq");
        this.notifyFn = ContextOps.function(context.ctx, ContextOps.REQ_NOTIFY_CQ_OFFSET, "ibv_req_notify_cq");
        this.pollSession = wcFields < 0 ? null : new PollSession(this, handle.pointer(), wcFields);
        this.address = handle.address();
        life.watch(this::refreshOwner);
    }

    /** Whether the queue was created by {@link Context#createExtendedCq} ({@code ibv_create_cq_ex}). */
    public boolean isExtended() {
        return pollSession != null;
    }

    /**
     * Starts a pass over the queue's completions through the extended CQ interface
     * ({@code ibv_start_poll}); see {@link PollSession}. Returns this queue's one session
     * object: nothing is allocated.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} for a classic queue, while a pass is
     * already open, or after close; {@link VerbsException} when start_poll fails with an errno
     * other than ENOENT (which means empty: {@link PollSession#next()} then returns false).
     */
    public PollSession startPoll() {
        Thread owner = confinedTo;
        if (owner != null && owner != Thread.currentThread()) {
            throw Lifecycle.wrongThread(this, owner, "startPoll");
        }
        life.ensureOpen(this);
        if (pollSession == null) {
            throw new IllegalStateException(this + " is a classic completion queue: create it with"
                    + " Context.createExtendedCq to poll through ibv_cq_ex");
        }
        return pollSession.begin();
    }

    /** The number of entries the device gave the queue ({@code cqe}, at least what was asked). */
    public int capacity() {
        life.ensureOpen(this);
        return WorkCompletionLayout.cqe(handle.pointer());
    }

    /** The channel the queue signals, or {@code null}. */
    public CompletionChannel channel() {
        return channel;
    }

    /**
     * One empty poll in this many (a power of two) gives the JVM a safepoint ({@link #afterEmptyPolls}).
     * 1,024 polls of an empty queue take tens of microseconds, so a GC waits at most that long
     * for a spinning poller, and the cost is one short native call per 1,024 empty polls.
     */
    static final int SAFEPOINT_EVERY_EMPTY_POLLS_MASK = 1023;

    /**
     * One empty poll in this many (a power of two, a multiple of 1,024; default 4,096) also hands
     * the CPU away ({@link Thread#yield}); {@code -Dverbs4j.emptyPollYieldEvery=0} never does
     * (a poller with a core of its own). Read once, through {@link Tuning} (a bad value: one
     * warning, and the default).
     */
    static final int YIELD_EVERY_EMPTY_POLLS_MASK = yieldMask(Tuning.intProperty("verbs4j.emptyPollYieldEvery", 4096,
            every -> every == 0 || (Long.bitCount(every) == 1 && every >= SAFEPOINT_EVERY_EMPTY_POLLS_MASK + 1),
            "0 or a power of two >= " + (SAFEPOINT_EVERY_EMPTY_POLLS_MASK + 1)));

    private static int yieldMask(int every) {
        // (count & -1) == 0 only for a count of 0, which the wrapping counter reaches once per 2^32
        return every == 0 ? -1 : every - 1;
    }

    /**
     * The empty-poll counter's rare path, every 1,024th empty poll ({@code count}: the counter, a
     * multiple of 1,024): the safepoint call ({@link #letTheJvmStop}, about 8 ns), and on every
     * 4th of them ({@link #YIELD_EVERY_EMPTY_POLLS_MASK}) a {@link Thread#yield} instead (a native
     * call with the transition too, so also a safepoint), which hands the CPU to a peer thread
     * sharing it: on a provider that never yields itself (a NIC's; softrdma yields every 8th
     * empty poll), two threads of an in-process ping-pong pinned to one CPU took 26-32 us per
     * round trip with a yield per 1,024 empty polls, 89-97 us with one per 4,096, and 4.1 ms (a
     * scheduler time slice per hop) with none; the yield costs about 1.4 us here, so 0.35 ns per
     * empty poll at 4,096 where it was 1.4 at 1,024 (docs/measurements/performance.md, "The empty
     * poll's safepoint without `sched_yield`").
     */
    static void afterEmptyPolls(int count) {
        if ((count & YIELD_EVERY_EMPTY_POLLS_MASK) == 0) {
            Thread.yield(); // to give the CPU away (and a safepoint check on return)
        } else {
            letTheJvmStop();
        }
    }

    /**
     * libc's {@code long labs(long)} through a <em>non-critical</em> downcall: a call into C with
     * the thread-state transition, and so a safepoint check on its way back, but no system call
     * ({@link #letTheJvmStop}). A libc without {@code labs} (none known) gets {@link Thread#yield}.
     */
    private static final MethodHandle SAFEPOINT_CALL = safepointCall();

    private static MethodHandle safepointCall() {
        Linker linker = Linker.nativeLinker();
        return linker.defaultLookup().find("labs")
                .map(labs -> linker.downcallHandle(labs,
                        FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG)))
                .orElseGet(() -> {
                    try {
                        return MethodHandles.lookup().findStatic(CompletionQueue.class, "yieldInstead",
                                MethodType.methodType(long.class, long.class));
                    } catch (ReflectiveOperationException e) {
                        throw new ExceptionInInitializerError(e);
                    }
                });
    }

    @SuppressWarnings("unused") // found by name in safepointCall
    private static long yieldInstead(long x) {
        Thread.yield();
        return x;
    }

    /**
     * Gives the JVM a safepoint. The provider's poll is a critical downcall (no thread-state
     * transition, so no safepoint check), and the JIT drops the safepoint check of a loop that
     * makes a call on every pass (a call is a safepoint for Java callees): a loop such as
     * {@code while (cq.poll(wcs) == 0) {}} then never reaches a safepoint while the queue stays
     * empty, so a GC or any other stop-the-world operation waits for it, and if the completion it
     * waits for must come from another thread of the same JVM (an in-process peer that needs to
     * allocate), nothing ever moves again. Seen in a two-thread ping-pong in one JVM: one thread
     * spinning in poll, the other waiting for a GC that waited for the first (2026-11-28).
     *
     * <p>The call is libc's {@code labs} through a plain (non-critical) downcall: the thread goes
     * to native and back, and on the way back it stops if a safepoint or handshake is pending
     * (while it is in native the JVM counts it as stopped), with no system call. Until 2026-11-30
     * this was {@link Thread#yield} on every 1,024th empty poll, whose {@code sched_yield} costs
     * about 1.4 us on the 2-vCPU VM (1.4 ns per empty poll); the yield now comes every 4,096th
     * only, for its other purpose ({@link #afterEmptyPolls}). The spin-then-yield waits elsewhere
     * ({@code NativeHandle}, {@code InFlight.awaitClear}, the channel's drive loop) yield to give
     * the CPU away, not for a safepoint, and keep {@code Thread.yield}. Covered by
     * {@code EmptyPollSafepointTest}.
     */
    static void letTheJvmStop() {
        try {
            long unused = (long) SAFEPOINT_CALL.invokeExact(1L);
        } catch (Throwable t) {
            throw Downcalls.unexpected("labs", t);
        }
    }

    /** A new reusable batch of {@code capacity} completions for {@link #poll}. */
    public Completions completions(int capacity) {
        return new Completions(capacity);
    }

    /**
     * Takes up to {@code batch.capacity()} completions ({@code ibv_poll_cq}, through
     * {@code ops.poll_cq}).
     *
     * <p><b>Errors</b>: {@link VerbsException} when the provider reports a failure (negative
     * return); {@link IllegalStateException} after close.
     *
     * @return how many were taken (0 when the queue is empty); also {@code batch.count()}
     */
    public int poll(Completions batch) {
        Thread owner = pollOwner;
        if (owner != null) {
            return pollConfined(owner, batch); // confine(): the owner's poll publishes no mark
        }
        int n;
        // every pointer by address: a close waits for the mark (NativeHandle.enter), and the
        // segments' checks and session handling would cost more than the call (ContextOps). The
        // mark's retired check also stands for the owner's state check: it refuses from the
        // moment the close retires the handle (an instant after the state reads closing), so that
        // close() never waits on a stream of new calls; the refusal then says what the owner's
        // check said ("is closed"), read only on that path
        InFlight cached = batch.mark;
        InFlight mark;
        try {
            mark = handle.enter(cached, this, "ibv_poll_cq");
        } catch (IllegalStateException refused) {
            life.ensureOpen(this);
            throw refused;
        }
        if (mark != cached) {
            batch.mark = mark; // another thread used it last (or none): keep this thread's record
        }
        try {
            n = (int) ContextOps.POLL_CQ_ADDRESSES.invokeExact(pollFn, handle.address(), batch.capacity,
                    batch.arrayAddress);
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_poll_cq", t);
        } finally {
            mark.exit();
            // the batch (and the arena of its array) stays reachable until the provider returned
            Reference.reachabilityFence(batch);
        }
        return polled(batch, n);
    }

    /**
     * {@link #poll} on a confined, open queue ({@link #pollOwner}): on the owner thread, the
     * provider, with no mark (only this thread can close the queue, and it is here: see {@link #confine()}).
     */
    private int pollConfined(Thread owner, Completions batch) {
        if (owner != Thread.currentThread()) {
            refuseConfined("ibv_poll_cq");
        }
        int n;
        try {
            n = (int) ContextOps.POLL_CQ_ADDRESSES.invokeExact(pollFn, address, batch.capacity,
                    batch.arrayAddress);
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_poll_cq", t);
        } finally {
            Reference.reachabilityFence(batch);
        }
        return polled(batch, n);
    }

    /**
     * The confined paths' check when the owner field was not the current thread: throws
     * {@link WrongThreadException} on a thread other than the owner {@link #confine()} recorded
     * (in every state, first), and what the state refuses on the owner thread (a close begun or
     * done); returns when the queue is open again (a close that failed), for the owner's call.
     */
    private void refuseConfined(String what) {
        Thread owner = confinedTo;
        if (owner != Thread.currentThread()) {
            throw Lifecycle.wrongThread(this, owner, what);
        }
        life.ensureOpen(this);
    }

    /** Derives {@link #pollOwner} from the confinement and the lifecycle's state. */
    private synchronized void refreshOwner() {
        Thread owner = confinedTo;
        pollOwner = owner == null ? null : life.isOpen() ? owner : Lifecycle.NOT_TAKING_CALLS;
    }

    /** What {@link #poll} does with the provider's return {@code n}. */
    private int polled(Completions batch, int n) {
        batch.count = n;
        if (n > 0) {
            // tested first, as a caller's batch.get(i) tests i < count: with the count just stored
            // C2 folds that test of get(0) into this one
            if (Telemetry.errorCompletionsEnabled()) {
                for (int i = 0; i < n; i++) {
                    Completion wc = batch.get(i);
                    if (!wc.ok()) {
                        Telemetry.errorCompletion(wc.qpNumber(), wc.wrId(), wc.status().toString(), wc.vendorError());
                    }
                }
            }
            return n;
        }
        if (n < 0) {
            batch.count = 0;
            throw new VerbsException("ibv_poll_cq", 0, "the provider returned " + n);
        }
        int empty = ++batch.emptyPolls;
        if ((empty & SAFEPOINT_EVERY_EMPTY_POLLS_MASK) == 0) {
            afterEmptyPolls(empty);
        }
        return 0;
    }

    /**
     * Arms the queue to signal its channel on the next completion ({@code ibv_req_notify_cq}):
     * any completion, or with {@code solicitedOnly} only solicited receives and errors.
     *
     * <p><b>Errors</b>: {@link VerbsException} with the provider's errno;
     * {@link IllegalStateException} after close.
     */
    public void requestNotify(boolean solicitedOnly) {
        Thread owner = pollOwner;
        if (owner != null) {
            requestNotifyConfined(owner, solicitedOnly);
            return;
        }
        // refused from the moment a close begins, so that close() never waits on a stream of new calls
        life.ensureOpen(this);
        int rc;
        // the record cached in the queue, as posts and polls cache it in their request objects:
        // taken only when it is this thread's (InFlight.of), so a queue armed by several threads
        // is correct too, each paying the thread-local lookup when another armed it last
        InFlight cached = notifyMark;
        InFlight mark = handle.enter(cached, this, "ibv_req_notify_cq");
        if (mark != cached) {
            notifyMark = mark;
        }
        try {
            rc = (int) ContextOps.REQ_NOTIFY_CQ_ADDRESS.invokeExact(notifyFn, handle.address(), solicitedOnly ? 1 : 0);
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_req_notify_cq", t);
        } finally {
            mark.exit();
        }
        if (rc != 0) {
            throw VerbsException.of("ibv_req_notify_cq", Math.abs(rc));
        }
    }

    /** {@link #requestNotify} on a confined queue: as {@link #pollConfined}. */
    private void requestNotifyConfined(Thread owner, boolean solicitedOnly) {
        if (owner != Thread.currentThread()) {
            refuseConfined("ibv_req_notify_cq");
        }
        int rc;
        try {
            rc = (int) ContextOps.REQ_NOTIFY_CQ_ADDRESS.invokeExact(notifyFn, address, solicitedOnly ? 1 : 0);
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_req_notify_cq", t);
        }
        if (rc != 0) {
            throw VerbsException.of("ibv_req_notify_cq", Math.abs(rc));
        }
    }

    /**
     * Confines this queue to the calling thread, as {@link Arena#ofConfined()} confines a
     * segment: from now on that thread's {@link #poll} and {@link #requestNotify} call the
     * provider without the close guard's mark (a load of the owner, which the queue keeps only
     * while it is open, compared with {@link Thread#currentThread()}, the downcall), and only that thread may close
     * the queue. With {@link QueuePair#confine()}, the fast form for a thread that owns its queue
     * pair and its queues. {@link #resize}, {@link #capacity()} and the channel's events stay open to every
     * thread. Calling it again on the owner thread does nothing. Irreversible.
     *
     * <p>Not for a queue that a layer or another thread closes (the queues of
     * {@code RdmaConnection}, of the channel and transfer layers, and a queue whose channel's
     * events another thread takes and re-arms): they must stay shared. (The netty transport's
     * event loop creates, polls, arms and destroys its connections' queues alone, and confines them.)
     *
     * <p><b>Errors</b>: {@link WrongThreadException} when the queue is confined to another
     * thread; {@link IllegalStateException} when it is closed or being closed. After the
     * confinement: {@link WrongThreadException} naming this queue and the owner thread from a
     * poll, a notify request (in any state: before "is closed"), a {@link #startPoll()} or a {@link #close()} on any other thread
     * (nothing is polled or armed, the queue stays open), and from the close of its context or
     * channel on another thread while the queue is open (nothing is closed). When the owner
     * thread has ended, any thread may close the queue.
     *
     * @return this queue
     */
    public CompletionQueue confine() {
        if (life.confine(this)) {
            confinedTo = Thread.currentThread();
            refreshOwner();
        }
        return this;
    }

    /** The thread this queue is {@linkplain #confine() confined} to, or empty when it is shared (the default). */
    public java.util.Optional<Thread> confinedTo() {
        return java.util.Optional.ofNullable(confinedTo);
    }

    /**
     * Resizes the queue ({@code ibv_resize_cq}) to hold at least {@code entries}.
     *
     * <p><b>Errors</b>: {@link VerbsException} (EINVAL when fewer entries than completions
     * present or more than max_cqe, EOPNOTSUPP when the device cannot resize).
     */
    public void resize(int entries) {
        life.ensureOpen(this);
        if (entries < 1) {
            throw new IllegalArgumentException("a completion queue needs at least 1 entry, asked for " + entries);
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            int rc = (int) VerbsFunctions.need(VerbsFunctions.RESIZE_CQ, "ibv_resize_cq").invokeExact(errno, handle.segment(), entries);
            if (rc != 0) {
                throw new VerbsException("ibv_resize_cq", Downcalls.errnoOf(rc, errno), entries + " entries");
            }
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_resize_cq", t);
        }
    }

    void eventReceived() {
        if (unackedEvents.incrementAndGet() >= ACK_BATCH) {
            acknowledgeEvents();
        }
    }

    /**
     * Where {@code ibv_ack_cq_events} (a void function) leaves errno: never read, so shared by
     * every queue and thread, and an acknowledgement allocates nothing.
     */
    private static final MemorySegment ACK_ERRNO = Downcalls.errnoSegment(Arena.global());

    /** Acknowledges the events taken so far ({@code ibv_ack_cq_events}). */
    private void acknowledgeEvents() {
        int n = unackedEvents.getAndSet(0);
        if (n > 0) {
            try {
                VerbsFunctions.need(VerbsFunctions.ACK_CQ_EVENTS, "ibv_ack_cq_events").invokeExact(ACK_ERRNO, handle.pointer(), n);
            } catch (Throwable t) {
                throw Downcalls.unexpected("ibv_ack_cq_events", t);
            }
        }
    }

    /** Events taken from the channel and not yet acknowledged (for tests and diagnostics). */
    int unacknowledgedEvents() {
        return unackedEvents.get();
    }

    /**
     * Acknowledges outstanding channel events, then destroys the queue ({@code ibv_destroy_cq}).
     * Idempotent.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} naming queue pairs or SRQs still using the
     * queue; {@link WrongThreadException} on a thread other than the one a
     * {@linkplain #confine() confined} queue (or a confined QP using it) belongs to, while that
     * thread lives (nothing is closed); {@link VerbsException} (EBUSY).
     */
    @Override
    public void close() {
        if (pollSession != null && pollSession.isOpen() && !life.isClosed()) {
            throw new IllegalStateException("cannot close " + this + " inside a polling session: close the PollSession first");
        }
        life.close(this, handle, () -> {
            acknowledgeEvents();
            Lifecycle.destroyVerb("ibv_destroy_cq", VerbsFunctions.DESTROY_CQ, handle.pointer());
        }, () -> {
            if (channel != null) {
                channel.detach(this);
            }
            context.removeChild(handle.pointer(), this);
            context.life.removeDependent(this);
        });
    }

    /** Whether {@link #close()} completed. */
    public boolean isClosed() {
        return life.isClosed();
    }

    @Override
    public String toString() {
        return "CompletionQueue[0x" + Long.toHexString(handle.pointer().address()) + "]";
    }
}
