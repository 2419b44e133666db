package io.github.verbs4j.cm;

import io.github.verbs4j.Errno;
import io.github.verbs4j.VerbsException;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Objects;

/**
 * A listening RC endpoint: binds and listens ({@code rdma_bind_addr}, {@code rdma_listen}) and
 * accepts connections, each an {@link RdmaConnection} with its own event channel.
 *
 * <pre>{@code
 * try (RdmaServer server = RdmaServer.listen(new InetSocketAddress("127.0.0.1", 7174));
 *      RdmaConnection c = server.accept(Duration.ofSeconds(10))) {
 *     byte[] hello = c.receive(Duration.ofSeconds(5));
 * }
 * }</pre>
 *
 * <p>A client that vanishes during its handshake does not harm the server: {@link #accept}
 * drops that request and waits for the next one within its timeout.
 *
 * <p><b>Thread-safety</b>: one thread accepts at a time; connections are independent.
 */
public final class RdmaServer implements AutoCloseable {

    private final EventChannel channel;
    private final CmId listener;
    private final EndpointOptions options;

    private RdmaServer(EventChannel channel, CmId listener, EndpointOptions options) {
        this.channel = channel;
        this.listener = listener;
        this.options = options;
    }

    /** {@link #listen(InetSocketAddress, EndpointOptions, int)} with default options and a backlog of 16. */
    public static RdmaServer listen(InetSocketAddress address) {
        return listen(address, EndpointOptions.defaults(), 16);
    }

    /**
     * Binds to {@code address} (port 0 picks one: see {@link #localAddress()}) and listens.
     *
     * <p><b>Errors</b>: {@link VerbsException} from {@code rdma_create_event_channel},
     * {@code rdma_bind_addr} (EADDRINUSE, EADDRNOTAVAIL) or {@code rdma_listen}.
     */
    public static RdmaServer listen(InetSocketAddress address, EndpointOptions options, int backlog) {
        Objects.requireNonNull(address, "address");
        Objects.requireNonNull(options, "options");
        EventChannel channel = EventChannel.create();
        CmId id = null;
        try {
            id = channel.createId(PortSpace.TCP);
            id.bind(address);
            id.listen(backlog);
            return new RdmaServer(channel, id, options);
        } catch (RuntimeException | Error e) {
            RdmaConnection.closeAfterFailure(e, channel, id);
            throw e;
        }
    }

    /** The bound address and port. */
    public InetSocketAddress localAddress() {
        return listener.localAddress();
    }

    /**
     * The next connection request, to inspect before accepting or rejecting.
     *
     * <p><b>Errors</b>: {@link VerbsException} ETIMEDOUT when none came within {@code timeout}.
     */
    public ConnectionRequest nextRequest(Duration timeout) {
        CmEvent request = listener.getRequest(timeout);
        if (request == null) {
            throw new VerbsException("rdma_get_cm_event", Errno.ETIMEDOUT, "no connection request on "
                    + localAddress() + " within " + timeout.toMillis() + " ms");
        }
        return new ConnectionRequest(request, options);
    }

    /**
     * Accepts the next connection that completes its handshake within {@code timeout}. Requests
     * whose peers vanish before ESTABLISHED are dropped and the wait goes on.
     *
     * <p><b>Errors</b>: {@link VerbsException} ETIMEDOUT (with the dropped requests' failures
     * attached as suppressed exceptions); errors of the server's own resources.
     */
    public RdmaConnection accept(Duration timeout) {
        long deadline = System.nanoTime() + Cm.timeoutMillis(timeout) * 1_000_000L;
        VerbsException timedOut = new VerbsException("rdma_accept", Errno.ETIMEDOUT, "no connection established on "
                + localAddress() + " within " + timeout.toMillis() + " ms");
        while (true) {
            CmEvent request = listener.getRequest(RdmaConnection.remaining(deadline));
            if (request == null) {
                throw timedOut;
            }
            try {
                return new ConnectionRequest(request, options).accept(RdmaConnection.remaining(deadline));
            } catch (CmEventException dropped) {
                timedOut.addSuppressed(dropped);
            } catch (VerbsException e) {
                if (!e.is(Errno.ETIMEDOUT)) {
                    throw e;
                }
                timedOut.addSuppressed(e);
            }
        }
    }

    /** Closes the listener (pending requests are rejected) and its channel. Idempotent. */
    @Override
    public void close() {
        try {
            listener.close();
        } finally {
            channel.close();
        }
    }

    @Override
    public String toString() {
        return "RdmaServer[" + (listener.isClosed() ? "closed" : String.valueOf(localAddress())) + "]";
    }
}
