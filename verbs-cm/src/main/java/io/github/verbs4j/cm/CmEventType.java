package io.github.verbs4j.cm;

import io.github.verbs4j.cm.ffi.RdmaCm;

/** The type of a connection-manager event ({@code enum rdma_cm_event_type}), every value. */
public enum CmEventType {
    ADDR_RESOLVED(RdmaCm.RDMA_CM_EVENT_ADDR_RESOLVED()),
    ADDR_ERROR(RdmaCm.RDMA_CM_EVENT_ADDR_ERROR()),
    ROUTE_RESOLVED(RdmaCm.RDMA_CM_EVENT_ROUTE_RESOLVED()),
    ROUTE_ERROR(RdmaCm.RDMA_CM_EVENT_ROUTE_ERROR()),
    /** A peer asks to connect; the event carries a new id for that connection, owned by the receiver. */
    CONNECT_REQUEST(RdmaCm.RDMA_CM_EVENT_CONNECT_REQUEST()),
    CONNECT_RESPONSE(RdmaCm.RDMA_CM_EVENT_CONNECT_RESPONSE()),
    CONNECT_ERROR(RdmaCm.RDMA_CM_EVENT_CONNECT_ERROR()),
    UNREACHABLE(RdmaCm.RDMA_CM_EVENT_UNREACHABLE()),
    REJECTED(RdmaCm.RDMA_CM_EVENT_REJECTED()),
    ESTABLISHED(RdmaCm.RDMA_CM_EVENT_ESTABLISHED()),
    DISCONNECTED(RdmaCm.RDMA_CM_EVENT_DISCONNECTED()),
    DEVICE_REMOVAL(RdmaCm.RDMA_CM_EVENT_DEVICE_REMOVAL()),
    MULTICAST_JOIN(RdmaCm.RDMA_CM_EVENT_MULTICAST_JOIN()),
    MULTICAST_ERROR(RdmaCm.RDMA_CM_EVENT_MULTICAST_ERROR()),
    ADDR_CHANGE(RdmaCm.RDMA_CM_EVENT_ADDR_CHANGE()),
    TIMEWAIT_EXIT(RdmaCm.RDMA_CM_EVENT_TIMEWAIT_EXIT());

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
