package io.github.verbs4j.cm;

import io.github.verbs4j.Deadline;
import io.github.verbs4j.Errno;
import io.github.verbs4j.VerbsException;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.Objects;

/**
 * Connects RC endpoints: address and route resolution, resources, {@code rdma_connect} and
 * ESTABLISHED, all within one timeout.
 *
 * <pre>{@code
 * try (RdmaConnection c = new RdmaClient().connect("127.0.0.1", 7174, Duration.ofSeconds(5))) {
 *     c.send("hello".getBytes(), Duration.ofSeconds(1));
 * }
 * }</pre>
 *
 * <p>A connect to an address or port nobody serves fails with {@link CmEventException}
 * (REJECTED, UNREACHABLE) or {@link io.github.verbs4j.VerbsException} ETIMEDOUT, never later than
 * its timeout (plus the cost of releasing the resources).
 *
 * <p><b>Thread-safety</b>: immutable and thread-safe; each connect makes its own connection.
 */
public final class RdmaClient {

    private final EndpointOptions options;

    /** A client with {@link EndpointOptions#defaults()}. */
    public RdmaClient() {
        this(EndpointOptions.defaults());
    }

    /** A client whose connections have {@code options} (sizes, queue depths, connect parameters). */
    public RdmaClient(EndpointOptions options) {
        this.options = Objects.requireNonNull(options, "options");
    }

    /** Connects to {@code host} (an IP address or a name) and rdma_cm {@code port}. */
    public RdmaConnection connect(String host, int port, Duration timeout) {
        Objects.requireNonNull(host, "host");
        try {
            return connect(new InetSocketAddress(InetAddress.getByName(host), port), timeout);
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException("unknown host " + host, e);
        }
    }

    /**
     * Resolves, connects and waits for ESTABLISHED within {@code timeout}; everything made is
     * released when a step fails.
     *
     * <p><b>Errors</b>: {@link CmEventException} for ADDR_ERROR, ROUTE_ERROR, REJECTED (with the
     * server's private data), UNREACHABLE, CONNECT_ERROR; {@link io.github.verbs4j.VerbsException}
     * ETIMEDOUT or from a verb.
     */
    public RdmaConnection connect(InetSocketAddress address, Duration timeout) {
        Objects.requireNonNull(address, "address");
        try {
            return connectWithin(address, timeout);
        } catch (VerbsException e) {
            if (e.is(Errno.ETIMEDOUT) && !(e instanceof CmEventException)) {
                // each step waited only for what was left of the caller's timeout: name that one
                VerbsException timedOut = VerbsException.timedOut(e.verb(), "a connection to " + address, timeout);
                timedOut.initCause(e);
                throw timedOut;
            }
            throw e;
        }
    }

    private RdmaConnection connectWithin(InetSocketAddress address, Duration timeout) {
        Deadline deadline = Deadline.after(timeout);
        EventChannel channel = EventChannel.create();
        CmId id = null;
        try {
            id = channel.createId(PortSpace.TCP);
            id.resolveAddress(null, address, deadline.remaining());
            id.resolveRoute(deadline.remaining());
        } catch (RuntimeException | Error e) {
            RdmaConnection.closeAfterFailure(e, channel, id);
            throw e;
        }
        return RdmaConnection.connect(channel, id, options, deadline);
    }
}
