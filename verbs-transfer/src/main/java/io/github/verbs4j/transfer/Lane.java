package io.github.verbs4j.transfer;

import io.github.verbs4j.QueuePair;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.WcStatus;
import io.github.verbs4j.cm.CmId;

/**
 * One queue pair to a peer, with its pre-allocated request slots: a chunk in flight holds a slot
 * (its work request, and which request of which batch it belongs to) until its completion.
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
    private final int[] free;
    private int freeCount;
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
        this.free = new int[depth];
        for (int i = 0; i < depth; i++) {
            requests[i] = SendRequest.rdmaRead().signaled().id(((long) index << 32) | i);
            free[i] = depth - 1 - i;
        }
        freeCount = depth;
    }

    boolean hasFreeSlot() {
        return !dead && freeCount > 0;
    }

    int outstanding() {
        return requests.length - freeCount;
    }

    int take() {
        return free[--freeCount];
    }

    void give(int slot) {
        slotBatch[slot] = null;
        free[freeCount++] = slot;
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
}
