package io.github.verbs4j.cm;

import io.github.verbs4j.VerbsException;

/**
 * A connection step ended with an error event (ADDR_ERROR, ROUTE_ERROR, UNREACHABLE, REJECTED,
 * CONNECT_ERROR) or an unexpected one. {@link #event()} has the type, status and the peer's
 * private data (a rejection's reason bytes).
 */
public final class CmEventException extends VerbsException {

    private static final long serialVersionUID = 1L;

    private final transient CmEvent event;

    CmEventException(String verb, CmEvent event, String detail) {
        super(verb, event.errno(), event.describe() + reason(event) + (detail == null ? "" : ": " + detail));
        this.event = event;
    }

    /** What a REJECTED's status means, in words. */
    private static String reason(CmEvent event) {
        if (event.type() != CmEventType.REJECTED) {
            return "";
        }
        return switch (event.status()) {
            case CmEvent.REJECT_INVALID_SERVICE_ID -> ": nobody listens on that port (no rdma_listen there)";
            case CmEvent.REJECT_CONSUMER -> ": the peer application rejected the connection (rdma_reject)";
            default -> "";
        };
    }

    /** The event that ended the step. */
    public CmEvent event() {
        return event;
    }
}
