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
import io.github.verbs4j.PeerLostException;
import io.github.verbs4j.PollSet;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.RdmaTimeoutException;
import io.github.verbs4j.ReceiveRequest;
import io.github.verbs4j.SendOpcode;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.WcStatus;
import io.github.verbs4j.WcOpcode;
import io.github.verbs4j.WorkCompletionException;
import io.github.verbs4j.cm.CmEvent;
import io.github.verbs4j.cm.CmEventType;
import io.github.verbs4j.cm.CmId;
import io.github.verbs4j.cm.ConnectParameters;
import io.github.verbs4j.cm.EventChannel;
import io.github.verbs4j.cm.PortSpace;
import io.github.verbs4j.cm.QpInit;
import io.github.verbs4j.transfer.internal.StreamSpin;

import java.lang.foreign.MemorySegment;
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
 * others (command line, environment...); each other rank {@link #join}s it with its rank, and
 * rank 0 itself calls {@link Rendezvous#join(int, RingOptions)}, which builds its own side of the
 * ring. The
 * ranks' connection requests carry their own ring listener's port; once all arrived, rank 0
 * accepts them with the table of every rank's address in the private data. Then each rank
 * connects to its right neighbour and accepts its left one, whose accept carries the address
 * and rkey of its buffers. Addresses are IPv4; at most {@link #MAX_RANKS} ranks.
 *
 * <p><b>Collectives</b>, as NCCL defines them, for {@code float}, {@code double}, {@code int} and
 * {@code long} ({@link ElementType}) with {@link ReduceOp} SUM, PROD, MIN and MAX, on Java arrays
 * and on {@link MemorySegment}s of any kind (copied into the ring's registered buffer and back;
 * {@link #allreduceInWorkspace} reduces a slice of that buffer, {@link #workspace()}, in place):
 * <ul>
 * <li>{@link #allreduce(float[], ReduceOp)}: the reduction over all ranks, element by element,
 * left in every rank's array;</li>
 * <li>{@link #reduceScatter(float[], float[], ReduceOp)}: the array (a multiple of the ring's
 * size) cut into {@code size} equal blocks; rank {@code r} receives block {@code r} reduced;</li>
 * <li>{@link #allGather(float[], float[])}: every rank receives every rank's array, in rank
 * order;</li>
 * <li>{@link #broadcast(float[], int)}: every rank receives the root's array.</li>
 * </ul>
 * Reduce-scatter ({@code size - 1} steps) sends one chunk into the right neighbour's staging
 * buffer with RDMA WRITE and reduces into its own the chunk the left neighbour wrote, leaving
 * chunk {@code rank} fully reduced on each rank; all-gather ({@code size - 1} steps) writes the
 * chunks straight into the neighbours' arrays; allreduce is the two in a row (each rank moves
 * {@code 2 (size - 1) / size} of the array: the ring's bound on bus bandwidth). Before a phase
 * that writes into the neighbours' arrays each rank tells its left neighbour (a SEND) that its
 * own earlier writes have completed, so no chunk is overwritten while the device still reads it.
 *
 * <p><b>Pipeline</b>: each chunk is cut into pieces (as many as the chunk's size gives, at
 * least 64 KiB each, at most 16 or a quarter of the send queue), each its own WRITE with
 * immediate data; a rank reduces (or, in all-gather and broadcast, forwards) a piece and posts its
 * WRITE to the right at once, while the next piece is still arriving from the left, so the
 * transfer of one piece overlaps the reduction of the one before.
 *
 * <p>Every rank must call the same collectives in the same order with arrays of the same length
 * (at most {@code maxBytes}). Float sums are added in ring order: chunk {@code c} is summed as
 * {@code x[c+1] + x[c+2] + ...} around the ring, ending with rank {@code c}'s, the same on every
 * rank.
 *
 * <p><b>Failures</b>: a neighbour that dies ends the collective with a {@link PeerLostException}
 * naming it, whose cause is the {@link WorkCompletionException} of this rank's request that
 * showed it (and whose status is that request's): rdma_cm's DISCONNECTED shows a killed
 * neighbour's process at once (the ring's connections are then disconnected and the collective
 * ends with the flush, WR_FLUSH_ERROR); a host or link gone without a word shows after the
 * transport's retries (RETRY_EXCEEDED). Any other failed completion (a refused access) is the
 * {@link WorkCompletionException} itself.
 *
 * <p><b>Timeouts</b> ({@link RingOptions}): a rank that does not come within
 * {@link RingOptions#joinTimeout()} ends the join with {@link RdmaTimeoutException}; a
 * collective that does not finish within {@link RingOptions#operationTimeout()} (a neighbour
 * that does not take part, or stalls) throws {@link RdmaTimeoutException} naming the collective,
 * this rank and the neighbour's rank it waited for. The ring is unusable after either failure
 * (the ranks no longer agree where they are): close it.
 *
 * <p><b>Waiting</b>: a rank polls its completion queue for {@link RingOptions#spinWait()} without a result,
 * then blocks on its completion channel (and the neighbours' rdma_cm events) until a completion
 * wakes it, so a rank that waits for a slower neighbour leaves the core to it. Within a
 * collective the spin stretches to four times the usual gap between its completions (at most 20 x
 * spinWait), so a rank whose next piece is still landing keeps polling.
 *
 * <p><b>Thread-safety</b>: one thread at a time; {@link #close()} is idempotent.
 */
public final class Ring implements AutoCloseable {

    /** The most ranks a rendezvous takes (the table travels in 196 bytes of private data). */
    public static final int MAX_RANKS = 32;

    /** The largest single WRITE: a longer piece is posted as several, the last with immediate data. */
    private static final int PIECE = 1 << 20;
    /** The smallest piece a chunk is cut into for the pipeline ({@link #piecesFor}). */
    private static final long MIN_PIECE = 64 << 10;
    /** The most pieces a chunk is cut into: beyond, the per-piece cost outweighs the overlap won. */
    private static final int MAX_PIECES = 16;
    private static final int SCRATCH = 64;
    private static final byte MAGIC = 'R';
    /** Immediate data of a piece: the collective's phase, the step (below MAX_RANKS) and the piece (below 2^20). */
    private static final int TAG_SCATTER = 1 << 28;
    private static final int TAG_GATHER = 2 << 28;
    private static final int TAG_BCAST = 3 << 28;
    private static final int STEP_SHIFT = 20;
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
    /**
     * What a wait needs: a chunk from the left neighbour, a message from the right one, send
     * completions, or the completions of the writes to the right only.
     */
    private static final int NEED_LEFT = 0;
    private static final int NEED_RIGHT = 1;
    private static final int NEED_SENDS = 2;
    private static final int NEED_WRITES = 3;
    /** Work request ids of the writes to the right neighbour and of the ready messages to the left one. */
    private static final long WRITE_ID = 3;
    private static final long READY_ID = 4;

    private final int rank;
    private final int size;
    private final long maxBytes;
    /** How long each collective may take ({@link RingOptions#operationTimeout()}). */
    private final Duration operationTimeout;
    /**
     * How long a wait polls without a result before it blocks: {@link RingOptions#spinWait()} (a
     * few round trips, so that a step whose chunk is on its way is not put to sleep, while a rank
     * that waits for a slower neighbour leaves the core to it), stretched within a collective to a
     * few of its usual gaps between completions ({@link StreamSpin}): a piece of 64 KiB to 1 MiB
     * shows only when its last packet lands.
     */
    private final StreamSpin waitSpin;
    /** The collective in progress, named by its timeout. */
    private String collective = "";
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
    /**
     * Immediates taken but not yet awaited: the left neighbour runs at most about three phases of
     * pieces ahead (the rest of a collective and the next one's reduce-scatter), so four suffice.
     */
    private final int[] imms = new int[4 * MAX_PIECES * MAX_RANKS];
    /** The most pieces per chunk: a quarter of the send queue, so a step's pieces are posted without a wait. */
    private final int maxPieces;
    /**
     * Where the collective in progress has its data in the data area: 0 but for
     * {@link #allreduceInWorkspace} (its slice's offset; its staging as far into the staging area).
     */
    private long base;
    /** Whether the right neighbour still owes the word that its staging is free (after a reduce-scatter). */
    private boolean stagingReadyOwed;
    private int immHead;
    /**
     * The immediate {@link #awaitImm} waits for, named only when the wait times out: a message
     * made for every poll would allocate a string per round of the spin.
     */
    private int awaitedChunk;
    /** Bytes copied between callers' memory and the registered buffer ({@link #bytesCopied()}). */
    private long bytesCopied;
    private final CloseState state = new CloseState();

    private Ring(int rank, int size, RingOptions options, Closer owned, MemoryRegion buffer,
            CompletionQueue cq, CompletionChannel completionEvents, EventChannel leftEvents, EventChannel rightEvents,
            CmId rightId, CmId leftId, long rightAddress, int rightRkey, int sendDepth) {
        this.rank = rank;
        this.size = size;
        this.maxBytes = options.maxBytes();
        this.operationTimeout = options.operationTimeout();
        this.waitSpin = new StreamSpin(options.spinWait().toNanos());
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
        this.maxPieces = Math.min(MAX_PIECES, Math.max(1, sendDepth / 4));
        long scratch = 2 * this.maxBytes;
        this.leftRecv = ReceiveRequest.create().id(1).local(buffer, scratch, SCRATCH);
        this.rightRecv = ReceiveRequest.create().id(2).local(buffer, scratch + SCRATCH, SCRATCH);
        this.ready.local(buffer, scratch + 2 * SCRATCH, 4);
        state.opened(this); // for the test harness's leak check
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
     * Made by {@link #rendezvous(InetSocketAddress)}; {@link #join(int, RingOptions)} consumes it.
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
         * The shorthand of {@link #join(int, RingOptions)} with {@link RingOptions#defaults()} but
         * {@code maxBytes} and the join's {@code timeout}: collectives get
         * {@link RingOptions#DEFAULT_OPERATION_TIMEOUT} each, not {@code timeout}.
         */
        public Ring join(int size, long maxBytes, Duration timeout) {
            return join(size, RingOptions.defaults().withMaxBytes(maxBytes).withJoinTimeout(timeout));
        }

        /**
         * Waits for ranks 1..size-1, sends them the table and builds rank 0's side of the ring.
         *
         * <p><b>Errors</b>: {@link RdmaTimeoutException} when not every rank came within
         * {@link RingOptions#joinTimeout()}; {@link IllegalArgumentException} for a bad size or two
         * ranks with one number.
         */
        public Ring join(int size, RingOptions options) {
            checkSize(size);
            Objects.requireNonNull(options, "options");
            Deadline deadline = Deadline.after(options.joinTimeout());
            CmId[] requests = new CmId[size];
            InetSocketAddress[] table = new InetSocketAddress[size];
            RingSide side = new RingSide(options, new InetSocketAddress(address().getAddress(), 0));
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
                    id.createQueuePair(pd, side.cq, side.cq, QpInit.defaults().withMaxSendWr(1).withMaxRecvWr(1));
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
     * The shorthand of {@link #join(InetSocketAddress, int, int, RingOptions)} with
     * {@link RingOptions#defaults()} but {@code maxBytes} and the join's {@code timeout}:
     * collectives get {@link RingOptions#DEFAULT_OPERATION_TIMEOUT} each, not {@code timeout}.
     *
     * @param maxBytes the largest array a collective will take, in bytes (every rank the same)
     * @param timeout  how long the rendezvous and the ring's connections may take
     */
    public static Ring join(InetSocketAddress rendezvous, int rank, int size, long maxBytes, Duration timeout) {
        return join(rendezvous, rank, size, RingOptions.defaults().withMaxBytes(maxBytes).withJoinTimeout(timeout));
    }

    /**
     * Joins the ring as {@code rank} (1..size-1) through rank 0's rendezvous at {@code rendezvous}.
     *
     * <p><b>Errors</b>: {@link RdmaTimeoutException} when the rendezvous or the neighbours'
     * connections did not complete within {@link RingOptions#joinTimeout()};
     * {@link IllegalArgumentException} for a bad rank or size, a wildcard or unresolved
     * {@code rendezvous}; {@link io.github.verbs4j.cm.CmEventException} when rank 0 refused the rank.
     */
    public static Ring join(InetSocketAddress rendezvous, int rank, int size, RingOptions options) {
        Objects.requireNonNull(rendezvous, "rendezvous");
        Objects.requireNonNull(options, "options");
        if (rendezvous.getAddress() == null || rendezvous.getAddress().isAnyLocalAddress()) {
            throw new IllegalArgumentException("join the rendezvous at rank 0's address, not " + rendezvous);
        }
        checkSize(size);
        if (rank < 1 || rank >= size) {
            throw new IllegalArgumentException("rank must be within 1.." + (size - 1) + " (rank 0 opens the rendezvous), got "
                    + rank);
        }
        Deadline deadline = Deadline.after(options.joinTimeout());
        InetSocketAddress[] table = new InetSocketAddress[size];
        try (EventChannel channel = EventChannel.create(); CmId id = channel.createId(PortSpace.TCP)) {
            id.resolveAddress(null, rendezvous, deadline.remaining());
            id.resolveRoute(deadline.remaining());
            RingSide side = new RingSide(options, new InetSocketAddress(id.localAddress().getAddress(), 0));
            try {
                id.createQueuePair(side.pd, side.cq, side.cq, QpInit.defaults().withMaxSendWr(1).withMaxRecvWr(1));
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

    /**
     * The receives posted for the left neighbour's immediate data: a few steps of pieces, so the
     * left rarely finds none (it would then wait out a receiver-not-ready retry, never fail: the
     * ring connects with unbounded RNR retries).
     */
    private static int leftReceives(int size) {
        return MAX_PIECES * (size - 1) + 16;
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
        final RingOptions options;
        final long maxBytes;

        RingSide(RingOptions options, InetSocketAddress at) {
            this.options = options;
            this.maxBytes = options.maxBytes();
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
            int recvDepth = leftReceives(size);
            // accept the left neighbour in another thread while connecting to the right one
            CompletableFuture<CmId> leftSide = CompletableFuture.supplyAsync(() -> {
                CmEvent e = listener.getRequest(deadline.remaining());
                if (e == null) {
                    throw deadline.timedOut("the left neighbour's connection");
                }
                CmId id = e.id();
                try {
                    QueuePair qp = id.createQueuePair(pd, cq, cq, QpInit.defaults().withMaxSendWr(depth).withMaxRecvWr(recvDepth));
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
                QueuePair rq = rightId.createQueuePair(pd, cq, cq, QpInit.defaults().withMaxSendWr(depth).withMaxRecvWr(8));
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
                return new Ring(rank, size, options, owned, buffer, cq, completionEvents,
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
        allreduce(data, ReduceOp.SUM);
    }

    /** Sums {@code data} element by element over all ranks, in place on every rank. */
    public void allreduce(double[] data) {
        allreduce(data, ReduceOp.SUM);
    }

    /** Sums {@code data} element by element over all ranks, in place on every rank. */
    public void allreduce(int[] data) {
        allreduce(data, ReduceOp.SUM);
    }

    /** Sums {@code data} element by element over all ranks, in place on every rank. */
    public void allreduce(long[] data) {
        allreduce(data, ReduceOp.SUM);
    }

    /** Reduces {@code data} element by element over all ranks with {@code op}, in place on every rank. */
    public void allreduce(float[] data, ReduceOp op) {
        allreduce(MemorySegment.ofArray(data), ElementType.FLOAT, op);
    }

    /** Reduces {@code data} element by element over all ranks with {@code op}, in place on every rank. */
    public void allreduce(double[] data, ReduceOp op) {
        allreduce(MemorySegment.ofArray(data), ElementType.DOUBLE, op);
    }

    /** Reduces {@code data} element by element over all ranks with {@code op}, in place on every rank. */
    public void allreduce(int[] data, ReduceOp op) {
        allreduce(MemorySegment.ofArray(data), ElementType.INT, op);
    }

    /** Reduces {@code data} element by element over all ranks with {@code op}, in place on every rank. */
    public void allreduce(long[] data, ReduceOp op) {
        allreduce(MemorySegment.ofArray(data), ElementType.LONG, op);
    }

    /**
     * Reduces the elements of {@code data} (any segment: heap, native, mapped) element by element
     * over all ranks with {@code op}, in place on every rank. The chunks this rank reduces are read
     * from {@code data} by the reduction itself, the one it sends first is copied into the ring's
     * registered buffer, and the result is copied back piece by piece as it arrives
     * ({@link #bytesCopied()}: {@code S / size()} in, {@code S} out).
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} when {@code data} is not a whole number of
     * elements, exceeds {@link #maxBytes()} or is read-only.
     */
    public void allreduce(MemorySegment data, ElementType type, ReduceOp op) {
        Objects.requireNonNull(type, "type");
        Objects.requireNonNull(op, "op");
        long bytes = checkWhole("data", data, type);
        checkFits("data", bytes);
        checkWritable("data", data);
        long count = bytes / type.bytes();
        if (count == 0) {
            return;
        }
        long deadline = start("allreduce");
        if (apart(data)) {
            allreduceAt(0, count, type, op, data, deadline);
        } else {
            copy(data, 0, buffer.segment(), 0, bytes);
            allreduceAt(0, count, type, op, null, deadline);
            copy(buffer.segment(), 0, data, 0, bytes);
        }
    }

    /**
     * The bytes this ring has copied between the callers' memory and its registered buffer since
     * it opened, both ways: the cost of the copying collectives that {@link #allreduceInWorkspace}
     * does not have. An allreduce of {@code S} bytes copies {@code S / size()} in (the chunk it
     * sends first; the chunks it reduces are read straight from the caller's memory) and {@code S}
     * out (each piece as it lands, while the next is on its way); a reduce-scatter {@code S /
     * size()} in and its block out; an all-gather and a broadcast their data in and out.
     */
    public long bytesCopied() {
        return bytesCopied;
    }

    /**
     * Whether {@code s} lies outside the registered buffer, so that a collective may read it or
     * write it piece by piece while the buffer changes; one inside (a {@link #workspace()} slice
     * given to a copying collective) is copied whole before and after instead.
     */
    private boolean apart(MemorySegment s) {
        return buffer.segment().asOverlappingSlice(s).isEmpty();
    }

    /** Copies between a caller's segment and the registered buffer, counted in {@link #bytesCopied}. */
    private void copy(MemorySegment from, long fromOffset, MemorySegment to, long toOffset, long bytes) {
        MemorySegment.copy(from, fromOffset, to, toOffset, bytes);
        bytesCopied += bytes;
    }

    /**
     * The ring's registered data area, {@link #maxBytes()} bytes of native memory, for
     * {@link #allreduceInWorkspace}: a collective on a slice of it needs neither the copy into
     * the registered buffer nor the copy back, as NCCL works on device buffers. Its contents are
     * this rank's between collectives; the copying collectives use it too (from its start), so
     * what it holds is overwritten by any of them. Closed with the ring: an access after
     * {@link #close()} throws {@link IllegalStateException}.
     */
    public MemorySegment workspace() {
        state.ensureOpen(this);
        return buffer.segment().asSlice(0, maxBytes);
    }

    /**
     * {@link #allreduce(MemorySegment, ElementType, ReduceOp)} without copies: {@code data} is a
     * slice of {@link #workspace()}, reduced there in place. Every rank passes a slice at the
     * same offset and of the same size (the neighbours write into this rank's workspace at the
     * offsets of their own slice).
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} when {@code data} is not inside this
     * ring's workspace (naming both ranges: another segment takes the copying
     * {@link #allreduce(MemorySegment, ElementType, ReduceOp)}) or not a whole number of elements.
     */
    public void allreduceInWorkspace(MemorySegment data, ElementType type, ReduceOp op) {
        Objects.requireNonNull(type, "type");
        Objects.requireNonNull(op, "op");
        long bytes = checkWhole("data", data, type);
        checkFits("data", bytes);
        long at = data.address() - buffer.address();
        if (!data.isNative() || at < 0 || at + bytes > maxBytes) {
            throw new IllegalArgumentException("data (" + (data.isNative() ? "native, 0x" + Long.toHexString(data.address())
                    + ", " : "on the heap, ") + bytes + " bytes) is not inside this ring's workspace (0x"
                    + Long.toHexString(buffer.address()) + ", " + maxBytes + " bytes): take workspace() slices,"
                    + " or allreduce(MemorySegment, ElementType, ReduceOp), which copies");
        }
        checkWritable("data", data);
        long count = bytes / type.bytes();
        if (count == 0) {
            return;
        }
        allreduceAt(at, count, type, op, null, start("allreduce"));
    }

    /**
     * Allreduce of {@code count} elements at byte {@code at} of the data area: in place when
     * {@code data} is {@code null}, else of {@code data}'s elements (at 0), read from it as the
     * reduce-scatter needs them and written back to it piece by piece as the all-gather brings them.
     */
    private void allreduceAt(long at, long count, ElementType type, ReduceOp op, MemorySegment data, long deadline) {
        base = at;
        try {
            int pieces = piecesFor(count * type.bytes() / size);
            reduceScatterPhase(count, type, op, pieces, data, deadline);
            // this rank's writes of reduce-scatter have been read out: the left neighbour may overwrite
            awaitSends(0, deadline);
            sendReady(deadline);
            awaitReady(deadline);
            allGatherPhase(count, type.bytes(), pieces, data, deadline);
        } finally {
            base = 0;
        }
    }

    /**
     * NCCL's reduce-scatter: {@code send} (every rank's of one length, a multiple of the ring's
     * size) is cut into {@link #size()} equal blocks; rank {@code r} receives block {@code r}
     * reduced over all ranks with {@code op} in the first {@code send.length / size()} elements of
     * {@code recv}.
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} as {@link #reduceScatter(MemorySegment,
     * MemorySegment, ElementType, ReduceOp)}.
     */
    public void reduceScatter(float[] send, float[] recv, ReduceOp op) {
        reduceScatter(MemorySegment.ofArray(send), MemorySegment.ofArray(recv), ElementType.FLOAT, op);
    }

    /** As {@link #reduceScatter(float[], float[], ReduceOp)}, for doubles. */
    public void reduceScatter(double[] send, double[] recv, ReduceOp op) {
        reduceScatter(MemorySegment.ofArray(send), MemorySegment.ofArray(recv), ElementType.DOUBLE, op);
    }

    /** As {@link #reduceScatter(float[], float[], ReduceOp)}, for ints. */
    public void reduceScatter(int[] send, int[] recv, ReduceOp op) {
        reduceScatter(MemorySegment.ofArray(send), MemorySegment.ofArray(recv), ElementType.INT, op);
    }

    /** As {@link #reduceScatter(float[], float[], ReduceOp)}, for longs. */
    public void reduceScatter(long[] send, long[] recv, ReduceOp op) {
        reduceScatter(MemorySegment.ofArray(send), MemorySegment.ofArray(recv), ElementType.LONG, op);
    }

    /**
     * NCCL's reduce-scatter on segments: {@code send}'s elements are cut into {@link #size()} equal
     * blocks; rank {@code r} receives block {@code r} reduced over all ranks with {@code op} at the
     * start of {@code recv} ({@code send.byteSize() / size()} bytes; the rest of {@code recv} is left
     * alone). {@code send} is not changed; the two may overlap.
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} when {@code send} is not a whole number of
     * elements, its element count is not divisible by the ring's size, it exceeds
     * {@link #maxBytes()}, or {@code recv} is smaller than one block or read-only.
     */
    public void reduceScatter(MemorySegment send, MemorySegment recv, ElementType type, ReduceOp op) {
        Objects.requireNonNull(type, "type");
        Objects.requireNonNull(op, "op");
        long bytes = checkWhole("send", send, type);
        long count = bytes / type.bytes();
        if (count % size != 0) {
            throw new IllegalArgumentException("send has " + count + " " + type + " elements, not divisible by the ring's "
                    + size + " ranks");
        }
        checkFits("send", bytes);
        long block = bytes / size;
        checkRoom("recv", recv, block, "one block (" + count + " elements / " + size + " ranks)");
        if (count == 0) {
            return;
        }
        long deadline = start("reduceScatter");
        MemorySegment source = send;
        if (!apart(send)) {
            copy(send, 0, buffer.segment(), 0, bytes);
            source = null;
        }
        reduceScatterPhase(count, type, op, piecesFor(block), source, deadline);
        // the left neighbour may write into this rank's staging again once told (see start()); that
        // word is not awaited: the left may have ended its last collective and closed its ring
        sendReady(deadline);
        stagingReadyOwed = true;
        awaitWrites(deadline);
        copy(buffer.segment(), rank * block, recv, 0, block);
    }

    /**
     * NCCL's all-gather: every rank receives every rank's {@code send} (all of one length) in rank
     * order: rank {@code r}'s at element {@code r * send.length} of {@code recv}, which holds at
     * least {@code size() * send.length} elements.
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} as {@link #allGather(MemorySegment, MemorySegment)}.
     */
    public void allGather(float[] send, float[] recv) {
        allGather(MemorySegment.ofArray(send), MemorySegment.ofArray(recv));
    }

    /** As {@link #allGather(float[], float[])}, for doubles. */
    public void allGather(double[] send, double[] recv) {
        allGather(MemorySegment.ofArray(send), MemorySegment.ofArray(recv));
    }

    /** As {@link #allGather(float[], float[])}, for ints. */
    public void allGather(int[] send, int[] recv) {
        allGather(MemorySegment.ofArray(send), MemorySegment.ofArray(recv));
    }

    /** As {@link #allGather(float[], float[])}, for longs. */
    public void allGather(long[] send, long[] recv) {
        allGather(MemorySegment.ofArray(send), MemorySegment.ofArray(recv));
    }

    /**
     * NCCL's all-gather on segments (bytes: the element type does not matter): every rank receives
     * every rank's {@code send} (all of one size) in rank order, rank {@code r}'s at byte
     * {@code r * send.byteSize()} of {@code recv}; the rest of {@code recv} is left alone.
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} when {@code size() * send.byteSize()}
     * exceeds {@link #maxBytes()}, or {@code recv} is smaller than that or read-only.
     */
    public void allGather(MemorySegment send, MemorySegment recv) {
        Objects.requireNonNull(send, "send");
        long block = send.byteSize();
        long bytes = block * size;
        checkFits("size() * send", bytes);
        checkRoom("recv", recv, bytes, size + " blocks of " + block + " bytes");
        if (block == 0) {
            return;
        }
        long deadline = start("allGather");
        copy(send, 0, buffer.segment(), rank * block, block);
        // the left neighbour writes into this rank's array: once this rank's last collective is done with it
        sendReady(deadline);
        awaitReady(deadline);
        boolean piecewise = apart(recv);
        allGatherPhase(bytes, 1, piecesFor(block), piecewise ? recv : null, deadline);
        if (!piecewise) {
            copy(buffer.segment(), 0, recv, 0, bytes);
        }
    }

    /** Replaces {@code data} on every rank by the root's. */
    public void broadcast(byte[] data, int root) {
        broadcast(MemorySegment.ofArray(data), root);
    }

    /** Replaces {@code data} on every rank by the root's. */
    public void broadcast(float[] data, int root) {
        broadcast(MemorySegment.ofArray(data), root);
    }

    /** Replaces {@code data} on every rank by the root's. */
    public void broadcast(double[] data, int root) {
        broadcast(MemorySegment.ofArray(data), root);
    }

    /** Replaces {@code data} on every rank by the root's. */
    public void broadcast(int[] data, int root) {
        broadcast(MemorySegment.ofArray(data), root);
    }

    /** Replaces {@code data} on every rank by the root's. */
    public void broadcast(long[] data, int root) {
        broadcast(MemorySegment.ofArray(data), root);
    }

    /**
     * Replaces the bytes of {@code data} on every rank by the root's (every rank's {@code data} of
     * one size).
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} for a root outside {@code 0..size()-1},
     * or {@code data} larger than {@link #maxBytes()} or read-only.
     */
    public void broadcast(MemorySegment data, int root) {
        Objects.requireNonNull(data, "data");
        if (root < 0 || root >= size) {
            throw new IllegalArgumentException("root must be within 0.." + (size - 1) + ", got " + root);
        }
        long bytes = data.byteSize();
        checkFits("data", bytes);
        checkWritable("data", data);
        if (bytes == 0) {
            return;
        }
        long deadline = start("broadcast");
        int pieces = piecesFor(bytes);
        if (rank == root) {
            copy(data, 0, buffer.segment(), 0, bytes);
            awaitReady(deadline);
            for (int j = 0; j < pieces; j++) {
                writeChunk(bytes * j / pieces, bytes * j / pieces, bytes * (j + 1) / pieces - bytes * j / pieces,
                        tag(TAG_BCAST, 0, j), deadline);
            }
        } else {
            boolean forward = (rank + 1) % size != root;
            sendReady(deadline);
            for (int j = 0; j < pieces; j++) {
                awaitImm(tag(TAG_BCAST, 0, j), deadline);
                if (forward) {
                    if (j == 0) {
                        awaitReady(deadline);
                    }
                    writeChunk(bytes * j / pieces, bytes * j / pieces, bytes * (j + 1) / pieces - bytes * j / pieces,
                        tag(TAG_BCAST, 0, j), deadline);
                }
            }
        }
        awaitSends(0, deadline);
        if (rank != root) {
            copy(buffer.segment(), 0, data, 0, bytes);
        }
    }

    private long checkWhole(String name, MemorySegment s, ElementType type) {
        Objects.requireNonNull(s, name);
        long bytes = s.byteSize();
        if (bytes % type.bytes() != 0) {
            throw new IllegalArgumentException(name + " has " + bytes + " bytes, not a whole number of " + type.bytes()
                    + "-byte " + type + " elements");
        }
        return bytes;
    }

    private void checkFits(String name, long bytes) {
        state.ensureOpen(this);
        if (bytes > maxBytes) {
            throw new IllegalArgumentException(name + " has " + bytes + " bytes, more than the ring's maxBytes " + maxBytes);
        }
    }

    private static void checkWritable(String name, MemorySegment s) {
        if (s.isReadOnly()) {
            throw new IllegalArgumentException(name + " is read-only: the result is written into it");
        }
    }

    private static void checkRoom(String name, MemorySegment s, long bytes, String what) {
        Objects.requireNonNull(s, name);
        if (s.byteSize() < bytes) {
            throw new IllegalArgumentException(name + " has " + s.byteSize() + " bytes, too small for " + what + ": "
                    + bytes + " bytes");
        }
        checkWritable(name, s);
    }

    /**
     * The deadline of collective {@code name} that begins now ({@link RingOptions#operationTimeout()}
     * from now); first takes the right neighbour's word that its staging is free when the last
     * collective was a reduce-scatter: that one ends without waiting for it (its last chunk from
     * the left may still be being reduced on the right, and the next collective's first writes go
     * to the same staging).
     */
    private long start(String name) {
        collective = name;
        waitSpin.streamEnded(); // the time since the last collective is the application's
        idleSince = NOT_IDLE;
        long deadline = System.nanoTime() + operationTimeout.toNanos();
        if (stagingReadyOwed) {
            awaitReady(deadline);
            stagingReadyOwed = false;
        }
        return deadline;
    }

    /** The first element of chunk {@code c} of {@code count} elements cut in {@link #size} chunks. */
    private long chunkStart(long count, int c) {
        return count * c / size;
    }

    /** The first element of piece {@code j} of {@code pieces} of chunk {@code c}. */
    private long pieceStart(long count, int c, int j, int pieces) {
        long a = chunkStart(count, c);
        return a + (chunkStart(count, c + 1) - a) * j / pieces;
    }

    /**
     * How many pieces a chunk of {@code chunkBytes} is cut into: enough that the reduction (or the
     * forwarding) of one piece overlaps the transfer of the next, none below {@link #MIN_PIECE}
     * (each piece costs a work request and a completion on both sides), and few enough that a
     * step's pieces fit the send queue together.
     */
    private int piecesFor(long chunkBytes) {
        return (int) Math.max(1, Math.min(maxPieces, chunkBytes / MIN_PIECE));
    }

    private static int tag(int kind, int step, int piece) {
        return kind | step << STEP_SHIFT | piece;
    }

    /**
     * Reduce-scatter over {@code count} elements in the data area: after {@code size - 1} steps,
     * chunk {@code rank} holds the reduction over all ranks. At step {@code s} this rank receives
     * chunk {@code rank - s - 2} in its staging from the left (which began it with its own chunk
     * {@code rank - 2} at step 0) and reduces it into its own; each reduced piece goes on to the
     * right at once, while the next piece is still arriving.
     *
     * <p>With a {@code source} (the caller's segment, the elements at 0) the data area holds
     * nothing yet: the chunk sent first is copied in piece by piece just before its WRITEs, and
     * every other chunk is reduced once, from the left's piece and the source's elements into the
     * data area, so no chunk is copied in only to be read once by the reduction.
     */
    private void reduceScatterPhase(long count, ElementType type, ReduceOp op, int pieces, MemorySegment source,
            long deadline) {
        int elem = type.bytes();
        MemorySegment m = buffer.segment();
        int first = Math.floorMod(rank - 1, size);
        for (int j = 0; j < pieces; j++) {
            if (source != null) {
                long a = pieceStart(count, first, j, pieces) * elem;
                copy(source, a, m, base + a, pieceStart(count, first, j + 1, pieces) * elem - a);
            }
            writePiece(count, first, elem, maxBytes, j, pieces, tag(TAG_SCATTER, 0, j), deadline);
        }
        for (int s = 0; s < size - 1; s++) {
            int recv = Math.floorMod(rank - s - 2, size);
            for (int j = 0; j < pieces; j++) {
                awaitImm(tag(TAG_SCATTER, s, j), deadline);
                long a = pieceStart(count, recv, j, pieces) * elem;
                long len = pieceStart(count, recv, j + 1, pieces) * elem - a;
                // the piece arriving from the left carries the reduction of the ranks before this one
                MemorySegment out = m.asSlice(base + a, len);
                Reduction.apply(m.asSlice(maxBytes + base + a, len), source == null ? out : source.asSlice(a, len),
                        out, type, op);
                if (s < size - 2) {
                    writePiece(count, recv, elem, maxBytes, j, pieces, tag(TAG_SCATTER, s + 1, j), deadline);
                }
            }
        }
    }

    /**
     * All-gather over {@code count} elements of {@code elem} bytes, this rank holding chunk
     * {@code rank}: at step {@code s} it receives chunk {@code rank - 1 - s} straight into its data
     * area and forwards each piece as it lands. Ends with every write completed. With a
     * {@code dest} (the caller's segment) each piece is copied out to it once final (this rank's
     * own once posted, the others once forwarded), while the next one is on its way.
     */
    private void allGatherPhase(long count, long elem, int pieces, MemorySegment dest, long deadline) {
        for (int j = 0; j < pieces; j++) {
            writePiece(count, rank, elem, 0, j, pieces, tag(TAG_GATHER, 0, j), deadline);
            copyOut(count, rank, elem, j, pieces, dest);
        }
        for (int s = 0; s < size - 1; s++) {
            int recv = Math.floorMod(rank - 1 - s, size);
            for (int j = 0; j < pieces; j++) {
                awaitImm(tag(TAG_GATHER, s, j), deadline);
                if (s < size - 2) {
                    writePiece(count, recv, elem, 0, j, pieces, tag(TAG_GATHER, s + 1, j), deadline);
                }
                copyOut(count, recv, elem, j, pieces, dest);
            }
        }
        awaitSends(0, deadline);
    }

    /** Copies piece {@code j} of chunk {@code c} of the data area to the same place of {@code dest}, if any. */
    private void copyOut(long count, int c, long elem, int j, int pieces, MemorySegment dest) {
        if (dest != null) {
            long from = pieceStart(count, c, j, pieces) * elem;
            copy(buffer.segment(), base + from, dest, from, pieceStart(count, c, j + 1, pieces) * elem - from);
        }
    }

    /**
     * WRITEs piece {@code j} of chunk {@code c} ({@code count} elements of {@code elem} bytes) to
     * the same place of the right neighbour's data area ({@code toOffset} 0) or its staging
     * ({@code toOffset} {@link #maxBytes}), with immediate {@code imm}.
     */
    private void writePiece(long count, int c, long elem, long toOffset, int j, int pieces, int imm, long deadline) {
        long from = pieceStart(count, c, j, pieces) * elem;
        long end = pieceStart(count, c, j + 1, pieces) * elem;
        writeChunk(base + from, base + toOffset + from, end - from, imm, deadline);
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
            pollOnce(deadline, "the completions of its sends", NEED_SENDS);
        }
    }

    /** Waits for the writes to the right neighbour, not for the ready messages to the left one. */
    private void awaitWrites(long deadline) {
        while (sendsPending > readySendsPending) {
            pollOnce(deadline, "the completions of its writes", NEED_WRITES);
        }
    }

    private void awaitReady(long deadline) {
        while (readyReceived == 0) {
            pollOnce(deadline, "its ready message", NEED_RIGHT);
        }
        readyReceived--;
    }

    private void awaitImm(int tag, long deadline) {
        awaitedChunk = tag;
        while (immReceived == 0) {
            pollOnce(deadline, null, NEED_LEFT);
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
     *
     * @param what what the wait awaits, for a timeout's message; {@code null}: the chunk
     *             {@link #awaitedChunk}
     */
    private void pollOnce(long deadline, String what, int need) {
        if (takeCompletions() > 0) {
            waitSpin.completions(System.nanoTime());
            idleSince = NOT_IDLE;
            return;
        }
        long now = System.nanoTime();
        if (now - deadline > 0) {
            idleSince = NOT_IDLE;
            throw new RdmaTimeoutException(null, awaited(what != null ? what
                    : "its chunk 0x" + Integer.toHexString(awaitedChunk), need), operationTimeout);
        }
        if (idleSince == NOT_IDLE) {
            idleSince = now;
        }
        if (now - idleSince < waitSpin.spinNanos()) {
            Thread.onSpinWait();
            return;
        }
        cq.requestNotify(false);
        if (takeCompletions() > 0) {
            waitSpin.completions(System.nanoTime());
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

    /**
     * What a wait that timed out awaited, for {@link RdmaTimeoutException#awaited()}: the neighbour
     * by rank (whom to look at), what of it, and the collective on this rank, e.g. {@code "rank 0,
     * the left neighbour: its chunk 0x10000000 (allreduce on rank 1 of 3)"}.
     */
    private String awaited(String what, int need) {
        int leftRank = (rank - 1 + size) % size;
        int rightRank = (rank + 1) % size;
        String whom = switch (need) {
            case NEED_LEFT -> "rank " + leftRank + ", the left neighbour";
            case NEED_SENDS -> size == 2 ? "rank " + rightRank + ", both neighbours"
                    : "ranks " + leftRank + " and " + rightRank + ", the neighbours";
            default -> "rank " + rightRank + ", the right neighbour";
        };
        return whom + ": " + what + " (" + collective + " on rank " + rank + " of " + size + ")";
    }

    /** Polls the queue once and accounts for what completed; how many completions it took. */
    private int takeCompletions() {
        int n = cq.poll(wcs);
        for (int k = 0; k < n; k++) {
            Completion wc = wcs.get(k);
            if (!wc.ok()) {
                throw failure(wc);
            }
            WcOpcode op = wc.opcode();
            if (op == WcOpcode.RECV_RDMA_WITH_IMM) {
                if (immReceived == imms.length) {
                    throw new IllegalStateException("rank " + rank + ": more than " + imms.length
                            + " chunks from the left neighbour not yet taken: the ranks did not call the same collectives");
                }
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
     * What a failed completion ends the collective with: a {@link PeerLostException} naming the
     * neighbour when the completion shows it gone (rdma_cm reported it, looked at once more here in
     * case the flush came first; the transport gave up on it; or its connection was flushed), with
     * the completion's {@link WorkCompletionException} as cause; else that exception itself.
     */
    private RuntimeException failure(Completion wc) {
        WorkCompletionException failed = new WorkCompletionException("rank " + rank + "'s " + wc.opcode(), wc.status(),
                wc.wrId(), wc.vendorError(), wc.qpNumber(), wc.opcode());
        String gone = neighbourGone;
        if (gone == null) {
            long now = System.nanoTime();
            int leftRank = Math.floorMod(rank - 1, size);
            int rightRank = (rank + 1) % size;
            leftGone = leftGone != null ? leftGone : watch(leftId, "left", leftRank, now);
            rightGone = rightGone != null ? rightGone : watch(rightId, "right", rightRank, now);
            boolean onLeft = wc.qpNumber() == left.qpNumber();
            gone = onLeft ? leftGone : rightGone;
            if (gone == null && (wc.status() == WcStatus.WR_FLUSH_ERROR || PeerLostException.shows(wc.status()))) {
                gone = "its " + (onLeft ? "left" : "right") + " neighbour, rank " + (onLeft ? leftRank : rightRank)
                        + ", is lost (" + (PeerLostException.shows(wc.status()) ? "the transport gave up on it"
                        : "its connection was flushed") + ")";
            }
        }
        return gone == null ? failed : new PeerLostException("rank " + rank + " of " + size + ": " + gone, failed);
    }

    /**
     * Takes the neighbours' rdma_cm events, and breaks the ring when this wait needs a neighbour
     * that rdma_cm reported DISCONNECTED (its process died or closed its ring) or removed: both
     * connections are disconnected (to ERR: the posted receives and writes flush, and the live
     * neighbour hears of it the same way), and the collective ends with the flush (a
     * {@link PeerLostException} naming the neighbour), instead of waiting for the
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
        } else if (need == NEED_WRITES && now - goneAt > SEND_GRACE_NANOS) {
            broken = rightGone;
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
