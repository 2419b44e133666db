package io.github.verbs4j;

import java.time.Duration;

/**
 * A wait ran out of time: what was awaited did not come within the caller's timeout. verbs4j's
 * one timeout convention: every method that takes a timeout throws this when it runs out (none
 * returns {@code null} or {@code false} for it), so a caller cannot mistake "nothing yet" for a
 * result, and a timeout is an {@link RdmaException} like every other failure.
 *
 * <p>It is a {@link VerbsException} with errno {@link Errno#ETIMEDOUT}, so code that tests
 * {@code e.is(Errno.ETIMEDOUT)} keeps working. {@link #verb()} names the rdma-core function
 * waited on when one was (e.g. {@code ibv_poll_cq}, {@code rdma_get_cm_event}); it is
 * {@code null} when the wait was verbs4j's own (a ring's rendezvous, a directory look-up), so
 * that no message names a verb that did not time out.
 */
public class RdmaTimeoutException extends VerbsException {

    private static final long serialVersionUID = 1L;

    private final String awaited;
    private final Duration timeout;

    /**
     * @param verb    the function waited on, or {@code null} when the wait was not on one verb
     * @param awaited what did not come, e.g. {@code "a message on RdmaConnection[...]"}
     * @param timeout how long the caller asked to wait
     */
    public RdmaTimeoutException(String verb, String awaited, Duration timeout) {
        super(message(verb, awaited, timeout), verb, Errno.ETIMEDOUT.code());
        this.awaited = awaited;
        this.timeout = timeout;
    }

    private static String message(String verb, String awaited, Duration timeout) {
        return "timed out after " + timeout.toMillis() + " ms waiting for " + awaited + " ("
                + (verb == null ? "" : verb + ": ") + Errno.name(Errno.ETIMEDOUT.code()) + ")";
    }

    /** What did not come in time. */
    public String awaited() {
        return awaited;
    }

    /** How long the caller asked to wait. */
    public Duration timeout() {
        return timeout;
    }
}
