package io.github.verbs4j.cm;

import io.github.verbs4j.Access;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Context;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.ProtectionDomain;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * RC connections through rdma_cm in this process, both ends' queue pairs made by their ids
 * ({@code rdma_create_qp}): a listener on the test net, and for each {@link #connect} a client id
 * on an event channel of its own, whose QP is on {@link #cq()}, connected to an accepted id whose
 * QP is on {@link #peerCq()}. Both ends are on the one device, in one domain ({@link #pd()}, made
 * from the first client's device once its route is resolved), so each side's QP may write the one
 * region ({@link #mr()}, 64 KiB, local and remote write). The setup of {@code CmCloseRaceTest}
 * (three connections a round) and {@code CmConfinedQueuePairTest} (one).
 *
 * <p>{@link #close()} closes on the calling thread the accepted ids first (each destroys its QP,
 * the peer), then every client id before its event channel, the listener and its channel, the
 * region, the queues and the domain; it tries every close, and throws the first failure with the
 * later ones suppressed (inside try-with-resources, a test's own failure carries them).
 */
final class CmConnections implements AutoCloseable {

    private static final Duration T = CmInProcessTest.T;

    private final int cqEntries;
    private final List<AutoCloseable> opened = new ArrayList<>(); // closed last first
    private final List<CmId> accepted = new ArrayList<>();
    private CmId listener;
    private ProtectionDomain pd;
    private MemoryRegion mr;
    private CompletionQueue cq;
    private CompletionQueue peerCq;

    private CmConnections(int cqEntries) {
        this.cqEntries = cqEntries;
    }

    /**
     * A listener taking up to {@code backlog} pending requests; the clients' completion queue
     * ({@link #cq()}) will have {@code cqEntries} entries, the accepted ids' 64.
     */
    static CmConnections listen(int backlog, int cqEntries) throws Exception {
        CmConnections c = new CmConnections(cqEntries);
        try {
            EventChannel serverEvents = EventChannel.create();
            c.opened.add(serverEvents);
            c.listener = serverEvents.createId(PortSpace.TCP);
            c.opened.add(c.listener);
            c.listener.bind(new InetSocketAddress(CmTestNet.INET_ADDRESS, 0));
            c.listener.listen(backlog);
            return c;
        } catch (RuntimeException | Error e) {
            try {
                c.close();
            } catch (Exception closing) {
                e.addSuppressed(closing);
            }
            throw e;
        }
    }

    /**
     * Connects one more client: a new id resolves the listener's address and route, makes its QP
     * on {@link #cq()} with {@code init} and connects; the accepted id makes its QP on
     * {@link #peerCq()} with the defaults and accepts; both see ESTABLISHED. Returns the client's
     * id (its QP: {@link CmId#queuePair()}). What it opened is closed by {@link #close()}, also
     * when it fails half way.
     */
    CmId connect(QpInit init) throws Exception {
        EventChannel events = EventChannel.create();
        opened.add(events);
        CmId client = events.createId(PortSpace.TCP);
        opened.add(client);
        client.resolveAddress(null, listener.localAddress(), T);
        client.resolveRoute(T);
        if (pd == null) {
            Context ctx = client.context();
            pd = ctx.allocatePd();
            opened.addFirst(pd);
            mr = pd.allocate(64 * 1024, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
            opened.add(1, mr);
            cq = ctx.createCq(cqEntries);
            opened.add(1, cq);
            peerCq = ctx.createCq(64);
            opened.add(1, peerCq);
        }
        client.createQueuePair(pd, cq, cq, init);
        ProtectionDomain serverPd = pd;
        CompletionQueue serverCq = peerCq;
        CompletableFuture<CmId> server = CompletableFuture.supplyAsync(() -> {
            CmId child = listener.getRequest(T).id();
            synchronized (accepted) {
                accepted.add(child);
            }
            child.createQueuePair(serverPd, serverCq, serverCq, QpInit.defaults());
            assertEquals(CmEventType.ESTABLISHED, child.accept(ConnectParameters.defaults(), T).type());
            return child;
        });
        assertEquals(CmEventType.ESTABLISHED, client.connect(ConnectParameters.defaults(), T).type());
        server.get(CmInProcessTest.FUTURE_SECONDS, TimeUnit.SECONDS);
        return client;
    }

    ProtectionDomain pd() {
        return pd;
    }

    MemoryRegion mr() {
        return mr;
    }

    /** The clients' completion queue. */
    CompletionQueue cq() {
        return cq;
    }

    /** The accepted ids' completion queue. */
    CompletionQueue peerCq() {
        return peerCq;
    }

    @Override
    public void close() throws Exception {
        List<AutoCloseable> order = new ArrayList<>();
        synchronized (accepted) {
            order.addAll(accepted);
        }
        order.addAll(opened.reversed());
        Exception first = null;
        for (AutoCloseable c : order) {
            try {
                c.close();
            } catch (Exception e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
