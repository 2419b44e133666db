package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.pollfd;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * {@code poll(2)} on one file descriptor: how verbs4j blocks on a completion channel, the async
 * event fd and the CM event fd, without holding a carrier in a sleep loop. Never critical: it
 * blocks.
 */
public final class Poll {

    private Poll() {
    }

    /** {@code int poll(struct pollfd *fds, nfds_t nfds, int timeout)}, errno captured. */
    private static final MethodHandle POLL = Downcalls.errnoCapturing(Linker.nativeLinker().defaultLookup(), "poll",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));

    private static final short POLLIN = 0x001;
    private static final short POLLNVAL = 0x020;
    private static final int EINTR = 4;
    private static final int EBADF = 9;

    /** {@link #awaitReadable}: the fd became readable. */
    public static final int READABLE = 1;
    /** {@link #awaitReadable}: the time ran out first. */
    public static final int TIMED_OUT = 0;

    /**
     * Waits until {@code fd} is readable, at most {@code timeoutMillis} (negative: without a
     * bound). An interrupted {@code poll} is retried with the time left.
     *
     * @return {@link #READABLE}, {@link #TIMED_OUT}, or a negative errno: {@code -EBADF} when
     *         the fd is not open (POLLNVAL), else {@code poll}'s own error
     */
    public static int awaitReadable(int fd, long timeoutMillis) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment pfd = arena.allocate(pollfd.layout());
            pollfd.fd(pfd, fd);
            return awaitReadable(pfd, Downcalls.errnoSegment(arena), timeoutMillis);
        }
    }

    /**
     * As {@link #awaitReadable(int, long)} on the descriptor already written into {@code pfd} (a
     * {@code struct pollfd} of {@link #POLLFD_SIZE} bytes the caller owns and reuses, see
     * {@link #setFd}), with {@code errno} a segment of {@link Downcalls#errnoSegment}: allocates
     * nothing, for a wait that a polling loop repeats.
     */
    public static int awaitReadable(MemorySegment pfd, MemorySegment errno, long timeoutMillis) {
        long deadline = timeoutMillis < 0 ? 0 : System.nanoTime() + Math.min(timeoutMillis, Long.MAX_VALUE / 2_000_000L) * 1_000_000L;
        try {
            while (true) {
                pollfd.events(pfd, POLLIN);
                pollfd.revents(pfd, (short) 0);
                int wait = timeoutMillis < 0 ? -1
                        : (int) Math.min(Integer.MAX_VALUE, Math.max(0, (deadline - System.nanoTime() + 999_999) / 1_000_000));
                int n = (int) POLL.invokeExact(errno, pfd, 1L, wait);
                if (n < 0) {
                    int e = Downcalls.errno(errno);
                    if (e == EINTR) {
                        continue;
                    }
                    return -e;
                }
                if (n == 0) {
                    // poll rounds to its clock: wait out what is left rather than report early
                    if (timeoutMillis >= 0 && deadline - System.nanoTime() > 0) {
                        continue;
                    }
                    return TIMED_OUT;
                }
                if ((pollfd.revents(pfd) & POLLNVAL) != 0) {
                    return -EBADF;
                }
                return READABLE;
            }
        } catch (Throwable t) {
            throw Downcalls.unexpected("poll", t);
        }
    }

    /** {@code sizeof(struct pollfd)}. */
    public static final long POLLFD_SIZE = pollfd.layout().byteSize();

    /**
     * Waits until one of the {@code nfds} descriptors already written into {@code pollfds} (an
     * array of {@code struct pollfd} the caller owns and reuses, {@link #POLLFD_SIZE} bytes each)
     * is readable, at most {@code timeoutMillis} (negative: without a bound); allocates nothing.
     * {@code errno} is a segment of {@link Downcalls#errnoSegment}. An interrupted {@code poll} is
     * retried with the time left.
     *
     * @return a bit mask of the readable descriptors (bit {@code i} for {@code pollfds[i]}), 0 when
     *         the time ran out, or a negative errno ({@code -EBADF} for a descriptor not open)
     */
    public static int awaitAnyReadable(MemorySegment pollfds, int nfds, MemorySegment errno, long timeoutMillis) {
        int n = awaitAny(pollfds, nfds, errno, timeoutMillis);
        if (n <= 0) {
            return n;
        }
        int mask = 0;
        for (int i = 0; i < nfds; i++) {
            short revents = revents(pollfds, i);
            if ((revents & POLLNVAL) != 0) {
                return -EBADF;
            }
            if (revents != 0) {
                mask |= 1 << i;
            }
        }
        return mask;
    }

    /**
     * Waits until one of the {@code nfds} descriptors already written into {@code pollfds} is
     * readable or in error, at most {@code timeoutMillis} (negative: without a bound), and leaves
     * each entry's {@code revents} for {@link #revents}: for any number of descriptors, where
     * {@link #awaitAnyReadable}'s mask holds 32. A descriptor not open is reported through its
     * {@code revents} (POLLNVAL), not as a failure of the wait. Allocates nothing; an interrupted
     * {@code poll} is retried with the time left.
     *
     * @return how many entries have events, 0 when the time ran out, or a negative errno
     */
    public static int awaitAny(MemorySegment pollfds, int nfds, MemorySegment errno, long timeoutMillis) {
        long deadline = timeoutMillis < 0 ? 0 : System.nanoTime() + Math.min(timeoutMillis, Long.MAX_VALUE / 2_000_000L) * 1_000_000L;
        try {
            while (true) {
                for (int i = 0; i < nfds; i++) {
                    MemorySegment pfd = pollfds.asSlice(i * POLLFD_SIZE, POLLFD_SIZE);
                    pollfd.events(pfd, POLLIN);
                    pollfd.revents(pfd, (short) 0);
                }
                int wait = timeoutMillis < 0 ? -1
                        : (int) Math.min(Integer.MAX_VALUE, Math.max(0, (deadline - System.nanoTime() + 999_999) / 1_000_000));
                int n = (int) POLL.invokeExact(errno, pollfds, (long) nfds, wait);
                if (n < 0) {
                    int e = Downcalls.errno(errno);
                    if (e == EINTR) {
                        continue;
                    }
                    return -e;
                }
                if (n == 0 && timeoutMillis >= 0 && deadline - System.nanoTime() > 0) {
                    continue;
                }
                return n;
            }
        } catch (Throwable t) {
            throw Downcalls.unexpected("poll", t);
        }
    }

    /** The {@code revents} of entry {@code index} of a {@code struct pollfd} array after a wait. */
    public static short revents(MemorySegment pollfds, int index) {
        return pollfd.revents(pollfds.asSlice(index * POLLFD_SIZE, POLLFD_SIZE));
    }

    /** Writes {@code fd} as entry {@code index} of a {@code struct pollfd} array. */
    public static void setFd(MemorySegment pollfds, int index, int fd) {
        pollfd.fd(pollfds.asSlice(index * POLLFD_SIZE, POLLFD_SIZE), fd);
    }
}
