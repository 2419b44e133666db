package io.github.verbs4j.internal;

import io.github.verbs4j.raw.Downcalls;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

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
 */
public final class NativeHandle {

    /** How long {@link #retire} waits for calls still inside the provider. */
    private static final long RETIRE_WAIT_NANOS = 10_000_000_000L;

    private final MemorySegment pointer;
    private volatile Arena arena;
    private volatile MemorySegment segment;

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
        for (int spins = 0; ; spins++) {
            try {
                arena.close();
                return;
            } catch (IllegalStateException inUse) {
                if (!segment.scope().isAlive()) {
                    return;
                }
                if (System.nanoTime() - deadline > 0) {
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
    }
}
