package io.github.verbs4j.cm;

import io.github.verbs4j.Access;
import io.github.verbs4j.Closer;
import io.github.verbs4j.Completion;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Context;
import io.github.verbs4j.Deadline;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.PeerLostException;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QpState;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.RemoteBuffer;
import io.github.verbs4j.SendOpcode;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.VerbsException;
import io.github.verbs4j.WcOpcode;
import io.github.verbs4j.WcStatus;
import io.github.verbs4j.WorkCompletionException;
import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.internal.Timeouts;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * A connected RC endpoint made by {@link RdmaServer#accept} or {@link RdmaClient#connect}: a
 * queue pair, a completion queue, a send buffer, receive buffers kept posted, and an RDMA buffer
 * the peer may READ and WRITE ({@link #remote()}, to be sent to the peer by the application).
 * Sizes come from {@link EndpointOptions}.
 *
 * <p><b>Messages</b>: {@link #send(byte[], Duration)} / {@link #send(MemorySegment, Duration)} and
 * {@link #receive(Duration)} / {@link #receive(MemorySegment, Duration)} (the latter copies into
 * the caller's memory and allocates nothing).
 *
 * <p><b>One-sided</b>: {@link #read} and {@link #write} wait for their completion;
 * {@link #readAsync(long, RemoteBuffer, int, long, RmaCallback, Duration)} and
 * {@link #writeAsync(long, RemoteBuffer, int, long, RmaCallback, Duration)} only post, so that up
 * to {@link EndpointOptions#sendQueueDepth()} READs and WRITEs are in flight at once (READs
 * beyond the negotiated initiator depth wait in the device's send queue); their completion
 * reaches a reusable {@link RmaCallback} with the caller's tag, or a future from
 * {@link #readAsync(long, RemoteBuffer, int, Duration)} (one allocation per operation, for the
 * caller who wants it). Requests and completions are reused: a loop of reads, writes, sends and
 * {@code receive(MemorySegment, ...)} allocates nothing.
 *
 * <p><b>Waiting</b>: a wait polls the completion queue, spins {@link EndpointOptions#spinPolls()}
 * times, then blocks in {@code poll(2)} on the completion channel and the CM event fd together:
 * an idle connection costs no CPU, and a peer that disconnects ends every wait at once with
 * {@link PeerLostException}. Every wait has a timeout, and a wait that runs out throws
 * {@link VerbsException} ETIMEDOUT naming the duration the caller gave. Failed completions throw
 * {@link WorkCompletionException} naming the operation ("RDMA READ #3") and its status.
 *
 * <p><b>Lifecycle</b>: {@link #close()} disconnects (if still connected) and releases the queue
 * pair, buffers, queues, domain, id and channel, also after errors. Idempotent. Connections
 * accepted by a server with shared queues ({@link RdmaServer.Builder#sharedQueues}) share the
 * domain, completion queue and SRQ: the last to close (server included) releases them.
 *
 * <p><b>Thread-safety</b>: one thread uses a connection at a time. Connections sharing a
 * server's queues may be used from different threads: they take turns on the shared queue, and
 * whichever waits hands the others their completions (callbacks then run on that thread).
 */
public final class RdmaConnection implements AutoCloseable {

    /** wr_id of a send-queue request: this bit, and its sequence number. Receives carry their slot. */
    private static final long SEND_QUEUE = 1L << 62;

    private static final byte SEND = 1;
    private static final byte READ = 2;
    private static final byte WRITE = 3;

    private final EventChannel channel;
    private final CmId id;
    private final EndpointOptions options;
    private final QueueSet queues;
    private final MemoryRegion sendBuffer;
    private final MemoryRegion rdmaBuffer;
    private final QueuePair qp;
    private final int qpNumber;
    private final SendRequest request = SendRequest.send();
    private final int depth;
    private final RmaCallback[] callbacks;
    private final long[] tags;
    private final byte[] kinds;
    private long posted;
    private volatile long completed;
    /** The sequence number of the first failed send-queue request (0: none), and its completion. */
    private long failedSeq;
    private WcStatus failedStatus;
    private int failedVendorError;
    private WorkCompletionException receiveFailure;
    private RuntimeException callbackFailure;
    /** Received messages not yet taken: their receive-buffer slots and lengths, a ring. */
    private final int[] rxSlot;
    private final int[] rxLength;
    private int rxHead;
    private volatile int rxTail;
    private volatile byte[] peerPrivateData = new byte[0];
    private final Lifecycle life = new Lifecycle();

    /**
     * Makes the connection's buffers and QP on {@code id}'s device, with its own queues or with
     * {@code shared} ones; on failure releases what it made (not the id or channel).
     */
    private RdmaConnection(EventChannel channel, CmId id, EndpointOptions options, QueueSet shared) {
        this.channel = channel;
        this.id = id;
        this.options = options;
        Context context = id.context();
        List<AutoCloseable> made = new ArrayList<>();
        QueueSet q = shared;
        try {
            if (q == null) {
                q = QueueSet.own(context, options);
            } else {
                q.retain();
            }
            QueueSet held = q;
            made.add(held::release);
            ProtectionDomain pd = q.pd;
            sendBuffer = add(made, pd.allocate(options.messageSize(), Access.LOCAL_WRITE));
            rdmaBuffer = add(made, pd.allocate(options.rdmaBufferSize(), Access.LOCAL_WRITE, Access.REMOTE_READ,
                    Access.REMOTE_WRITE));
            qp = add(made, id.createQueuePair(pd, q.cq, q.cq, q.srq, options.qpInit()));
            queues = q;
            qpNumber = qp.qpNumber();
            depth = Math.min(options.sendQueueDepth(), qp.capabilities().maxSendWr());
            callbacks = new RmaCallback[depth];
            tags = new long[depth];
            kinds = new byte[depth];
            int ring = q.receiveSlots + 1; // every slot may hold a message not yet taken: full must not read as empty
            rxSlot = new int[ring];
            rxLength = new int[ring];
            q.register(this, qpNumber, depth);
            made.add(() -> held.unregister(qpNumber, depth));
            if (q.srq == null) {
                for (int slot = 0; slot < q.receiveSlots; slot++) {
                    q.repost(this, slot);
                }
            }
        } catch (RuntimeException | Error e) {
            closeAll(made, e);
            throw e;
        }
        life.opened(this); // it holds its id and channel: a root
    }

    private static <T extends AutoCloseable> T add(List<AutoCloseable> made, T resource) {
        made.add(resource);
        return resource;
    }

    /**
     * After a failed open: closes what was made (nulls skipped), the last first, each on its own so
     * that one failing close does not leak the rest; their failures are suppressed into {@code failure}.
     */
    static void closeAfterFailure(Throwable failure, AutoCloseable... made) {
        closeAll(Arrays.asList(made), failure);
    }

    /** Closes {@code made}, last made first, each failure suppressed on {@code failure}. */
    static void closeAll(List<AutoCloseable> made, Throwable failure) {
        Closer closer = new Closer();
        for (AutoCloseable resource : made) {
            if (resource != null) {
                closer.register(resource);
            }
        }
        closer.closeSuppressingInto(failure);
    }

    /** Client side: resources on a resolved id, then connect. Closes id and channel on failure. */
    static RdmaConnection connect(EventChannel channel, CmId id, EndpointOptions options, Deadline deadline) {
        RdmaConnection c = null;
        try {
            c = new RdmaConnection(channel, id, options, null);
            CmEvent established = id.connect(options.parameters(), deadline.remaining());
            c.peerPrivateData = established.privateData();
            return c;
        } catch (RuntimeException | Error e) {
            if (c != null) {
                c.closeQuietly(e);
            } else {
                closeAll(List.of(channel, id), e);
            }
            throw e;
        }
    }

    /**
     * Server side: resources on a request's id (already on its own channel), then accept;
     * {@code shared}: the server's shared queues, or {@code null} for the connection's own.
     */
    static RdmaConnection accept(EventChannel channel, CmEvent request, EndpointOptions options, QueueSet shared,
            Deadline deadline) {
        RdmaConnection c = null;
        CmId id = request.id();
        try {
            c = new RdmaConnection(channel, id, options, shared);
            c.peerPrivateData = request.privateData();
            id.accept(options.parameters(), deadline.remaining());
            return c;
        } catch (RuntimeException | Error e) {
            if (c != null) {
                c.closeQuietly(e);
            } else {
                closeAll(List.of(channel, id), e);
            }
            throw e;
        }
    }

    /** The queue pair (RC, in RTS while connected). */
    public QueuePair queuePair() {
        return qp;
    }

    /**
     * The completion queue of both directions (shared with the server's other connections when
     * it shares its queues). Polling it directly bypasses this connection's bookkeeping.
     */
    public CompletionQueue completionQueue() {
        return queues.cq;
    }

    /** The protection domain of the buffers and the QP (shared with the server's other connections when it shares its queues). */
    public ProtectionDomain protectionDomain() {
        return queues.pd;
    }

    /** The options the connection was made with. */
    public EndpointOptions options() {
        return options;
    }

    /** The CM id of this connection. */
    public CmId id() {
        return id;
    }

    /** The registered send buffer ({@code messageSize} bytes). */
    public MemoryRegion sendBuffer() {
        return sendBuffer;
    }

    /** The registered RDMA buffer, readable and writable by the peer. */
    public MemoryRegion rdmaBuffer() {
        return rdmaBuffer;
    }

    /** The address, length and rkey of {@link #rdmaBuffer()}: send it to the peer for READ/WRITE. */
    public RemoteBuffer remote() {
        return rdmaBuffer.remote();
    }

    /** The private data the peer sent with its connect (server side) or accept (client side). */
    public byte[] peerPrivateData() {
        return peerPrivateData.clone();
    }

    /** The peer's IP address and port. */
    public InetSocketAddress remoteAddress() {
        return id.remoteAddress();
    }

    /** Send-queue requests (sends, READs, WRITEs) posted and not yet completed. */
    public int outstanding() {
        return (int) (posted - completed);
    }

    /** How many send-queue requests may be outstanding at once: {@link EndpointOptions#sendQueueDepth()}, or less when the device granted less. */
    public int sendQueueDepth() {
        return depth;
    }

    /**
     * Sends {@code data} as one message ({@code ibv_post_send}, SEND) and waits for its completion.
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} for more than {@code messageSize} bytes;
     * {@link PeerLostException} when the peer is gone: rdma_cm reported it disconnected (the
     * flushed request's {@link WorkCompletionException} as cause when a flush showed it first), or
     * the transport gave up on it (RETRY_EXC_ERR: the request's exception as cause);
     * {@link WorkCompletionException} with the status when the request failed otherwise;
     * {@link VerbsException} ETIMEDOUT.
     */
    public void send(byte[] data, Duration timeout) {
        Objects.requireNonNull(data, "data");
        send(MemorySegment.ofArray(data), timeout);
    }

    /** As {@link #send(byte[], Duration)}, from native or heap memory; allocates nothing. */
    public void send(MemorySegment data, Duration timeout) {
        Objects.requireNonNull(data, "data");
        ensureOpen();
        if (data.byteSize() > options.messageSize()) {
            throw new IllegalArgumentException(data.byteSize() + " bytes exceed the message size " + options.messageSize());
        }
        long deadline = Timeouts.deadline(timeout);
        int length = (int) data.byteSize();
        MemorySegment.copy(data, 0, sendBuffer.segment(), 0, length);
        long seq = post(SEND, SendOpcode.SEND, 0, null, length, null, 0, deadline, timeout);
        awaitCompletion(seq, deadline, timeout);
    }

    /**
     * The next message from the peer, waiting up to {@code timeout}; allocates the returned array.
     * Its buffer is posted again before this returns.
     *
     * <p><b>Errors</b>: as {@link #send}; {@link VerbsException} ETIMEDOUT when no message came.
     */
    public byte[] receive(Duration timeout) {
        ensureOpen();
        awaitMessage(Timeouts.deadline(timeout), timeout);
        int slot = rxSlot[rxHead];
        byte[] message = queues.slot(slot, rxLength[rxHead]).toArray(ValueLayout.JAVA_BYTE);
        takeMessage(slot);
        return message;
    }

    /**
     * The next message from the peer copied into {@code into}, waiting up to {@code timeout};
     * returns its length. Allocates nothing.
     *
     * <p><b>Errors</b>: as {@link #receive(Duration)}; {@link IllegalArgumentException} when the
     * message is longer than {@code into} (the message stays queued).
     */
    public int receive(MemorySegment into, Duration timeout) {
        Objects.requireNonNull(into, "into");
        ensureOpen();
        awaitMessage(Timeouts.deadline(timeout), timeout);
        int slot = rxSlot[rxHead];
        int length = rxLength[rxHead];
        if (length > into.byteSize()) {
            throw new IllegalArgumentException("a message of " + length + " bytes does not fit into " + into.byteSize()
                    + " bytes");
        }
        MemorySegment.copy(queues.receiveBuffers.segment(), (long) slot * queues.messageSize, into, 0, length);
        takeMessage(slot);
        return length;
    }

    private void awaitMessage(long deadline, Duration timeout) {
        while (rxHead == rxTail) {
            if (receiveFailure != null) {
                // iWARP (siw) flushes the receive queue before the DISCONNECTED event arrives:
                // a flush followed by that event is the peer's disconnect, not a failure
                if (receiveFailure.status() == WcStatus.WR_FLUSH_ERROR
                        && disconnectArrives(System.nanoTime() + 1_000_000_000L)) {
                    throw new PeerLostException("the peer of " + this + " disconnected", receiveFailure);
                }
                throw PeerLostException.shows(receiveFailure.status())
                        ? new PeerLostException("the peer of " + this + " is lost", receiveFailure) : receiveFailure;
            }
            step(deadline, timeout, null);
        }
    }

    private void takeMessage(int slot) {
        rxHead = (rxHead + 1) % rxSlot.length;
        queues.repost(this, slot);
    }

    /**
     * RDMA WRITE of {@code length} bytes from {@link #rdmaBuffer()} at {@code localOffset} to
     * {@code remote}; waits for its completion. Allocates nothing.
     *
     * <p><b>Errors</b>: {@link WorkCompletionException} naming the operation ("RDMA WRITE #3") and
     * its status; {@link PeerLostException}; {@link VerbsException} ETIMEDOUT;
     * {@link IndexOutOfBoundsException} for a range outside the RDMA buffer.
     */
    public void write(long localOffset, RemoteBuffer remote, int length, Duration timeout) {
        oneSided(WRITE, SendOpcode.RDMA_WRITE, localOffset, remote, length, timeout);
    }

    /**
     * RDMA READ of {@code length} bytes from {@code remote} into {@link #rdmaBuffer()} at
     * {@code localOffset}; waits for its completion (the bytes are then in place). Allocates nothing.
     *
     * <p><b>Errors</b>: as {@link #write}.
     */
    public void read(long localOffset, RemoteBuffer remote, int length, Duration timeout) {
        oneSided(READ, SendOpcode.RDMA_READ, localOffset, remote, length, timeout);
    }

    private void oneSided(byte kind, SendOpcode opcode, long localOffset, RemoteBuffer remote, int length,
            Duration timeout) {
        Objects.requireNonNull(remote, "remote");
        ensureOpen();
        long deadline = Timeouts.deadline(timeout);
        long seq = post(kind, opcode, localOffset, remote, length, null, 0, deadline, timeout);
        awaitCompletion(seq, deadline, timeout);
    }

    /**
     * Posts an RDMA READ of {@code length} bytes from {@code remote} into {@link #rdmaBuffer()} at
     * {@code localOffset} and returns; {@code callback} gets {@code tag} and the status when it
     * completes (driven by {@link #poll()}, {@link #drain} or any wait of the connection). When
     * the send queue is full it first drives completions until there is room, waiting at most
     * {@code timeout}. Allocates nothing.
     *
     * <p><b>Errors</b>: {@link VerbsException} ETIMEDOUT when no room came within {@code timeout};
     * {@link WorkCompletionException} when an earlier request failed (the connection is broken);
     * {@link PeerLostException}; {@link IndexOutOfBoundsException} for a range outside
     * the RDMA buffer.
     */
    public void readAsync(long localOffset, RemoteBuffer remote, int length, long tag, RmaCallback callback,
            Duration timeout) {
        async(READ, SendOpcode.RDMA_READ, localOffset, remote, length, tag, callback, timeout);
    }

    /** As {@link #readAsync(long, RemoteBuffer, int, long, RmaCallback, Duration)}, for an RDMA WRITE from {@link #rdmaBuffer()}. */
    public void writeAsync(long localOffset, RemoteBuffer remote, int length, long tag, RmaCallback callback,
            Duration timeout) {
        async(WRITE, SendOpcode.RDMA_WRITE, localOffset, remote, length, tag, callback, timeout);
    }

    /**
     * As {@link #readAsync(long, RemoteBuffer, int, long, RmaCallback, Duration)}, completing the
     * returned future instead (normally, or exceptionally with a {@link WorkCompletionException});
     * the future is allocated per call. It completes only when completions are driven
     * ({@link #poll()}, {@link #drain}, or any wait of the connection).
     */
    public CompletableFuture<Void> readAsync(long localOffset, RemoteBuffer remote, int length, Duration timeout) {
        return future(READ, SendOpcode.RDMA_READ, localOffset, remote, length, timeout);
    }

    /** As {@link #readAsync(long, RemoteBuffer, int, Duration)}, for an RDMA WRITE. */
    public CompletableFuture<Void> writeAsync(long localOffset, RemoteBuffer remote, int length, Duration timeout) {
        return future(WRITE, SendOpcode.RDMA_WRITE, localOffset, remote, length, timeout);
    }

    private CompletableFuture<Void> future(byte kind, SendOpcode opcode, long localOffset, RemoteBuffer remote,
            int length, Duration timeout) {
        CompletableFuture<Void> f = new CompletableFuture<>();
        async(kind, opcode, localOffset, remote, length, 0, (tag, status) -> {
            if (status == WcStatus.SUCCESS) {
                f.complete(null);
            } else {
                f.completeExceptionally(new WorkCompletionException("an asynchronous " + (kind == READ ? "RDMA READ"
                        : "RDMA WRITE") + " on " + this, status, tag, 0, qpNumber, WcOpcode.UNKNOWN));
            }
        }, timeout);
        return f;
    }

    private void async(byte kind, SendOpcode opcode, long localOffset, RemoteBuffer remote, int length, long tag,
            RmaCallback callback, Duration timeout) {
        Objects.requireNonNull(remote, "remote");
        Objects.requireNonNull(callback, "callback");
        ensureOpen();
        long deadline = Timeouts.deadline(timeout);
        post(kind, opcode, localOffset, remote, length, callback, tag, deadline, timeout);
    }

    /**
     * Drives completions without waiting: runs the callbacks of operations that completed and
     * takes arrived messages in; returns how many completions were taken (of this connection or,
     * with shared queues, of any).
     */
    public int poll() {
        ensureOpen();
        queues.lock.lock();
        int n;
        try {
            n = queues.pollOnce();
        } finally {
            queues.lock.unlock();
        }
        rethrowCallbackFailure();
        return n;
    }

    /**
     * Waits until every posted send-queue request has completed (their callbacks run), at most
     * {@code timeout}.
     *
     * <p><b>Errors</b>: {@link WorkCompletionException} when one failed; as {@link #send} otherwise.
     */
    public void drain(Duration timeout) {
        ensureOpen();
        long deadline = Timeouts.deadline(timeout);
        awaitCompletion(posted, deadline, timeout);
    }

    /** Posts one send-queue request once there is room; its sequence number. */
    private long post(byte kind, SendOpcode opcode, long localOffset, RemoteBuffer remote, int length,
            RmaCallback callback, long tag, long deadline, Duration timeout) {
        while (posted - completed >= depth) {
            failIfBroken(posted);
            step(deadline, timeout, kind);
        }
        failIfBroken(posted);
        long seq = posted + 1;
        int slot = (int) (seq % depth);
        callbacks[slot] = callback;
        tags[slot] = callback == null ? seq : tag;
        kinds[slot] = kind;
        SendRequest r = request.opcode(opcode).id(SEND_QUEUE | seq).signaled();
        if (kind == SEND) {
            r.local(sendBuffer, 0, length);
        } else {
            r.local(rdmaBuffer, localOffset, length).remote(remote);
        }
        boolean lock = queues.shared;
        if (lock) {
            queues.lock.lock();
        }
        try {
            qp.postSend(r);
            posted = seq;
        } catch (RuntimeException e) {
            callbacks[slot] = null;
            throw e;
        } finally {
            if (lock) {
                queues.lock.unlock();
            }
        }
        return seq;
    }

    /** Waits until request {@code seq} completed; throws if it, or one before it, failed. */
    private void awaitCompletion(long seq, long deadline, Duration timeout) {
        while (completed < seq) {
            if (failedSeq != 0 && failedSeq <= seq && completed >= failedSeq) {
                break;
            }
            step(deadline, timeout, kinds[(int) (seq % depth)]);
        }
        rethrowCallbackFailure();
        failIfBroken(seq + 1);
    }

    /** Throws when a request before {@code seq} failed. */
    private void failIfBroken(long seq) {
        if (failedSeq != 0 && failedSeq < seq) {
            WorkCompletionException failed = new WorkCompletionException(describe(kinds[(int) (failedSeq % depth)],
                    failedSeq) + " on " + this, failedStatus, failedSeq, failedVendorError, qpNumber, WcOpcode.UNKNOWN);
            if (failedStatus == WcStatus.WR_FLUSH_ERROR && disconnectArrives(System.nanoTime() + 1_000_000_000L)) {
                throw new PeerLostException("the peer of " + this + " disconnected", failed);
            }
            throw PeerLostException.shows(failedStatus) ? new PeerLostException("the peer of " + this + " is lost", failed)
                    : failed;
        }
    }

    private void rethrowCallbackFailure() {
        RuntimeException e = callbackFailure;
        if (e != null) {
            callbackFailure = null;
            throw e;
        }
    }

    /** One step of a wait for {@code kind} (null: a message): progress, or throw on disconnect or deadline. */
    private void step(long deadline, Duration timeout, Object kind) {
        long before = completed;
        int tail = rxTail;
        if (!queues.progress(this, deadline) || (System.nanoTime() - deadline >= 0 && completed == before
                && tail == rxTail)) {
            if (id.hasDisconnectedEvent()) {
                throw disconnectedWhile(kind);
            }
            throw VerbsException.timedOut("ibv_poll_cq", awaited(kind) + " on " + this, timeout);
        }
        if (completed == before && tail == rxTail && id.hasDisconnectedEvent()) {
            throw disconnectedWhile(kind);
        }
        rethrowCallbackFailure();
    }

    private PeerLostException disconnectedWhile(Object kind) {
        return new PeerLostException("the peer of " + this + " disconnected while waiting for " + awaited(kind));
    }

    private static String awaited(Object kind) {
        if (kind == null) {
            return "a message";
        }
        return switch ((byte) kind) {
            case SEND -> "the completion of a send";
            case READ -> "the completion of an RDMA READ";
            default -> "the completion of an RDMA WRITE";
        };
    }

    private static String describe(byte kind, long seq) {
        return switch (kind) {
            case SEND -> "send #" + seq;
            case READ -> "RDMA READ #" + seq;
            default -> "RDMA WRITE #" + seq;
        };
    }

    /** A completion of this connection's QP, handed out by its {@link QueueSet} (under its lock). */
    void onCompletion(Completion wc) {
        long wrId = wc.wrId();
        if ((wrId & SEND_QUEUE) == 0) {
            int slot = (int) wrId;
            if (!wc.ok()) {
                if (receiveFailure == null) {
                    receiveFailure = wc.status() == WcStatus.WR_FLUSH_ERROR && id.isDisconnected()
                            ? null : new WorkCompletionException("receive (buffer " + slot + ") on " + this,
                                    wc.status(), wrId, wc.vendorError(), wc.qpNumber(), WcOpcode.UNKNOWN);
                }
                return;
            }
            int tail = rxTail;
            rxSlot[tail] = slot;
            rxLength[tail] = wc.byteLength();
            rxTail = (tail + 1) % rxSlot.length;
            return;
        }
        long seq = wrId & ~SEND_QUEUE;
        int slot = (int) (seq % depth);
        WcStatus status = wc.status();
        if (status != WcStatus.SUCCESS && failedSeq == 0) {
            failedSeq = seq;
            failedStatus = status;
            failedVendorError = wc.vendorError();
        }
        RmaCallback callback = callbacks[slot];
        callbacks[slot] = null;
        completed = seq;
        if (callback != null) {
            try {
                callback.completed(tags[slot], status);
            } catch (RuntimeException e) {
                if (callbackFailure == null) {
                    callbackFailure = e;
                } else {
                    callbackFailure.addSuppressed(e);
                }
            }
        }
    }

    /** Whether the DISCONNECTED event is, or within a few seconds (never past {@code deadline}) becomes, pending. */
    private boolean disconnectArrives(long deadline) {
        long until = Math.min(deadline, System.nanoTime() + 5_000_000_000L);
        while (!id.hasDisconnectedEvent() && until - System.nanoTime() > 0) {
            id.awaitEvent(Duration.ofMillis(Math.max(1, (until - System.nanoTime()) / 1_000_000L)));
        }
        return id.hasDisconnectedEvent();
    }

    /**
     * Disconnects ({@code rdma_disconnect}); the peer gets DISCONNECTED. After the peer
     * disconnected first, this answers its request, which completes the peer's disconnect
     * without waiting for this connection to close. Idempotent.
     */
    public void disconnect() {
        ensureOpen();
        if (!id.hasCalledDisconnect()) {
            id.disconnect();
        }
    }

    /**
     * Waits until the peer disconnects (a DISCONNECTED event: the peer called disconnect, closed
     * its connection or its process died); returns at once when it already did.
     *
     * @throws io.github.verbs4j.RdmaTimeoutException when no DISCONNECTED came within
     *         {@code timeout} (its verb is {@code rdma_get_cm_event})
     */
    public void awaitDisconnect(Duration timeout) {
        ensureOpen();
        Deadline deadline = Deadline.after(timeout);
        while (!id.hasDisconnectedEvent()) {
            if (id.awaitEvent(deadline.remaining()) == null) {
                throw deadline.timedOut("rdma_get_cm_event", "the peer's DISCONNECTED on " + this);
            }
        }
    }

    private void ensureOpen() {
        life.ensureOpen(this);
    }

    private void closeQuietly(Throwable failure) {
        try {
            close();
        } catch (RuntimeException e) {
            failure.addSuppressed(e);
        }
    }

    /** Disconnects if connected, then releases everything. Idempotent. */
    @Override
    public void close() {
        life.close(this, this::release, () -> { });
    }

    /**
     * Disconnects if connected, then closes every part, last made first; the first failure is
     * thrown after all were tried (the others suppressed), and a later close tries again.
     */
    private void release() {
        boolean connected = id.queuePair() != null && qp.trackedState() == QpState.RTS && !id.isDisconnected();
        QueueSet q = queues;
        Closer.closeAll(List.of(() -> {
            if (connected) {
                id.disconnect();
            }
        }, this::returnUntakenMessages, () -> q.unregister(qpNumber, depth), qp, rdmaBuffer, sendBuffer, q::release,
                id, channel));
    }

    /** Messages nobody took: with shared queues their buffers go back to the SRQ for the other connections. */
    private void returnUntakenMessages() {
        if (queues.srq == null || queues.srq.isClosed()) {
            return;
        }
        queues.lock.lock();
        try {
            while (rxHead != rxTail) {
                queues.repost(this, rxSlot[rxHead]);
                rxHead = (rxHead + 1) % rxSlot.length;
            }
        } finally {
            queues.lock.unlock();
        }
    }

    @Override
    public String toString() {
        return "RdmaConnection[" + id + (life.isClosed() ? ", closed" : "") + "]";
    }
}
