package io.github.verbs4j.channel;

import io.github.verbs4j.Access;
import io.github.verbs4j.CloseState;
import io.github.verbs4j.Closer;
import io.github.verbs4j.Completion;
import io.github.verbs4j.CompletionChannel;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Completions;
import io.github.verbs4j.Context;
import io.github.verbs4j.Deadline;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.TransportType;
import io.github.verbs4j.cm.CmEvent;
import io.github.verbs4j.cm.CmId;
import io.github.verbs4j.cm.ConnectParameters;
import io.github.verbs4j.cm.EventChannel;
import io.github.verbs4j.cm.PortSpace;
import io.github.verbs4j.cm.QpInit;
import io.github.verbs4j.internal.Tuning;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Channels that share one protection domain, one completion queue and its completion channel,
 * and one polling thread: the thread takes the completions of every channel of the group,
 * spinning briefly ({@link ChannelOptions#spinPolls()}) and then blocking on the completion
 * channel's fd. A second thread reads the connection manager's events (disconnects) of the
 * group's channels. While an application thread waits in one of the channels' operations it
 * polls the queue itself and the polling thread stands down (docs/channel.md, "The waiting
 * thread polls"): the polling thread moves what nobody waits for, the waiting thread takes its
 * own message without a hand-off.
 *
 * <pre>{@code
 * try (ChannelGroup group = ChannelGroup.create(ChannelOptions.defaults());
 *      ChannelServer server = group.listen(new InetSocketAddress(0))) {
 *     Channel a = server.accept(Duration.ofSeconds(5));
 *     Channel b = server.accept(Duration.ofSeconds(5));    // same CQ, same thread
 * }
 * }</pre>
 *
 * <p><b>Application polling</b> ({@link ChannelOptions#applicationPolling()}): the group starts
 * no polling thread; a thread waiting in one of its channels' operations polls the completion
 * queue itself, one thread at a time, and hands what it takes for other channels of the group
 * to them. A channel is then driven only while some thread is inside one of its group's
 * channels' operations: a receiver waiting in {@code receive} keeps it going.
 *
 * <p>The device is the one of the first connection (the group binds to it then); a connection
 * over another device is refused.
 *
 * <p><b>Lifecycle</b>: {@link #close()} closes the group's channels and servers, stops its
 * threads and releases the queue, channel and domain. Idempotent; {@link #listen} and
 * {@link #connect} on a closed group throw {@link IllegalStateException}.
 *
 * <p><b>Thread-safety</b>: thread-safe.
 */
public final class ChannelGroup implements AutoCloseable {

    private static final Duration CM_SLICE = Duration.ofMillis(200);
    private static final Duration POLL_SLICE = Duration.ofMillis(100);
    /**
     * How long the polling thread parks while application threads poll, before it looks again:
     * the longest that completions wait for it after the last of them stopped polling with no
     * thread blocked (with one blocked, it is woken at once). 1 ms; a longer park was timed and
     * not kept (docs/measurements/channel.md, "Not kept"): {@code -Dverbs4j.channel.standDownMicros=N} sets
     * another for such A/B runs (read once; a bad value: one warning and the default, docs/guide.md,
     * "8.2 Tuning properties"). Package-private for {@code TuningPropertyTest}.
     */
    static final long STAND_DOWN_NANOS = standDownFromProperty();
    /**
     * The park of a stand-down: {@link #STAND_DOWN_NANOS}, or what a test holds it to
     * ({@link #holdStandDown}) to show what waits for the polling thread's own look.
     */
    private volatile long standDownNanos = STAND_DOWN_NANOS;
    private static final int MAX_CHANNELS = 1 << 15;

    private final ChannelOptions options;
    private final EventChannel monitor;
    private final Thread cmThread;
    private final Map<CmId, Channel> byId = new ConcurrentHashMap<>();
    private final ConcurrentLinkedQueue<Channel> disconnected = new ConcurrentLinkedQueue<>();
    private final List<ChannelServer> servers = new ArrayList<>();

    // guarded by this
    private Context context;
    private ProtectionDomain pd;
    private CompletionChannel completionChannel;
    private CompletionQueue cq;
    /** Written under this lock, read without it by the threads that wake it. */
    private volatile Thread poller;
    private final Channel[] table = new Channel[MAX_CHANNELS];
    private final int[] generations = new int[MAX_CHANNELS];
    private int nextIndex;
    private int open;
    private volatile boolean running = true;
    /** Begun under this lock, so that {@link #prepare} never adds a channel that close() misses. */
    private final CloseState state = new CloseState();
    private volatile Throwable pollerFailure;
    /**
     * How often the polling thread blocked on the completion channel: a test's measure. A wait
     * is not per message, and its code may run uncompiled (it runs rarely), where the JDK's errno
     * capture allocates a segment slice per downcall; the allocation tests allow for it per wait.
     */
    private volatile long blockingWaits;
    /** How often the polling thread stood down (parked) because application threads polled: a test's measure. */
    private volatile long standDowns;
    /** The queue, polled by one thread at a time (the polling thread or an application thread): {@link #drive()}. */
    private final ReentrantLock pollLock = new ReentrantLock();
    private volatile CompletionQueue polledCq;
    private Completions wcs;           // guarded by pollLock
    private final List<Channel> toCheck = new ArrayList<>(); // guarded by pollLock
    /**
     * With a polling thread: the application threads polling the queue while they wait
     * ({@link #beginPolling()}), and those blocked on a channel's monitor waiting for the queue
     * to move ({@link #beginBlocking()}). The polling thread stands down while the first is
     * above 0; the lost-wake-up argument is at {@link #endPolling()}.
     */
    private final AtomicInteger applicationPollers = new AtomicInteger();
    private final AtomicInteger blockedWaiters = new AtomicInteger();

    /**
     * {@link #STAND_DOWN_NANOS}: 1 ms, or {@code verbs4j.channel.standDownMicros} (1 µs to 10 s),
     * read through verbs-core's {@code internal.Tuning} (a bad value: one warning, and the default).
     */
    private static long standDownFromProperty() {
        return Tuning.longProperty("verbs4j.channel.standDownMicros", 1_000,
                micros -> micros >= 1 && micros <= 10_000_000, "1 to 10000000 microseconds") * 1_000;
    }

    private ChannelGroup(ChannelOptions options) {
        this.options = options;
        this.monitor = EventChannel.create(); // non-blocking: a close racing its read cannot hang it
        this.cmThread = Thread.ofPlatform().daemon().name("verbs4j-channel-cm").unstarted(this::cmLoop);
        cmThread.start();
        state.opened(this);
    }

    /**
     * A group whose channels use {@code options}.
     *
     * <p><b>Errors</b>: {@link io.github.verbs4j.VerbsException} when librdmacm has no event channel to give.
     */
    public static ChannelGroup create(ChannelOptions options) {
        return new ChannelGroup(Objects.requireNonNull(options, "options"));
    }

    /** The options of this group's channels. */
    public ChannelOptions options() {
        return options;
    }

    /** How many channels of this group are open. */
    public synchronized int channelCount() {
        return open;
    }

    /**
     * The polling thread (started with the first channel), or {@code null} (before it, and always
     * with {@linkplain ChannelOptions#applicationPolling() application polling}): for monitoring
     * its CPU time or allocation.
     */
    public synchronized Thread pollingThread() {
        return poller;
    }

    /**
     * Listens on {@code address} (port 0 picks a free port: see {@link ChannelServer#localAddress()}).
     *
     * <p><b>Errors</b>: {@link io.github.verbs4j.VerbsException} from {@code rdma_bind_addr} or
     * {@code rdma_listen} (EADDRINUSE, EADDRNOTAVAIL).
     */
    public ChannelServer listen(InetSocketAddress address) {
        Objects.requireNonNull(address, "address");
        state.ensureOpen(this);
        ChannelServer server = new ChannelServer(this, address);
        synchronized (this) {
            if (!state.isClosed()) {
                servers.add(server);
                return server;
            }
        }
        server.close(); // the group closed meanwhile, without it
        throw new IllegalStateException(this + " is closed");
    }

    /**
     * Connects to the {@link ChannelServer} at {@code address}: resolves the address and route,
     * makes the queue pair and ring, and connects, all within {@code timeout}.
     *
     * <p><b>Errors</b>: {@link io.github.verbs4j.cm.CmEventException} (REJECTED: no server
     * there; UNREACHABLE); {@link io.github.verbs4j.VerbsException} (ETIMEDOUT naming the
     * step); {@link IllegalArgumentException} when the peer is not a channel;
     * {@link UnsupportedOperationException} for {@link ChannelOptions.Notification#IMMEDIATE}
     * over an iWARP device.
     */
    public Channel connect(InetSocketAddress address, Duration timeout) {
        return connect(address, timeout, false);
    }

    Channel connect(InetSocketAddress address, Duration timeout, boolean owned) {
        Objects.requireNonNull(address, "address");
        Objects.requireNonNull(timeout, "timeout");
        Deadline deadline = Deadline.after(timeout);
        state.ensureOpen(this);
        // the connection's own event channel serves the handshake only: the id then moves to the group's
        try (EventChannel events = EventChannel.create()) {
            CmId id = events.createId(PortSpace.TCP);
            Channel ch = null;
            try {
                id.resolveAddress(null, address, deadline.remaining());
                id.resolveRoute(deadline.remaining());
                ch = prepare(id, owned);
                CmEvent established = id.connect(parameters(ch), deadline.remaining());
                ch.attachPeer(established.privateData(), this::allocateStage);
                id.migrate(monitor);
                byId.put(id, ch);
                return ch;
            } catch (RuntimeException | Error e) {
                abandon(ch, id, e);
                throw e;
            }
        }
    }

    /** The failure path of a connect or accept: releases the channel (or the bare id), failures suppressed on {@code e}. */
    private static void abandon(Channel ch, CmId id, Throwable e) {
        try {
            if (ch != null) {
                ch.abandon();
            } else {
                id.close();
            }
        } catch (RuntimeException | Error suppressed) {
            e.addSuppressed(suppressed);
        }
    }

    /** Accepts the request of {@code id} (a ChannelServer's). */
    Channel accept(CmEvent request, Duration timeout) {
        CmId id = request.id();
        Channel ch = null;
        try {
            ch = prepare(id, false);
            ch.attachPeer(request.privateData(), this::allocateStage);
            id.accept(parameters(ch), timeout);
            id.migrate(monitor);
            byId.put(id, ch);
            return ch;
        } catch (IllegalArgumentException | UnsupportedOperationException e) {
            // not a channel, or a notification the device cannot carry: tell it so
            try {
                id.reject(null);
            } catch (RuntimeException ignored) {
                // the peer is gone already
            }
            abandon(ch, id, e);
            throw e;
        } catch (RuntimeException | Error e) {
            abandon(ch, id, e);
            throw e;
        }
    }

    private static ConnectParameters parameters(Channel ch) {
        return ConnectParameters.defaults().withPrivateData(ch.localInfo());
    }

    /** The group's device resources on the id's device, the ring, the queue pair, the receives. */
    private Channel prepare(CmId id, boolean owned) {
        Context ctx = id.context();
        int key;
        MemoryRegion ring;
        synchronized (this) {
            state.ensureOpen(this);
            bind(ctx);
            if (open >= MAX_CHANNELS) {
                throw new IllegalStateException("a channel group holds at most " + MAX_CHANNELS + " channels");
            }
            int needed = (open + 1) * options.entriesPerChannel();
            if (needed > cq.capacity()) {
                throw new IllegalStateException("the group's completion queue has " + cq.capacity() + " entries; "
                        + (open + 1) + " channels of " + options.slots() + " slots need " + needed
                        + ": raise ChannelOptions.completionQueueEntries or lower slots");
            }
            int index = nextIndex;
            while (table[index] != null) {
                index = (index + 1) % MAX_CHANNELS;
            }
            nextIndex = (index + 1) % MAX_CHANNELS;
            generations[index] = (generations[index] + 1) & 0xffff;
            key = (index << 16) | generations[index];
            ring = pd.allocate((long) options.slots() * options.slotSize(), Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            open++;
        }
        Channel ch;
        Closer made = new Closer();
        made.register(ring);
        try {
            boolean sendNotify = notifiesBySend(ctx);
            // by SEND, each data WRITE takes two entries of the send queue (the WRITE and its SEND)
            int sendWr = sendNotify ? 2 * options.writesInFlight() + 8 : options.writesInFlight() + 4;
            // by SEND, a small message's SEND gathers the word and the staged slots: two entries
            QueuePair qp = id.createQueuePair(pd, cq, cq, QpInit.defaults().withMaxSendWr(sendWr)
                    .withMaxRecvWr(Channel.receiveCount(options.slots())).withMaxSendSge(sendNotify ? 2 : 1));
            MemoryRegion words = made.register(pd.allocate(
                    Channel.wordBytes(options.slots(), sendNotify, qp.capabilities().maxSendWr()), Access.LOCAL_WRITE));
            ch = new Channel(this, owned, key, id, qp, ring, words, sendNotify, options);
        } catch (RuntimeException | Error e) {
            made.closeSuppressingInto(e);
            synchronized (this) {
                open--;
            }
            throw e;
        }
        synchronized (this) {
            table[key >>> 16] = ch;
        }
        try {
            ch.postInitialReceives();
        } catch (RuntimeException | Error e) {
            // the caller never sees this channel (its failure path closes only the bare id): release it here
            try {
                ch.abandon();
            } catch (RuntimeException | Error suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
        return ch;
    }

    /**
     * Whether a channel on {@code ctx} notifies by SEND: {@link ChannelOptions.Notification#AUTO}
     * chooses so when the device reports the iWARP transport, which has no immediate data.
     */
    private boolean notifiesBySend(Context ctx) {
        boolean iwarp = ctx.device().transport() == TransportType.IWARP;
        return switch (options.notification()) {
            case AUTO -> iwarp;
            case SEND -> true;
            case IMMEDIATE -> {
                if (iwarp) {
                    throw new UnsupportedOperationException("ChannelOptions.Notification.IMMEDIATE cannot be used on "
                            + ctx.device().name() + ": iWARP devices have no immediate data (use AUTO or SEND)");
                }
                yield false;
            }
        };
    }

    private MemoryRegion allocateStage(long bytes) {
        ProtectionDomain p;
        synchronized (this) {
            p = pd;
        }
        return p.allocate(bytes, Access.LOCAL_WRITE);
    }

    private void bind(Context ctx) {
        if (ctx == null) {
            throw new IllegalStateException("the connection is bound to no device");
        }
        if (context == null) {
            Closer made = new Closer();
            try {
                pd = made.register(ctx.allocatePd());
                completionChannel = made.register(ctx.createCompletionChannel());
                cq = ctx.createCq(options.completionQueueEntries(), completionChannel, 0);
            } catch (RuntimeException | Error e) {
                made.closeSuppressingInto(e);
                pd = null;
                completionChannel = null;
                throw e;
            }
            context = ctx;
            wcs = cq.completions(64);
            polledCq = cq;
            if (!options.applicationPolling()) {
                poller = Thread.ofPlatform().daemon().name("verbs4j-channel-poller").unstarted(this::pollLoop);
                poller.start();
            }
        } else if (context != ctx) {
            throw new IllegalArgumentException("this group's channels use " + context + "; a connection over "
                    + ctx + " needs a group of its own");
        }
    }

    synchronized void unregister(Channel ch) {
        int index = ch.key >>> 16;
        if (table[index] == ch) {
            table[index] = null;
            open--;
        }
        byId.values().remove(ch);
    }

    synchronized void forget(ChannelServer server) {
        servers.remove(server);
    }

    /** {@link #blockingWaits}: how often the polling thread has blocked so far (tests). */
    long blockingWaits() {
        return blockingWaits;
    }

    /**
     * Holds each stand-down of the polling thread parked up to {@code nanos} (tests): with a
     * park far longer than a round trip, whatever moves only at the polling thread's own look
     * (not at a wake-up: a thread that blocks, the last poller leaving while one is blocked, a
     * disconnect, the close) shows as a stall of that length.
     */
    void holdStandDown(long nanos) {
        if (nanos <= 0) {
            throw new IllegalArgumentException("a stand-down of " + nanos + " ns");
        }
        standDownNanos = nanos;
    }

    /** {@link #standDowns}: how often the polling thread stood down for polling application threads so far (tests). */
    long standDowns() {
        return standDowns;
    }

    // ---- application threads that wait (with a polling thread) --------------------------------

    /**
     * The calling thread, waiting in an operation of one of this group's channels, polls the
     * queue ({@link #drive()}) until {@link #endPolling()}: the polling thread stands down
     * meanwhile, parked, its completion channel unarmed (an armed queue costs the device an
     * event and the polling thread a wake-up per completion).
     */
    void beginPolling() {
        applicationPollers.incrementAndGet();
    }

    /**
     * The calling thread stops polling. When it was the last and some thread is blocked waiting
     * ({@link #beginBlocking()}), the polling thread is woken now; otherwise it resumes at its
     * park bound ({@link #STAND_DOWN_NANOS}), or when a thread blocks, and completions wait in
     * the queue until then.
     *
     * <p>No lost wake-up: a thread blocks only after {@link #beginBlocking()}, which increments
     * {@link #blockedWaiters} and then reads {@link #applicationPollers}; this method decrements
     * {@link #applicationPollers} and then reads {@link #blockedWaiters}. Both are sequentially
     * consistent, so of a blocking thread and the last poller to leave at least one sees the
     * other, and that one unparks the polling thread (twice is harmless). While a poller
     * remains it polls again before it leaves, and the last one to leave runs this. An unpark
     * that comes before the polling thread parks makes that park return at once, and after it
     * the polling thread polls, spins, and arms the queue, polling once more after arming
     * before it blocks on the completion channel; a completion that comes at any point after
     * the blocked thread's condition was checked under its channel's lock is therefore taken
     * by some poller, which delivers it under that lock and notifies the monitor.
     */
    void endPolling() {
        if (applicationPollers.decrementAndGet() == 0 && blockedWaiters.get() > 0) {
            wakePoller();
        }
    }

    /**
     * The calling thread is about to block on a channel's monitor until a completion changes
     * that channel: unless an application thread is polling (its {@link #endPolling()} then
     * wakes the polling thread), the polling thread is woken now, not at its park bound.
     */
    void beginBlocking() {
        blockedWaiters.incrementAndGet();
        if (applicationPollers.get() == 0) {
            wakePoller();
        }
    }

    /** The blocked thread of {@link #beginBlocking()} returned from its wait. */
    void endBlocking() {
        blockedWaiters.decrementAndGet();
    }

    private void wakePoller() {
        Thread p = poller;
        if (p != null) {
            LockSupport.unpark(p);
        }
    }

    // ---- the threads --------------------------------------------------------------------------

    /**
     * The polling thread: polls the queue ({@link #drive()}) while no application thread does,
     * spins {@link ChannelOptions#spinPolls()} empty polls, then arms the queue and blocks on the
     * completion channel. While application threads poll it stands down: it parks, without
     * arming, until the last of them stops ({@link #endPolling()}) or its park bound passes.
     */
    private void pollLoop() {
        int idle = 0;
        try {
            while (running && pollerFailure == null) {
                if (applicationPollers.get() > 0) {
                    standDowns++; // written by this thread only
                    LockSupport.parkNanos(this, standDownNanos);
                    idle = 0;
                    continue;
                }
                int r = drive();
                if (r == DROVE) {
                    idle = 0;
                    continue;
                }
                if (r == BUSY || idle < options.spinPolls()) {
                    // BUSY: an application thread is polling; the next round stands down
                    idle += r == EMPTY ? 1 : 0;
                    Thread.onSpinWait();
                    continue;
                }
                cq.requestNotify(false);
                // only an empty poll after arming may block: anything that came before the arming is taken first
                if (drive() != EMPTY || applicationPollers.get() > 0) {
                    idle = 0;
                    continue;
                }
                blockingWaits++; // written by this thread only
                completionChannel.await(POLL_SLICE);
            }
        } catch (Throwable t) {
            if (running) {
                pollerFailure = t;
                System.getLogger(ChannelGroup.class.getName()).log(System.Logger.Level.ERROR,
                        "the polling thread of " + this + " failed; its channels fail with PeerLostException", t);
                failAll(t);
            }
        }
    }

    /** {@link #drive()}: completions were taken (or a disconnect judged). */
    static final int DROVE = 1;
    /** {@link #drive()}: the queue was empty. */
    static final int EMPTY = 0;
    /** {@link #drive()}: another thread is polling the queue. */
    static final int BUSY = -1;

    /**
     * One poll of the queue by the calling thread (the polling thread, or an application thread
     * that waits), which hands each completion to its channel (taking that channel's lock), and,
     * once the queue is empty, the disconnects noticed before. One thread at a time: the others
     * get {@link #BUSY}, so that completions are handled in the order the queue gave them.
     * Allocates nothing. Returns {@link #DROVE}, {@link #EMPTY} or {@link #BUSY}.
     */
    int drive() {
        CompletionQueue q = polledCq;
        if (q == null || !pollLock.tryLock()) {
            return q == null ? EMPTY : BUSY;
        }
        try {
            if (!running) {
                return EMPTY;
            }
            int n = q.poll(wcs);
            if (n > 0) {
                dispatch(wcs, n);
                return DROVE;
            }
            // the queue is empty: disconnects noticed before this drain can be judged now
            if (!toCheck.isEmpty()) {
                for (Channel ch : toCheck) {
                    ch.checkDisconnected();
                }
                toCheck.clear();
                return DROVE;
            }
            for (Channel ch; (ch = disconnected.poll()) != null; ) {
                toCheck.add(ch);
            }
            return toCheck.isEmpty() ? EMPTY : DROVE;
        } catch (RuntimeException | Error t) {
            if (running) {
                pollerFailure = t;
                System.getLogger(ChannelGroup.class.getName()).log(System.Logger.Level.ERROR,
                        "polling the queue of " + this + " failed; its channels fail with PeerLostException", t);
                failAll(t);
            }
            return EMPTY; // the channels were told; a caller looping while this drives stops
        } finally {
            pollLock.unlock();
        }
    }

    private void dispatch(Completions wcs, int n) {
        for (int i = 0; i < n; i++) {
            Completion wc = wcs.get(i);
            long wrId = wc.wrId();
            int key = (int) (wrId >>> 32);
            Channel ch = table[key >>> 16];
            if (ch != null && ch.key == key) {
                try {
                    ch.onCompletion(wc, wrId & 0xffff_ffffL);
                } catch (RuntimeException e) {
                    ch.internalFailure(e);
                }
            }
        }
    }

    private void failAll(Throwable t) {
        for (Channel ch : byId.values()) {
            ch.onDisconnected("polling the group's completion queue failed: " + t);
            disconnected.add(ch);
        }
    }

    private void cmLoop() {
        while (running) {
            CmEvent e;
            try {
                e = monitor.next(CM_SLICE);
            } catch (RuntimeException ex) {
                if (!running) {
                    return;
                }
                continue;
            }
            if (e == null) {
                continue;
            }
            Channel ch = byId.get(e.id());
            if (ch == null) {
                continue;
            }
            switch (e.type()) {
                case DISCONNECTED, DEVICE_REMOVAL, TIMEWAIT_EXIT -> {
                    ch.onDisconnected(e.type().toString());
                    disconnected.add(ch);
                    wakePoller(); // judged once the queue is drained: not at a stood-down poller's park bound
                }
                default -> {
                }
            }
        }
    }

    /** Whether {@link #close()} has begun. */
    public boolean isClosed() {
        return state.isClosed();
    }

    /**
     * Closes the group's servers and channels (each {@link Channel#close()}: their staged
     * messages are drained first), stops the threads and releases the device resources. Idempotent.
     *
     * <p><b>Errors</b>: the first failure (a channel whose staged messages could not be
     * delivered: {@link ChannelException}), every later one suppressed on it; every server,
     * channel, thread and device resource is closed all the same.
     */
    @Override
    public void close() {
        List<AutoCloseable> teardown = new ArrayList<>();
        synchronized (this) {
            if (!state.beginClose()) {
                return;
            }
            teardown.addAll(servers);
            for (Channel ch : table) {
                if (ch != null) {
                    teardown.add(ch);
                }
            }
        }
        teardown.add(this::stopThreads);
        teardown.add(monitor);
        teardown.add(this::releaseQueue);
        Closer.closeAll(teardown);
    }

    private void stopThreads() {
        running = false;
        join(cmThread);
        Thread p = poller;
        if (p != null) {
            LockSupport.unpark(p); // a stood-down poller ends now, not at its park bound
            join(p);
        }
    }

    /** The queue, its completion channel and the domain, once no application thread polls the queue. */
    private void releaseQueue() {
        pollLock.lock(); // no application thread is inside a poll of the queue closed here
        try {
            polledCq = null;
            synchronized (this) {
                Closer.closeAll(Arrays.asList(cq, completionChannel, pd));
            }
        } finally {
            pollLock.unlock();
        }
    }

    private static void join(Thread t) {
        boolean interrupted = false;
        while (true) {
            try {
                t.join();
                break;
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public String toString() {
        return "ChannelGroup[" + (context == null ? "unbound" : context.toString()) + "]";
    }
}
