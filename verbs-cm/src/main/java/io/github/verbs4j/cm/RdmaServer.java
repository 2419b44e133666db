package io.github.verbs4j.cm;

import io.github.verbs4j.CloseState;
import io.github.verbs4j.Closer;
import io.github.verbs4j.Context;
import io.github.verbs4j.Deadline;
import io.github.verbs4j.Errno;
import io.github.verbs4j.VerbsException;
import io.github.verbs4j.internal.Timeouts;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
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
 * <p><b>Shared queues</b>: a server built with {@link Builder#sharedQueues(boolean)} gives all its
 * connections one protection domain, one completion queue (with one completion channel) and one
 * shared receive queue holding {@link EndpointOptions#receiveSlots()} buffers for all of them,
 * instead of a set per connection: memory and queue count no longer grow with the number of
 * connections. Each connection still has its own QP, send buffer and RDMA buffer. The shared
 * parts are made on the first accept (on the device of that request) and released when the
 * server and all its connections are closed.
 *
 * <pre>{@code
 * try (RdmaServer server = RdmaServer.builder(new InetSocketAddress("10.0.0.1", 0))
 *         .options(EndpointOptions.defaults().withReceiveSlots(256))
 *         .sharedQueues(true).backlog(64).listen()) { ... }
 * }</pre>
 *
 * <p>A client that vanishes during its handshake does not harm the server: {@link #accept}
 * drops that request and waits for the next one within its timeout.
 *
 * <p><b>Errors</b>: {@link VerbsException} with the failing verb and errno;
 * {@link CmEventException} for a handshake that failed. Timeouts name the duration the caller gave.
 *
 * <p><b>Thread-safety</b>: one thread accepts at a time; connections are independent (see
 * {@link RdmaConnection} for those sharing queues).
 */
public final class RdmaServer implements AutoCloseable {

    private final EventChannel channel;
    private final CmId listener;
    private final EndpointOptions options;
    private final boolean shareQueues;
    private QueueSet shared;
    private final CloseState state = new CloseState();

    private RdmaServer(EventChannel channel, CmId listener, EndpointOptions options, boolean shareQueues) {
        this.channel = channel;
        this.listener = listener;
        this.options = options;
        this.shareQueues = shareQueues;
        state.opened(this);
    }

    /** {@link #listen(InetSocketAddress, EndpointOptions, int)} with default options and a backlog of 16. */
    public static RdmaServer listen(InetSocketAddress address) {
        return builder(address).listen();
    }

    /**
     * Binds to {@code address} (port 0 picks one: see {@link #localAddress()}) and listens; each
     * connection gets its own queues.
     *
     * <p><b>Errors</b>: {@link VerbsException} from {@code rdma_create_event_channel},
     * {@code rdma_bind_addr} (EADDRINUSE, EADDRNOTAVAIL) or {@code rdma_listen}.
     */
    public static RdmaServer listen(InetSocketAddress address, EndpointOptions options, int backlog) {
        return builder(address).options(options).backlog(backlog).listen();
    }

    /** A builder for a server on {@code address} (port 0 picks one). */
    public static Builder builder(InetSocketAddress address) {
        return new Builder(Objects.requireNonNull(address, "address"));
    }

    /** Builds an {@link RdmaServer}: options, backlog, shared queues. Not thread-safe. */
    public static final class Builder {

        private final InetSocketAddress address;
        private EndpointOptions options = EndpointOptions.defaults();
        private int backlog = 16;
        private boolean sharedQueues;

        private Builder(InetSocketAddress address) {
            this.address = address;
        }

        /** The options of every accepted connection (default {@link EndpointOptions#defaults()}). */
        public Builder options(EndpointOptions options) {
            this.options = Objects.requireNonNull(options, "options");
            return this;
        }

        /** Connection requests {@code rdma_listen} queues (default 16). */
        public Builder backlog(int backlog) {
            if (backlog < 0) {
                throw new IllegalArgumentException("backlog must not be negative, got " + backlog);
            }
            this.backlog = backlog;
            return this;
        }

        /**
         * Whether the connections share one protection domain, completion queue and shared receive
         * queue (default {@code false}: a set per connection). The shared completion queue has
         * {@link EndpointOptions#completionQueueEntries()} entries and must hold the receive slots and
         * the send queues of all connections at once: size it for the connections expected (an
         * accept that could overflow it fails with {@link IllegalStateException} saying so).
         */
        public Builder sharedQueues(boolean on) {
            this.sharedQueues = on;
            return this;
        }

        /**
         * Binds and listens.
         *
         * <p><b>Errors</b>: as {@link RdmaServer#listen(InetSocketAddress, EndpointOptions, int)}.
         */
        public RdmaServer listen() {
            EventChannel channel = EventChannel.create();
            CmId id = null;
            try {
                id = channel.createId(PortSpace.TCP);
                id.bind(address);
                id.listen(backlog);
                return new RdmaServer(channel, id, options, sharedQueues);
            } catch (RuntimeException | Error e) {
                RdmaConnection.closeAfterFailure(e, channel, id);
                throw e;
            }
        }
    }

    /** The bound address and port. */
    public InetSocketAddress localAddress() {
        return listener.localAddress();
    }

    /** Whether the connections share one set of queues ({@link Builder#sharedQueues}). */
    public boolean sharesQueues() {
        return shareQueues;
    }

    /** The shared queues for a request on {@code id}'s device, made on first use; {@code null} without sharing. */
    synchronized QueueSet sharedQueues(CmId id) {
        if (!shareQueues) {
            return null;
        }
        state.ensureOpen(this);
        Context context = id.context();
        if (shared == null) {
            shared = QueueSet.shared(context, options);
        } else if (shared.pd.context() != context) {
            throw new IllegalArgumentException("a connection request on " + context + ", but this server's shared queues"
                    + " are on " + shared.pd.context() + ": bind the server to one device's address");
        }
        return shared;
    }

    /**
     * The next connection request, to inspect before accepting or rejecting.
     *
     * <p><b>Errors</b>: {@link VerbsException} ETIMEDOUT when none came within {@code timeout}.
     */
    public ConnectionRequest nextRequest(Duration timeout) {
        CmEvent request = listener.getRequest(timeout);
        if (request == null) {
            throw VerbsException.timedOut("rdma_get_cm_event", "a connection request on " + localAddress(), timeout);
        }
        return new ConnectionRequest(request, options, this);
    }

    /**
     * Accepts the next connection that completes its handshake within {@code timeout}. Requests
     * whose peers vanish before ESTABLISHED are dropped and the wait goes on.
     *
     * <p><b>Errors</b>: {@link VerbsException} ETIMEDOUT (with the dropped requests' failures
     * attached as suppressed exceptions); errors of the server's own resources.
     */
    public RdmaConnection accept(Duration timeout) {
        Deadline deadline = Deadline.after(timeout);
        VerbsException timedOut = VerbsException.timedOut("rdma_accept", "an established connection on "
                + localAddress(), timeout);
        while (true) {
            CmEvent request = listener.getRequest(deadline.remaining());
            if (request == null) {
                throw timedOut;
            }
            try {
                return new ConnectionRequest(request, options, this).accept(deadline.remaining());
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

    /**
     * Closes the listener (pending requests are rejected) and its channel. Shared queues are
     * released once the connections using them are closed too. Idempotent.
     */
    @Override
    public void close() {
        if (!state.beginClose()) {
            return;
        }
        QueueSet q;
        synchronized (this) {
            q = shared; // sharedQueues() checks the state under this monitor: none is made after this
        }
        Closer.closeAll(List.of(listener, channel, () -> {
            if (q != null) {
                q.release();
            }
        }));
    }

    /** Whether {@link #close()} has begun. */
    public boolean isClosed() {
        return state.isClosed();
    }

    @Override
    public String toString() {
        return "RdmaServer[" + (listener.isClosed() ? "closed" : String.valueOf(localAddress())) + "]";
    }
}
