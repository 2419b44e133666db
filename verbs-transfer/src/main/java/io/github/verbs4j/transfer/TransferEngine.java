package io.github.verbs4j.transfer;

import io.github.verbs4j.Access;
import io.github.verbs4j.CloseState;
import io.github.verbs4j.Closer;
import io.github.verbs4j.Completion;
import io.github.verbs4j.CompletionChannel;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Completions;
import io.github.verbs4j.Context;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.PeerLostException;
import io.github.verbs4j.PollSet;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.ReceiveRequest;
import io.github.verbs4j.SendOpcode;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.WcStatus;
import io.github.verbs4j.cm.CmEvent;
import io.github.verbs4j.cm.CmEventType;
import io.github.verbs4j.cm.CmId;
import io.github.verbs4j.cm.ConnectParameters;
import io.github.verbs4j.cm.EventChannel;
import io.github.verbs4j.cm.PortSpace;
import io.github.verbs4j.cm.QpInit;
import io.github.verbs4j.transfer.internal.StreamSpin;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A batch transfer engine: registers local segments, publishes their descriptors to peers over
 * rdma_cm, and moves batches of RDMA READ and WRITE between local and remote segments, split into
 * chunks and striped over several queue pairs per peer and several peers.
 *
 * <pre>{@code
 * try (TransferEngine engine = TransferEngine.open("node1", new InetSocketAddress(ip, 0), TransferOptions.defaults())) {
 *     Segment local = engine.allocate("kv-cache", 1L << 30);
 *     TransferPeer node2 = engine.connect(node2Address);
 *     RemoteSegment peer = node2.lookup("kv-cache", Duration.ofSeconds(2));
 *     Batch b = engine.batch(64);
 *     for (int i = 0; i < 64; i++) b.read(local, i * CHUNK, peer, offsets[i], CHUNK);
 *     b.submit().await(Duration.ofSeconds(5));            // then b.status(i) for each request
 * }
 * }</pre>
 *
 * <p><b>Connections</b>: an engine listens on its rdma_cm address ({@link #localAddress()});
 * peers that {@link #connect} to it reach its registered segments with one-sided READ and WRITE
 * (its CPU takes no part) and look up descriptors by name: a service thread accepts connections
 * and answers look-ups (a SEND/RECV exchange on the connection's first queue pair). An engine
 * moves data over the connections it made itself.
 *
 * <p><b>Memory</b>: {@link #allocate} (memory the engine owns), {@link #register} (a segment of
 * {@code Arena.ofAuto()} or {@code Arena.global()}: for example a file or a hugetlbfs file mapped
 * with {@code FileChannel.map(mode, 0, size, Arena.ofAuto())}), or {@link #registerUnsafe} (a
 * segment of a closeable arena that the caller keeps open until it unregisters it). Segments
 * grant remote READ and WRITE.
 *
 * <p><b>Progress</b> is made by the threads that poll or await batches: no thread of the engine
 * touches the data path. Each progress pass takes the completions, then gives every batch in
 * flight (oldest first, up to {@link TransferOptions#maxBatches()}) the room the queue pairs have:
 * so one thread awaiting one batch keeps every queue pair's send queue full with the chunks of
 * the batches submitted after it, and batches flow back to back. The chunks a pass gives one
 * queue pair go out as one chain (one {@code ibv_post_send}, one doorbell), and only every
 * quarter of the depth and each chain's last are signaled ({@code Lane}). Steady state allocates
 * nothing: each queue pair's work requests are pre-allocated slots, and batches are reused with
 * {@link Batch#reset()}.
 *
 * <p><b>Lifecycle</b>: {@link #close()} stops the service thread, closes connections and
 * deregisters every segment; idempotent.
 */
public final class TransferEngine implements AutoCloseable {

    private static final Access[] SEGMENT_ACCESS = {Access.LOCAL_WRITE, Access.REMOTE_READ, Access.REMOTE_WRITE};

    /**
     * The longest single block of a wait: a bound on a wake-up lost to a race the arming does not
     * cover (none is known), not how a completion is noticed.
     */
    static final long MAX_BLOCK_MILLIS = 50;

    /**
     * The longest single block of the service thread: how long {@link #close()} may wait for it
     * to notice, since nothing wakes it for that.
     */
    static final long SERVICE_BLOCK_MILLIS = 20;

    private final String name;
    private final TransferOptions options;
    private final EventChannel serviceChannel;
    private final EventChannel activeChannel;
    /**
     * Where the connections this engine made report their rdma_cm events once established (moved
     * here from {@link #activeChannel}, whose events the connects in progress wait for): the
     * service thread reads it, so a peer's DISCONNECTED fails its requests at once.
     */
    private final EventChannel peerEvents;
    /** The completion channel of every peer's queues: what a wait blocks on once its spin is spent. */
    private final CompletionChannel completionEvents;
    /** Held by the one thread that blocks for the engine ({@link #awaitEvents}); the others wait for it. */
    private final ReentrantLock blocking = new ReentrantLock();
    /** {@link #completionEvents} and {@link #peerEvents}, waited on together (under {@link #blocking}). */
    private final PollSet waitSet = new PollSet(2);
    /** How long a wait spins before it blocks: spinWait, stretched while batches stream. */
    private final StreamSpin waitSpin;
    private final CmId listener;
    private final Context context;
    private final ProtectionDomain pd;
    private final Map<String, Segment> segments = new ConcurrentHashMap<>();
    private final List<TransferPeer> peers = new ArrayList<>();
    private TransferPeer[] peerArray = new TransferPeer[0];
    private final Batch[] inflight;
    private int inflightCount;
    /**
     * What the data path did so far (under this monitor): chunks posted, the chains (doorbells)
     * that carried them, and the completions taken for them. For the tests that show the chains
     * and the selective signaling; counting costs three increments per pass.
     */
    long chunksPosted;
    long chainsPosted;
    long completionsTaken;
    /**
     * How many requests the posting scans looked at (under this monitor), for the test that shows
     * a pass with no room stops scanning; one increment per request looked at.
     */
    long requestsScanned;
    /** Progress passes so far (under this monitor): a peer found full in pass {@code n} is skipped for the rest of it. */
    long pass;
    /**
     * Waits that blocked ({@link #awaitEvents} reaching its poll), under {@link #blocking}: for
     * the test that shows a wait back from a pause spins before it blocks.
     */
    long waitsBlocked;
    /**
     * Of {@link #waitsBlocked}, those decided on the wait's first poll after {@link #AWAY_NANOS}
     * or more without one (the thread was away: descheduled, or kept out of this monitor), under
     * {@link #blocking}: what the test counts, apart from the blocks of the stream itself.
     */
    long waitsBlockedBackFromAway;
    /** How long a wait went without polling for its next poll to count as back from away ({@link #waitsBlockedBackFromAway}). */
    static final long AWAY_NANOS = 1_000_000;
    /** Peers of {@link #peerArray} found full in the current pass. */
    private int fullPeers;
    private final Thread service;
    private final CloseState state = new CloseState();
    /** Whether close() has released the resources (under this monitor): progress() stops then. */
    private boolean released;

    // service side: connections accepted from peers (touched by the service thread only)
    private final CompletionQueue serviceSendCq;
    private final CompletionQueue serviceRecvCq;
    /**
     * The completion channel of the two service queues: the service thread polls them only once it
     * fired. Polling them every tick was not free: softrdma's poll of an empty queue serves the
     * process's waiting packets (up to 16), so on a peer that READs from this engine the service
     * thread answered up to 16 READs (1 MiB at 64 KiB) every 2 ms beside the agent, a third
     * thread competing for the two CPUs the READ stream runs on.
     */
    private final CompletionChannel lookupEvents;
    /** Polls of the service queues so far (by the service thread), for the test that bounds them. */
    final AtomicLong serviceCqPolls = new AtomicLong();
    /** Passes of the service loop so far (each after a wake-up or a block's end), for the same test. */
    final AtomicLong servicePasses = new AtomicLong();
    private final Completions serviceCompletions = new Completions(16);
    private final List<Accepted> accepted = new ArrayList<>();

    private record Accepted(CmId id, QueuePair qp, MemoryRegion buffer, ReceiveRequest recv, SendRequest send) {
    }

    private TransferEngine(String name, TransferOptions options, EventChannel serviceChannel, EventChannel activeChannel,
            EventChannel peerEvents, CompletionChannel completionEvents, CmId listener, Context context,
            ProtectionDomain pd, CompletionChannel lookupEvents, CompletionQueue sendCq, CompletionQueue recvCq) {
        this.name = name;
        this.options = options;
        this.serviceChannel = serviceChannel;
        this.activeChannel = activeChannel;
        this.peerEvents = peerEvents;
        this.completionEvents = completionEvents;
        this.waitSpin = new StreamSpin(options.spinWait().toNanos());
        waitSet.add(completionEvents.fd());
        waitSet.add(peerEvents.fd());
        this.listener = listener;
        this.context = context;
        this.pd = pd;
        this.lookupEvents = lookupEvents;
        this.serviceSendCq = sendCq;
        this.serviceRecvCq = recvCq;
        this.inflight = new Batch[options.maxBatches()];
        this.service = Thread.ofPlatform().daemon().name("verbs4j-transfer-" + name).unstarted(this::serve);
        state.opened(this); // for the test harness's leak check
    }

    /**
     * Opens an engine named {@code name} listening on {@code listen}: the address of an RDMA
     * device (port 0 picks a free port; the wildcard address is refused, since the engine's
     * memory is registered on the device that address selects).
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} for a bad name or a wildcard address;
     * {@link io.github.verbs4j.VerbsException} from rdma_cm (EADDRINUSE, EADDRNOTAVAIL for an
     * address no RDMA device has) or the device.
     */
    public static TransferEngine open(String name, InetSocketAddress listen, TransferOptions options) {
        SegmentDescriptor.checkName("name", name);
        Objects.requireNonNull(listen, "listen");
        Objects.requireNonNull(options, "options");
        if (listen.getAddress() == null || listen.getAddress().isAnyLocalAddress()) {
            throw new IllegalArgumentException("listen on the address of an RDMA device, not " + listen);
        }
        List<AutoCloseable> made = new ArrayList<>();
        try {
            EventChannel serviceChannel = add(made, EventChannel.create());
            EventChannel activeChannel = add(made, EventChannel.create());
            EventChannel peerEvents = add(made, EventChannel.create());
            CmId listener = add(made, serviceChannel.createId(PortSpace.TCP));
            listener.bind(listen);
            listener.listen(64);
            Context context = listener.context();
            if (context == null) {
                throw new IllegalArgumentException(listen + " selects no RDMA device");
            }
            ProtectionDomain pd = add(made, context.allocatePd());
            CompletionChannel completionEvents = add(made, context.createCompletionChannel());
            CompletionChannel lookupEvents = add(made, context.createCompletionChannel());
            CompletionQueue sendCq = add(made, context.createCq(64, lookupEvents, 0));
            CompletionQueue recvCq = add(made, context.createCq(64, lookupEvents, 0));
            TransferEngine engine = new TransferEngine(name, options, serviceChannel, activeChannel, peerEvents,
                    completionEvents, listener, context, pd, lookupEvents, sendCq, recvCq);
            engine.service.start();
            return engine;
        } catch (RuntimeException | Error e) {
            for (int i = made.size() - 1; i >= 0; i--) {
                try {
                    made.get(i).close();
                } catch (Exception suppressed) {
                    e.addSuppressed(suppressed);
                }
            }
            throw e;
        }
    }

    private static <T extends AutoCloseable> T add(List<AutoCloseable> made, T t) {
        made.add(t);
        return t;
    }

    /** The engine's name: the owner in its segments' descriptors. */
    public String name() {
        return name;
    }

    /** The rdma_cm address peers connect to. */
    public InetSocketAddress localAddress() {
        return listener.localAddress();
    }

    /** The options it was opened with. */
    public TransferOptions options() {
        return options;
    }

    /** The device its memory is registered on. */
    public Context context() {
        return context;
    }

    // ---------------------------------------------------------------- segments

    /**
     * Allocates {@code size} bytes of zeroed, page-aligned memory owned by the engine and
     * registers it as segment {@code name}.
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} for a bad name or size, or a name in use.
     */
    public Segment allocate(String name, long size) {
        checkNewName(name);
        return publish(name, pd.allocate(size, SEGMENT_ACCESS));
    }

    /**
     * Registers the caller's memory as segment {@code name}: a segment whose lifetime the region
     * controls ({@code Arena.ofAuto()}, {@code Arena.global()}), for example a file or a
     * hugetlbfs file mapped with {@code FileChannel.map(mode, 0, size, Arena.ofAuto())}.
     *
     * <p><b>Errors</b>: as {@link ProtectionDomain#register(MemorySegment, Access...)} (memory of a
     * closeable arena is refused: use {@link #registerUnsafe}); {@link IllegalArgumentException} for
     * a name in use.
     */
    public Segment register(String name, MemorySegment memory) {
        checkNewName(name);
        return publish(name, pd.register(memory, SEGMENT_ACCESS));
    }

    /**
     * As {@link #register}, also for memory of a closeable arena. <b>The caller guarantees</b> that
     * the segment is {@linkplain #unregister unregistered} (or the engine closed) before the arena
     * is closed: a peer's WRITE after that would reach freed memory.
     */
    public Segment registerUnsafe(String name, MemorySegment memory) {
        checkNewName(name);
        return publish(name, pd.registerUnsafe(memory, SEGMENT_ACCESS));
    }

    private void checkNewName(String segmentName) {
        SegmentDescriptor.checkName("name", segmentName);
        ensureOpen();
        if (segments.containsKey(segmentName)) {
            throw new IllegalArgumentException("a segment named '" + segmentName + "' is registered already");
        }
    }

    private Segment publish(String segmentName, MemoryRegion region) {
        Segment s = new Segment(this, region, new SegmentDescriptor(segmentName, name, region.address(),
                region.length(), region.rkey()));
        if (segments.putIfAbsent(segmentName, s) != null) {
            region.close();
            throw new IllegalArgumentException("a segment named '" + segmentName + "' is registered already");
        }
        return s;
    }

    /** The local segment named {@code name}, or {@code null}. */
    public Segment segment(String name) {
        return segments.get(name);
    }

    /**
     * Withdraws a segment from the directory and deregisters it: peers' requests to it fail with
     * {@link TransferStatus#ACCESS_ERROR} from then on. Local requests naming it that are not
     * posted yet fail with {@link TransferStatus#LOCAL_ERROR}.
     */
    public void unregister(Segment segment) {
        Objects.requireNonNull(segment, "segment");
        if (segment.engine != this) {
            throw new IllegalArgumentException(segment + " belongs to another engine");
        }
        synchronized (this) {
            segments.remove(segment.name(), segment);
            segment.region.close();
        }
    }

    // ---------------------------------------------------------------- connections

    /**
     * Connects to the engine listening at {@code peer} with {@link TransferOptions#qpsPerPeer()}
     * queue pairs.
     *
     * <p><b>Errors</b>: {@link io.github.verbs4j.cm.CmEventException} (REJECTED, UNREACHABLE...),
     * {@link io.github.verbs4j.VerbsException} (ETIMEDOUT after {@link TransferOptions#connectTimeout()});
     * {@link IllegalStateException} when rdma_cm reaches the peer through another device than the
     * engine's.
     */
    public TransferPeer connect(InetSocketAddress peer) {
        Objects.requireNonNull(peer, "peer");
        ensureOpen();
        Duration t = options.connectTimeout();
        int qps = options.qpsPerPeer();
        int depth = options.maxOutstanding();
        List<AutoCloseable> made = new ArrayList<>();
        try {
            CompletionQueue cq = add(made, context.createCq(qps * depth + 4, completionEvents, 0));
            CompletionQueue controlCq = add(made, context.createCq(8, completionEvents, 0));
            MemoryRegion control = add(made, pd.allocate(2 * TransferPeer.CONTROL_BYTES, Access.LOCAL_WRITE));
            CmId[] ids = new CmId[qps];
            synchronized (activeChannel) {
                for (int i = 0; i < qps; i++) {
                    CmId id = add(made, activeChannel.createId(PortSpace.TCP));
                    ids[i] = id;
                    id.resolveAddress(null, peer, t);
                    id.resolveRoute(t);
                    if (id.context() != context) {
                        throw new IllegalStateException(peer + " is reached through " + id.context()
                                + ", not the engine's device " + context);
                    }
                    QueuePair qp = id.createQueuePair(pd, cq, controlCq, QpInit.defaults().withMaxSendWr(depth + 4).withMaxRecvWr(2));
                    if (i == 0) {
                        TransferPeer.postControlReceive(qp, control);
                    }
                    byte[] nameBytes = name.getBytes(StandardCharsets.UTF_8);
                    id.connect(ConnectParameters.defaults().withDepths(ConnectParameters.MAX, ConnectParameters.MAX)
                            .withPrivateData(nameBytes.length <= 48 ? nameBytes : new byte[0]), t);
                }
            }
            TransferPeer p = new TransferPeer(this, peer, cq, controlCq, control, ids, depth);
            for (CmId id : ids) {
                id.migrate(peerEvents); // established: from now on only DISCONNECTED and the like come
            }
            synchronized (this) {
                ensureOpen();
                peers.add(p);
                peerArray = peers.toArray(new TransferPeer[0]);
            }
            return p;
        } catch (RuntimeException | Error e) {
            for (int i = made.size() - 1; i >= 0; i--) {
                try {
                    made.get(i).close();
                } catch (Exception suppressed) {
                    e.addSuppressed(suppressed);
                }
            }
            throw e;
        }
    }

    void closePeer(TransferPeer p) {
        // not while a wait takes the completion events of the queues about to go
        blocking.lock();
        try {
            closePeerLocked(p);
        } finally {
            blocking.unlock();
        }
    }

    private synchronized void closePeerLocked(TransferPeer p) {
        if (p.isClosed()) {
            return;
        }
        for (Lane l : p.lanes) {
            for (int n = l.outstanding(); n > 0; n--) {
                int s = l.oldestSlot();
                Batch b = l.slotBatch[s];
                if (b != null && b.generation == l.slotGeneration[s]) {
                    int r = l.slotRequest[s];
                    b.inFlight[r]--;
                    b.finish(r, TransferStatus.PEER_LOST, null);
                }
                l.retireOldest();
            }
        }
        p.destroy();
        peers.remove(p);
        peerArray = peers.toArray(new TransferPeer[0]);
    }

    // ---------------------------------------------------------------- batches

    /** A new reusable batch of up to {@code capacity} requests. */
    public Batch batch(int capacity) {
        if (capacity < 1) {
            throw new IllegalArgumentException("capacity must be positive, got " + capacity);
        }
        ensureOpen();
        return new Batch(this, capacity);
    }

    synchronized void submit(Batch b) {
        ensureOpen();
        if (inflightCount == inflight.length) {
            throw new IllegalStateException("the engine has " + inflightCount + " batches in flight (maxBatches)");
        }
        b.submitted = true;
        inflight[inflightCount++] = b;
        progressLocked();
    }

    /**
     * Makes progress on every batch in flight: takes completions, posts the chunks the queue pairs
     * have room for. {@link Batch#poll()} and {@link Batch#await(Duration)} call it.
     *
     * @return how many completions were taken and chunks posted (0 when nothing moved)
     */
    public synchronized int progress() {
        if (released) {
            return 0;
        }
        return progressLocked();
    }

    private int progressLocked() {
        int work = 0;
        TransferPeer[] ps = peerArray;
        for (TransferPeer p : ps) {
            work += reap(p);
        }
        if (work > 0 && inflightCount > 0) {
            waitSpin.completions(System.nanoTime());
        }
        // every batch in flight, oldest first: chunks of later batches fill the room earlier ones leave
        pass++;
        fullPeers = 0;
        // with no peer left (all closed) nothing is full: the scan fails the requests to closed peers
        int allFull = ps.length == 0 ? Integer.MAX_VALUE : ps.length;
        for (int i = 0; i < inflightCount && fullPeers < allFull; i++) {
            work += post(inflight[i], allFull);
        }
        for (TransferPeer p : ps) {
            flush(p);
        }
        // drop finished batches, keeping order
        int w = 0;
        for (int i = 0; i < inflightCount; i++) {
            Batch b = inflight[i];
            if (!b.isDone()) {
                inflight[w++] = b;
            }
        }
        for (int i = w; i < inflightCount; i++) {
            inflight[i] = null;
        }
        inflightCount = w;
        if (w == 0) {
            waitSpin.streamEnded();
        }
        return work;
    }

    private int reap(TransferPeer p) {
        if (p.isClosed()) {
            return 0;
        }
        Completions wcs = p.completions;
        int n = p.cq.poll(wcs);
        for (int k = 0; k < n; k++) {
            Completion wc = wcs.get(k);
            long id = wc.wrId();
            if (id == TransferPeer.CONTROL_WR_ID) {
                continue;
            }
            completionsTaken++;
            Lane lane = p.lanes[(int) (id >>> 32)];
            boolean ok = wc.ok();
            WcStatus st = ok ? WcStatus.SUCCESS : wc.status();
            if (!ok) {
                lane.failed(st);
            }
            // The unsignaled chunks before this one on its queue pair have completed too (an RC
            // send queue completes in order). After a success or the queue pair's first error
            // (RETRY_EXC_ERR, REM_ACCESS_ERR...) they succeeded. Before a flush they may have been
            // flushed as well, where a provider reports no flush of an unsignaled request: they
            // count as flushed, since a chunk wrongly failed costs a retry, one wrongly done
            // would claim bytes that never moved.
            boolean olderOk = ok || st != WcStatus.WR_FLUSH_ERROR;
            WcStatus olderStatus = olderOk ? WcStatus.SUCCESS : WcStatus.WR_FLUSH_ERROR;
            for (int older = lane.retiring((int) id) - 1; older >= 0; older--) {
                int slot = lane.oldestSlot();
                if (older == 0) {
                    retire(lane, slot, ok, st);
                } else {
                    retire(lane, slot, olderOk, olderStatus);
                }
                lane.retireOldest();
            }
        }
        return n;
    }

    /** The chunk in {@code slot} completed with {@code st}: its request is final when it was the last, or failed. */
    private static void retire(Lane lane, int slot, boolean ok, WcStatus st) {
        Batch b = lane.slotBatch[slot];
        if (b == null || b.generation != lane.slotGeneration[slot]) {
            return; // the batch was reset since (its request timed out): the chunk no longer touches it
        }
        int r = lane.slotRequest[slot];
        b.inFlight[r]--;
        if (ok) {
            if (b.posted[r] == b.length[r] && b.inFlight[r] == 0) {
                b.finish(r, TransferStatus.DONE, null);
            }
        } else {
            b.finish(r, classify(st, lane), st);
        }
    }

    /**
     * Appends the chunks of {@code b} the queue pairs have room for to their chains (posted by
     * {@link #flush}). Stops once {@code allFull} peers are full in this pass: every peer of
     * {@link #peerArray}, none lost (a lost or closed peer's requests are failed as the scan meets
     * them, so it is never counted full): the rest of the batches would only be scanned for room
     * there is not.
     * Without that stop a streaming wait scanned every request not yet posted of every batch in
     * flight (the benchmark's window: up to 256) on each of its polls. Stopping is safe: a live
     * peer with no room has chunks in flight, whose completions start later passes.
     */
    private int post(Batch b, int allFull) {
        int work = 0;
        int size = b.size;
        boolean advancing = true;
        for (int i = b.scanFrom; i < size && fullPeers < allFull; i++) {
            if (b.status[i] != TransferStatus.PENDING || b.posted[i] == b.length[i]) {
                if (advancing) {
                    b.scanFrom = i + 1;
                }
                continue;
            }
            advancing = false;
            requestsScanned++;
            TransferPeer p = b.remote[i].peer;
            if (p.isLost()) {
                // a request none of whose chunks was posted has no completion status of its own: it
                // must not claim the retry failure (or flush) of the chunks that showed the loss
                b.finish(i, TransferStatus.PEER_LOST, b.posted[i] == 0 ? null : p.lostBecause());
                continue;
            }
            Segment local = b.local[i];
            if (!local.isRegistered()) {
                b.finish(i, TransferStatus.LOCAL_ERROR, null);
                continue;
            }
            if (p.fullInPass == pass) {
                continue; // found full earlier in this pass: no completion is taken before the next
            }
            SegmentDescriptor d = b.remote[i].descriptor();
            SendOpcode op = b.write[i] ? SendOpcode.RDMA_WRITE : SendOpcode.RDMA_READ;
            while (b.posted[i] < b.length[i]) {
                Lane lane = p.pickLane();
                if (lane == null) {
                    p.fullInPass = pass;
                    fullPeers++;
                    break;
                }
                long done = b.posted[i];
                int chunk = (int) Math.min(options.chunkSize(), b.length[i] - done);
                int slot = lane.append(b, i);
                lane.requests[slot].opcode(op).local(local.region, b.localOffset[i] + done, chunk)
                        .remote(d.address() + b.remoteOffset[i] + done, d.rkey());
                b.posted[i] = done + chunk;
                b.inFlight[i]++;
                work++;
            }
        }
        return work;
    }

    /**
     * Posts each lane's chain of this pass with one doorbell. A chain refused by a Java-side check
     * (nothing of it posted) frees its slots and fails its requests with
     * {@link TransferStatus#LOCAL_ERROR}, as a refused single post did; a chain the provider
     * refused with an errno may have gone out in part, so its queue pair is given up as well (its
     * posted chunks still complete, or flush).
     */
    private void flush(TransferPeer p) {
        for (Lane lane : p.lanes) {
            if (!lane.hasChain()) {
                continue;
            }
            long first = lane.chainStart();
            int length = lane.chainLength();
            SendRequest head = lane.takeChain();
            int rc;
            try {
                rc = lane.qp.tryPostSend(head);
            } catch (RuntimeException e) {
                rc = -1;
            }
            if (rc == 0) {
                chainsPosted++;
                chunksPosted += length;
                continue;
            }
            for (int k = 0; k < length; k++) {
                int slot = lane.chainSlot(first, k);
                Batch b = lane.slotBatch[slot];
                if (b != null && b.generation == lane.slotGeneration[slot]) {
                    int r = lane.slotRequest[slot];
                    b.inFlight[r]--;
                    b.finish(r, TransferStatus.LOCAL_ERROR, null);
                }
                lane.slotBatch[slot] = null; // a completion that still comes for it touches no batch
            }
            if (rc < 0) {
                lane.unappend(length);
            } else {
                lane.refused();
            }
        }
    }
    /**
     * How long a wait polls without a result before it blocks, in nanoseconds: {@link
     * TransferOptions#spinWait()}, stretched while batches stream ({@link StreamSpin}).
     */
    long spinNanos() {
        return waitSpin.spinNanos();
    }

    /**
     * Blocks the calling thread, which found nothing to do for its spin budget, until a completion
     * or an rdma_cm event of a peer arrives, {@code deadline} (System.nanoTime) passes, or at most
     * {@link #MAX_BLOCK_MILLIS}; the caller polls again after. Every peer's data queue is armed
     * ({@code ibv_req_notify_cq}) and polled once more before the wait, so a completion that came
     * in between is not slept through. One thread blocks for the engine at a time; another that
     * comes meanwhile waits until that one wakes and then returns, to poll for itself. A caller
     * that polls a queue of its own (a look-up's) arms that one itself and polls it before this.
     * Allocates nothing.
     */
    void awaitEvents(long deadline) {
        awaitEvents(deadline, false);
    }

    /** {@link #awaitEvents(long)}, from a wait whose poll before it came {@link #AWAY_NANOS} or more after the one before (counted). */
    void awaitEvents(long deadline, boolean backFromAway) {
        if (!blocking.tryLock()) {
            try {
                long wait = Math.min(deadline - System.nanoTime(), MAX_BLOCK_MILLIS * 1_000_000L);
                if (wait > 0 && blocking.tryLock(wait, TimeUnit.NANOSECONDS)) {
                    blocking.unlock();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return;
        }
        try {
            synchronized (this) {
                if (released) {
                    return;
                }
                for (TransferPeer p : peerArray) {
                    if (!p.isClosed()) {
                        p.cq.requestNotify(false);
                    }
                }
                if (progressLocked() > 0) {
                    return;
                }
            }
            long millis = Math.min(MAX_BLOCK_MILLIS, (deadline - System.nanoTime() + 999_999) / 1_000_000);
            waitsBlocked++;
            if (backFromAway) {
                waitsBlockedBackFromAway++;
            }
            if (millis <= 0 || waitSet.await(millis) == 0) {
                return;
            }
            if (waitSet.isReady(0)) {
                while (completionEvents.await(Duration.ZERO) != null) {
                    // each queue that fired: it is armed again before the next wait
                }
            }
            if (waitSet.isReady(1)) {
                watchPeers();
            }
        } finally {
            blocking.unlock();
        }
    }

    synchronized void timeOut(Batch b) {
        progressLocked();
        if (b.isDone()) {
            return;
        }
        b.timedOut = true;
        for (int i = 0; i < b.size; i++) {
            b.finish(i, TransferStatus.TIMED_OUT, null);
        }
        progressLocked();
    }

    /** What a failed completion means for the request it belongs to. */
    static TransferStatus classify(WcStatus status, Lane lane) {
        if (PeerLostException.shows(status)) {
            return TransferStatus.PEER_LOST; // the transport gave up on the peer
        }
        return switch (status) {
            case REMOTE_ACCESS_ERROR, LOCAL_PROTECTION_ERROR, LOCAL_ACCESS_ERROR, REMOTE_INVALID_REQUEST_ERROR,
                    REMOTE_INVALID_RD_REQUEST_ERROR -> TransferStatus.ACCESS_ERROR;
            // a flush that is the queue pair's first error: rdma_cm moved it to ERR because the peer
            // disconnected (its process died); after another error first, the flush is collateral
            case WR_FLUSH_ERROR -> lane == null || lane.cause == TransferStatus.PEER_LOST
                    ? TransferStatus.PEER_LOST : TransferStatus.FLUSHED;
            default -> TransferStatus.LOCAL_ERROR;
        };
    }

    // ---------------------------------------------------------------- service thread

    /**
     * The service thread: blocks until the listener's rdma_cm channel (connection requests, and the
     * events of the connections it accepted), the look-up queues' completion channel or the peers'
     * rdma_cm channel has something, then serves what came. It used to wake every 2 ms to look at
     * each: on the two CPUs of a READ stream that tick, and the JIT compiling its paths, took CPU
     * from the agent that serves the READs.
     */
    private void serve() {
        PollSet serviceSet = new PollSet(3);
        serviceSet.add(serviceChannel.fd());
        int lookupIndex = serviceSet.add(lookupEvents.fd());
        serviceSet.add(peerEvents.fd());
        boolean armed = false;
        while (!state.isClosed()) {
            servicePasses.incrementAndGet();
            try {
                for (CmEvent request; (request = listener.getRequest(Duration.ZERO)) != null; ) {
                    acceptOne(request.id());
                }
                if (!armed || serviceSet.isReady(lookupIndex) && lookupEventsFired()) {
                    // armed before the poll: a completion after the arm fires the channel again
                    serviceSendCq.requestNotify(false);
                    serviceRecvCq.requestNotify(false);
                    armed = true;
                    answerLookups();
                }
                dropDisconnected();
                watchPeers();
                serviceSet.await(SERVICE_BLOCK_MILLIS);
            } catch (RuntimeException e) {
                if (state.isClosed()) {
                    return;
                }
                // one bad connection must not stop the service: go on with the others, at the old
                // tick's pace, since a failure before the block would otherwise spin this thread
                LockSupport.parkNanos(2_000_000L);
            }
        }
    }

    private void acceptOne(CmId id) {
        MemoryRegion buffer = null;
        try {
            if (id.context() != context) {
                id.reject(null);
                id.close();
                return;
            }
            QueuePair qp = id.createQueuePair(pd, serviceSendCq, serviceRecvCq, QpInit.defaults().withMaxSendWr(4).withMaxRecvWr(2));
            buffer = pd.allocate(2 * TransferPeer.CONTROL_BYTES, Access.LOCAL_WRITE);
            int index = accepted.size();
            ReceiveRequest recv = ReceiveRequest.create().id(index).local(buffer, 0, TransferPeer.CONTROL_BYTES);
            SendRequest send = SendRequest.send().id(index).signaled();
            qp.postRecv(recv);
            id.accept(ConnectParameters.defaults().withDepths(ConnectParameters.MAX, ConnectParameters.MAX),
                    options.connectTimeout());
            accepted.add(new Accepted(id, qp, buffer, recv, send));
        } catch (RuntimeException e) {
            id.close();
            if (buffer != null) {
                buffer.close();
            }
        }
    }

    /** Whether a service queue fired since it was armed: takes the events, without blocking. */
    private boolean lookupEventsFired() {
        boolean fired = false;
        while (lookupEvents.await(Duration.ZERO) != null) {
            fired = true;
        }
        return fired;
    }

    /** Polls a service queue, counting the poll. */
    private int pollService(CompletionQueue cq) {
        serviceCqPolls.incrementAndGet();
        return cq.poll(serviceCompletions);
    }

    /**
     * Answers every look-up waiting: each queue is polled until empty, since the channel fires
     * only for completions that come after the arm.
     */
    private void answerLookups() {
        while (pollService(serviceSendCq) > 0) {
            // send completions of answers: nothing to do
        }
        for (int n; (n = pollService(serviceRecvCq)) > 0; ) {
            answer(n);
        }
    }

    private void answer(int n) {
        for (int k = 0; k < n; k++) {
            Completion wc = serviceCompletions.get(k);
            int index = (int) wc.wrId();
            if (index < 0 || index >= accepted.size() || accepted.get(index) == null || !wc.ok()) {
                continue;
            }
            Accepted a = accepted.get(index);
            ByteBuffer in = a.buffer().segment().asSlice(0, wc.byteLength()).asByteBuffer();
            ByteBuffer out = a.buffer().segment().asSlice(TransferPeer.CONTROL_BYTES, TransferPeer.CONTROL_BYTES)
                    .asByteBuffer();
            if (in.get() == TransferPeer.LOOKUP) {
                byte[] n2 = new byte[Byte.toUnsignedInt(in.get())];
                in.get(n2);
                Segment s = segments.get(new String(n2, StandardCharsets.UTF_8));
                out.put(TransferPeer.ANSWER);
                if (s == null || !s.isRegistered()) {
                    out.put((byte) 0);
                } else {
                    out.put((byte) 1);
                    s.descriptor().encode(out);
                }
                try {
                    a.qp().postRecv(a.recv());
                    a.qp().postSend(a.send().local(a.buffer(), TransferPeer.CONTROL_BYTES, out.position()));
                } catch (RuntimeException e) {
                    // the peer is going away: its connection is dropped when DISCONNECTED arrives
                }
            }
        }
    }

    private void dropDisconnected() {
        for (int i = 0; i < accepted.size(); i++) {
            Accepted a = accepted.get(i);
            if (a == null) {
                continue;
            }
            // every event kept for it: the channel's descriptor no longer wakes the service thread for them
            for (CmEvent e; (e = a.id().awaitEvent(Duration.ZERO)) != null; ) {
                if (e.type() == CmEventType.DISCONNECTED || e.type() == CmEventType.DEVICE_REMOVAL) {
                    accepted.set(i, null);
                    a.id().close();
                    a.buffer().close();
                    break;
                }
            }
        }
    }

    /**
     * Takes the rdma_cm events of the connections this engine made: a DISCONNECTED (the peer's
     * process died, or it closed the connection) or DEVICE_REMOVAL marks the peer lost at once,
     * rather than after the transport's retries run out (about half a second with rdma_cm's
     * defaults), and moves its queue pairs to ERR so that the chunks in flight flush.
     */
    private void watchPeers() {
        for (CmEvent e; (e = peerEvents.next(Duration.ZERO)) != null; ) {
            if (e.type() == CmEventType.DISCONNECTED || e.type() == CmEventType.DEVICE_REMOVAL) {
                peerDisconnected(e.id());
            }
        }
    }

    private synchronized void peerDisconnected(CmId id) {
        for (TransferPeer p : peerArray) {
            if (p.owns(id)) {
                p.disconnected();
                return;
            }
        }
    }

    // ---------------------------------------------------------------- lifecycle

    private void ensureOpen() {
        state.ensureOpen(this);
    }

    /** Whether {@link #close()} has begun. */
    public boolean isClosed() {
        return state.isClosed();
    }

    /**
     * Stops the service thread, closes every connection (requests still in flight fail as
     * {@link TransferStatus#PEER_LOST}) and deregisters every segment. Idempotent.
     */
    @Override
    public void close() {
        if (!state.beginClose()) {
            return;
        }
        try {
            service.join(10_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        blocking.lock(); // a wait that blocks wakes within MAX_BLOCK_MILLIS and finds the engine released
        try {
            releaseAll();
        } finally {
            blocking.unlock();
        }
    }

    private synchronized void releaseAll() {
        // in this order, every one even when one fails (the first failure is thrown after)
        List<AutoCloseable> order = new ArrayList<>();
        for (TransferPeer p : peers.toArray(new TransferPeer[0])) {
            order.add(() -> closePeerLocked(p));
        }
        for (Accepted a : accepted) {
            if (a != null) {
                order.add(a.id());
                order.add(a.buffer());
            }
        }
        for (Segment s : segments.values()) {
            order.add(s.region);
        }
        order.addAll(List.of(listener, serviceSendCq, serviceRecvCq, lookupEvents, completionEvents, pd, peerEvents,
                activeChannel, serviceChannel));
        accepted.clear();
        segments.clear();
        released = true;
        Closer.closeAll(order);
    }

    @Override
    public String toString() {
        return "TransferEngine[" + name + (state.isClosed() ? ", closed" : "") + "]";
    }
}
