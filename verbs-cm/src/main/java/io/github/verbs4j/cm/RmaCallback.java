package io.github.verbs4j.cm;

import io.github.verbs4j.WcStatus;

/**
 * Told when an asynchronous operation of an {@link RdmaConnection} completes
 * ({@link RdmaConnection#readAsync(long, io.github.verbs4j.RemoteBuffer, int, long, RmaCallback, java.time.Duration)}
 * and its siblings). One callback object may serve any number of operations: the {@code tag} the
 * caller gave tells them apart, so a hot loop allocates nothing per operation.
 *
 * <p><b>Threading</b>: runs on the thread that drives the connection's completions
 * ({@link RdmaConnection#poll()}, {@link RdmaConnection#drain}, any blocking call of the
 * connection, or for connections sharing a server's queues, of another connection); it should
 * return quickly. It may post further operations on the connection. An exception it throws is
 * passed on to the caller of the method that drove it.
 */
@FunctionalInterface
public interface RmaCallback {

    /**
     * The operation tagged {@code tag} completed with {@code status}: {@link WcStatus#SUCCESS}, or
     * the failure (the connection is then broken: later operations fail, most as
     * {@link WcStatus#WR_FLUSH_ERROR}).
     */
    void completed(long tag, WcStatus status);
}
