package io.github.verbs4j.internal;

import io.github.verbs4j.raw.Downcalls;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * The pointer to a native object (an {@code ibv_qp}, {@code ibv_cq}, ...) as the segment every
 * call on that object passes, tied to a shared arena of its own: FFM's own guarantee that a close
 * cannot free what an in-flight call uses.
 *
 * <p>A downcall that takes {@link #segment()} as an argument holds (acquires) the arena for the
 * duration of the call. {@link #retire} closes the arena, which succeeds only when no call holds
 * it: so the owner's destroy verb runs only after every post or poll already in the provider has
 * returned, and any call that starts afterwards fails in the linker with an
 * {@link IllegalStateException} before native code sees the pointer. Races between
 * {@code close()} and a post on another thread end in that exception, never in the provider
 * using freed memory.
 *
 * <p>The owners refuse new calls from the moment their close begins ({@link Lifecycle#ensureOpen}),
 * so {@link #retire} waits only for the calls already past that check, never for a thread that
 * keeps posting or polling in a loop.
 *
 * <p>The cost on the hot path is the linker's acquire/release of a shared session around the
 * call (measured in docs/performance.md).
 *
 * <p><b>Pins.</b> A sequence of calls that passes the object's address as a {@code long}
 * (the extended QP's and CQ's sessions: several calls per request, each of which would pay the
 * segment's checks and its session's acquire and release) holds a pin instead: {@link #pin}
 * before the first call, {@link #unpin} after the last. {@link #retire} refuses new pins and
 * waits for the pins held, as it waits for calls in flight, before it closes the segment; so
 * the destroy verb never runs while a pinned sequence may still call the provider. A pin costs
 * one atomic update to take and one to give back, whatever the number of calls it covers.
 */
public final class NativeHandle {

    /** How long {@link #retire} waits for calls still inside the provider. */
    private static final long RETIRE_WAIT_NANOS = 10_000_000_000L;
    /** The bit of {@link #pins} that {@link #retire} sets: no new pin from then on. */
    private static final int RETIRING = Integer.MIN_VALUE;
    private static final VarHandle PINS;

    static {
        try {
            PINS = MethodHandles.lookup().findVarHandle(NativeHandle.class, "pins", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final MemorySegment pointer;
    private volatile Arena arena;
    private volatile MemorySegment segment;
    /** The pins held (low bits), and {@link #RETIRING} once {@link #retire} began. */
    @SuppressWarnings("unused") // through PINS
    private volatile int pins;

    /** A handle for the {@code size}-byte native object at {@code pointer}. */
    public NativeHandle(MemorySegment pointer, long size) {
        this.pointer = MemorySegment.ofAddress(pointer.address()).reinterpret(size);
        attach();
    }

    private void attach() {
        Arena a = Arena.ofShared();
        this.segment = pointer.reinterpret(a, null);
        this.arena = a;
    }

    /** The segment to pass to calls on the object: refused by the linker once retired. */
    public MemorySegment segment() {
        return segment;
    }

    /** The object's address as a segment that never closes: for identity, and for the destroy verb itself. */
    public MemorySegment pointer() {
        return pointer;
    }

    /**
     * Takes a pin: until {@link #unpin}, {@link #retire} waits, so the object's address may be
     * passed to the provider as a {@code long}.
     *
     * @return false (and no pin taken) when the handle is retired or being retired
     */
    public boolean pin() {
        int c;
        do {
            c = (int) PINS.getVolatile(this);
            if (c < 0) {
                return false;
            }
        } while (!PINS.weakCompareAndSet(this, c, c + 1));
        return true;
    }

    /** Gives back a pin taken by {@link #pin} (exactly once per successful {@code pin()}). */
    public void unpin() {
        PINS.getAndAdd(this, -1);
    }

    /** Whether {@link #retire} closed the segment (and {@link #restore} did not reopen it). */
    public boolean isRetired() {
        return !segment.scope().isAlive();
    }

    /**
     * Closes the segment once no call holds it, waiting for calls in progress (they return in
     * microseconds: posts and polls never block).
     *
     * @throws IllegalStateException naming {@code owner} when a call has not returned in 10 s
     */
    public void retire(Object owner) {
        long deadline = System.nanoTime() + RETIRE_WAIT_NANOS;
        int c;
        do {
            c = (int) PINS.getVolatile(this);
        } while (c >= 0 && !PINS.weakCompareAndSet(this, c, c | RETIRING));
        for (int spins = 0; (int) PINS.getVolatile(this) != RETIRING; spins++) {
            if (System.nanoTime() - deadline > 0) {
                restorePins();
                throw new IllegalStateException("cannot close " + owner + ": a session on it from another thread"
                        + " has not ended in 10 s");
            }
            backOff(spins);
        }
        for (int spins = 0; ; spins++) {
            try {
                arena.close();
                return;
            } catch (IllegalStateException inUse) {
                if (!segment.scope().isAlive()) {
                    return;
                }
                if (System.nanoTime() - deadline > 0) {
                    restorePins();
                    throw new IllegalStateException("cannot close " + owner + ": a call on it from another thread"
                            + " has not returned in 10 s", inUse);
                }
                backOff(spins);
            }
        }
    }

    private static void backOff(int spins) {
        if (spins < 100) {
            Thread.onSpinWait();
        } else {
            Thread.yield();
        }
    }

    /** Lets pins be taken again (the retire gave up, or the destroy verb failed). */
    private void restorePins() {
        int c;
        do {
            c = (int) PINS.getVolatile(this);
        } while (c < 0 && !PINS.weakCompareAndSet(this, c, c & ~RETIRING));
    }

    /**
     * The exception for a call through {@code verb} that threw {@code t}: "closed" when the
     * handle was retired under it (a close on another thread), else as {@link Downcalls#unexpected}.
     */
    public RuntimeException failure(Object owner, String verb, Throwable t) {
        if (isRetired() && t instanceof IllegalStateException) {
            return new IllegalStateException(owner + " is closed (" + verb + " refused: closed by another thread)", t);
        }
        return Downcalls.unexpected(verb, t);
    }

    /** Reopens the segment after the destroy verb failed: the object lives on, and so do its calls. */
    public void restore() {
        if (!segment.scope().isAlive()) {
            attach();
        }
        restorePins();
    }
}
