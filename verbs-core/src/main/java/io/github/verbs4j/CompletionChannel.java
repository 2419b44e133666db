package io.github.verbs4j;

import io.github.verbs4j.internal.Fds;
import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.internal.NativeHandle;
import io.github.verbs4j.internal.Timeouts;
import io.github.verbs4j.raw.CompChannelFields;
import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.Poll;
import io.github.verbs4j.raw.VerbsFunctions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.Arrays;

/**
 * A completion event channel ({@code struct ibv_comp_channel}): completion queues created with
 * it signal here after {@link CompletionQueue#requestNotify(boolean)}.
 *
 * <pre>{@code
 * cq.requestNotify(false);
 * CompletionQueue fired = channel.await(Duration.ofSeconds(1));   // null on timeout
 * if (fired != null) { fired.requestNotify(false); while (fired.poll(wcs) > 0) ... }
 * }</pre>
 *
 * <p>Events are acknowledged for the application ({@code ibv_ack_cq_events}): in batches while
 * running and the remainder before the completion queue is destroyed, which rdma-core requires.
 *
 * <p><b>Lifecycle</b>: {@link #close()} ({@code ibv_destroy_comp_channel}) refuses while
 * completion queues use the channel. Idempotent.
 *
 * <p><b>Thread-safety</b>: {@link #await} may be called from one thread at a time; {@link #fd()}
 * from any thread. Close must not race with {@code await}.
 */
public final class CompletionChannel implements AutoCloseable {

    final Context context;
    /** The {@code ibv_comp_channel}: calls pass {@code handle.segment()}, so close waits for calls in flight. */
    final NativeHandle handle;
    final Lifecycle life = new Lifecycle();
    private final int fd;
    /** The queues using the channel, copied on change: await finds the one that fired without boxing its address. */
    private volatile CompletionQueue[] queues = new CompletionQueue[0];
    /** await's own memory, reused (one thread awaits at a time): a wait allocates nothing. */
    private final MemorySegment pollFd;
    private final MemorySegment errno;
    private final MemorySegment cqOut;
    private final MemorySegment ctxOut;
    private final String awaited;

    CompletionChannel(Context context, MemorySegment channel) {
        this.context = context;
        this.handle = new NativeHandle(channel, CompChannelFields.SIZE);
        this.fd = CompChannelFields.fd(handle.pointer());
        Arena scratch = Arena.ofAuto();
        this.pollFd = scratch.allocate(Poll.POLLFD_SIZE, 8);
        Poll.setFd(pollFd, 0, fd);
        this.errno = Downcalls.errnoSegment(scratch);
        this.cqOut = scratch.allocate(ValueLayout.ADDRESS);
        this.ctxOut = scratch.allocate(ValueLayout.ADDRESS);
        this.awaited = "a completion event on " + this;
    }

    void attach(CompletionQueue cq) {
        life.addDependent(this, cq, cq.life);
        synchronized (this) {
            CompletionQueue[] q = Arrays.copyOf(queues, queues.length + 1);
            q[q.length - 1] = cq;
            queues = q;
        }
    }

    void detach(CompletionQueue cq) {
        synchronized (this) {
            CompletionQueue[] q = queues;
            for (int i = 0; i < q.length; i++) {
                if (q[i] == cq) {
                    CompletionQueue[] r = Arrays.copyOf(q, q.length - 1);
                    System.arraycopy(q, i + 1, r, i, q.length - i - 1);
                    queues = r;
                    break;
                }
            }
        }
        life.removeDependent(cq);
    }

    /**
     * The channel's file descriptor: readable when a completion event is pending. Usable with
     * {@code poll}/{@code epoll} in the application's own event loop; then call
     * {@link #await(Duration)} with {@link Duration#ZERO} to take the event.
     */
    public int fd() {
        life.ensureOpen(this);
        return fd;
    }

    /**
     * Waits for the next completion event ({@code poll(2)} on the fd, then
     * {@code ibv_get_cq_event}). The caller re-arms with {@link CompletionQueue#requestNotify}
     * and polls the queue.
     *
     * <p><b>Errors</b>: {@link VerbsException} from {@code poll} or {@code ibv_get_cq_event};
     * {@link IllegalStateException} after close, also when another thread closes the channel
     * during the wait; {@link NullPointerException} for a {@code null} timeout and
     * {@link IllegalArgumentException} for a negative one (use {@link #await()} to wait without
     * a bound).
     *
     * @param timeout how long to wait; {@link Duration#ZERO} takes a pending event without waiting
     * @return the completion queue that fired, or {@code null} when none did in time
     */
    public CompletionQueue await(Duration timeout) {
        return await(Timeouts.millis(timeout));
    }

    /**
     * {@link #await(Duration)} without a bound: returns when a completion event arrives.
     *
     * <p><b>Errors</b>: as {@link #await(Duration)}.
     */
    public CompletionQueue await() {
        return await(-1L);
    }

    private CompletionQueue await(long millis) {
        life.ensureOpen(this);
        if (!Fds.awaitReadable(fd, pollFd, errno, millis, awaited, life, this)) {
            return null;
        }
        try {
            int rc = (int) VerbsFunctions.need(VerbsFunctions.GET_CQ_EVENT, "ibv_get_cq_event").invokeExact(errno, handle.segment(), cqOut, ctxOut);
            if (rc != 0) {
                throw VerbsException.of("ibv_get_cq_event", Downcalls.errno(errno));
            }
            // the pointer read as a 64-bit word: get(ADDRESS) would make a MemorySegment, which the
            // JIT does not always scalar-replace on this path (a polling thread blocks here often)
            long address = cqOut.get(ValueLayout.JAVA_LONG, 0);
            CompletionQueue cq = null;
            for (CompletionQueue q : queues) {
                if (q.handle.pointer().address() == address) {
                    cq = q;
                    break;
                }
            }
            if (cq == null) {
                throw new IllegalStateException("ibv_get_cq_event returned a completion queue (0x"
                        + Long.toHexString(address) + ") this channel does not know");
            }
            cq.eventReceived();
            return cq;
        } catch (Throwable t) {
            throw handle.failure(this, "ibv_get_cq_event", t);
        }
    }

    /**
     * Destroys the channel ({@code ibv_destroy_comp_channel}). Idempotent.
     *
     * <p><b>Errors</b>: {@link IllegalStateException} naming completion queues still using it;
     * {@link VerbsException} (EBUSY).
     */
    @Override
    public void close() {
        life.close(this, handle, () -> Lifecycle.destroyVerb("ibv_destroy_comp_channel", VerbsFunctions.DESTROY_COMP_CHANNEL, handle.pointer()),
                () -> context.life.removeDependent(this));
    }

    /** Whether {@link #close()} completed. */
    public boolean isClosed() {
        return life.isClosed();
    }

    @Override
    public String toString() {
        return "CompletionChannel[fd " + fd + "]";
    }
}
