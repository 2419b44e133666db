package io.github.verbs4j;

import io.github.verbs4j.internal.InFlight;
import io.github.verbs4j.raw.WorkCompletionLayout;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A reusable batch of work completions: a native {@code struct ibv_wc} array that
 * {@link CompletionQueue#poll(Completions)} fills, read through preallocated {@link Completion}
 * flyweights. Polling into the same batch allocates nothing.
 *
 * <p>The native array is freed by the garbage collector once the batch is unreachable.
 * Not thread-safe: one poller per batch.
 */
public final class Completions {

    final MemorySegment array;
    /** {@code array.address()} as a number, for the poll: one load instead of two (the array stays reachable through its field). */
    final long arrayAddress;
    /**
     * The close guard's record of the thread that polled into this batch last
     * ({@code NativeHandle.enter(InFlight, ...)}): reused while the same thread polls into it, so a poll
     * does not look the record up in a thread-local each time. Any thread may overwrite it. Starts as the creating thread's record
     * (why: {@code InFlight}'s class comment).
     */
    InFlight mark = InFlight.of(null);
    final int capacity;
    private final Completion[] views;
    /**
     * {@code views[0]}, the completion a caller that awaits one reads: {@link #get} returns it
     * without the array's load, length and bounds check (three instructions, two loads per read).
     */
    private final Completion first;
    int count;
    /** Empty polls through this batch, for {@link CompletionQueue#poll}'s safepoint and yield; wraps. */
    int emptyPolls;

    /** A batch of {@code capacity} completions (1..65536). */
    public Completions(int capacity) {
        if (capacity < 1 || capacity > 65536) {
            throw new IllegalArgumentException("capacity must be 1..65536, got " + capacity);
        }
        this.capacity = capacity;
        this.array = Arena.ofAuto().allocate(WorkCompletionLayout.WC_SIZE * capacity, WorkCompletionLayout.WC_ALIGNMENT);
        this.arrayAddress = array.address();
        this.views = new Completion[capacity];
        for (int i = 0; i < capacity; i++) {
            views[i] = new Completion(array, i);
        }
        this.first = views[0];
    }

    /** How many completions the batch holds at most. */
    public int capacity() {
        return capacity;
    }

    /** How many completions the last poll returned. */
    public int count() {
        return count;
    }

    /**
     * The completion at {@code index} (0..{@link #count()}-1) of the last poll.
     *
     * @throws IndexOutOfBoundsException outside that range
     */
    public Completion get(int index) {
        if (index < 0 || index >= count) {
            throw new IndexOutOfBoundsException("completion " + index + " of " + count);
        }
        return index == 0 ? first : views[index];
    }
}
