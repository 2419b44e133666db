package io.github.verbs4j.cm;

import io.github.verbs4j.Deadline;

import java.net.InetSocketAddress;
import java.time.Duration;

/**
 * A peer's request to connect to an {@link RdmaServer}, taken with {@link RdmaServer#nextRequest}:
 * look at its private data, then {@link #accept} or {@link #reject} it. A request neither
 * accepted nor rejected is rejected by {@link #close()}.
 *
 * <p><b>Thread-safety</b>: not thread-safe; one thread decides.
 */
public final class ConnectionRequest implements AutoCloseable {

    private final CmEvent event;
    private final EndpointOptions options;
    private final RdmaServer server;
    private boolean taken;

    ConnectionRequest(CmEvent event, EndpointOptions options, RdmaServer server) {
        this.event = event;
        this.options = options;
        this.server = server;
    }

    /** The private data the peer sent with its connect (56 bytes: the IB CM REQ size, zero-padded). */
    public byte[] privateData() {
        return event.privateData();
    }

    /** The peer's connection parameters as seen from this side. */
    public ConnectParameters parameters() {
        return event.parameters();
    }

    /** The peer's address. */
    public InetSocketAddress remoteAddress() {
        return event.id().remoteAddress();
    }

    /**
     * Accepts: makes the connection's resources on its own event channel, {@code rdma_accept}, and
     * waits for ESTABLISHED.
     *
     * <p><b>Errors</b>: {@link CmEventException} (UNREACHABLE: the peer went away);
     * {@link io.github.verbs4j.VerbsException} ETIMEDOUT; {@link IllegalStateException} when
     * already accepted or rejected. The request's id is released on failure.
     */
    public RdmaConnection accept(Duration timeout) {
        take();
        Deadline deadline = Deadline.after(timeout);
        CmId id = event.id();
        QueueSet shared;
        try {
            shared = server.sharedQueues(id);
        } catch (RuntimeException e) {
            id.close();
            throw e;
        }
        EventChannel own;
        try {
            own = EventChannel.create();
        } catch (RuntimeException e) {
            id.close();
            throw e;
        }
        try {
            id.migrate(own);
        } catch (RuntimeException e) {
            id.close();
            own.close();
            throw e;
        }
        return RdmaConnection.accept(own, event, options, shared, deadline);
    }

    /**
     * Rejects ({@code rdma_reject}) with {@code privateData}: the peer's connect fails with
     * REJECTED, status {@link CmEvent#REJECT_CONSUMER}, carrying these bytes. Releases the request.
     */
    public void reject(byte[] privateData) {
        take();
        try {
            event.id().reject(privateData);
        } finally {
            event.id().close();
        }
    }

    private void take() {
        if (taken) {
            throw new IllegalStateException("this connection request was already accepted or rejected");
        }
        taken = true;
    }

    /** Rejects the request without private data unless it was accepted or rejected. */
    @Override
    public void close() {
        if (!taken) {
            reject(new byte[0]);
        }
    }
}
