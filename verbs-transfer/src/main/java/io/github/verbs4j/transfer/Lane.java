package io.github.verbs4j.transfer;

import io.github.verbs4j.QueuePair;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.WcStatus;
import io.github.verbs4j.cm.CmId;

/**
 * One queue pair to a peer, with its pre-allocated request slots, used as a ring in posting
 * order: a chunk in flight holds a slot (its work request, and which request of which batch it
 * belongs to) from its post until a completion at or after it retires it.
 *
 * <p><b>Streaming</b>: the chunks an engine's progress pass gives a lane are linked into one
 * chain ({@link #append}) and posted with one doorbell ({@link #takeChain}); only every
 * {@link #signalEvery}-th work request and the last of each chain are signaled. An RC send queue
 * completes in order, so a completion of slot {@code s} also retires every older slot: the
 * unsignaled ones before it completed (successfully, unless {@code s} itself was flushed: then
 * they count as flushed too, see the engine's reap). The last of a chain is always signaled, so no chunk waits for a later
 * post to be retired; a chain begins only when {@link #signalEvery} slots are free
 * ({@link #hasFreeSlot()}).
 */
final class Lane {

    final TransferPeer peer;
    final int index;
    final CmId id;
    final QueuePair qp;
    final SendRequest[] requests;
    final Batch[] slotBatch;
    final int[] slotRequest;
    final long[] slotGeneration;
    /**
     * How many work requests go unsignaled between two signaled ones: a quarter of the depth, so
     * that completions free room in steps of a quarter while three quarters stay in flight.
     */
    final int signalEvery;
    /** Slots taken so far (the next slot is {@code taken % depth}). */
    private long taken;
    /** Slots retired so far: {@code taken - retired} are in flight or in the chain not yet posted. */
    private long retired;
    /** The chain built by the current progress pass, not posted yet: its first slot's sequence, its length. */
    private long chainStart;
    private int chainLength;
    /** Work requests appended since the last signaled one. */
    private int unsignaled;
    boolean dead;
    TransferStatus cause;
    WcStatus firstError;

    Lane(TransferPeer peer, int index, CmId id, QueuePair qp, int depth) {
        this.peer = peer;
        this.index = index;
        this.id = id;
        this.qp = qp;
        this.requests = new SendRequest[depth];
        this.slotBatch = new Batch[depth];
        this.slotRequest = new int[depth];
        this.slotGeneration = new long[depth];
        this.signalEvery = Math.max(1, depth / 4);
        for (int i = 0; i < depth; i++) {
            requests[i] = SendRequest.rdmaRead().signaled(false).id(((long) index << 32) | i);
        }
    }

    /**
     * Whether the lane takes a chunk now: a slot is free, and either this pass's chain has begun
     * or at least {@link #signalEvery} slots are free. Starting a chain only with that much room
     * keeps chains (and the groups one signaled completion retires) at least that long: refilling
     * each single slot as it frees would post chains of one, each its own doorbell and, as a
     * chain's last, signaled. Never a deadlock: when fewer are free, more than three quarters are
     * in flight, each group ending in a signaled request whose completion frees its slots.
     */
    boolean hasFreeSlot() {
        long free = requests.length - (taken - retired);
        return !dead && free > 0 && (chainLength > 0 || free >= signalEvery);
    }

    /** Slots held: chunks in flight, and chunks of the chain not posted yet. */
    int outstanding() {
        return (int) (taken - retired);
    }

    /**
     * Takes the next slot for a chunk of request {@code r} of {@code b} and links its work request
     * (filled by the caller afterwards) at the end of the pass's chain; the caller checked
     * {@link #hasFreeSlot()}.
     *
     * @return the slot, whose {@link #requests} entry the caller fills
     */
    int append(Batch b, int r) {
        int depth = requests.length;
        int slot = (int) (taken % depth);
        SendRequest req = requests[slot];
        req.next(null);
        boolean signal = ++unsignaled >= signalEvery;
        if (signal) {
            unsignaled = 0;
        }
        req.signaled(signal);
        if (chainLength == 0) {
            chainStart = taken;
        } else {
            requests[(int) ((taken - 1) % depth)].next(req);
        }
        chainLength++;
        taken++;
        slotBatch[slot] = b;
        slotRequest[slot] = r;
        slotGeneration[slot] = b.generation;
        return slot;
    }

    /** How many work requests the chain being built holds. */
    int chainLength() {
        return chainLength;
    }

    /** Whether a chain waits to be posted. */
    boolean hasChain() {
        return chainLength > 0;
    }

    /**
     * The chain built by this pass, its last request signaled, and forgets it (the caller posts
     * it); {@code null} when there is none.
     */
    SendRequest takeChain() {
        if (chainLength == 0) {
            return null;
        }
        requests[(int) ((chainStart + chainLength - 1) % requests.length)].signaled(true);
        unsignaled = 0;
        SendRequest head = requests[(int) (chainStart % requests.length)];
        chainLength = 0;
        return head;
    }

    /** The slot of the chain just taken, {@code k} places from its start (for a post that failed). */
    int chainSlot(long chainFirst, int k) {
        return (int) ((chainFirst + k) % requests.length);
    }

    /** The sequence number of the first slot of the chain being built, or just taken. */
    long chainStart() {
        return chainStart;
    }

    /**
     * A chain the provider refused before posting any of it (a Java-side check threw): its slots
     * are free again, newest first, as if never taken.
     */
    void unappend(int length) {
        for (int k = 0; k < length; k++) {
            taken--;
            slotBatch[(int) (taken % requests.length)] = null;
        }
    }

    /**
     * How many slots a completion of {@code slot} retires: the slots from the oldest in flight up
     * to and including {@code slot}, or 0 when {@code slot} is not in flight (a completion that
     * does not belong to this lane's ring: none is known).
     */
    int retiring(int slot) {
        int depth = requests.length;
        int oldest = (int) (retired % depth);
        int span = (slot - oldest + depth) % depth + 1;
        return span <= taken - retired ? span : 0;
    }

    /** The slot of the oldest chunk in flight. */
    int oldestSlot() {
        return (int) (retired % requests.length);
    }

    /** Retires the oldest slot in flight. */
    void retireOldest() {
        slotBatch[(int) (retired % requests.length)] = null;
        retired++;
    }

    /** The first error completion on this queue pair: RC stops here, later chunks flush. */
    void failed(WcStatus status) {
        if (dead) {
            return;
        }
        dead = true;
        firstError = status;
        cause = TransferEngine.classify(status, null);
        if (cause == TransferStatus.PEER_LOST) {
            peer.markLost(status);
        } else {
            peer.laneDied();
        }
    }

    /**
     * The provider refused a chain it may have posted in part ({@code ibv_post_send} returned an
     * errno): which of its chunks went out is not known, so the queue pair is given up; the
     * chunks that were posted still retire through their completions.
     */
    void refused() {
        if (dead) {
            return;
        }
        dead = true;
        cause = TransferStatus.LOCAL_ERROR;
        peer.laneDied();
    }
}
