package io.github.verbs4j.cm;

import io.github.verbs4j.raw.CmStructs;

/** The type of a connection-manager event ({@code enum rdma_cm_event_type}), every value. */
public enum CmEventType {
    ADDR_RESOLVED(CmStructs.EVENT_ADDR_RESOLVED),
    ADDR_ERROR(CmStructs.EVENT_ADDR_ERROR),
    ROUTE_RESOLVED(CmStructs.EVENT_ROUTE_RESOLVED),
    ROUTE_ERROR(CmStructs.EVENT_ROUTE_ERROR),
    /** A peer asks to connect; the event carries a new id for that connection, owned by the receiver. */
    CONNECT_REQUEST(CmStructs.EVENT_CONNECT_REQUEST),
    CONNECT_RESPONSE(CmStructs.EVENT_CONNECT_RESPONSE),
    CONNECT_ERROR(CmStructs.EVENT_CONNECT_ERROR),
    UNREACHABLE(CmStructs.EVENT_UNREACHABLE),
    REJECTED(CmStructs.EVENT_REJECTED),
    ESTABLISHED(CmStructs.EVENT_ESTABLISHED),
    DISCONNECTED(CmStructs.EVENT_DISCONNECTED),
    DEVICE_REMOVAL(CmStructs.EVENT_DEVICE_REMOVAL),
    MULTICAST_JOIN(CmStructs.EVENT_MULTICAST_JOIN),
    MULTICAST_ERROR(CmStructs.EVENT_MULTICAST_ERROR),
    ADDR_CHANGE(CmStructs.EVENT_ADDR_CHANGE),
    TIMEWAIT_EXIT(CmStructs.EVENT_TIMEWAIT_EXIT);

    private final int value;

    CmEventType(int value) {
        this.value = value;
    }

    /** The C value. */
    public int value() {
        return value;
    }

    /** Whether this type reports a failure (its status then says why). */
    public boolean isError() {
        return switch (this) {
            case ADDR_ERROR, ROUTE_ERROR, CONNECT_ERROR, UNREACHABLE, REJECTED, MULTICAST_ERROR, DEVICE_REMOVAL -> true;
            default -> false;
        };
    }

    /**
     * The type with C value {@code value}.
     *
     * @throws IllegalArgumentException for a value librdmacm does not define
     */
    public static CmEventType of(int value) {
        for (CmEventType t : values()) {
            if (t.value == value) {
                return t;
            }
        }
        throw new IllegalArgumentException("unknown rdma_cm_event_type " + value);
    }
}
