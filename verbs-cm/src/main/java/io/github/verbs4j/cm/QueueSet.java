package io.github.verbs4j.cm;

import io.github.verbs4j.Access;
import io.github.verbs4j.Closer;
import io.github.verbs4j.Completion;
import io.github.verbs4j.CompletionChannel;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Completions;
import io.github.verbs4j.Context;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.ReceiveRequest;
import io.github.verbs4j.SharedReceiveQueue;
import io.github.verbs4j.VerbsException;
import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.Poll;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The completion side of one or more {@link RdmaConnection}s: a protection domain, a completion
 * queue with its completion channel, and the registered receive buffers — posted to each
 * connection's own QP, or with {@link #shared} to one shared receive queue that every QP of a
 * server receives from. Whoever waits drives it: polls the queue, hands each completion to its
 * connection (by QP number), and when there is nothing, blocks in {@code poll(2)} on the
 * completion channel and the waiting connection's CM event fd together — no sleep loop.
 *
 * <p>Reference-counted: each connection and the server that made it hold it; the last release
 * closes it.
 */
final class QueueSet {

    /** How long one blocking wait on shared queues holds the lock, so that other connections' threads get turns. */
    private static final long SHARED_SLICE_MILLIS = 20;

    final ProtectionDomain pd;
    final CompletionChannel channel;
    final CompletionQueue cq;
    final SharedReceiveQueue srq;
    final MemoryRegion receiveBuffers;
    final int messageSize;
    final int receiveSlots;
    final int spinPolls;
    final boolean shared;
    /** The entries asked for the completion queue (the device may give more). */
    private final int cqEntries;
    private final Completions wcs;
    private final ReceiveRequest receive = ReceiveRequest.create();
    final ReentrantLock lock = new ReentrantLock(true);
    /** QP number to connection: open addressing, no boxing on the hot path. */
    private int[] keys = new int[64];
    private RdmaConnection[] values = new RdmaConnection[64];
    private int size;
    private RdmaConnection only;
    private int references = 1;
    private final MemorySegment pollfds;
    private final MemorySegment errno;

    private QueueSet(Context context, EndpointOptions options, boolean shared) {
        this.shared = shared;
        this.messageSize = options.messageSize();
        this.receiveSlots = options.receiveSlots();
        this.spinPolls = options.spinPolls();
        this.cqEntries = options.completionQueueEntries();
        List<AutoCloseable> made = new ArrayList<>();
        try {
            pd = add(made, context.allocatePd());
            channel = add(made, context.createCompletionChannel());
            cq = add(made, context.createCq(options.completionQueueEntries(), channel, 0));
            srq = shared ? add(made, pd.createSrq(receiveSlots, 1)) : null;
            receiveBuffers = add(made, pd.allocate((long) messageSize * receiveSlots, Access.LOCAL_WRITE));
            wcs = cq.completions(32);
        } catch (RuntimeException | Error e) {
            RdmaConnection.closeAll(made, e);
            throw e;
        }
        Arena arena = Arena.ofAuto();
        pollfds = arena.allocate(Poll.POLLFD_SIZE * 2, 8);
        errno = Downcalls.errnoSegment(arena);
        java.util.Arrays.fill(keys, -1);
    }

    private static <T extends AutoCloseable> T add(List<AutoCloseable> made, T resource) {
        made.add(resource);
        return resource;
    }

    /** Queues of one connection: its receive buffers are posted to its own QP. */
    static QueueSet own(Context context, EndpointOptions options) {
        return new QueueSet(context, options, false);
    }

    /** Queues shared by a server's connections: receives go to one SRQ; every buffer is posted at once. */
    static QueueSet shared(Context context, EndpointOptions options) {
        QueueSet q = new QueueSet(context, options, true);
        try {
            for (int slot = 0; slot < q.receiveSlots; slot++) {
                q.repost(null, slot);
            }
        } catch (RuntimeException | Error e) {
            q.closeQuietly(e);
            throw e;
        }
        return q;
    }

    synchronized void retain() {
        if (references == 0) {
            throw new IllegalStateException("the shared queues are closed");
        }
        references++;
    }

    /** Drops one reference; the last closes everything. */
    void release() {
        synchronized (this) {
            if (references == 0 || --references > 0) {
                return;
            }
        }
        close();
    }

    private void closeQuietly(Throwable failure) {
        try {
            close();
        } catch (RuntimeException e) {
            failure.addSuppressed(e);
        }
    }

    /** Closes the parts, last made first; the first failure is thrown after all were tried. */
    private void close() {
        Closer.closeAll(java.util.Arrays.asList(receiveBuffers, srq, cq, channel, pd)); // srq is null unless shared
    }

    /** Send-queue entries of the registered connections: with the receive slots, what the CQ must hold. */
    private int sendEntries;

    /**
     * Routes the completions of {@code c}'s QP (of {@code sendDepth} send requests) here.
     *
     * @throws IllegalStateException when the completion queue could overflow with one more connection
     */
    void register(RdmaConnection c, int qpNumber, int sendDepth) {
        lock.lock();
        try {
            if (!shared) {
                only = c;
                return;
            }
            if ((long) receiveSlots + sendEntries + sendDepth > cqEntries) {
                throw new IllegalStateException("the shared completion queue holds " + cqEntries + " entries: "
                        + receiveSlots + " receive slots and the send queues of " + (size + 1) + " connections ("
                        + (sendEntries + sendDepth) + ") could overflow it; build the server's options with a larger "
                        + "completionQueueSize");
            }
            sendEntries += sendDepth;
            if ((size + 1) * 2 > keys.length) {
                int[] oldKeys = keys;
                RdmaConnection[] oldValues = values;
                keys = new int[oldKeys.length * 2];
                java.util.Arrays.fill(keys, -1);
                values = new RdmaConnection[keys.length];
                size = 0;
                for (int i = 0; i < oldKeys.length; i++) {
                    if (oldKeys[i] != -1 && oldValues[i] != null) {
                        put(oldKeys[i], oldValues[i]);
                    }
                }
            }
            put(qpNumber, c);
        } finally {
            lock.unlock();
        }
    }

    void unregister(int qpNumber, int sendDepth) {
        lock.lock();
        try {
            if (!shared) {
                only = null;
                return;
            }
            int i = find(qpNumber);
            if (i >= 0 && values[i] != null) {
                values[i] = null; // a tombstone: the key stays, so that probing goes on past it
                sendEntries -= sendDepth;
            }
        } finally {
            lock.unlock();
        }
    }

    private void put(int key, RdmaConnection c) {
        int mask = keys.length - 1;
        int i = mix(key) & mask;
        while (keys[i] != -1 && keys[i] != key) {
            i = (i + 1) & mask;
        }
        if (keys[i] == -1) {
            size++;
        }
        keys[i] = key;
        values[i] = c;
    }

    private int find(int key) {
        int mask = keys.length - 1;
        int i = mix(key) & mask;
        while (keys[i] != -1) {
            if (keys[i] == key) {
                return i;
            }
            i = (i + 1) & mask;
        }
        return -1;
    }

    private static int mix(int key) {
        return key * 0x9E3779B1;
    }

    private RdmaConnection connectionOf(int qpNumber) {
        if (!shared) {
            return only;
        }
        int i = find(qpNumber);
        return i < 0 ? null : values[i];
    }

    /** Posts receive buffer {@code slot} again: to the SRQ, or to {@code c}'s QP. */
    void repost(RdmaConnection c, int slot) {
        receive.id(slot).local(receiveBuffers, (long) slot * messageSize, messageSize);
        if (srq != null) {
            srq.postRecv(receive);
        } else {
            c.queuePair().postRecv(receive);
        }
    }

    /** The bytes of receive buffer {@code slot}. */
    MemorySegment slot(int slot, int length) {
        return receiveBuffers.segment().asSlice((long) slot * messageSize, length);
    }

    /** Polls once and hands the completions out; the number taken. Holds the lock. */
    int pollOnce() {
        int n = cq.poll(wcs);
        for (int i = 0; i < n; i++) {
            Completion wc = wcs.get(i);
            RdmaConnection c = connectionOf(wc.qpNumber());
            if (c != null) {
                c.onCompletion(wc);
            } else if (wc.ok() && srq != null && wc.opcode() == io.github.verbs4j.WcOpcode.RECV) {
                repost(null, (int) wc.wrId()); // a message for a connection already closed
            }
        }
        return n;
    }

    /**
     * One step of a wait of {@code c}: poll, spin, then block on the completion channel and
     * {@code c}'s CM event fd until something arrives or {@code deadline}. Returns {@code false}
     * when the lock (shared queues) could not be taken before the deadline.
     */
    boolean progress(RdmaConnection c, long deadline) {
        try {
            if (!lock.tryLock(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                return false;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting on " + c, e);
        }
        try {
            if (pollOnce() > 0) {
                return true;
            }
            for (int i = 0; i < spinPolls; i++) {
                Thread.onSpinWait();
                if (pollOnce() > 0) {
                    return true;
                }
                if ((i & 63) == 63 && System.nanoTime() - deadline >= 0) {
                    return true; // the caller sees its deadline passed
                }
            }
            cq.requestNotify(false);
            if (pollOnce() > 0) {
                return true;
            }
            if (c.id().hasDisconnectedEvent()) {
                return true; // the caller looks at that
            }
            long left = (deadline - System.nanoTime() + 999_999) / 1_000_000;
            if (left <= 0) {
                return true;
            }
            if (shared) {
                left = Math.min(left, SHARED_SLICE_MILLIS);
            }
            Poll.setFd(pollfds, 0, channel.fd());
            Poll.setFd(pollfds, 1, c.id().channel().fd());
            int ready = Poll.awaitAnyReadable(pollfds, 2, errno, left);
            if (ready < 0) {
                throw new VerbsException("poll", -ready, "waiting for completions of " + c);
            }
            if ((ready & 1) != 0) {
                channel.await(Duration.ZERO); // takes and acknowledges the event; the next step polls
            }
            if ((ready & 2) != 0) {
                c.id().awaitEvent(Duration.ZERO); // DISCONNECTED and the like: the id records them
            }
            return true;
        } finally {
            lock.unlock();
        }
    }
}
