package io.github.verbs4j.cm;

import io.github.verbs4j.Access;
import io.github.verbs4j.Completion;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Completions;
import io.github.verbs4j.Context;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.ReceiveRequest;
import io.github.verbs4j.RemoteBuffer;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.VerbsException;
import io.github.verbs4j.WcOpcode;
import io.github.verbs4j.WcStatus;
import io.github.verbs4j.WorkCompletionException;
import io.github.verbs4j.internal.Lifecycle;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.locks.LockSupport;

/**
 * A connected RC endpoint made by {@link RdmaServer#accept} or {@link RdmaClient#connect}: a
 * queue pair, one completion queue, and three registered buffers — a send buffer, a ring of
 * receive buffers kept posted, and an RDMA buffer the peer may READ and WRITE
 * ({@link #remote()}, to be sent to the peer by the application).
 *
 * <p>Messages: {@link #send(byte[], Duration)} and {@link #receive(Duration)}. One-sided:
 * {@link #write} and {@link #read} between this side's RDMA buffer and a peer's
 * {@link RemoteBuffer}. Every wait has a timeout; failed completions throw
 * {@code WorkCompletionException} with their status; a wait during which the connection goes
 * away (DISCONNECTED) throws {@link PeerDisconnectedException} at once.
 *
 * <p><b>Lifecycle</b>: {@link #close()} disconnects (if still connected) and releases the queue
 * pair, buffers, queue, domain, id and channel, in that order, also after errors. Idempotent.
 *
 * <p><b>Thread-safety</b>: not thread-safe: one thread uses a connection at a time.
 */
public final class RdmaConnection implements AutoCloseable {

    private static final long SEND_ID = 1L << 40;
    private static final long RDMA_ID = 2L << 40;

    private final EventChannel channel;
    private final CmId id;
    private final EndpointOptions options;
    private final ProtectionDomain pd;
    private final CompletionQueue cq;
    private final MemoryRegion sendBuffer;
    private final MemoryRegion receiveBuffers;
    private final MemoryRegion rdmaBuffer;
    private final QueuePair qp;
    private final Completions completions;
    private final ReceiveRequest receive = ReceiveRequest.create();
    private final SendRequest send = SendRequest.send();
    private final SendRequest rdma = SendRequest.rdmaWrite();
    private final ArrayDeque<byte[]> received = new ArrayDeque<>();
    private long sendsCompleted;
    private long rdmaCompleted;
    private long sendsPosted;
    private long rdmaPosted;
    /** The one-sided operation in flight, for messages: {@code "RDMA READ #3"}. */
    private String rdmaOperation = "RDMA operation";
    private volatile byte[] peerPrivateData = new byte[0];
    private final Lifecycle life = new Lifecycle();
    private int idlePolls;

    /**
     * Allocates the resources on {@code id}'s device and creates the QP; on failure releases what
     * it made (not the id or channel).
     */
    private RdmaConnection(EventChannel channel, CmId id, EndpointOptions options) {
        this.channel = channel;
        this.id = id;
        this.options = options;
        Context context = id.context();
        List<AutoCloseable> made = new ArrayList<>();
        try {
            pd = add(made, context.allocatePd());
            int depth = options.receiveSlots() + 8;
            cq = add(made, context.createCq(depth * 2));
            sendBuffer = add(made, pd.allocate(options.messageSize(), Access.LOCAL_WRITE));
            receiveBuffers = add(made, pd.allocate((long) options.messageSize() * options.receiveSlots(), Access.LOCAL_WRITE));
            rdmaBuffer = add(made, pd.allocate(options.rdmaBufferSize(), Access.LOCAL_WRITE, Access.REMOTE_READ,
                    Access.REMOTE_WRITE));
            qp = add(made, id.createQueuePair(pd, cq, cq, new QpInit(8, options.receiveSlots(), 1, 1, 0, false)));
            completions = cq.completions(16);
            for (int slot = 0; slot < options.receiveSlots(); slot++) {
                postReceive(slot);
            }
        } catch (RuntimeException | Error e) {
            closeAll(made, e);
            throw e;
        }
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
        List<AutoCloseable> open = new ArrayList<>();
        for (AutoCloseable resource : made) {
            if (resource != null) {
                open.add(resource);
            }
        }
        closeAll(open, failure);
    }

    private static void closeAll(List<AutoCloseable> made, Throwable failure) {
        for (int i = made.size() - 1; i >= 0; i--) {
            try {
                made.get(i).close();
            } catch (Exception e) {
                failure.addSuppressed(e);
            }
        }
    }

    /** Client side: resources on a resolved id, then connect. Closes id and channel on failure. */
    static RdmaConnection connect(EventChannel channel, CmId id, EndpointOptions options, long deadline) {
        RdmaConnection c = null;
        try {
            c = new RdmaConnection(channel, id, options);
            CmEvent established = id.connect(options.parameters(), remaining(deadline));
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

    /** Server side: resources on a request's id (already on its own channel), then accept. */
    static RdmaConnection accept(EventChannel channel, CmEvent request, EndpointOptions options, long deadline) {
        RdmaConnection c = null;
        CmId id = request.id();
        try {
            c = new RdmaConnection(channel, id, options);
            c.peerPrivateData = request.privateData();
            id.accept(options.parameters(), remaining(deadline));
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

    static Duration remaining(long deadline) {
        return Duration.ofNanos(Math.max(0, deadline - System.nanoTime()));
    }

    private void postReceive(int slot) {
        qp.postRecv(receive.id(slot).local(receiveBuffers, (long) slot * options.messageSize(), options.messageSize()));
    }

    /** The queue pair (RC, in RTS while connected). */
    public QueuePair queuePair() {
        return qp;
    }

    /** The completion queue of both directions. Polling it directly bypasses {@link #receive}'s bookkeeping. */
    public CompletionQueue completionQueue() {
        return cq;
    }

    /** The protection domain of the buffers and the QP. */
    public ProtectionDomain protectionDomain() {
        return pd;
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

    /**
     * Sends {@code data} as one message ({@code ibv_post_send}, SEND) and waits for its completion.
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} for more than {@code messageSize} bytes;
     * {@code WorkCompletionException} with the status (RETRY_EXC_ERR when the peer is gone,
     * WR_FLUSH_ERR after a disconnect); {@link VerbsException} ETIMEDOUT.
     */
    public void send(byte[] data, Duration timeout) {
        Objects.requireNonNull(data, "data");
        ensureOpen();
        if (data.length > options.messageSize()) {
            throw new IllegalArgumentException(data.length + " bytes exceed the message size " + options.messageSize());
        }
        long deadline = deadline(timeout);
        MemorySegment.copy(data, 0, sendBuffer.segment(), ValueLayout.JAVA_BYTE, 0, data.length);
        sendsPosted++;
        qp.postSend(send.id(SEND_ID + sendsPosted).local(sendBuffer, 0, data.length).signaled());
        while (sendsCompleted < sendsPosted) {
            pollOrWait(deadline, timeout, "the completion of a send");
        }
    }

    /**
     * The next message from the peer, waiting up to {@code timeout}. Its buffer is posted again
     * before this returns.
     *
     * <p><b>Errors</b>: as {@link #send}; {@link VerbsException} ETIMEDOUT when no message came.
     */
    public byte[] receive(Duration timeout) {
        ensureOpen();
        long deadline = deadline(timeout);
        while (received.isEmpty()) {
            pollOrWait(deadline, timeout, "a message");
        }
        return received.removeFirst();
    }

    /**
     * RDMA WRITE of {@code length} bytes from {@link #rdmaBuffer()} at {@code localOffset} to
     * {@code remote}; waits for its completion.
     */
    public void write(long localOffset, RemoteBuffer remote, int length, Duration timeout) {
        oneSided(SendRequest.rdmaWrite(), localOffset, remote, length, timeout);
    }

    /**
     * RDMA READ of {@code length} bytes from {@code remote} into {@link #rdmaBuffer()} at
     * {@code localOffset}; waits for its completion (the bytes are then in place).
     */
    public void read(long localOffset, RemoteBuffer remote, int length, Duration timeout) {
        oneSided(SendRequest.rdmaRead(), localOffset, remote, length, timeout);
    }

    private void oneSided(SendRequest request, long localOffset, RemoteBuffer remote, int length, Duration timeout) {
        Objects.requireNonNull(remote, "remote");
        ensureOpen();
        long deadline = deadline(timeout);
        rdmaPosted++;
        rdmaOperation = request.opcode().toString().replace('_', ' ') + " #" + rdmaPosted; // "RDMA READ #3"
        qp.postSend(request.id(RDMA_ID + rdmaPosted).local(rdmaBuffer, localOffset, length).remote(remote).signaled());
        while (rdmaCompleted < rdmaPosted) {
            pollOrWait(deadline, timeout, "the completion of an " + rdmaOperation);
        }
    }

    private void pollOrWait(long deadline, Duration timeout, String what) {
        int n = cq.poll(completions);
        for (int i = 0; i < n; i++) {
            Completion wc = completions.get(i);
            long wrId = wc.wrId();
            if (!wc.ok()) {
                // iWARP (siw) flushes the posted requests as soon as the peer's disconnect moves the
                // QP to ERR, before this side has read the DISCONNECTED event: a flush that comes
                // with a disconnect is the peer leaving, not a failed request
                if (wc.status() == WcStatus.WR_FLUSH_ERROR && disconnectArrives(deadline)) {
                    throw new PeerDisconnectedException("ibv_poll_cq", "the connection was disconnected while waiting"
                            + " for " + what + " on " + this + " (its requests were flushed)");
                }
                // the work request ids are this class's bookkeeping: name the operation instead
                String op = wrId >= RDMA_ID ? rdmaOperation : wrId >= SEND_ID ? "send #" + (wrId - SEND_ID)
                        : "receive (buffer " + wrId + ")";
                throw new WorkCompletionException(op + " on " + this, wc.status(), wrId, wc.vendorError(),
                        wc.qpNumber(), WcOpcode.UNKNOWN);
            }
            if (wc.opcode() == WcOpcode.RECV) {
                int slot = (int) wrId;
                byte[] message = receiveBuffers.segment().asSlice((long) slot * options.messageSize(), wc.byteLength())
                        .toArray(ValueLayout.JAVA_BYTE);
                received.addLast(message);
                postReceive(slot);
            } else if (wrId >= RDMA_ID) {
                rdmaCompleted++;
            } else {
                sendsCompleted++;
            }
        }
        if (n > 0) {
            idlePolls = 0;
            return;
        }
        // a peer that is gone sends nothing more: look at the CM events now and then (a poll(2)
        // each time), so that waits end with the DISCONNECTED rather than at their timeout
        if (++idlePolls % 64 == 0) {
            id.awaitEvent(Duration.ZERO);
            if (id.hasDisconnectedEvent()) {
                throw new PeerDisconnectedException("ibv_poll_cq", "the connection was disconnected while waiting for "
                        + what + " on " + this);
            }
        }
        if (System.nanoTime() - deadline >= 0) {
            throw VerbsException.timedOut("ibv_poll_cq", what + " on " + this, timeout);
        }
        LockSupport.parkNanos(20_000);
    }

    /** Whether the DISCONNECTED event is, or within a few seconds (never past {@code deadline}) becomes, pending. */
    private boolean disconnectArrives(long deadline) {
        long until = Math.min(deadline, System.nanoTime() + 5_000_000_000L);
        while (!id.hasDisconnectedEvent() && until - System.nanoTime() > 0) {
            id.awaitEvent(Duration.ofMillis(Math.max(1, (until - System.nanoTime()) / 1_000_000L)));
        }
        return id.hasDisconnectedEvent();
    }

    private static long deadline(Duration timeout) {
        return System.nanoTime() + Cm.timeoutMillis(timeout) * 1_000_000L;
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
     * its connection or its process died). {@code true} once disconnected, {@code false} on timeout.
     */
    public boolean awaitDisconnect(Duration timeout) {
        ensureOpen();
        long deadline = deadline(timeout);
        while (!id.hasDisconnectedEvent()) {
            if (id.awaitEvent(remaining(deadline)) == null) {
                return false;
            }
        }
        return true;
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
        RuntimeException failure = null;
        if (id.queuePair() != null && qp.trackedState() == io.github.verbs4j.QpState.RTS && !id.isDisconnected()) {
            try {
                id.disconnect();
            } catch (RuntimeException e) {
                failure = e;
            }
        }
        List<AutoCloseable> all = List.of(channel, id, pd, cq, sendBuffer, receiveBuffers, rdmaBuffer, qp);
        for (int i = all.size() - 1; i >= 0; i--) {
            try {
                all.get(i).close();
            } catch (Exception e) {
                if (failure == null) {
                    failure = e instanceof RuntimeException re ? re : new IllegalStateException(e);
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    @Override
    public String toString() {
        return "RdmaConnection[" + id + (life.isClosed() ? ", closed" : "") + "]";
    }
}
