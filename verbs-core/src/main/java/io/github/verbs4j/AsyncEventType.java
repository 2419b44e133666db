package io.github.verbs4j;

import io.github.verbs4j.raw.VerbsConstants;

/** The kind of an asynchronous event ({@code enum ibv_event_type}). */
public enum AsyncEventType {
    CQ_ERR(VerbsConstants.IBV_EVENT_CQ_ERR),
    QP_FATAL(VerbsConstants.IBV_EVENT_QP_FATAL),
    QP_REQ_ERR(VerbsConstants.IBV_EVENT_QP_REQ_ERR),
    QP_ACCESS_ERR(VerbsConstants.IBV_EVENT_QP_ACCESS_ERR),
    COMM_EST(VerbsConstants.IBV_EVENT_COMM_EST),
    SQ_DRAINED(VerbsConstants.IBV_EVENT_SQ_DRAINED),
    PATH_MIG(VerbsConstants.IBV_EVENT_PATH_MIG),
    PATH_MIG_ERR(VerbsConstants.IBV_EVENT_PATH_MIG_ERR),
    DEVICE_FATAL(VerbsConstants.IBV_EVENT_DEVICE_FATAL),
    PORT_ACTIVE(VerbsConstants.IBV_EVENT_PORT_ACTIVE),
    PORT_ERR(VerbsConstants.IBV_EVENT_PORT_ERR),
    LID_CHANGE(VerbsConstants.IBV_EVENT_LID_CHANGE),
    PKEY_CHANGE(VerbsConstants.IBV_EVENT_PKEY_CHANGE),
    SM_CHANGE(VerbsConstants.IBV_EVENT_SM_CHANGE),
    SRQ_ERR(VerbsConstants.IBV_EVENT_SRQ_ERR),
    SRQ_LIMIT_REACHED(VerbsConstants.IBV_EVENT_SRQ_LIMIT_REACHED),
    QP_LAST_WQE_REACHED(VerbsConstants.IBV_EVENT_QP_LAST_WQE_REACHED),
    CLIENT_REREGISTER(VerbsConstants.IBV_EVENT_CLIENT_REREGISTER),
    GID_CHANGE(VerbsConstants.IBV_EVENT_GID_CHANGE),
    WQ_FATAL(VerbsConstants.IBV_EVENT_WQ_FATAL),
    UNKNOWN(-1);

    private final int value;

    AsyncEventType(int value) {
        this.value = value;
    }

    /** The C enum value ({@code -1} for {@link #UNKNOWN}). */
    public int value() {
        return value;
    }

    /** The type for a C value; {@link #UNKNOWN} for values not listed. */
    public static AsyncEventType of(int value) {
        for (AsyncEventType t : values()) {
            if (t.value == value) {
                return t;
            }
        }
        return UNKNOWN;
    }

    /** Whether the event's element is a queue pair. */
    public boolean isQpEvent() {
        return switch (this) {
            case QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR, COMM_EST, SQ_DRAINED, PATH_MIG, PATH_MIG_ERR,
                 QP_LAST_WQE_REACHED -> true;
            default -> false;
        };
    }

    /** Whether the event's element is a completion queue. */
    public boolean isCqEvent() {
        return this == CQ_ERR;
    }

    /** Whether the event's element is a shared receive queue. */
    public boolean isSrqEvent() {
        return this == SRQ_ERR || this == SRQ_LIMIT_REACHED;
    }

    /** Whether the event's element is a port number. */
    public boolean isPortEvent() {
        return switch (this) {
            case PORT_ACTIVE, PORT_ERR, LID_CHANGE, PKEY_CHANGE, SM_CHANGE, CLIENT_REREGISTER, GID_CHANGE -> true;
            default -> false;
        };
    }
}
