package io.github.verbs4j.internal;

import io.github.verbs4j.raw.Downcalls;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * The pointer to a native object (an {@code ibv_qp}, {@code ibv_cq}, ...) and the guard that keeps
 * a close from destroying it while a call on another thread may still be inside the provider.
 *
 * <p><b>Hot-path calls</b> (post send/recv, SRQ recv, poll, notify) pass the object's
 * {@link #address()} as a {@code long} between {@link #enter} and {@link InFlight#exit}: the
 * calling thread marks itself "inside this handle" with plain stores into its own record
 * ({@link InFlight}), then reads whether the handle is retired. {@link #retire} sets the retired
 * state, makes every thread of the process pass a memory barrier ({@code membarrier(2)}), and
 * waits until no mark names the handle. So the destroy verb runs only after every call already
 * past its check has returned, and a call that checks later is refused with
 * {@link IllegalStateException} before native code sees the pointer. No atomic read-modify-write
 * on shared memory is made per call (the shared arena's acquire and release were two, 2.7 to
 * 24 ns per call depending on the CPU: docs/performance.md).
 *
 * <p><b>Control-path calls</b> (modify, query, resize, and blocking waits) pass {@link #segment()}:
 * the pointer as a segment of a shared arena of the handle's own, which the linker holds for the
 * length of the call; {@link #retire} closes the arena, which succeeds only when no call holds it.
 *
 * <p>The owners refuse new calls from the moment their close begins ({@link Lifecycle#ensureOpen}),
 * so {@link #retire} waits only for the calls already past that check, never for a thread that
 * keeps posting or polling in a loop.
 *
 * <p><b>Confined owners</b> ({@code QueuePair.confine()}, {@code CompletionQueue.confine()}): the
 * owner thread's hot-path calls pass {@link #address()} without {@link #enter}, since no other
 * thread can run {@link #retire} on them while that thread lives ({@link InFlight}, "Confined
 * owners: no mark"); the owner's own close still calls {@link #retire}, which waits for the marks
 * of calls that other threads began before the confinement.
 *
 * <p><b>Sessions.</b> A sequence of calls that passes the object's address as a {@code long}
 * (the extended QP's and CQ's sessions: several calls per request) is marked once, from its
 * first call to its last, with {@link #enterSession}: the same protocol with a record of the
 * handle's own rather than the thread's (an owner has at most one session open, and a thread may
 * hold sessions on several owners while it also posts and polls).
 */
public final class NativeHandle {

    /** How long {@link #retire} waits for calls still inside the provider. */
    private static final long RETIRE_WAIT_NANOS = 10_000_000_000L;

    /** The source of {@link #id}s: taken once per handle, at creation (never on the hot path). */
    private static final java.util.concurrent.atomic.AtomicLong NEXT_ID = new java.util.concurrent.atomic.AtomicLong(1);

    private final MemorySegment pointer;
    private final long address;
    /**
     * What a mark publishes for this handle ({@link InFlight}): a number, not the reference, so
     * the mark's store is a plain store of a {@code long}, with no garbage collector's write
     * barrier (G1's card-marking barrier is several instructions and, for a store that crosses
     * regions into an old object, a full fence). Unique for the life of the JVM (an address may
     * be reused by the next object the provider makes).
     */
    private final long id = NEXT_ID.getAndIncrement();
    /**
     * Set by {@link #retire} before it waits for the marks of calls in flight; read by
     * {@link #enter} after its mark is published (see {@link InFlight} for the ordering).
     */
    private volatile boolean retired;
    private volatile Arena arena;
    private volatile MemorySegment segment;
    /** The record of this handle's sessions ({@link #enterSession}); created at the first, registered while not retired. */
    private volatile InFlight sessionMark;

    /** A handle for the {@code size}-byte native object at {@code pointer}. */
    public NativeHandle(MemorySegment pointer, long size) {
        this.pointer = MemorySegment.ofAddress(pointer.address()).reinterpret(size);
        this.address = pointer.address();
        attach();
    }

    private void attach() {
        Arena a = Arena.ofShared();
        this.segment = pointer.reinterpret(a, null);
        this.arena = a;
    }

    /** The segment to pass to control-path calls on the object: refused by the linker once retired. */
    public MemorySegment segment() {
        return segment;
    }

    /**
     * The object's address, for a hot-path call between {@link #enter} and {@link InFlight#exit}
     * (and nowhere else: only there does a close wait for the call).
     */
    public long address() {
        return address;
    }

    /**
     * Marks the calling thread inside this handle and checks that it is not retired: until the
     * returned record's {@link InFlight#exit()}, {@link #retire} waits, so {@link #address()} may
     * be passed to the provider. Costs no atomic read-modify-write and allocates nothing.
     *
     * @throws IllegalStateException naming {@code owner} and {@code verb} when the handle is
     *         retired (closed, or being closed, by another thread)
     */
    public InFlight enter(Object owner, String verb) {
        return mark(InFlight.current(), owner, verb);
    }

    /**
     * {@link #enter(Object, String)} with the record {@code cached} by the caller's request or
     * batch object when it is the calling thread's ({@link InFlight#of}); the caller stores the
     * returned record back when it differs. Saves the thread-local lookup on every call but a
     * thread's first with that object.
     */
    public InFlight enter(InFlight cached, Object owner, String verb) {
        return mark(InFlight.of(cached), owner, verb);
    }

    /**
     * Publishes the calling thread's mark for the handle whose {@link #id()} is {@code handleId}
     * <b>without</b> reading whether it is retired: for an owner that keeps the id (and
     * {@link #address()}) in fields of its own, so that its post reads them from the object it
     * already holds (two dependent loads and the handle's null check fewer), and that reads, right
     * after this and before it passes the address to the provider, a volatile field of its own that
     * its close clears before {@link #retire} begins ({@code QueuePair.postable}), refusing the call
     * (after {@link InFlight#exit()}) when clear. That load then takes the retired load's place in
     * {@link InFlight}'s handshake: the close's store precedes its barrier as the retired store does
     * (see {@link InFlight}, "Folding the retired check into an owner's field").
     */
    public static InFlight enterUnchecked(InFlight cached, long handleId) {
        InFlight mark = InFlight.of(cached);
        mark.publish(handleId);
        return mark;
    }

    /** What a mark publishes for this handle (see {@link #enterUnchecked(InFlight, long)}): fixed for its life. */
    public long id() {
        return id;
    }

    /**
     * {@link #enter} for a session of several calls (the extended QP's and CQ's), with this
     * handle's own record: the mark stays from the session's first call until its
     * {@link InFlight#exit()}, whatever the thread does meanwhile. One session at a time per
     * handle (the owners refuse a second one).
     */
    public InFlight enterSession(Object owner, String verb) {
        InFlight mark = sessionMark;
        if (mark == null) {
            mark = createSessionMark(owner, verb);
        }
        return mark(mark, owner, verb);
    }

    private synchronized InFlight createSessionMark(Object owner, String verb) {
        if (sessionMark == null) {
            if (retired) {
                throw refusedUnder(owner, verb, null);
            }
            sessionMark = InFlight.registerUnowned();
        }
        return sessionMark;
    }

    private InFlight mark(InFlight mark, Object owner, String verb) {
        mark.publish(id);
        if (retired) {
            mark.exit();
            throw refusedUnder(owner, verb, null);
        }
        return mark;
    }

    /**
     * The refusal of a call on a retired handle. It says "being closed" while {@link #retire} still
     * waits for calls in flight (the owner's state is then "closing" too, so a caller that passed
     * the owner's own check a moment earlier reads the same state as one refused by that check),
     * and "closed" once the retire completed.
     */
    private IllegalStateException refusedUnder(Object owner, String verb, Throwable cause) {
        if (segment.scope().isAlive()) {
            return new IllegalStateException(owner + " is being closed (" + verb
                    + " refused: a close on another thread began)", cause);
        }
        return new IllegalStateException(owner + " is closed (" + verb + " refused: closed by another thread)", cause);
    }

    /** The object's address as a segment that never closes: for identity, and for the destroy verb itself. */
    public MemorySegment pointer() {
        return pointer;
    }

    /** Whether {@link #retire} began or completed (and {@link #restore} did not undo it). */
    public boolean isRetired() {
        return retired || !segment.scope().isAlive();
    }

    /**
     * Refuses new calls, waits for those in progress (they return in microseconds: posts and
     * polls never block) and for an open session to end, then closes the segment.
     *
     * @throws IllegalStateException naming {@code owner} when a call or a session has not ended
     *         in 10 s (the handle is then usable again)
     */
    public void retire(Object owner) {
        long deadline = System.nanoTime() + RETIRE_WAIT_NANOS;
        retired = true;
        if (InFlight.OFF) {
            // -Dverbs4j.closeGuard=off (tests only): no wait for calls in flight, and the control
            // path's arena stays open, because closing a shared arena is a handshake with every
            // thread, which also waits for any critical downcall in progress (docs/architecture.md)
            return;
        }
        InFlight.barrier();
        if (!InFlight.awaitClear(id, deadline)) {
            retired = false;
            throw new IllegalStateException("cannot close " + owner + ": a call or a session on it from another"
                    + " thread has not ended in 10 s");
        }
        for (int spins = 0; ; spins++) {
            try {
                arena.close();
                break;
            } catch (IllegalStateException inUse) {
                if (!segment.scope().isAlive()) {
                    break;
                }
                if (System.nanoTime() - deadline > 0) {
                    retired = false;
                    throw new IllegalStateException("cannot close " + owner + ": a call on it from another thread"
                            + " has not returned in 10 s", inUse);
                }
                if (spins < 100) {
                    Thread.onSpinWait();
                } else {
                    Thread.yield();
                }
            }
        }
        synchronized (this) {
            if (sessionMark != null) {
                InFlight.unregister(sessionMark); // no session can start any more: nothing to scan
            }
        }
    }

    /**
     * The exception for a call through {@code verb} that threw {@code t}: "closed" when the
     * handle was retired under it (a close on another thread), else as {@link Downcalls#unexpected}.
     */
    public RuntimeException failure(Object owner, String verb, Throwable t) {
        if (isRetired() && t instanceof IllegalStateException) {
            return refusedUnder(owner, verb, t);
        }
        return Downcalls.unexpected(verb, t);
    }

    /** Reopens the handle after the destroy verb failed: the object lives on, and so do its calls. */
    public void restore() {
        if (!segment.scope().isAlive()) {
            attach();
        }
        synchronized (this) {
            if (sessionMark != null && retired) {
                InFlight.reregister(sessionMark);
            }
            retired = false;
        }
    }
}
