package io.github.verbs4j.netty;

import io.github.verbs4j.Verbs;
import io.github.verbs4j.cm.EventChannel;

/**
 * Whether this transport can run here: librdmacm and libibverbs load, an RDMA device is
 * present, and an rdma_cm event channel opens. Checked once, like Netty's {@code Epoll} and
 * {@code IoUring}.
 */
public final class Rdma {

    private static final Throwable UNAVAILABILITY_CAUSE = probe();

    private Rdma() {
    }

    private static Throwable probe() {
        try {
            if (!Verbs.isAvailable()) {
                return Verbs.unavailabilityCause();
            }
            try (EventChannel channel = EventChannel.create()) {
                channel.fd();
            }
            return null;
        } catch (Throwable t) {
            return t;
        }
    }

    /** Whether the transport can be used. */
    public static boolean isAvailable() {
        return UNAVAILABILITY_CAUSE == null;
    }

    /** Why the transport cannot be used, or {@code null} when it can. */
    public static Throwable unavailabilityCause() {
        return UNAVAILABILITY_CAUSE;
    }

    /**
     * Throws when the transport cannot be used.
     *
     * @throws UnsatisfiedLinkError with the cause, as Netty's native transports do
     */
    public static void ensureAvailability() {
        if (UNAVAILABILITY_CAUSE != null) {
            throw (Error) new UnsatisfiedLinkError("the RDMA transport is not available: " + UNAVAILABILITY_CAUSE)
                    .initCause(UNAVAILABILITY_CAUSE);
        }
    }
}
