package io.github.verbs4j.cm;

import io.github.verbs4j.Errno;
import io.github.verbs4j.VerbsException;
import io.github.verbs4j.internal.Fds;
import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.internal.Timeouts;
import io.github.verbs4j.raw.CmEventFields;
import io.github.verbs4j.raw.CmFunctions;
import io.github.verbs4j.raw.CmStructs;
import io.github.verbs4j.raw.ConnParam;
import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.FileStatusFlags;
import io.github.verbs4j.raw.UdParam;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Predicate;

/**
 * An event channel ({@code struct rdma_event_channel}): where the events of its {@link CmId}s
 * arrive.
 *
 * <pre>{@code
 * try (EventChannel channel = EventChannel.create();
 *      CmId id = channel.createId(PortSpace.TCP)) {
 *     id.resolveAddress(null, new InetSocketAddress("10.0.0.2", 7174), Duration.ofSeconds(2));
 *     ...
 * }
 * }</pre>
 *
 * <p><b>Events</b>: {@link #next(Duration)} waits with {@code poll(2)} on the channel's
 * {@link #fd()}, then calls {@code rdma_get_cm_event}, copies everything out of the native event
 * (private data included) and acknowledges it ({@code rdma_ack_cm_event}) before returning: an
 * event can never be left unacknowledged. The blocking methods of {@link CmId} (resolve,
 * connect, accept...) read this channel too; events they are not waiting for are kept, in order,
 * for later {@code next} calls and other waits.
 *
 * <p><b>Lifecycle</b>: {@link #close()} ({@code rdma_destroy_event_channel}) refuses while ids
 * of this channel are open, naming them (connection requests that nobody took are closed, which
 * rejects those peers); it is idempotent. Use after close throws {@link IllegalStateException}.
 *
 * <p><b>Thread-safety</b>: thread-safe. Several threads may wait on one channel for different
 * ids (a server thread accepting while a client thread connects): they take turns polling, each
 * for at most 20 ms, and each finds the events the others read for it.
 */
public final class EventChannel implements AutoCloseable {

    final MemorySegment channel;
    private final int fd;
    private final Map<Long, CmId> ids = new ConcurrentHashMap<>();
    private final ArrayDeque<CmEvent> backlog = new ArrayDeque<>();
    /** Fair: waiters for different ids alternate. */
    private final ReentrantLock lock = new ReentrantLock(true);
    /** The longest single poll while holding the lock. */
    private static final long SLICE_MILLIS = 20;
    private final Lifecycle life = new Lifecycle();

    private EventChannel(MemorySegment channel) {
        this.channel = channel.reinterpret(CmStructs.EVENT_CHANNEL_SIZE);
        this.fd = CmStructs.eventChannelFd(this.channel);
        life.opened(this);
    }

    /**
     * Creates a channel ({@code rdma_create_event_channel}).
     *
     * <p><b>Errors</b>: {@link VerbsException} (ENODEV or ENOENT without an rdma_cm: no kernel
     * support and no softrdma; EMFILE); {@link UnsatisfiedLinkError} when librdmacm cannot be loaded.
     */
    public static EventChannel create() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment ch = (MemorySegment) CmFunctions.CREATE_EVENT_CHANNEL.invokeExact(errno);
            if (Cm.isNull(ch)) {
                int e = Downcalls.errno(errno);
                throw new VerbsException("rdma_create_event_channel", e, Errno.ENODEV.is(e) || Errno.ENOENT.is(e)
                        ? "no RDMA connection manager: " + (java.nio.file.Files.exists(java.nio.file.Path.of("/dev/infiniband/rdma_cm"))
                                ? "the kernel's rdma_cm has no RDMA device to serve"
                                : "the kernel has no rdma_cm (no /dev/infiniband/rdma_cm)")
                          + " and no user-space RDMA device such as softrdma is loaded (-Dverbs4j.substrate=softrdma)"
                        : null);
            }
            // Non-blocking: between a poll that saw the fd readable and rdma_get_cm_event, another
            // thread may destroy the id the pending event belongs to (librdmacm then discards the
            // event); a blocking read would then wait for a next event that may never come.
            int fd = CmStructs.eventChannelFd(ch.reinterpret(CmStructs.EVENT_CHANNEL_SIZE));
            int e = FileStatusFlags.setNonBlocking(fd);
            if (e != 0) {
                CmFunctions.DESTROY_EVENT_CHANNEL.invokeExact(errno, ch);
                throw new VerbsException("fcntl(O_NONBLOCK) on the CM event channel", e, null);
            }
            return new EventChannel(ch);
        } catch (Throwable t) {
            throw Downcalls.unexpected("rdma_create_event_channel", t);
        }
    }

    /** The file descriptor: readable while events are queued (for selectors and poll loops). */
    public int fd() {
        ensureOpen();
        return fd;
    }

    /**
     * Creates an id in {@code space} whose events arrive here ({@code rdma_create_id}).
     *
     * <p><b>Errors</b>: {@link VerbsException} (ENOMEM); {@link IllegalStateException} after close.
     */
    public CmId createId(PortSpace space) {
        Objects.requireNonNull(space, "space");
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment out = arena.allocate(ValueLayout.ADDRESS);
            int rc = (int) CmFunctions.CREATE_ID.invokeExact(errno, channel, out, MemorySegment.NULL, space.value());
            Cm.check(rc, errno, "rdma_create_id", space);
            MemorySegment native_ = out.get(ValueLayout.ADDRESS, 0);
            CmId id = new CmId(this, native_, space);
            life.addNewDependent(this, id, () -> CmFunctions.DESTROY_ID.invokeExact(errno, native_));
            ids.put(id.address(), id);
            return id;
        } catch (Throwable t) {
            throw Downcalls.unexpected("rdma_create_id", t);
        }
    }

    /**
     * The next event of any id of this channel, or {@code null} when none arrived within
     * {@code timeout}. The event is already acknowledged.
     *
     * <p><b>Errors</b>: {@link VerbsException} from {@code poll} or {@code rdma_get_cm_event};
     * {@link IllegalStateException} after close.
     */
    public CmEvent next(Duration timeout) {
        return await(e -> true, Timeouts.deadline(timeout));
    }

    /**
     * The first event (kept or new) that {@code wanted} accepts, before {@code deadline}
     * (System.nanoTime); events it does not want are kept for later, in order. {@code null} on timeout.
     */
    CmEvent await(Predicate<CmEvent> wanted, long deadline) {
        ensureOpen();
        // The lock is held for one short poll at a time, so that threads waiting for different
        // ids on one channel take turns: each sees the events the others read and kept for it.
        while (true) {
            try {
                if (!lock.tryLock(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                    return null;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while waiting for an event of " + this, e);
            }
            try {
                ensureOpen();
                for (Iterator<CmEvent> it = backlog.iterator(); it.hasNext(); ) {
                    CmEvent e = it.next();
                    if (wanted.test(e)) {
                        it.remove();
                        return e;
                    }
                }
                long leftMillis = Math.max(0, (deadline - System.nanoTime() + 999_999) / 1_000_000);
                if (Fds.awaitReadable(fd, Math.min(leftMillis, SLICE_MILLIS), "a CM event")) {
                    CmEvent e = read();
                    if (e != null) {
                        if (wanted.test(e)) {
                            return e;
                        }
                        backlog.addLast(e);
                    }
                    continue;
                }
            } finally {
                lock.unlock();
            }
            if (System.nanoTime() - deadline >= 0) {
                return null;
            }
        }
    }

    /**
     * {@code rdma_get_cm_event}, copy, {@code rdma_ack_cm_event}; {@code null} for an event of an
     * id no longer here, or for none (EAGAIN: the fd is non-blocking).
     */
    private CmEvent read() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment out = arena.allocate(ValueLayout.ADDRESS);
            int rc = (int) CmFunctions.GET_CM_EVENT.invokeExact(errno, channel, out);
            if (rc != 0 && Errno.EAGAIN.is(Downcalls.errno(errno))) {
                return null; // the event the poll saw went with its id, destroyed meanwhile
            }
            Cm.check(rc, errno, "rdma_get_cm_event", this);
            MemorySegment ev = out.get(ValueLayout.ADDRESS, 0);
            CmEvent event;
            try {
                event = decode(CmEventFields.read(ev));
            } finally {
                int ack = (int) CmFunctions.ACK_CM_EVENT.invokeExact(errno, ev);
                Cm.check(ack, errno, "rdma_ack_cm_event", this);
            }
            if (event != null) {
                event.id().observe(event);
            }
            return event;
        } catch (Throwable t) {
            throw Downcalls.unexpected("rdma_get_cm_event", t);
        }
    }

    private CmEvent decode(CmEventFields ev) {
        CmEventType type = CmEventType.of(ev.event());
        int status = ev.status();
        MemorySegment idPtr = ev.id();
        CmId listenId = null;
        CmId id;
        if (type == CmEventType.CONNECT_REQUEST) {
            listenId = ids.get(ev.listenId().address());
            if (listenId == null) {
                return null;
            }
            // handed over: the caller accepts, rejects or closes it
            id = new CmId(this, idPtr, listenId.portSpace());
            track(id);
        } else {
            id = ids.get(idPtr.address());
            if (id == null) {
                return null;
            }
        }
        MemorySegment param = ev.param();
        ConnectParameters parameters;
        int qpNum;
        int qkey = 0;
        UdAddress ud = null;
        if (id.portSpace() == PortSpace.UDP) {
            UdParam udParam = UdParam.read(param);
            parameters = new ConnectParameters(0, 0, 0, 0, udParam.privateData());
            qpNum = udParam.qpNum();
            qkey = udParam.qkey();
            if (type == CmEventType.ESTABLISHED) {
                ud = UdAddress.of(udParam.ahAttr(), qpNum, qkey);
            }
        } else {
            ConnParam conn = ConnParam.read(param);
            parameters = new ConnectParameters(conn.responderResources(), conn.initiatorDepth(),
                    Math.min(7, conn.retryCount()), Math.min(7, conn.rnrRetryCount()), conn.privateData());
            qpNum = conn.qpNum();
        }
        return new CmEvent(type, status, id, listenId, parameters, qpNum, qkey, ud);
    }

    /** Registers an id whose events arrive here: the channel cannot close while it is open. */
    private void track(CmId id) {
        life.addDependent(this, id);
        ids.put(id.address(), id);
    }

    private void untrack(CmId id) {
        ids.remove(id.address());
        life.removeDependent(id);
    }

    void moveIn(CmId id, List<CmEvent> events) {
        track(id);
        lock.lock();
        try {
            backlog.addAll(events);
        } finally {
            lock.unlock();
        }
    }

    /** Takes {@code id} off this channel with the events kept for it (rdma_migrate_id). */
    List<CmEvent> moveOut(CmId id) {
        untrack(id);
        List<CmEvent> moved = new ArrayList<>();
        lock.lock();
        try {
            for (Iterator<CmEvent> it = backlog.iterator(); it.hasNext(); ) {
                CmEvent e = it.next();
                if (e.id() == id) {
                    moved.add(e);
                    it.remove();
                }
            }
        } finally {
            lock.unlock();
        }
        return moved;
    }

    void forget(CmId id) {
        untrack(id);
    }

    void ensureOpen() {
        life.ensureOpen(this);
    }

    /**
     * Destroys the channel ({@code rdma_destroy_event_channel}). Connection requests kept for
     * later and never taken are closed first (their peers see a rejection). Idempotent.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} naming the ids still open (the channel stays open).
     */
    @Override
    public void close() {
        lock.lock();
        try {
            if (life.isClosed()) {
                return;
            }
            for (CmEvent e : backlog) {
                if (e.type() == CmEventType.CONNECT_REQUEST) {
                    e.id().close();
                }
            }
            backlog.clear();
            life.close(this, () -> {
                try (Arena arena = Arena.ofConfined()) {
                    CmFunctions.DESTROY_EVENT_CHANNEL.invokeExact(Downcalls.errnoSegment(arena), channel);
                }
            }, () -> { });
        } finally {
            lock.unlock();
        }
    }

    /** Whether {@link #close()} completed. */
    public boolean isClosed() {
        return life.isClosed();
    }

    @Override
    public String toString() {
        return "EventChannel[fd " + fd + "]";
    }
}
