package io.github.verbs4j.cm;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Enabled;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

import java.lang.System.Logger.Level;
import java.util.Set;

/**
 * The CM side of verbs4j's observability (see {@code io.github.verbs4j.internal.Telemetry}):
 * every CM event is logged at DEBUG to {@code io.github.verbs4j.cm}; the connection events
 * (established, rejected, unreachable, errors, disconnected) are JFR events, off unless a
 * recording enables {@code io.github.verbs4j.CmConnection}.
 */
final class CmTelemetry {

    static final System.Logger LOG = System.getLogger("io.github.verbs4j.cm");

    private static final Set<CmEventType> CONNECTION_EVENTS = Set.of(CmEventType.ESTABLISHED, CmEventType.REJECTED,
            CmEventType.UNREACHABLE, CmEventType.CONNECT_ERROR, CmEventType.DISCONNECTED, CmEventType.ADDR_ERROR,
            CmEventType.ROUTE_ERROR);
    private static final CmConnection PROBE = new CmConnection();

    private CmTelemetry() {
    }

    /** A connection's life on the CM: established, refused or ended. */
    @Name("io.github.verbs4j.CmConnection")
    @Label("CM Connection")
    @Category({"verbs4j"})
    @Description("An rdma_cm connection event: established, rejected, unreachable, error or disconnected")
    @Enabled(false)
    @StackTrace(false)
    static final class CmConnection extends Event {
        @Label("Event") String event;
        @Label("Status") int status;
        @Label("Local Address") String local;
        @Label("Remote Address") String remote;
        @Label("Port Space") String portSpace;
    }

    static void observed(CmId id, CmEvent event) {
        if (LOG.isLoggable(Level.DEBUG)) {
            LOG.log(Level.DEBUG, "{0} on {1}", event.describe(), id);
        }
        if (PROBE.isEnabled() && CONNECTION_EVENTS.contains(event.type())) {
            CmConnection e = new CmConnection();
            e.event = event.type().toString();
            e.status = event.status();
            e.local = address(id, true);
            e.remote = address(id, false);
            e.portSpace = id.portSpace().toString();
            e.commit();
        }
    }

    private static String address(CmId id, boolean local) {
        try {
            return String.valueOf(local ? id.localAddress() : id.remoteAddress());
        } catch (RuntimeException closing) {
            return "unknown";
        }
    }
}
