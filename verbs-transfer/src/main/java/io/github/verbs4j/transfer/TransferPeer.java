package io.github.verbs4j.transfer;

import io.github.verbs4j.CloseState;
import io.github.verbs4j.Closer;
import io.github.verbs4j.Completion;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Deadline;
import io.github.verbs4j.Completions;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.PeerLostException;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.RdmaTimeoutException;
import io.github.verbs4j.ReceiveRequest;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.WcStatus;
import io.github.verbs4j.WorkCompletionException;
import io.github.verbs4j.cm.CmId;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * A connection from a {@link TransferEngine} to another engine: {@code qpsPerPeer} RC queue pairs
 * made with rdma_cm, the first of which also carries directory look-ups
 * ({@link #lookup(String, Duration)}). Made by {@link TransferEngine#connect}; closed with the
 * engine, or by {@link #close()}.
 *
 * <p>When the peer goes away the connection is {@linkplain #isLost() lost}: requests to it fail
 * with {@link TransferStatus#PEER_LOST}, the rest of their batches go on. rdma_cm's DISCONNECTED
 * shows it first when the peer's process dies or closes the connection (the engine's service
 * thread takes the event within milliseconds and moves the queue pairs to ERR, so the chunks in
 * flight flush); a queue pair's transport retry failure shows it when the peer's host or the link
 * is gone without a word.
 */
public final class TransferPeer implements AutoCloseable {

    static final long CONTROL_WR_ID = -1L;
    static final int CONTROL_BYTES = 512;
    static final byte LOOKUP = 1;
    static final byte ANSWER = 2;

    final TransferEngine engine;
    private final InetSocketAddress address;
    final CompletionQueue cq;
    final CompletionQueue controlCq;
    final Completions completions;
    private final Completions controlCompletions = new Completions(4);
    final Lane[] lanes;
    private final MemoryRegion control;
    private final ReceiveRequest controlRecv;
    private final SendRequest controlSend;
    private int nextLane;
    /** The engine's progress pass in which this peer was last found with no room (under the engine's monitor). */
    long fullInPass = -1;
    private int deadLanes;
    private volatile boolean lost;
    private volatile WcStatus lostBecause;
    private final CloseState state = new CloseState();

    TransferPeer(TransferEngine engine, InetSocketAddress address, CompletionQueue cq, CompletionQueue controlCq,
            MemoryRegion control, CmId[] ids, int depth) {
        this.engine = engine;
        this.address = address;
        this.cq = cq;
        this.controlCq = controlCq;
        this.control = control;
        this.completions = new Completions(Math.min(65536, Math.max(16, depth * ids.length)));
        this.lanes = new Lane[ids.length];
        for (int i = 0; i < ids.length; i++) {
            lanes[i] = new Lane(this, i, ids[i], ids[i].queuePair(), depth);
        }
        this.controlRecv = ReceiveRequest.create().id(CONTROL_WR_ID).local(control, 0, CONTROL_BYTES);
        this.controlSend = SendRequest.send().id(CONTROL_WR_ID).signaled().local(control, CONTROL_BYTES, 1);
    }

    /** The peer's rdma_cm address this connection was made to. */
    public InetSocketAddress address() {
        return address;
    }

    /** How many queue pairs the connection stripes over. */
    public int queuePairs() {
        return lanes.length;
    }

    /** Whether the peer was found gone: new requests to it fail at once with {@link TransferStatus#PEER_LOST}. */
    public boolean isLost() {
        return lost;
    }

    /**
     * The completion status that showed the peer gone (RETRY_EXC_ERR...), or {@code null}: while
     * it is not lost, and when rdma_cm's DISCONNECTED showed it, before any completion failed.
     */
    public WcStatus lostBecause() {
        return lostBecause;
    }

    /** Whether {@code id} is one of this connection's queue pairs' ids. */
    boolean owns(CmId id) {
        for (Lane l : lanes) {
            if (l.id == id) {
                return true;
            }
        }
        return false;
    }

    /**
     * rdma_cm reported the connection gone (DISCONNECTED, DEVICE_REMOVAL): the peer is lost, and
     * every queue pair goes to ERR ({@code rdma_disconnect}) so that the chunks in flight complete
     * as flushed (PEER_LOST, since the lanes' cause is set first) instead of waiting out the
     * transport's retries. Called under the engine's lock.
     */
    void disconnected() {
        if (state.isClosed()) {
            return;
        }
        markLost(lostBecause);
        for (Lane l : lanes) {
            try {
                l.id.disconnect();
            } catch (RuntimeException e) {
                // already disconnected on the device's side: its requests flush all the same
            }
        }
    }

    void markLost(WcStatus status) {
        if (!lost) {
            lostBecause = status;
            lost = true;
        }
        for (Lane l : lanes) {
            if (!l.dead) {
                l.dead = true;
                l.cause = TransferStatus.PEER_LOST;
                l.firstError = status;
            }
        }
    }

    void laneDied() {
        int n = 0;
        for (Lane l : lanes) {
            if (l.dead) {
                n++;
            }
        }
        deadLanes = n;
        if (deadLanes == lanes.length) {
            markLost(lanes[0].firstError);
        }
    }

    /** A live lane with a free slot, round robin, or {@code null} when all are full or dead. */
    Lane pickLane() {
        int n = lanes.length;
        for (int k = 0; k < n; k++) {
            Lane l = lanes[nextLane];
            nextLane = nextLane + 1 == n ? 0 : nextLane + 1;
            if (l.hasFreeSlot()) {
                return l;
            }
        }
        return null;
    }

    /** Chunks in flight on this connection's queue pairs. */
    int outstanding() {
        int n = 0;
        for (Lane l : lanes) {
            n += l.outstanding();
        }
        return n;
    }

    /** Posts the first control receive (before connect, so the answer always finds one). */
    static void postControlReceive(QueuePair qp, MemoryRegion control) {
        qp.postRecv(ReceiveRequest.create().id(CONTROL_WR_ID).local(control, 0, CONTROL_BYTES));
    }

    /**
     * Asks the peer's engine for the descriptor of its segment {@code name}, over a SEND/RECV
     * exchange on the first queue pair.
     *
     * <p><b>Errors</b>: {@link java.util.NoSuchElementException} when the peer has no segment of
     * that name; {@link RdmaTimeoutException} when no answer came within {@code timeout};
     * {@link PeerLostException} when the connection is lost, found before the look-up (no cause)
     * or by its own work request (RETRY_EXC_ERR, or the flush after rdma_cm's DISCONNECTED: the
     * {@link WorkCompletionException} is the cause); {@link WorkCompletionException} when its work
     * request failed otherwise; {@link IllegalStateException} when the connection was closed.
     */
    public synchronized RemoteSegment lookup(String name, Duration timeout) {
        SegmentDescriptor.checkName("name", name);
        Deadline deadline = Deadline.after(timeout);
        state.ensureOpen(this);
        if (lost) {
            throw lostException("directory look-up of '" + name + "'", null);
        }
        engine.progress(); // reap the completions of earlier look-ups' SENDs, which share the send queue
        byte[] n = name.getBytes(StandardCharsets.UTF_8);
        ByteBuffer out = control.segment().asSlice(CONTROL_BYTES, CONTROL_BYTES).asByteBuffer();
        out.put(LOOKUP).put((byte) n.length).put(n);
        lanes[0].qp.postSend(controlSend.local(control, CONTROL_BYTES, out.position()));
        long idleSince = System.nanoTime();
        boolean armed = false;
        while (true) {
            int got = controlCq.poll(controlCompletions);
            if (got > 0) {
                Completion wc = controlCompletions.get(0);
                if (!wc.ok()) {
                    WorkCompletionException failed = new WorkCompletionException("directory look-up of '" + name
                            + "' at " + address, wc.status(), wc.wrId(), wc.vendorError(), wc.qpNumber(), wc.opcode());
                    if (lost || TransferEngine.classify(wc.status(), lanes[0]) == TransferStatus.PEER_LOST) {
                        throw lostException("directory look-up of '" + name + "'", failed);
                    }
                    throw failed;
                }
                ByteBuffer in = control.segment().asSlice(0, wc.byteLength()).asByteBuffer();
                lanes[0].qp.postRecv(controlRecv);
                if (in.get() != ANSWER) {
                    throw new IllegalStateException("unexpected directory message from " + address);
                }
                if (in.get() == 0) {
                    throw new java.util.NoSuchElementException("no segment '" + name + "' at " + address);
                }
                return new RemoteSegment(this, SegmentDescriptor.decode(in));
            }
            if (deadline.expired()) {
                throw deadline.timedOut("the directory's answer for '" + name + "' from " + address);
            }
            if (System.nanoTime() - idleSince < engine.spinNanos()) {
                Thread.onSpinWait();
            } else if (!armed) {
                controlCq.requestNotify(false); // then polled once more before blocking
                armed = true;
            } else {
                engine.awaitEvents(deadline.nanoTime());
                armed = false;
            }
        }
    }

    /** What a call meeting the loss throws: the status that showed it, once, and the call's own failure as cause. */
    private PeerLostException lostException(String call, WorkCompletionException failed) {
        WcStatus why = failed != null ? failed.status() : lostBecause;
        return new PeerLostException(call + ": " + address + " is lost ("
                + (why == null ? "rdma_cm reported it disconnected" : "shown by " + why) + ")", why, failed);
    }

    /** Disconnects and destroys the queue pairs; requests still in flight fail as flushed. Idempotent. */
    @Override
    public void close() {
        engine.closePeer(this);
    }

    void destroy() {
        if (!state.beginClose()) {
            return;
        }
        lost = true;
        List<AutoCloseable> order = new ArrayList<>();
        for (Lane l : lanes) {
            l.dead = true;
            order.add(l.id);
        }
        order.addAll(List.of(cq, controlCq, control));
        Closer.closeAll(order); // every one even when one fails, the first failure thrown after
    }

    /** Whether {@link #close()} (or the engine's) has begun. */
    public boolean isClosed() {
        return state.isClosed();
    }

    @Override
    public String toString() {
        return "TransferPeer[" + address + ", " + lanes.length + " QPs" + (lost ? ", lost" : "") + "]";
    }
}
