package io.github.verbs4j;

import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.Poll;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * A reusable set of file descriptors waited on together in one {@code poll(2)}: what an event
 * loop blocks on when it serves several completion channels ({@link CompletionChannel#fd()}),
 * rdma_cm event channels and a wakeup descriptor of its own. The set is filled once
 * ({@link #clear}, {@link #add}) and waited on many times; a wait allocates nothing.
 *
 * <p>{@link #await} returns 0 when the time runs out rather than throwing
 * {@link RdmaTimeoutException} as verbs4j's other timed waits do: this is an event loop's wait,
 * where a time-out is the ordinary outcome (the next scheduled task is due), as it is for
 * {@code Selector.select}; and it takes milliseconds, not a {@code Duration}, so that a loop that
 * blocks thousands of times a second allocates nothing for it.
 *
 * <p>Not thread-safe: one thread fills it and waits on it. The descriptors stay the caller's:
 * the set neither closes them nor notices when they are closed (a closed one reports events, as
 * {@code POLLNVAL}, so that its owner is looked at); refill it when they change.
 */
public final class PollSet {

    private final Arena arena = Arena.ofAuto();
    private final MemorySegment errno = Downcalls.errnoSegment(arena);
    private MemorySegment pollfds;
    private int[] fds;
    private int size;

    /** An empty set with room for 16 descriptors; it grows as descriptors are added. */
    public PollSet() {
        this(16);
    }

    /** An empty set with room for {@code capacity} descriptors; it grows beyond them as needed. */
    public PollSet(int capacity) {
        if (capacity < 1) {
            throw new IllegalArgumentException("a poll set holds at least one descriptor, not " + capacity);
        }
        pollfds = arena.allocate(capacity * Poll.POLLFD_SIZE, 8);
        fds = new int[capacity];
    }

    /** Empties the set (the room stays). */
    public void clear() {
        size = 0;
    }

    /**
     * Adds {@code fd} to the set.
     *
     * @return its index, which {@link #isReady} takes after a wait
     * @throws IllegalArgumentException for a negative descriptor
     */
    public int add(int fd) {
        if (fd < 0) {
            throw new IllegalArgumentException("not a file descriptor: " + fd);
        }
        if (size == fds.length) {
            int capacity = size * 2;
            MemorySegment larger = arena.allocate(capacity * Poll.POLLFD_SIZE, 8);
            larger.copyFrom(pollfds.asSlice(0, size * Poll.POLLFD_SIZE));
            pollfds = larger;
            fds = Arrays.copyOf(fds, capacity);
        }
        Poll.setFd(pollfds, size, fd);
        fds[size] = fd;
        return size++;
    }

    /** How many descriptors the set holds. */
    public int size() {
        return size;
    }

    /** The descriptor at {@code index}. */
    public int fd(int index) {
        return fds[checkIndex(index)];
    }

    /**
     * Waits until one of the descriptors is readable, or in error or hung up, at most
     * {@code timeoutMillis} (0: a look without waiting; negative: without a bound). An
     * interrupted {@code poll} is resumed with the time left.
     *
     * @return how many descriptors have events ({@link #isReady}), 0 when the time ran out
     * @throws VerbsException when {@code poll} fails, with its errno
     */
    public int await(long timeoutMillis) {
        int n = Poll.awaitAny(pollfds, size, errno, timeoutMillis);
        if (n < 0) {
            throw new VerbsException("poll", -n, "waiting on " + size + " descriptors");
        }
        return n;
    }

    /**
     * Whether the descriptor at {@code index} had events in the last {@link #await}: readable, in
     * error, hung up, or not open; its owner is to be looked at.
     */
    public boolean isReady(int index) {
        return Poll.revents(pollfds, checkIndex(index)) != 0;
    }

    private int checkIndex(int index) {
        if (index < 0 || index >= size) {
            throw new IndexOutOfBoundsException("index " + index + " of a poll set of " + size);
        }
        return index;
    }

    @Override
    public String toString() {
        return "PollSet" + Arrays.toString(Arrays.copyOf(fds, size));
    }
}
