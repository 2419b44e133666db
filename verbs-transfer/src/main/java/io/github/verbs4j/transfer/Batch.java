package io.github.verbs4j.transfer;

import io.github.verbs4j.Deadline;
import io.github.verbs4j.RdmaTimeoutException;
import io.github.verbs4j.WcStatus;
import io.github.verbs4j.transfer.internal.StreamSpin;

import java.time.Duration;
import java.util.Objects;

/**
 * A reusable batch of RDMA READ and WRITE requests between local {@link Segment}s and
 * {@link RemoteSegment}s of one or several peers. Made by {@link TransferEngine#batch(int)}.
 *
 * <p><b>Use</b>: add requests ({@link #read}, {@link #write}; each is bounds-checked against the
 * local segment and the remote descriptor at once), {@link #submit()}, then {@link #poll()} or
 * {@link #await(Duration)}; read each request's {@link #status(int)}. {@link #reset()} empties
 * a finished batch for the next round: a batch reused this way allocates nothing per request or
 * per chunk.
 *
 * <p><b>Chunks</b>: the engine splits each request into chunks of at most
 * {@link TransferOptions#chunkSize()} bytes and stripes them round robin over the peer's queue
 * pairs, with at most {@link TransferOptions#maxOutstanding()} chunks in flight per queue pair;
 * requests of other peers go on while one peer's queue pairs are full. Several batches may be
 * submitted before any is awaited (up to {@link TransferOptions#maxBatches()}): awaiting or
 * polling any of them posts the chunks of all, oldest batch first, as the queue pairs make room.
 *
 * <p><b>Failures</b> are per request, never an exception of the batch: a lost peer fails that
 * peer's requests ({@link TransferStatus#PEER_LOST}), a refused access fails its own request
 * ({@link TransferStatus#ACCESS_ERROR}); everything else completes. The one exception is the
 * timeout: {@link #await(Duration)} throws {@link RdmaTimeoutException} when requests were not
 * final in time, after marking them {@link TransferStatus#TIMED_OUT}.
 *
 * <p><b>Thread-safety</b>: one thread builds and drives a batch; several batches may be in
 * flight on one engine, from several threads (the engine's progress is serialized).
 */
public final class Batch {

    final TransferEngine engine;
    final boolean[] write;
    final Segment[] local;
    final long[] localOffset;
    final RemoteSegment[] remote;
    final long[] remoteOffset;
    final long[] length;
    final long[] posted;
    final int[] inFlight;
    final TransferStatus[] status;
    final WcStatus[] completion;
    int size;
    int finished;
    int scanFrom;
    long generation;
    boolean submitted;
    boolean timedOut;

    Batch(TransferEngine engine, int capacity) {
        this.engine = engine;
        this.write = new boolean[capacity];
        this.local = new Segment[capacity];
        this.localOffset = new long[capacity];
        this.remote = new RemoteSegment[capacity];
        this.remoteOffset = new long[capacity];
        this.length = new long[capacity];
        this.posted = new long[capacity];
        this.inFlight = new int[capacity];
        this.status = new TransferStatus[capacity];
        this.completion = new WcStatus[capacity];
    }

    /** How many requests the batch holds at most. */
    public int capacity() {
        return length.length;
    }

    /** How many requests it holds. */
    public int size() {
        return size;
    }

    /**
     * Adds a READ of {@code length} bytes at {@code remoteOffset} of {@code remote} into
     * {@code local} at {@code localOffset}.
     *
     * @return the request's index, for {@link #status(int)}
     * @throws IndexOutOfBoundsException when a range lies outside its segment or descriptor
     * @throws IllegalStateException     when the batch is full or already submitted
     * @throws IllegalArgumentException  when the local segment belongs to another engine, or the
     *                                   remote one to a peer of another engine
     */
    public int read(Segment local, long localOffset, RemoteSegment remote, long remoteOffset, long length) {
        return add(false, local, localOffset, remote, remoteOffset, length);
    }

    /**
     * Adds a WRITE of {@code length} bytes from {@code local} at {@code localOffset} to
     * {@code remote} at {@code remoteOffset}. As {@link #read} otherwise.
     *
     * @return the request's index, for {@link #status(int)}
     */
    public int write(Segment local, long localOffset, RemoteSegment remote, long remoteOffset, long length) {
        return add(true, local, localOffset, remote, remoteOffset, length);
    }

    private int add(boolean isWrite, Segment l, long lOff, RemoteSegment r, long rOff, long len) {
        Objects.requireNonNull(l, "local");
        Objects.requireNonNull(r, "remote");
        if (submitted) {
            throw new IllegalStateException("the batch was submitted: reset() it once finished to reuse it");
        }
        if (size == length.length) {
            throw new IllegalStateException("the batch is full (" + size + " requests)");
        }
        if (l.engine != engine) {
            throw new IllegalArgumentException(l + " belongs to another engine");
        }
        if (r.peer.engine != engine) {
            throw new IllegalArgumentException(r + " was looked up through another engine");
        }
        if (len <= 0) {
            throw new IllegalArgumentException("length must be positive, got " + len);
        }
        if (lOff < 0 || lOff > l.length() || len > l.length() - lOff) {
            throw new IndexOutOfBoundsException("local range [" + lOff + ", +" + len + ") outside " + l);
        }
        if (!r.descriptor().contains(rOff, len)) {
            throw new IndexOutOfBoundsException("remote range [" + rOff + ", +" + len + ") outside " + r.descriptor());
        }
        int i = size++;
        write[i] = isWrite;
        local[i] = l;
        localOffset[i] = lOff;
        remote[i] = r;
        remoteOffset[i] = rOff;
        length[i] = len;
        posted[i] = 0;
        inFlight[i] = 0;
        status[i] = TransferStatus.PENDING;
        completion[i] = null;
        return i;
    }

    /**
     * Hands the batch to the engine and posts what the queue pairs take at once.
     *
     * @return this batch
     * @throws IllegalStateException when already submitted, empty, or the engine has
     *                               {@link TransferOptions#maxBatches()} batches in flight
     */
    public Batch submit() {
        if (submitted) {
            throw new IllegalStateException("the batch was already submitted");
        }
        if (size == 0) {
            throw new IllegalStateException("the batch is empty");
        }
        engine.submit(this);
        return this;
    }

    /** Makes progress once (polls completions, posts chunks) without waiting; whether every request is final. */
    public boolean poll() {
        engine.progress();
        return isDone();
    }

    /**
     * Makes progress until every request is final or {@code timeout} passed: it polls for
     * {@link TransferOptions#spinWait()} without a result, then blocks on the engine's completion
     * channel (and the peers' rdma_cm events) until a completion wakes it. At the timeout the
     * requests not yet final become {@link TransferStatus#TIMED_OUT} (their chunks not yet posted
     * never are) and it throws; the requests that finished keep their status.
     *
     * @throws RdmaTimeoutException when a request was not final within {@code timeout} (also
     *         when an earlier {@code await} of this round timed out)
     * @throws IllegalStateException before {@link #submit()}
     */
    public void await(Duration timeout) {
        Deadline deadline = Deadline.after(timeout);
        if (!awaitUntil(deadline.nanoTime())) {
            throw timedOut(timeout);
        }
    }

    /**
     * As {@link #await(Duration)}, with the timeout in nanoseconds (allocates nothing unless it
     * times out; a negative timeout is zero).
     *
     * @throws RdmaTimeoutException when a request was not final within the timeout
     */
    public void awaitNanos(long timeoutNanos) {
        long timeout = Math.max(0, timeoutNanos);
        if (!awaitUntil(System.nanoTime() + timeout)) {
            throw timedOut(Duration.ofNanos(timeout));
        }
    }

    /** Whether every request finished before {@code deadline} (a {@link System#nanoTime()}). */
    private boolean awaitUntil(long deadline) {
        if (!submitted) {
            throw new IllegalStateException("submit() the batch first");
        }
        long idleSince = System.nanoTime();
        long polled = idleSince;
        while (!isDone()) {
            boolean moved = engine.progress() > 0;
            long now = System.nanoTime();
            if (now - deadline > 0 && !isDone()) {
                engine.timeOut(this);
                return false;
            }
            long spin = engine.spinNanos();
            // a poll after a pause (this thread away, not polling) starts the spin again: StreamSpin.spinStart
            idleSince = moved ? now : StreamSpin.spinStart(idleSince, polled, now, spin);
            boolean backFromAway = now - polled >= TransferEngine.AWAY_NANOS;
            polled = now;
            if (moved) {
                continue;
            }
            if (now - idleSince < spin) {
                Thread.onSpinWait();
            } else {
                engine.awaitEvents(deadline, backFromAway); // nothing moved for the spin budget: block until something does
                polled = System.nanoTime(); // the time blocked is no pause that restarts the spin
            }
        }
        return !timedOut;
    }

    private RdmaTimeoutException timedOut(Duration timeout) {
        // a wait of the engine's own: no one verb timed out
        return new RdmaTimeoutException(null, count(TransferStatus.TIMED_OUT) + " of " + size
                + " requests of a batch", timeout);
    }

    /** Whether every request is final. */
    public boolean isDone() {
        return submitted && finished == size;
    }

    /** The state of request {@code index}. */
    public TransferStatus status(int index) {
        check(index);
        return status[index];
    }

    /**
     * The completion status behind a failed request, or {@code null}: done, pending, timed out,
     * local error, and a {@link TransferStatus#PEER_LOST} request that was never posted: the peer
     * was found lost (through rdma_cm's DISCONNECTED, or another request's failed chunk) before any
     * of its chunks went out, so no completion of its own says why; {@link TransferPeer#lostBecause()}
     * says what showed the loss.
     */
    public WcStatus completionStatus(int index) {
        check(index);
        return completion[index];
    }

    /** How many requests have status {@code s}. */
    public int count(TransferStatus s) {
        int n = 0;
        for (int i = 0; i < size; i++) {
            if (status[i] == s) {
                n++;
            }
        }
        return n;
    }

    /** The bytes of the requests that are {@link TransferStatus#DONE}. */
    public long bytesDone() {
        long n = 0;
        for (int i = 0; i < size; i++) {
            if (status[i] == TransferStatus.DONE) {
                n += length[i];
            }
        }
        return n;
    }

    /**
     * Empties a finished (or never submitted) batch for reuse. Chunks of requests that timed out
     * may still complete later; they no longer touch this batch.
     *
     * @throws IllegalStateException while a submitted batch has requests that are not final
     */
    public void reset() {
        if (submitted && !isDone()) {
            throw new IllegalStateException("the batch is still in flight: " + (size - finished) + " requests pending");
        }
        for (int i = 0; i < size; i++) {
            local[i] = null;
            remote[i] = null;
        }
        size = 0;
        finished = 0;
        scanFrom = 0;
        submitted = false;
        timedOut = false;
        generation++;
    }

    void finish(int i, TransferStatus s, WcStatus wc) {
        if (status[i] == TransferStatus.PENDING) {
            status[i] = s;
            completion[i] = wc;
            finished++;
        }
    }

    private void check(int index) {
        if (index < 0 || index >= size) {
            throw new IndexOutOfBoundsException("request " + index + " of a batch of " + size);
        }
    }

    @Override
    public String toString() {
        return "Batch[" + size + " requests, " + finished + " final" + (submitted ? ", submitted" : "") + "]";
    }
}
