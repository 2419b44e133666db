package io.github.verbs4j.cm;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Duration;

/**
 * Where the rdma_cm suites listen and connect, and how long they wait, on either substrate.
 *
 * <p>softrdma's CM runs over TCP and accepts loopback. The kernel's rdma_cm on rxe cannot route
 * over loopback ({@code rdma_resolve_route} fails with ENODEV), so under {@code scripts/rxe-vm}
 * the suites use the guest's address on the rxe netdev, which the VM exports as
 * {@code VERBS4J_ADDR}.
 */
final class CmTestNet {

    private CmTestNet() {
    }

    /** The address both ends use: {@code VERBS4J_ADDR} if set, else 127.0.0.1. */
    static final String ADDRESS = address();

    static final InetAddress INET_ADDRESS = inet(ADDRESS);

    /**
     * An address nothing answers on, on either substrate: TEST-NET-2 (RFC 5737). TEST-NET-1
     * (192.0.2.0/24) cannot be used: it is the host's own eth0 network here.
     */
    static final String DEAD_ADDRESS = "198.51.100.1";

    /**
     * Waits are multiplied by this inside the rxe VM, where the JVM runs emulated and is some
     * tens of times slower; 1 elsewhere, so host timeouts stay as they are.
     */
    static final int SLOWDOWN = "1".equals(System.getenv("VERBS4J_IN_VM")) ? 10 : 1;

    /** {@code d}, stretched by {@link #SLOWDOWN}. */
    static Duration scaled(Duration d) {
        return d.multipliedBy(SLOWDOWN);
    }

    /** {@code seconds}, stretched by {@link #SLOWDOWN}. */
    static long scaledSeconds(long seconds) {
        return seconds * SLOWDOWN;
    }

    /**
     * Whether the suites run on softrdma's librdmacm (the build's default) rather than the
     * system's ({@code -Dverbs4j.substrate=system}, which sets the property to "system").
     */
    static boolean onSoftrdma() {
        String rdmacm = System.getProperty("verbs4j.librdmacm");
        String verbs = System.getProperty("verbs4j.libibverbs");
        if (rdmacm != null && !rdmacm.isBlank()) {
            return !rdmacm.equals("system");
        }
        return verbs != null && !verbs.isBlank() && !verbs.equals("system");
    }

    /**
     * Whether the RDMA device the suites run on reports the iWARP transport ({@code enum
     * ibv_transport_type} 1; the kernel's siw0 under {@code scripts/rxe-vm --device siw}), decided
     * from the devices' reported transport, never from a name.
     */
    static boolean iwarp() {
        try {
            return io.github.verbs4j.Verbs.devices().stream()
                    .anyMatch(d -> d.transport() == io.github.verbs4j.TransportType.IWARP);
        } catch (RuntimeException | Error e) {
            return false;
        }
    }

    /**
     * The queue pair's state as the device reports it ({@code ibv_query_qp}), except on a device
     * that reports the iWARP transport ({@code enum ibv_transport_type} 1): siw's query_qp fills
     * in no state, so every QP reads back as RESET there, and verbs4j's tracked state, which
     * follows rdma_cm's events, stands in for it.
     */
    static io.github.verbs4j.QpState state(io.github.verbs4j.QueuePair qp) {
        boolean iwarp = qp.protectionDomain().context().device().transport() == io.github.verbs4j.TransportType.IWARP;
        return iwarp ? qp.trackedState() : qp.state();
    }

    private static String address() {
        String env = System.getenv("VERBS4J_ADDR");
        return env == null || env.isBlank() ? "127.0.0.1" : env.trim();
    }

    private static InetAddress inet(String address) {
        try {
            return InetAddress.getByName(address);
        } catch (UnknownHostException e) {
            throw new ExceptionInInitializerError("VERBS4J_ADDR is not an address: " + address);
        }
    }
}
