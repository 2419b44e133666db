package io.github.verbs4j;

/**
 * The root of every exception verbs4j throws for an RDMA failure, so an application can catch
 * them in one place:
 * <ul>
 *   <li>{@link VerbsException}: a verb (or librdmacm call) failed, with the function's name and
 *       its {@link Errno}; verbs-cm's {@code CmEventException} is a kind of it, and so is
 *       {@link RdmaTimeoutException} (a wait ran out);</li>
 *   <li>{@link WorkCompletionException}: a work request completed with an error
 *       {@link WcStatus};</li>
 *   <li>{@link PeerLostException}: the peer of a connection is gone, in every layer (cm,
 *       channel, transfer), with the completion that showed it as cause.</li>
 * </ul>
 * Misuse of the API is not an {@code RdmaException}: a closed owner or a request that cannot be
 * posted is an {@link IllegalStateException} or {@link IllegalArgumentException}, thrown before
 * anything reaches the device.
 */
public abstract class RdmaException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    /** An exception with this message. */
    protected RdmaException(String message) {
        super(message);
    }

    /** An exception with this message and cause. */
    protected RdmaException(String message, Throwable cause) {
        super(message, cause);
    }
}
