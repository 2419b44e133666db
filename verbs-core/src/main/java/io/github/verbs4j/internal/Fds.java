package io.github.verbs4j.internal;

import io.github.verbs4j.VerbsException;
import io.github.verbs4j.raw.Poll;

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
        int r = Poll.awaitReadable(fd, timeoutMillis);
        if (r < 0) {
            throw new VerbsException("poll", -r, "waiting for " + what + " (fd " + fd + ")");
        }
        return r == Poll.READABLE;
    }
}
