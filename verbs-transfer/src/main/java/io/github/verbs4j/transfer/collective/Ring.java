package io.github.verbs4j.transfer.collective;

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
import io.github.verbs4j.PollSet;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.RdmaTimeoutException;
import io.github.verbs4j.ReceiveRequest;
import io.github.verbs4j.SendOpcode;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.WcOpcode;
import io.github.verbs4j.WorkCompletionException;
import io.github.verbs4j.cm.CmEvent;
import io.github.verbs4j.cm.CmEventType;
import io.github.verbs4j.cm.CmId;
import io.github.verbs4j.cm.ConnectParameters;
import io.github.verbs4j.cm.EventChannel;
import io.github.verbs4j.cm.PortSpace;
import io.github.verbs4j.cm.QpInit;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A ring of {@code size} processes connected over RDMA (RC queue pairs made with rdma_cm): each
 * rank writes to its right neighbour ({@code rank + 1 mod size}) and is written by its left one.
 *
 * <p><b>Rendezvous</b>: rank 0 opens a {@link Rendezvous} on an rdma_cm address and tells the
 * others (command line, environment...); each other rank {@link #join}s it with its rank. The
 * ranks' connection requests carry their own ring listener's port; once all arrived, rank 0
 * accepts them with the table of every rank's address in the private data. Then each rank
 * connects to its right neighbour and accepts its left one, whose accept carries the address
 * and rkey of its buffers. Addresses are IPv4; at most {@link #MAX_RANKS} ranks.
 *
 * <p><b>Allreduce</b> ({@link #allreduce(float[])}, {@link #allreduce(long[])}): the sum over all
 * ranks, element by element, left in every rank's array. The array is cut into {@code size}
 * chunks; reduce-scatter ({@code size - 1} steps: send one chunk into the right neighbour's
 * staging buffer with RDMA WRITE, the last piece with immediate data; add the chunk the left
 * neighbour wrote) leaves chunk {@code rank + 1} fully reduced on each rank; allgather
 * ({@code size - 1} steps) writes the reduced chunks straight into the neighbours' arrays. Before
 * allgather each rank tells its left neighbour (a SEND) that its own reduce-scatter writes have
 * completed, so no chunk is overwritten while the device still reads it. Each rank moves
 * {@code 2 (size - 1) / size} of the array: the ring's bound on bus bandwidth.
 *
 * <p><b>Broadcast</b> ({@link #broadcast(long[], int)} and others): the root's array is passed
 * along the ring, each rank forwarding once it has it.
 *
 * <p>Every rank must call the same collectives in the same order with arrays of the same length
 * (at most {@code maxBytes}). Float sums are added in ring order: chunk {@code c} is summed as
 * {@code x[c] + x[c+1] + ...} around the ring, the same on every rank.
 *
 * <p><b>Failures</b>: a neighbour that dies ends the collective with a
 * {@link WorkCompletionException}: rdma_cm's DISCONNECTED shows a killed neighbour's process at
 * once (the ring's connections are then disconnected and the collective ends with the flush,
 * naming the neighbour); a host or link gone without a word shows after the transport's retries.
 * A rank that does not come within the timeout ends the wait with {@link RdmaTimeoutException}.
 *
 * <p><b>Waiting</b>: a rank polls its completion queue for {@link #SPIN_WAIT} without a result,
 * then blocks on its completion channel (and the neighbours' rdma_cm events) until a completion
 * wakes it, so a rank that waits for a slower neighbour leaves the core to it.
 *
 * <p><b>Thread-safety</b>: one thread at a time; {@link #close()} is idempotent.
 */
public final class Ring implements AutoCloseable {

    /** The most ranks a rendezvous takes (the table travels in 196 bytes of private data). */
    public static final int MAX_RANKS = 32;

    private static final int PIECE = 1 << 20;
    private static final int SCRATCH = 64;
    private static final byte MAGIC = 'R';
    private static final int TAG_SCATTER = 1 << 16;
    private static final int TAG_GATHER = 2 << 16;
    private static final int TAG_BCAST = 3 << 16;
    /**
     * How long a wait polls the completion queue without a result before it blocks on the
     * completion channel (and the neighbours' rdma_cm events): a few round trips, so that a step
     * whose chunk is on its way is not put to sleep, while a rank that waits for a slower neighbour
     * leaves the core to it (on a shared machine, the neighbour may need that very core).
     */
    public static final Duration SPIN_WAIT = Duration.ofNanos(50_000);
    private static final long SPIN_NANOS = SPIN_WAIT.toNanos();
    /**
     * The longest single block of a wait: a bound on a wake-up lost to a race the arming does not
     * cover (none is known), not how a completion or a neighbour's loss is noticed.
     */
    private static final long MAX_BLOCK_MILLIS = 50;
    private static final long NOT_IDLE = Long.MIN_VALUE;
    /**
     * How long send completions may still come after a neighbour disconnected: one that closed
     * its ring cleanly acknowledged this rank's last requests before its DISCONNECTED was sent,
     * but the acknowledgement and the event travel separately.
     */
    private static final long SEND_GRACE_NANOS = 20_000_000;
    /** What a wait needs: a chunk from the left neighbour, a message from the right one, or send completions. */
    private static final int NEED_LEFT = 0;
    private static final int NEED_RIGHT = 1;
    private static final int NEED_SENDS = 2;
    /** Work request ids of the writes to the right neighbour and of the ready messages to the left one. */
    private static final long WRITE_ID = 3;
    private static final long READY_ID = 4;

    private final int rank;
    private final int size;
    private final long maxBytes;
    private final Duration timeout;
    private final Closer owned;
    private final MemoryRegion buffer;
    private final CompletionQueue cq;
    /** The queue's completion channel: what a wait blocks on once its spin is spent. */
    private final CompletionChannel completionEvents;
    /** The completion channel and the neighbours' rdma_cm event channels, waited on together. */
    private final PollSet waitSet = new PollSet(3);
    /** When the current wait began to find nothing (System.nanoTime), or {@link #NOT_IDLE}. */
    private long idleSince = NOT_IDLE;
    private final Completions wcs = new Completions(64);
    private final QueuePair right;
    private final QueuePair left;
    private final CmId rightId;
    private final CmId leftId;
    /** What rdma_cm reported of a neighbour (it disconnected), or {@code null}: named by the failure it causes. */
    private String neighbourGone;
    /** What rdma_cm reported of the left and the right neighbour when it reported them gone; else {@code null}. */
    private String leftGone;
    private String rightGone;
    /** When the first neighbour was seen gone (System.nanoTime), for the grace of send completions. */
    private long goneAt;
    private final long rightAddress;
    private final int rightRkey;
    private final SendRequest write = SendRequest.rdmaWrite().signaled().id(WRITE_ID);
    private final SendRequest ready = SendRequest.send().signaled().id(READY_ID);
    private final ReceiveRequest leftRecv;
    private final ReceiveRequest rightRecv;
    private final int sendDepth;
    private int sendsPending;
    /** Of {@link #sendsPending}, the ready messages to the left neighbour (the rest are writes to the right one). */
    private int readySendsPending;
    private int readyReceived;
    private int immReceived;
    private int immExpectedNext;
    private final int[] imms = new int[1024];
    private int immHead;
    private final CloseState state = new CloseState();

    private Ring(int rank, int size, long maxBytes, Duration timeout, Closer owned, MemoryRegion buffer,
            CompletionQueue cq, CompletionChannel completionEvents, EventChannel leftEvents, EventChannel rightEvents,
            CmId rightId, CmId leftId, long rightAddress, int rightRkey, int sendDepth) {
        this.rank = rank;
        this.size = size;
        this.maxBytes = maxBytes;
        this.timeout = timeout;
        this.owned = owned;
        this.buffer = buffer;
        this.cq = cq;
        this.completionEvents = completionEvents;
        waitSet.add(completionEvents.fd());
        waitSet.add(leftEvents.fd());
        waitSet.add(rightEvents.fd());
        this.rightId = rightId;
        this.leftId = leftId;
        this.right = rightId.queuePair();
        this.left = leftId.queuePair();
        this.rightAddress = rightAddress;
        this.rightRkey = rightRkey;
        this.sendDepth = sendDepth;
        long scratch = 2 * maxBytes;
        this.leftRecv = ReceiveRequest.create().id(1).local(buffer, scratch, SCRATCH);
        this.rightRecv = ReceiveRequest.create().id(2).local(buffer, scratch + SCRATCH, SCRATCH);
        this.ready.local(buffer, scratch + 2 * SCRATCH, 4);
    }

    /** This process's rank, 0..size-1. */
    public int rank() {
        return rank;
    }

    /** How many ranks the ring has. */
    public int size() {
        return size;
    }

    /** The largest array, in bytes, a collective takes. */
    public long maxBytes() {
        return maxBytes;
    }

    // ---------------------------------------------------------------- rendezvous

    /**
     * Rank 0's side of the rendezvous: an rdma_cm listener the other ranks {@link #join}.
     * Made by {@link #rendezvous(InetSocketAddress)}; {@link #join(int, long, Duration)} consumes it.
     */
    public static final class Rendezvous implements AutoCloseable {
        private final EventChannel channel;
        private final CmId listener;

        private Rendezvous(EventChannel channel, CmId listener) {
            this.channel = channel;
            this.listener = listener;
        }

        /** Whether {@link #join} has ended (it closes the rendezvous) or {@link #close()} was called. */
        public boolean isClosed() {
            return listener.isClosed();
        }

        /** The address the other ranks pass to {@link Ring#join}. */
        public InetSocketAddress address() {
            return listener.localAddress();
        }

        /**
         * Waits for ranks 1..size-1, sends them the table and builds rank 0's side of the ring.
         *
         * <p><b>Errors</b>: {@link RdmaTimeoutException} when not every rank came within
         * {@code timeout}; {@link IllegalArgumentException} for a bad size or two ranks with one number.
         */
        public Ring join(int size, long maxBytes, Duration timeout) {
            checkSize(size);
            Deadline deadline = Deadline.after(timeout);
            CmId[] requests = new CmId[size];
            InetSocketAddress[] table = new InetSocketAddress[size];
            RingSide side = RingSide.listen(new InetSocketAddress(address().getAddress(), 0), maxBytes);
            try {
                table[0] = side.listenAddress();
                for (int got = 1; got < size; ) {
                    CmEvent e = listener.getRequest(deadline.remaining());
                    if (e == null) {
                        throw deadline.timedOut((size - got) + " more ranks");
                    }
                    ByteBuffer in = ByteBuffer.wrap(e.privateData());
                    int r = in.remaining() >= 9 && in.get() == MAGIC ? in.getInt() : -1;
                    int port = r >= 0 ? in.getInt() : -1;
                    if (r < 1 || r >= size || requests[r] != null) {
                        e.id().reject(null);
                        e.id().close();
                        continue;
                    }
                    requests[r] = e.id();
                    table[r] = new InetSocketAddress(e.id().remoteAddress().getAddress(), port);
                    got++;
                }
                ByteBuffer out = ByteBuffer.allocate(1 + size * 6);
                out.put((byte) size);
                for (InetSocketAddress a : table) {
                    out.put(ipv4(a.getAddress())).putShort((short) a.getPort());
                }
                for (int r = 1; r < size; r++) {
                    // the table rides on the accept; the connection itself carries nothing else
                    CmId id = requests[r];
                    ProtectionDomain pd = side.pd;
                    if (id.context() != side.context) {
                        throw new IllegalStateException("rank " + r + " reached rank 0 through another device");
                    }
                    id.createQueuePair(pd, side.cq, side.cq, new QpInit(1, 1, 1, 1, 0, false));
                    id.accept(ConnectParameters.defaults().withPrivateData(out.array()), deadline.remaining());
                }
                return side.connect(0, size, table, deadline);
            } catch (RuntimeException | Error e) {
                for (CmId id : requests) {
                    if (id != null) {
                        id.close(); // their queue pairs are on the side's domain: gone first
                    }
                }
                side.closeAll(e);
                throw e;
            } finally {
                for (CmId id : requests) {
                    if (id != null) {
                        id.close();
                    }
                }
                close();
            }
        }

        /** Closes the listener (done by {@link #join}). Idempotent. */
        @Override
        public void close() {
            listener.close();
            channel.close();
        }
    }

    /**
     * Opens rank 0's rendezvous on {@code address} (the address of an RDMA device; port 0 picks one).
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} for a wildcard or unresolved address,
     * before anything is made: rank 0's own ring connections go out from the rendezvous's
     * device, which a wildcard does not name (as {@code TransferEngine.open} refuses it).
     */
    public static Rendezvous rendezvous(InetSocketAddress address) {
        Objects.requireNonNull(address, "address");
        if (address.getAddress() == null || address.getAddress().isAnyLocalAddress()) {
            throw new IllegalArgumentException("open the rendezvous on the address of an RDMA device, not " + address);
        }
        EventChannel channel = EventChannel.create();
        try {
            CmId listener = channel.createId(PortSpace.TCP);
            listener.bind(address);
            listener.listen(MAX_RANKS);
            return new Rendezvous(channel, listener);
        } catch (RuntimeException e) {
            channel.close();
            throw e;
        }
    }

    /**
     * Joins the ring as {@code rank} (1..size-1) through rank 0's rendezvous at {@code rendezvous}.
     *
     * @param maxBytes the largest array a collective will take, in bytes (every rank the same)
     * @param timeout  how long the rendezvous and the ring's connections may take
     */
    public static Ring join(InetSocketAddress rendezvous, int rank, int size, long maxBytes, Duration timeout) {
        Objects.requireNonNull(rendezvous, "rendezvous");
        checkSize(size);
        if (rank < 1 || rank >= size) {
            throw new IllegalArgumentException("rank must be within 1.." + (size - 1) + " (rank 0 opens the rendezvous), got "
                    + rank);
        }
        Deadline deadline = Deadline.after(timeout);
        InetSocketAddress[] table = new InetSocketAddress[size];
        try (EventChannel channel = EventChannel.create(); CmId id = channel.createId(PortSpace.TCP)) {
            id.resolveAddress(null, rendezvous, deadline.remaining());
            id.resolveRoute(deadline.remaining());
            RingSide side = RingSide.listen(new InetSocketAddress(id.localAddress().getAddress(), 0), maxBytes);
            try {
                id.createQueuePair(side.pd, side.cq, side.cq, new QpInit(1, 1, 1, 1, 0, false));
                ByteBuffer req = ByteBuffer.allocate(9).put(MAGIC).putInt(rank).putInt(side.listenAddress().getPort());
                CmEvent established = id.connect(ConnectParameters.defaults().withPrivateData(req.array()), deadline.remaining());
                ByteBuffer in = ByteBuffer.wrap(established.privateData());
                int n = Byte.toUnsignedInt(in.get());
                if (n != size) {
                    throw new IllegalStateException("rank 0 has a ring of " + n + " ranks, this rank was told " + size);
                }
                for (int r = 0; r < size; r++) {
                    byte[] ip = new byte[4];
                    in.get(ip);
                    table[r] = new InetSocketAddress(InetAddress.getByAddress(ip), Short.toUnsignedInt(in.getShort()));
                }
                return side.connect(rank, size, table, deadline);
            } catch (RuntimeException | Error e) {
                id.close(); // its queue pair is on the side's domain: gone first
                side.closeAll(e);
                throw e;
            } catch (java.net.UnknownHostException e) {
                id.close();
                side.closeAll(e);
                throw new IllegalStateException(e);
            }
        }
    }

    private static void checkSize(int size) {
        if (size < 2 || size > MAX_RANKS) {
            throw new IllegalArgumentException("size must be within 2.." + MAX_RANKS + ", got " + size);
        }
    }

    private static byte[] ipv4(InetAddress a) {
        if (!(a instanceof Inet4Address)) {
            throw new IllegalArgumentException("the ring's rendezvous takes IPv4 addresses, got " + a);
        }
        return a.getAddress();
    }

    /** One rank's resources while the ring is being built. */
    private static final class RingSide {
        final Closer owned = new Closer();
        final EventChannel listenChannel;
        final EventChannel connectChannel;
        final CmId listener;
        final Context context;
        final ProtectionDomain pd;
        final CompletionChannel completionEvents;
        final CompletionQueue cq;
        final MemoryRegion buffer;
        final long maxBytes;

        private RingSide(long maxBytes, InetSocketAddress at) {
            this.maxBytes = maxBytes;
            try {
                listenChannel = add(EventChannel.create());
                connectChannel = add(EventChannel.create());
                listener = add(listenChannel.createId(PortSpace.TCP));
                listener.bind(at);
                listener.listen(4);
                context = listener.context();
                if (context == null) {
                    throw new IllegalArgumentException(at + " selects no RDMA device");
                }
                pd = add(context.allocatePd());
                completionEvents = add(context.createCompletionChannel());
                cq = add(context.createCq(4096, completionEvents, 0));
                buffer = add(pd.allocate(2 * maxBytes + 4 * SCRATCH, Access.LOCAL_WRITE, Access.REMOTE_WRITE));
            } catch (RuntimeException | Error e) {
                closeAll(e);
                throw e;
            }
        }

        static RingSide listen(InetSocketAddress at, long maxBytes) {
            if (maxBytes < 8 || maxBytes % 8 != 0) {
                throw new IllegalArgumentException("maxBytes must be a positive multiple of 8, got " + maxBytes);
            }
            return new RingSide(maxBytes, at);
        }

        <T extends AutoCloseable> T add(T t) {
            return owned.register(t);
        }

        InetSocketAddress listenAddress() {
            return listener.localAddress();
        }

        void closeAll(Throwable cause) {
            owned.closeSuppressingInto(cause);
        }

        Ring connect(int rank, int size, InetSocketAddress[] table, Deadline deadline) {
            int depth = 256;
            int recvDepth = 4 * size + 8;
            // accept the left neighbour in another thread while connecting to the right one
            CompletableFuture<CmId> leftSide = CompletableFuture.supplyAsync(() -> {
                CmEvent e = listener.getRequest(deadline.remaining());
                if (e == null) {
                    throw deadline.timedOut("the left neighbour's connection");
                }
                CmId id = e.id();
                try {
                    QueuePair qp = id.createQueuePair(pd, cq, cq, new QpInit(depth, recvDepth, 1, 1, 0, false));
                    for (int i = 0; i < recvDepth; i++) {
                        qp.postRecv(ReceiveRequest.create().id(1).local(buffer, 2 * maxBytes, SCRATCH));
                    }
                    ByteBuffer out = ByteBuffer.allocate(12).putLong(buffer.address()).putInt(buffer.rkey());
                    id.accept(ConnectParameters.defaults().withPrivateData(out.array()), deadline.remaining());
                    return id;
                } catch (RuntimeException ex) {
                    id.close();
                    throw ex;
                }
            }, Thread::startVirtualThread);
            CmId rightId = null;
            try {
                rightId = connectChannel.createId(PortSpace.TCP);
                InetSocketAddress to = table[(rank + 1) % size];
                rightId.resolveAddress(null, to, deadline.remaining());
                rightId.resolveRoute(deadline.remaining());
                if (rightId.context() != context) {
                    throw new IllegalStateException("the right neighbour " + to + " is reached through another device");
                }
                QueuePair rq = rightId.createQueuePair(pd, cq, cq, new QpInit(depth, 8, 1, 1, 0, false));
                for (int i = 0; i < 8; i++) {
                    rq.postRecv(ReceiveRequest.create().id(2).local(buffer, 2 * maxBytes + SCRATCH, SCRATCH));
                }
                CmEvent est = rightId.connect(ConnectParameters.defaults(), deadline.remaining());
                ByteBuffer in = ByteBuffer.wrap(est.privateData());
                long address = in.getLong();
                int rkey = in.getInt();
                CmId leftId = leftSide.get(Math.max(1, deadline.remainingNanos()), TimeUnit.NANOSECONDS);
                // ids own their QPs: close them before the CQ, PD and buffer (the closer goes in reverse)
                owned.register(rightId);
                owned.register(leftId);
                listener.close();
                return new Ring(rank, size, maxBytes, deadline.timeout(), owned, buffer, cq, completionEvents,
                        listenChannel, connectChannel, rightId, leftId,
                        address, rkey, depth);
            } catch (ExecutionException e) {
                if (rightId != null) {
                    rightId.close();
                }
                throw e.getCause() instanceof RuntimeException r ? r : new IllegalStateException(e.getCause());
            } catch (TimeoutException e) {
                if (rightId != null) {
                    rightId.close();
                }
                leftSide.thenAccept(CmId::close);
                throw deadline.timedOut("the left neighbour's connection");
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                if (rightId != null) {
                    rightId.close();
                }
                throw new IllegalStateException("interrupted while joining the ring", e);
            } catch (RuntimeException | Error e) {
                if (rightId != null) {
                    rightId.close();
                }
                leftSide.thenAccept(CmId::close);
                throw e;
            }
        }
    }

    // ---------------------------------------------------------------- collectives

    /** Sums {@code data} element by element over all ranks, in place on every rank. */
    public void allreduce(float[] data) {
        checkLength(data.length, 4L);
        MemorySegment.copy(data, 0, buffer.segment(), ValueLayout.JAVA_FLOAT, 0, data.length);
        allreduce(data.length, 4, false);
        MemorySegment.copy(buffer.segment(), ValueLayout.JAVA_FLOAT, 0, data, 0, data.length);
    }

    /** Sums {@code data} element by element over all ranks, in place on every rank. */
    public void allreduce(long[] data) {
        checkLength(data.length, 8L);
        MemorySegment.copy(data, 0, buffer.segment(), ValueLayout.JAVA_LONG, 0, data.length);
        allreduce(data.length, 8, true);
        MemorySegment.copy(buffer.segment(), ValueLayout.JAVA_LONG, 0, data, 0, data.length);
    }

    /** Replaces {@code data} on every rank by the root's. */
    public void broadcast(long[] data, int root) {
        checkLength(data.length, 8L);
        MemorySegment.copy(data, 0, buffer.segment(), ValueLayout.JAVA_LONG, 0, data.length);
        broadcast(data.length * 8L, root);
        MemorySegment.copy(buffer.segment(), ValueLayout.JAVA_LONG, 0, data, 0, data.length);
    }

    /** Replaces {@code data} on every rank by the root's. */
    public void broadcast(float[] data, int root) {
        checkLength(data.length, 4L);
        MemorySegment.copy(data, 0, buffer.segment(), ValueLayout.JAVA_FLOAT, 0, data.length);
        broadcast(data.length * 4L, root);
        MemorySegment.copy(buffer.segment(), ValueLayout.JAVA_FLOAT, 0, data, 0, data.length);
    }

    /** Replaces {@code data} on every rank by the root's. */
    public void broadcast(byte[] data, int root) {
        checkLength(data.length, 1L);
        MemorySegment.copy(data, 0, buffer.segment(), ValueLayout.JAVA_BYTE, 0, data.length);
        broadcast(data.length, root);
        MemorySegment.copy(buffer.segment(), ValueLayout.JAVA_BYTE, 0, data, 0, data.length);
    }

    private long checkLength(int count, long elementBytes) {
        state.ensureOpen(this);
        long bytes = count * elementBytes;
        if (bytes > maxBytes) {
            throw new IllegalArgumentException(bytes + " bytes exceed the ring's maxBytes " + maxBytes);
        }
        return bytes;
    }

    private long chunkStart(int count, int c) {
        return (long) count * c / size;
    }

    private void allreduce(int count, int elem, boolean isLong) {
        if (count == 0) {
            return;
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        MemorySegment m = buffer.segment();
        // reduce-scatter
        for (int s = 0; s < size - 1; s++) {
            int send = Math.floorMod(rank - s, size);
            long from = chunkStart(count, send) * elem;
            long len = chunkStart(count, send + 1) * elem - from;
            writeChunk(from, maxBytes + from, len, TAG_SCATTER | s, deadline);
            int recv = Math.floorMod(rank - s - 1, size);
            awaitImm(TAG_SCATTER | s, deadline);
            long a = chunkStart(count, recv);
            long b = chunkStart(count, recv + 1);
            if (isLong) {
                for (long i = a; i < b; i++) {
                    m.setAtIndex(ValueLayout.JAVA_LONG, i, m.getAtIndex(ValueLayout.JAVA_LONG, i)
                            + m.get(ValueLayout.JAVA_LONG, maxBytes + i * 8));
                }
            } else {
                for (long i = a; i < b; i++) {
                    // the chunk arriving from the left carries the sum of the ranks before this one
                    m.setAtIndex(ValueLayout.JAVA_FLOAT, i, m.get(ValueLayout.JAVA_FLOAT, maxBytes + i * 4)
                            + m.getAtIndex(ValueLayout.JAVA_FLOAT, i));
                }
            }
        }
        // this rank's writes of reduce-scatter have been read out: the left neighbour may overwrite
        awaitSends(0, deadline);
        sendReady(deadline);
        awaitReady(deadline);
        // allgather
        for (int s = 0; s < size - 1; s++) {
            int send = Math.floorMod(rank + 1 - s, size);
            long from = chunkStart(count, send) * elem;
            long len = chunkStart(count, send + 1) * elem - from;
            writeChunk(from, from, len, TAG_GATHER | s, deadline);
            awaitImm(TAG_GATHER | s, deadline);
        }
        awaitSends(0, deadline);
    }

    private void broadcast(long bytes, int root) {
        if (root < 0 || root >= size) {
            throw new IllegalArgumentException("root must be within 0.." + (size - 1) + ", got " + root);
        }
        if (bytes == 0) {
            return;
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        if (rank != root) {
            sendReady(deadline);
            awaitImm(TAG_BCAST, deadline);
        }
        if ((rank + 1) % size != root) {
            awaitReady(deadline);
            writeChunk(0, 0, bytes, TAG_BCAST, deadline);
        }
        awaitSends(0, deadline);
    }

    /** WRITEs {@code len} bytes at {@code from} to the right neighbour's {@code to}, the last piece with immediate. */
    private void writeChunk(long from, long to, long len, int imm, long deadline) {
        long done = 0;
        do {
            int piece = (int) Math.min(PIECE, len - done);
            boolean last = done + piece == len;
            awaitSends(sendDepth - 1, deadline);
            write.opcode(last ? SendOpcode.RDMA_WRITE_WITH_IMM : SendOpcode.RDMA_WRITE);
            if (last) {
                write.immediate(imm);
            }
            if (piece == 0) {
                write.sgeCount(0);
            } else {
                write.local(buffer, from + done, piece);
            }
            write.remote(rightAddress + to + done, rightRkey);
            right.postSend(write);
            sendsPending++;
            done += piece;
        } while (done < len);
    }

    private void sendReady(long deadline) {
        awaitSends(sendDepth - 1, deadline);
        left.postSend(ready);
        sendsPending++;
        readySendsPending++;
    }

    private void awaitSends(int atMost, long deadline) {
        while (sendsPending > atMost) {
            pollOnce(deadline, "send completions", NEED_SENDS);
        }
    }

    private void awaitReady(long deadline) {
        while (readyReceived == 0) {
            pollOnce(deadline, "the right neighbour's ready message", NEED_RIGHT);
        }
        readyReceived--;
    }

    private void awaitImm(int tag, long deadline) {
        while (immReceived == 0) {
            pollOnce(deadline, "the left neighbour's chunk " + Integer.toHexString(tag), NEED_LEFT);
        }
        immReceived--;
        int got = imms[immHead];
        immHead = (immHead + 1) % imms.length;
        if (got != tag) {
            throw new IllegalStateException("rank " + rank + " expected chunk 0x" + Integer.toHexString(tag)
                    + " from its left neighbour, got 0x" + Integer.toHexString(got)
                    + ": the ranks did not call the same collectives");
        }
    }

    /**
     * One round of a wait: takes what completed; when nothing did for {@link #SPIN_WAIT}, arms the
     * queue, takes what completed meanwhile, looks at the neighbours' rdma_cm events and blocks
     * until a completion or an event arrives (or {@link #MAX_BLOCK_MILLIS}). The caller loops
     * until what it needs has come.
     */
    private void pollOnce(long deadline, String what, int need) {
        if (takeCompletions() > 0) {
            idleSince = NOT_IDLE;
            return;
        }
        long now = System.nanoTime();
        if (now - deadline > 0) {
            idleSince = NOT_IDLE;
            throw new RdmaTimeoutException(null, what + " (rank " + rank + " of " + size + ")", timeout);
        }
        if (idleSince == NOT_IDLE) {
            idleSince = now;
        }
        if (now - idleSince < SPIN_NANOS) {
            Thread.onSpinWait();
            return;
        }
        cq.requestNotify(false);
        if (takeCompletions() > 0) {
            idleSince = NOT_IDLE;
            return;
        }
        if (watchNeighbours(need, now)) {
            idleSince = NOT_IDLE;
            return;
        }
        long millis = Math.min(MAX_BLOCK_MILLIS, (deadline - now + 999_999) / 1_000_000);
        if (millis > 0 && waitSet.await(millis) > 0 && waitSet.isReady(0)) {
            completionEvents.await(Duration.ZERO); // the queue's one event: it is armed again before the next block
        }
    }

    /** Polls the queue once and accounts for what completed; how many completions it took. */
    private int takeCompletions() {
        int n = cq.poll(wcs);
        for (int k = 0; k < n; k++) {
            Completion wc = wcs.get(k);
            if (!wc.ok()) {
                throw new WorkCompletionException("rank " + rank + "'s " + wc.opcode() + " ("
                        + (neighbourGone != null ? neighbourGone : "a neighbour is gone?") + ")",
                        wc.status(), wc.wrId(), wc.vendorError(), wc.qpNumber(), wc.opcode());
            }
            WcOpcode op = wc.opcode();
            if (op == WcOpcode.RECV_RDMA_WITH_IMM) {
                imms[(immHead + immReceived) % imms.length] = wc.immediate();
                immReceived++;
                left.postRecv(leftRecv);
            } else if (op == WcOpcode.RECV) {
                readyReceived++;
                right.postRecv(rightRecv);
            } else {
                sendsPending--;
                if (wc.wrId() == READY_ID) {
                    readySendsPending--;
                }
            }
        }
        return n;
    }

    /**
     * Takes the neighbours' rdma_cm events, and breaks the ring when this wait needs a neighbour
     * that rdma_cm reported DISCONNECTED (its process died or closed its ring) or removed: both
     * connections are disconnected (to ERR: the posted receives and writes flush, and the live
     * neighbour hears of it the same way), and the collective ends with the flush's
     * {@link WorkCompletionException}, naming the neighbour, instead of waiting for the
     * transport's retries or the ring's timeout.
     *
     * <p>A neighbour that closed its ring after its last collective disconnects too, while this
     * rank may still wait for the other one: only the side the wait needs counts. What that side
     * sent before it disconnected completed here before its DISCONNECTED was sent, so the queue is
     * polled once more before the ring is broken; send completions get {@link #SEND_GRACE_NANOS}.
     *
     * @return whether the wait is to poll again rather than block: completions were taken, or the
     *         ring was broken (its flushes are on their way)
     */
    private boolean watchNeighbours(int need, long now) {
        if (leftGone == null) {
            leftGone = watch(leftId, "left", Math.floorMod(rank - 1, size), now);
        }
        if (rightGone == null) {
            rightGone = watch(rightId, "right", (rank + 1) % size, now);
        }
        String broken = null;
        int took = 0;
        if (need == NEED_LEFT && leftGone != null) {
            took = takeCompletions(); // what the left neighbour sent before it went
            broken = immReceived == 0 ? leftGone : null;
        } else if (need == NEED_RIGHT && rightGone != null) {
            took = takeCompletions();
            broken = readyReceived == 0 ? rightGone : null;
        } else if (need == NEED_SENDS && now - goneAt > SEND_GRACE_NANOS) {
            // only the sends to a side that is gone wait for nothing
            broken = leftGone != null && readySendsPending > 0 ? leftGone
                    : rightGone != null && sendsPending > readySendsPending ? rightGone : null;
        }
        if (broken != null) {
            neighbourGone = broken;
            for (CmId c : new CmId[] {leftId, rightId}) {
                try {
                    c.disconnect();
                } catch (RuntimeException ex) {
                    // already disconnected on the device's side: its requests flush all the same
                }
            }
        }
        return took > 0 || broken != null;
    }

    /** What rdma_cm reported of {@code id}'s neighbour, when it reported it gone now; else {@code null}. */
    private String watch(CmId id, String side, int neighbour, long now) {
        CmEvent e = id.awaitEvent(Duration.ZERO);
        if (e == null || (e.type() != CmEventType.DISCONNECTED && e.type() != CmEventType.DEVICE_REMOVAL)) {
            return null;
        }
        if (leftGone == null && rightGone == null) {
            goneAt = now;
        }
        return "its " + side + " neighbour, rank " + neighbour + ", disconnected (rdma_cm " + e.type() + ")";
    }

    /** Disconnects from both neighbours and frees the buffers. Idempotent. */
    @Override
    public void close() {
        if (state.beginClose()) {
            owned.close();
        }
    }

    /** Whether {@link #close()} has begun. */
    public boolean isClosed() {
        return state.isClosed();
    }

    @Override
    public String toString() {
        return "Ring[rank " + rank + " of " + size + "]";
    }
}
