package io.github.verbs4j.internal;

import io.github.verbs4j.VerbsException;
import io.github.verbs4j.raw.Poll;

import java.lang.foreign.MemorySegment;

/** Blocking on a file descriptor (completion channel, async events, CM events) for core and cm. */
public final class Fds {

    private Fds() {
    }

    /**
     * Waits until {@code fd} is readable, at most {@code timeoutMillis} (negative: without a bound).
     *
     * @param what names what is awaited, for the exception
     * @return whether the fd became readable before the timeout
     * @throws VerbsException from {@code poll} (EBADF when the fd is not open)
     */
    public static boolean awaitReadable(int fd, long timeoutMillis, String what) {
        return awaitReadable(fd, null, null, timeoutMillis, what, null, null);
    }

    /** The longest single poll of a wait that watches its owner. */
    private static final long SLICE_MILLIS = 100;

    /**
     * As {@link #awaitReadable(int, long, String)}, polling in slices of at most 100 ms and
     * checking between them that {@code owner} is still open: a close on another thread ends the
     * wait with {@link IllegalStateException} within a slice, instead of leaving the thread in
     * {@code poll} on a file descriptor that was closed (and may be reused).
     */
    public static boolean awaitReadable(int fd, long timeoutMillis, String what, Lifecycle life, Object owner) {
        return awaitReadable(fd, null, null, timeoutMillis, what, life, owner);
    }

    /**
     * As {@link #awaitReadable(int, long, String, Lifecycle, Object)} with the caller's own
     * {@code struct pollfd} (already holding {@code fd}, see {@link Poll#setFd}) and errno
     * segment, reused from wait to wait: allocates nothing (a polling thread that blocks often).
     */
    public static boolean awaitReadable(int fd, MemorySegment pfd, MemorySegment errno, long timeoutMillis, String what,
            Lifecycle life, Object owner) {
        if (life == null) {
            return pollOnce(fd, pfd, errno, timeoutMillis, what);
        }
        long deadline = timeoutMillis < 0 ? 0 : System.nanoTime() + timeoutMillis * 1_000_000L;
        while (true) {
            life.ensureOpen(owner);
            long left = timeoutMillis < 0 ? SLICE_MILLIS
                    : Math.max(0, (deadline - System.nanoTime() + 999_999) / 1_000_000);
            boolean readable;
            try {
                readable = pollOnce(fd, pfd, errno, Math.min(left, SLICE_MILLIS), what);
            } catch (VerbsException e) {
                // the fd closed under the wait (EBADF/POLLNVAL): say which owner closed it
                life.ensureOpen(owner);
                throw e;
            }
            if (readable) {
                life.ensureOpen(owner);
                return true;
            }
            if (timeoutMillis >= 0 && deadline - System.nanoTime() <= 0) {
                return false;
            }
        }
    }

    private static boolean pollOnce(int fd, MemorySegment pfd, MemorySegment errno, long timeoutMillis, String what) {
        int r = pfd == null ? Poll.awaitReadable(fd, timeoutMillis) : Poll.awaitReadable(pfd, errno, timeoutMillis);
        if (r < 0) {
            throw new VerbsException("poll", -r, "waiting for " + what + " (fd " + fd + ")");
        }
        return r == Poll.READABLE;
    }
}
