package io.github.verbs4j.netty;

import io.github.verbs4j.CompletionChannel;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Context;
import io.github.verbs4j.PollSet;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.VerbsException;
import io.netty.channel.IoHandle;
import io.netty.channel.IoHandler;
import io.netty.channel.IoHandlerContext;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.IoOps;
import io.netty.channel.IoRegistration;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.concurrent.ThreadAwareExecutor;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

/**
 * The I/O handler of an RDMA event loop: {@code new MultiThreadIoEventLoopGroup(n, RdmaIoHandler.newFactory())}.
 *
 * <p>Each loop owns, per RDMA device its channels use, a completion channel and a protection
 * domain; each connection's completion queue signals that loop's completion channel. A pass of
 * {@link #run} polls every connection's completion queue. When a pass finds nothing for longer
 * than the busy-poll budget, the loop arms notification on every queue, polls once more (a
 * completion may have landed before the arm), and blocks in one {@code poll(2)} over the
 * completion channels, the rdma_cm event channels of its channels, an eventfd that
 * {@link #wakeup()} writes and a timerfd armed for the next scheduled task: an idle loop costs no
 * CPU, a task from another thread wakes it at once, and a scheduled task runs when it is due,
 * not up to a millisecond later ({@code poll(2)}'s own timeout is whole milliseconds).
 *
 * <p>In Netty's auto-scaling groups an idle loop without registrations is suspended and resumes
 * on a new thread, as Netty's own loops do (docs/netty.md, "Auto-scaling groups"); a loop that
 * still holds a connection's queues, which are confined to its thread, is kept from suspending.
 */
public final class RdmaIoHandler implements IoHandler {

    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RdmaIoHandler.class);

    /**
     * Time between two non-blocking looks (one {@code poll(2)} each) at the CM event channels
     * while the loop is busy, so that a disconnect is seen under load too. By time, not by
     * passes: every 64 passes was 0.13 to 0.16 {@code poll(2)} calls per round trip of a 64 B
     * ping-pong on each side (docs/measurements/netty.md, "The two-process echo"), for events that come once
     * per connection.
     */
    private static final long CM_CHECK_NANOS = TimeUnit.MICROSECONDS.toNanos(500);

    private final ThreadAwareExecutor executor;
    private final RdmaTransportOptions options;
    private final Arena arena = Arena.ofShared();
    private final int wakeupFd;
    /**
     * Ends a blocking wait at the next scheduled task's deadline to the nanosecond. Without it
     * the wait's timeout, rounded up to whole milliseconds, overslept short timers by up to a
     * millisecond each: a sender that retried every 20 µs (Netty's usual schedule-and-retry
     * writer) slept a millisecond per 64 KiB write whenever its loop blocked between two
     * (docs/netty.md, "Benchmarks").
     */
    private final int timerFd;
    private final MemorySegment timerSpec;
    /** The deadline (System.nanoTime) {@link #timerFd} is armed for; {@link #TIMER_IDLE} when it is not armed. */
    private long timerDeadline = TIMER_IDLE;
    private static final long TIMER_IDLE = Long.MIN_VALUE;
    /** The owner entry of {@link #timerFd} in {@link #pollOwners}. */
    private static final Object TIMER = new Object();
    /**
     * How many {@link #wakeup()} calls are writing to {@link #wakeupFd} now, plus
     * {@code Integer.MIN_VALUE} once {@link #destroy()} began: destroy waits until no write is
     * in flight before it closes the fd (whose number another open could take) and the arena
     * (which a write in flight holds).
     */
    private final AtomicInteger wakeups = new AtomicInteger();
    private final MemorySegment one;
    private final MemorySegment drain;
    private final List<Registration> registrations = new ArrayList<>();
    /**
     * Channels closed for Netty (deregistered already) whose connections wait until the sends
     * before their CLOSE are acknowledged: polled on every pass, armed before the loop blocks.
     */
    private final List<RdmaSocketChannel> lingering = new ArrayList<>();
    /**
     * Connections whose queues this loop made and that have not released them: registered or
     * not (a channel deregistered from this loop keeps its queues, which belong to this loop's
     * thread); {@link #destroy()} releases what is left.
     */
    private final Set<RdmaSocketChannel> connections = ConcurrentHashMap.newKeySet();
    /** Scheduled while {@link #connections} are held with no registration: see {@link #updateSuspendGuard()}. Loop only. */
    private ScheduledFuture<?> suspendGuard;
    private static final Runnable SUSPEND_GUARD = () -> { };
    /** Per device, made on first use by a channel's setup (on this loop since setup moved there; {@link #device} stays thread-safe). */
    private final Map<Context, Device> devices = new ConcurrentHashMap<>();
    private volatile boolean pollSetStale = true;
    private final PollSet pollSet = new PollSet();
    /** What each entry of pollSet is: the handle whose CM fd it is, a device, {@link #TIMER}, or null for the wakeup fd. */
    private Object[] pollOwners = new Object[0];
    /**
     * Set from just before the loop's blocking wait until it returned: {@link #wakeup()} writes
     * the eventfd only then, and clears it, so that one write wakes the wait.
     */
    private volatile boolean sleeping;
    private static final VarHandle SLEEPING;

    static {
        try {
            SLEEPING = MethodHandles.lookup().findVarHandle(RdmaIoHandler.class, "sleeping", boolean.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /**
     * Busy passes per clock read (a power of two). Reading the clock on every pass was 11 to 15 %
     * of a busy loop's CPU time in the two-process 64 B echo, a pass being one empty
     * {@code ibv_poll_cq} of a few hundred nanoseconds (docs/measurements/netty.md, "Where a round trip's
     * passes go"); 32 passes are microseconds, against a busy-poll budget of tens of them and a
     * CM look every 500.
     */
    static final int CLOCK_EVERY_PASSES = 32;
    /**
     * Passes one {@link #run} makes at most while they find nothing, before it returns to
     * Netty's loop (which then looks at its task queues). A busy loop's pass that finds nothing
     * was also a round of Netty's loop (its scheduled-task, task and tail-task queues, its
     * shutdown checks) around one empty {@code ibv_poll_cq}, and the two-process 64 B echo makes
     * eight such passes per hop (docs/measurements/netty.md, "Where a round trip's passes go"); the spin polls
     * again at once instead. It ends at the first pass with work and at the clock's pass, so the
     * budget and the CM look keep their schedule; a task from another thread or a timer that
     * falls due waits for at most this many empty passes (a few microseconds) more.
     */
    static final int SPIN_PASSES = 8;
    private int passesSinceClock;
    /** A loop that blocks on its first empty pass (EVENT, or no busy-poll budget) decides on every pass. */
    private final boolean clockEveryPass;
    /** Work was found since the last clock read: {@link #lastWorkNanos} is set at the next one. */
    private boolean workSinceClock;
    /**
     * Passes (one poll of every channel's queue each), the clock reads they made, and the calls
     * of {@link #run} by Netty's loop, all and those that found nothing: how a test sees the cost
     * of a busy pass. Loop only.
     */
    long passes;
    long clockReads;
    long runs;
    long emptyRuns;
    /** Active I/O time reported to Netty ({@code IoHandlerContext.reportActiveIoTime}), in all: for tests. Loop only. */
    long activeIoNanos;

    private long lastWorkNanos = System.nanoTime();
    private long lastCmCheckNanos = lastWorkNanos;
    /** The last clock read of the loop (System.nanoTime): the start of the passes the next report of active I/O time covers. */
    private long lastClockNanos = lastWorkNanos;
    /**
     * Blocking waits of every RDMA loop of this JVM, for tests of steady-state allocation: a wait
     * costs a {@code poll(2)} downcall, whose allocation (if any) is per wait, not per message.
     */
    private static final LongAdder BLOCKING_WAITS = new LongAdder();
    /** Blocking waits of every RDMA loop of this JVM that the timer ended: for tests. */
    private static final LongAdder TIMER_EXPIRIES = new LongAdder();
    /** Writes of the wakeup eventfd by every RDMA loop's {@link #wakeup()} in this JVM: for tests and benchmarks. */
    private static final LongAdder WAKEUP_WRITES = new LongAdder();
    /** Non-blocking looks at the CM event channels while busy ({@link #CM_CHECK_NANOS}): for tests and benchmarks. */
    private static final LongAdder CM_CHECKS = new LongAdder();

    /**
     * A device's resources on this loop. The protection domain is held by the loop until it ends
     * and by each connection's receive ring until the ring's memory is freed (with the channel's
     * release, or with the release of the last zero-copy buffer read from it, which may come after
     * the loop ended): the last holder closes it.
     */
    static final class Device {
        final Context context;
        final ProtectionDomain pd;
        final CompletionChannel completions;
        /** The loop's hold (until {@link #destroy()}) and one per receive ring whose region lies in {@link #pd}. */
        private final AtomicInteger holds = new AtomicInteger(1);

        Device(Context context) {
            this.context = context;
            this.pd = context.allocatePd();
            try {
                this.completions = context.createCompletionChannel();
            } catch (RuntimeException e) {
                pd.close();
                throw e;
            }
        }

        /** A receive ring's region was made in {@link #pd}. On the loop, which holds the domain still. */
        void hold() {
            holds.incrementAndGet();
        }

        /**
         * A holder let go (the loop as it ended, a ring whose region was closed); the last one
         * closes the domain. Any thread: a zero-copy buffer is released where the application
         * releases it.
         */
        void release() {
            if (holds.decrementAndGet() == 0) {
                try {
                    pd.close();
                } catch (RuntimeException e) {
                    // something else in the domain was not closed: a leak to report
                    logger.warn("closing the protection domain of an ended RDMA event loop", e);
                }
            }
        }
    }

    private RdmaIoHandler(ThreadAwareExecutor executor, RdmaTransportOptions options) {
        Rdma.ensureAvailability();
        this.executor = executor;
        this.options = options;
        this.clockEveryPass = options.mode() == RdmaNotificationMode.EVENT
                || (options.mode() == RdmaNotificationMode.ADAPTIVE && options.busyPollNanos() == 0);
        this.wakeupFd = Syscalls.eventfd();
        try {
            this.timerFd = Syscalls.timerfd();
        } catch (RuntimeException e) {
            Syscalls.close(wakeupFd);
            arena.close();
            throw e;
        }
        this.timerSpec = arena.allocate(Syscalls.ITIMERSPEC_SIZE);
        this.one = arena.allocate(ValueLayout.JAVA_LONG);
        one.set(ValueLayout.JAVA_LONG, 0, 1L);
        this.drain = arena.allocate(ValueLayout.JAVA_LONG);
    }

    /** A factory with {@link RdmaTransportOptions#defaults()}. */
    public static IoHandlerFactory newFactory() {
        return newFactory(RdmaTransportOptions.defaults());
    }

    /**
     * A factory for {@code new MultiThreadIoEventLoopGroup(n, factory)}.
     *
     * @throws UnsatisfiedLinkError from {@link Rdma#ensureAvailability()} when RDMA cannot be used here
     */
    public static IoHandlerFactory newFactory(RdmaTransportOptions options) {
        Objects.requireNonNull(options, "options");
        Rdma.ensureAvailability();
        return new IoHandlerFactory() {
            @Override
            public IoHandler newHandler(ThreadAwareExecutor executor) {
                return new RdmaIoHandler(executor, options);
            }

            /**
             * True, as for Netty's NIO, epoll and io_uring handlers: what makes a loop suspendable in
             * an auto-scaling group ({@code AutoScalingEventExecutorChooserFactory}); a suspended
             * loop's thread ends and the loop resumes on a new one. Without it every trySuspend
             * was refused and an idle group never scaled down. The handler's own state (eventfd,
             * timerfd, poll set, each device's domain and completion channel) is no thread's; the
             * one thing bound to the loop's thread is a connection's confined queues, and the
             * handler keeps a loop that holds any from suspending ({@link #updateSuspendGuard}).
             */
            @Override
            public boolean isChangingThreadSupported() {
                return true;
            }
        };
    }

    /** How many times the RDMA loops of this JVM blocked in {@code poll(2)} so far: for tests. */
    static long blockingWaits() {
        return BLOCKING_WAITS.sum();
    }

    /** How many blocking waits of the RDMA loops of this JVM the scheduled-task timer ended: for tests. */
    static long timerExpiries() {
        return TIMER_EXPIRIES.sum();
    }

    /** How many times {@link #wakeup()} wrote a loop's eventfd in this JVM so far: for tests and benchmarks. */
    static long wakeupWrites() {
        return WAKEUP_WRITES.sum();
    }

    /** How many non-blocking {@code poll(2)} looks at the CM event channels busy loops of this JVM made: for tests and benchmarks. */
    static long cmChecks() {
        return CM_CHECKS.sum();
    }

    /** The options this loop runs with. */
    RdmaTransportOptions options() {
        return options;
    }

    /** This loop's resources for the device of {@code context}; made on first use. Thread-safe. */
    Device device(Context context) {
        Device d = devices.get(context);
        if (d != null) {
            return d;
        }
        d = devices.computeIfAbsent(context, Device::new);
        pollSetStale = true;
        wakeup();
        return d;
    }

    /** {@code channel}'s queues were made on this loop ({@link #destroy()} releases them if the channel did not). */
    void connectionOpened(RdmaSocketChannel channel) {
        connections.add(channel);
        updateSuspendGuard();
    }

    /** {@code channel} released its queues. */
    void connectionReleased(RdmaSocketChannel channel) {
        connections.remove(channel);
        updateSuspendGuard();
    }

    /**
     * Keeps the loop from being suspended (auto-scaling groups) while it holds connections but no
     * registration: a channel deregistered with its queues, or a close waiting for its last
     * sends. Netty suspends a loop that has no registration, no task and no scheduled task, and
     * resumes it on a new thread; these connections' queues are confined to the thread that made
     * them, so on a resumed loop the next poll, the linger or the release would throw
     * {@code WrongThreadException}. A scheduled task is what keeps Netty's {@code canSuspend}
     * false: one that never runs (a day away, periodic), cancelled once the last such connection
     * is released or a channel is registered again. A loop the group asked to suspend meanwhile
     * takes no new channels from the group and suspends when the guard is cancelled. On the loop.
     */
    private void updateSuspendGuard() {
        if (!executor.isExecutorThread(Thread.currentThread())) {
            try {
                executor.execute(this::updateSuspendGuard);
            } catch (RejectedExecutionException e) {
                // the loop ended: nothing left to keep from suspending
            }
            return;
        }
        boolean want = registrations.isEmpty() && !connections.isEmpty();
        if (want && suspendGuard == null && executor instanceof EventExecutor loop && !loop.isShuttingDown()) {
            suspendGuard = loop.scheduleAtFixedRate(SUSPEND_GUARD, 1, 1, TimeUnit.DAYS);
        } else if (!want && suspendGuard != null) {
            suspendGuard.cancel(false);
            suspendGuard = null;
        }
    }

    /** Whether the suspension guard is in place: for tests. Loop only. */
    boolean suspendGuarded() {
        return suspendGuard != null;
    }

    /** A handle's CM fd changed (set up, closed): the poll set is rebuilt before the next wait. */
    void pollSetChanged() {
        pollSetStale = true;
    }

    /**
     * On the loop's thread as it starts, and as it resumes on a new thread after a suspension
     * (auto-scaling groups): the time it was suspended is not active I/O time.
     */
    @Override
    public void initialize() {
        lastClockNanos = System.nanoTime();
    }

    @Override
    public int run(IoHandlerContext context) {
        runs++;
        int work = run0(context);
        if (work == 0) {
            emptyRuns++;
        }
        return work;
    }

    private int run0(IoHandlerContext context) {
        if (clockEveryPass && context.shouldReportActiveIoTime()) {
            // a loop that reads the clock on every pass anyway times each pass from its start
            lastClockNanos = System.nanoTime();
        }
        int work = pollAll();
        passes++;
        if (!clockEveryPass) {
            // a busy pass reads no clock: the busy-poll budget and the CM look are checked on
            // every CLOCK_EVERY_PASSES-th pass; until then an empty pass is followed by the
            // next one here, SPIN_PASSES in all, not by a round of Netty's loop
            passesSinceClock++;
            for (int spun = 1; work == 0 && spun < SPIN_PASSES && passesSinceClock < CLOCK_EVERY_PASSES; spun++) {
                work = pollAll();
                passes++;
                passesSinceClock++;
            }
        }
        if (work > 0) {
            workSinceClock = true;
        }
        if (!clockEveryPass && passesSinceClock < CLOCK_EVERY_PASSES) {
            return work;
        }
        RdmaNotificationMode mode = options.mode();
        passesSinceClock = 0;
        clockReads++;
        long now = System.nanoTime();
        if (workSinceClock) {
            // the work was up to CLOCK_EVERY_PASSES passes ago: the budget runs that much longer
            workSinceClock = false;
            lastWorkNanos = now;
            if (context.shouldReportActiveIoTime()) {
                // auto-scaling's utilization: the passes since the last clock read found work,
                // counted whole (no clock read of its own on the busy path); a stretch of passes
                // that found nothing, and a blocking wait, count as idle
                context.reportActiveIoTime(now - lastClockNanos);
                activeIoNanos += now - lastClockNanos;
            }
        }
        lastClockNanos = now;
        if (now - lastCmCheckNanos >= CM_CHECK_NANOS) {
            lastCmCheckNanos = now;
            CM_CHECKS.increment();
            work += waitForEvents(0);
        }
        if (work > 0 || !context.canBlock()) {
            return work;
        }
        if (mode == RdmaNotificationMode.BUSY_POLL && !registrations.isEmpty()) {
            return 0;
        }
        if (mode == RdmaNotificationMode.ADAPTIVE && now - lastWorkNanos < options.busyPollNanos()) {
            return 0;
        }
        for (int i = 0; i < registrations.size(); i++) {
            registrations.get(i).handle.armCompletions();
        }
        for (int i = 0; i < lingering.size(); i++) {
            lingering.get(i).armLinger();
        }
        work = pollAll();
        if (work > 0) {
            workSinceClock = true;
            return work;
        }
        clockReads++;
        long delay = context.delayNanos(System.nanoTime());
        int timeoutMillis = delay == Long.MAX_VALUE ? -1 : (int) Math.min(Integer.MAX_VALUE, (delay + 999_999) / 1_000_000);
        if (delay != Long.MAX_VALUE) {
            armTimer(context.deadlineNanos(), delay);
        }
        // wakeup() writes the eventfd only while this is set; a task queued before it was set
        // is seen here, one queued after finds it set (both sides' accesses are volatile)
        sleeping = true;
        if (!context.canBlock()) {
            sleeping = false;
            return 0;
        }
        BLOCKING_WAITS.increment();
        work = waitForEvents(timeoutMillis);
        sleeping = false;
        boolean report = context.shouldReportActiveIoTime();
        long woke = report ? System.nanoTime() : 0;
        work += pollAll();
        clockReads++;
        lastWorkNanos = System.nanoTime();
        lastClockNanos = lastWorkNanos;
        if (report && work > 0) {
            // the wait is not active time: from its end
            context.reportActiveIoTime(lastWorkNanos - woke);
            activeIoNanos += lastWorkNanos - woke;
        }
        return work;
    }

    /**
     * Arms the timer for {@code deadline}, {@code delay} from now, unless it is armed for it
     * already (a wait that something else ended leaves it so): the millisecond timeout of the
     * wait stays as the backstop, and is what remains if the kernel refuses the timer.
     */
    private void armTimer(long deadline, long delay) {
        if (deadline == timerDeadline) {
            return;
        }
        timerDeadline = Syscalls.armTimer(timerFd, delay, timerSpec) == 0 ? deadline : TIMER_IDLE;
    }

    private int pollAll() {
        int work = 0;
        for (int i = 0; i < registrations.size(); i++) {
            work += registrations.get(i).handle.pollCompletions();
        }
        // from the end: a close that finishes takes itself out of the list
        for (int i = lingering.size() - 1; i >= 0; i--) {
            if (i < lingering.size() && lingering.get(i).pollLinger()) {
                work++;
            }
        }
        return work;
    }

    /** A closed channel's connection waits for its last sends' acknowledgement on this loop. */
    void linger(RdmaSocketChannel channel) {
        lingering.add(channel);
    }

    /** Its close finished. */
    void unlinger(RdmaSocketChannel channel) {
        lingering.remove(channel);
    }

    /** One {@code poll(2)}; handles the CM channels and completion channels it reports. */
    private int waitForEvents(int timeoutMillis) {
        if (pollSetStale) {
            rebuildPollSet();
        }
        int ready;
        try {
            ready = pollSet.await(timeoutMillis);
        } catch (VerbsException e) {
            // poll(2) itself failed (EINVAL, ENOMEM): the next pass rebuilds the set and waits again
            logger.debug("waiting on {}", pollSet, e);
            pollSetStale = true;
            return 0;
        }
        if (ready == 0) {
            return 0;
        }
        int work = 0;
        for (int i = 0; i < pollOwners.length; i++) {
            if (!pollSet.isReady(i)) {
                continue;
            }
            Object owner = pollOwners[i];
            if (owner == null) {
                Syscalls.read(wakeupFd, drain);
            } else if (owner == TIMER) {
                // expired (and so disarmed): the loop runs the task that is due next
                Syscalls.read(timerFd, drain);
                timerDeadline = TIMER_IDLE;
                TIMER_EXPIRIES.increment();
            } else if (owner instanceof Device d) {
                // take (and so acknowledge, in batches) the events; the queues are polled next
                while (d.completions.await(Duration.ZERO) != null) {
                    work++;
                }
            } else {
                Registration r = (Registration) owner;
                if (r.valid) {
                    r.handle.cmReadable();
                    work++;
                }
            }
        }
        return work;
    }

    private void rebuildPollSet() {
        pollSetStale = false;
        List<Object> owners = new ArrayList<>();
        pollSet.clear();
        owners.add(null);
        pollSet.add(wakeupFd);
        owners.add(TIMER);
        pollSet.add(timerFd);
        for (Device d : devices.values()) {
            owners.add(d);
            pollSet.add(d.completions.fd());
        }
        for (Registration r : registrations) {
            int fd = r.handle.cmFd();
            if (fd >= 0) {
                owners.add(r);
                pollSet.add(fd);
            }
        }
        pollOwners = owners.toArray();
    }

    @Override
    public IoRegistration register(IoHandle handle) {
        if (!(handle instanceof RdmaIoHandle h)) {
            throw new IllegalArgumentException("an RDMA event loop takes RDMA channels only, not " + handle);
        }
        if (executor instanceof EventExecutor loop && loop.isShuttingDown()) {
            // its last prepareToDestroy may have run already (a shutdown without a quiet period
            // runs the last tasks and ends): what registered now would outlive the loop open,
            // with queues made on it. Refused, Netty closes the channel (register0).
            throw new IllegalStateException("the RDMA event loop " + loop + " is shutting down: "
                    + handle + " cannot be registered with it");
        }
        Registration r = new Registration(h);
        registrations.add(r);
        pollSetStale = true;
        h.registered();
        updateSuspendGuard();
        return r;
    }

    @Override
    public void wakeup() {
        // Only a loop in (or entering) its blocking wait needs the eventfd: an awake one, and the
        // loop's own thread, look at the task queue before they block. Netty's execute() calls
        // this for every task, so gRPC's writes from application threads to a busy loop would
        // otherwise cost a write(2) each, and the loop a poll(2) and read(2) to drain it.
        if (!sleeping || executor.isExecutorThread(Thread.currentThread()) || !SLEEPING.compareAndSet(this, true, false)) {
            return;
        }
        // from any thread, also while or after the loop ends: then there is nothing to wake
        if (wakeups.getAndIncrement() >= 0) {
            try {
                WAKEUP_WRITES.increment();
                Syscalls.write(wakeupFd, one);
            } finally {
                wakeups.decrementAndGet();
            }
        } else {
            wakeups.decrementAndGet();
        }
    }

    @Override
    public boolean isCompatible(Class<? extends IoHandle> handleType) {
        return RdmaIoHandle.class.isAssignableFrom(handleType);
    }

    @Override
    public void prepareToDestroy() {
        for (Registration r : new ArrayList<>(registrations)) {
            try {
                r.handle.close();
            } catch (Exception e) {
                logger.warn("closing {} as its event loop ends", r.handle, e);
            }
        }
    }

    @Override
    public void destroy() {
        // the closes of prepareToDestroy: no later pass polls them, so their sends are awaited
        // here, 500 ms at most in all, on the ending loop's thread
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
        while (!lingering.isEmpty() && System.nanoTime() - deadline < 0) {
            if (pollAll() == 0) {
                Thread.onSpinWait();
            }
        }
        while (!lingering.isEmpty()) {
            lingering.get(lingering.size() - 1).finishClose();
        }
        // connections whose queues are still open: channels deregistered from this loop (and not
        // registered again nor closed); their queues are this thread's and go with it
        for (RdmaSocketChannel c : new ArrayList<>(connections)) {
            if (c.isRegistered() || !c.isOpen()) {
                // registered ones were closed by prepareToDestroy and closed ones released: a
                // connection still open here is one no designed path left, reported
                logger.warn("{}: its queues were still open as its event loop ended; released now", c);
            }
            c.releaseAtLoopEnd();
        }
        for (Device d : devices.values()) {
            try {
                d.completions.close();
            } catch (RuntimeException e) {
                // a completion queue still open: something above was not released, a leak to report
                logger.warn("releasing the RDMA resources of an ended event loop", e);
            }
            RdmaByteBufAllocator.forget(d.pd);
            // the domain closes now, or with the last zero-copy buffer still held (its ring's region)
            d.release();
        }
        devices.clear();
        wakeups.addAndGet(Integer.MIN_VALUE); // no new write from here on
        while (wakeups.get() != Integer.MIN_VALUE) {
            Thread.onSpinWait(); // a write in flight: one eventfd write(2), microseconds
        }
        Syscalls.close(wakeupFd);
        Syscalls.close(timerFd);
        arena.close();
    }

    /** Whether {@code cq} signals a completion channel of this loop. */
    boolean owns(CompletionQueue cq) {
        for (Device d : devices.values()) {
            if (cq.channel() == d.completions) {
                return true;
            }
        }
        return false;
    }

    ThreadAwareExecutor executor() {
        return executor;
    }

    private final class Registration implements IoRegistration {
        final RdmaIoHandle handle;
        boolean valid = true;

        Registration(RdmaIoHandle handle) {
            this.handle = handle;
        }

        @Override
        @SuppressWarnings("unchecked")
        public <T> T attachment() {
            return (T) RdmaIoHandler.this;
        }

        @Override
        public long submit(IoOps ops) {
            // the channels drive the handler through RdmaIoHandle; there are no interest ops
            return 0;
        }

        @Override
        public boolean isValid() {
            return valid;
        }

        @Override
        public boolean cancel() {
            if (!valid) {
                return false;
            }
            valid = false;
            if (executor.isExecutorThread(Thread.currentThread())) {
                remove();
            } else {
                executor.execute(this::remove);
            }
            return true;
        }

        private void remove() {
            registrations.remove(this);
            pollSetStale = true;
            handle.unregistered();
            updateSuspendGuard();
        }
    }
}
