package io.github.verbs4j.channel;

import io.github.verbs4j.CloseState;
import io.github.verbs4j.Closer;
import io.github.verbs4j.Deadline;
import io.github.verbs4j.RdmaTimeoutException;
import io.github.verbs4j.cm.CmEvent;
import io.github.verbs4j.cm.CmId;
import io.github.verbs4j.cm.EventChannel;
import io.github.verbs4j.cm.PortSpace;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Arrays;

/**
 * A listening rdma_cm id whose accepted connections become {@link Channel}s of its
 * {@link ChannelGroup} (one completion queue, one polling thread for all of them).
 *
 * <p><b>Lifecycle</b>: {@link #close()} stops listening; accepted channels stay open (they
 * belong to the group). Idempotent; {@link #accept} on a closed server throws
 * {@link IllegalStateException}.
 *
 * <p><b>Thread-safety</b>: {@link #accept} from one thread at a time.
 */
public final class ChannelServer implements AutoCloseable {

    private final ChannelGroup group;
    private final EventChannel events;
    private final CmId listener;
    private final CloseState state = new CloseState();
    /** The event channel and the listener made on it (closed listener first). */
    private final Closer closer = new Closer();

    ChannelServer(ChannelGroup group, InetSocketAddress address) {
        this.group = group;
        try {
            this.events = closer.register(EventChannel.create());
            this.listener = closer.register(events.createId(PortSpace.TCP));
            listener.bind(address);
            listener.listen(128);
        } catch (RuntimeException | Error e) {
            closer.closeSuppressingInto(e);
            throw e;
        }
        state.opened(this);
    }

    /** Listens on {@code address} with a group of its own: closing the server closes the group and its channels. */
    public static ChannelServer listen(InetSocketAddress address, ChannelOptions options) {
        Closer made = new Closer();
        ChannelGroup group = made.register(ChannelGroup.create(options));
        try {
            ChannelServer server = group.listen(address);
            server.ownsGroup = true;
            return server;
        } catch (RuntimeException | Error e) {
            made.closeSuppressingInto(e);
            throw e;
        }
    }

    private volatile boolean ownsGroup;

    /** The address and port listened on (the port picked when 0 was asked for). */
    public InetSocketAddress localAddress() {
        return listener.localAddress();
    }

    /** The group the accepted channels join. */
    public ChannelGroup group() {
        return group;
    }

    /**
     * Accepts the next connection, waiting up to {@code timeout} for it (the request and the
     * handshake together).
     *
     * <p><b>Errors</b>: {@link RdmaTimeoutException} when no connection request came within
     * {@code timeout} (its verb is {@code rdma_get_cm_event}); {@link IllegalArgumentException} when the connecting peer is not a
     * channel (it is rejected); {@link UnsupportedOperationException} (the peer is rejected) for
     * {@link ChannelOptions.Notification#IMMEDIATE} over an iWARP device;
     * {@link io.github.verbs4j.cm.CmEventException} and
     * {@link io.github.verbs4j.VerbsException} when the peer vanished during the handshake.
     */
    public Channel accept(Duration timeout) {
        Deadline deadline = Deadline.after(timeout);
        state.ensureOpen(this);
        CmEvent request = listener.getRequest(timeout);
        if (request == null) {
            throw deadline.timedOut("rdma_get_cm_event", "a connection request on " + localAddress());
        }
        return group.accept(request, deadline.remaining());
    }

    /** Whether {@link #close()} has begun. */
    public boolean isClosed() {
        return state.isClosed();
    }

    /**
     * Stops listening (pending requests are rejected) and, for a server made by
     * {@link #listen(InetSocketAddress, ChannelOptions)}, closes its group. Idempotent.
     *
     * <p><b>Errors</b>: the first failure of closing the listener, its event channel or the
     * group, the later ones suppressed on it; everything is closed all the same.
     */
    @Override
    public void close() {
        if (!state.beginClose()) {
            return;
        }
        Closer.closeAll(Arrays.asList(closer, () -> group.forget(this), ownsGroup ? group : null));
    }

    @Override
    public String toString() {
        return "ChannelServer[" + (state.isClosed() ? "closed" : localAddress()) + "]";
    }
}
