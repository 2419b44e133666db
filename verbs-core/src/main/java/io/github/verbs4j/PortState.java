package io.github.verbs4j;

import io.github.verbs4j.raw.VerbsConstants;

/** The logical state of a port ({@code enum ibv_port_state}). */
public enum PortState {
    NOP(VerbsConstants.IBV_PORT_NOP),
    DOWN(VerbsConstants.IBV_PORT_DOWN),
    INIT(VerbsConstants.IBV_PORT_INIT),
    ARMED(VerbsConstants.IBV_PORT_ARMED),
    ACTIVE(VerbsConstants.IBV_PORT_ACTIVE),
    ACTIVE_DEFER(VerbsConstants.IBV_PORT_ACTIVE_DEFER);

    private final int value;

    PortState(int value) {
        this.value = value;
    }

    /** The C enum value. */
    public int value() {
        return value;
    }

    /** The state for a C value; {@link #NOP} for values not listed. */
    public static PortState of(int value) {
        for (PortState s : values()) {
            if (s.value == value) {
                return s;
            }
        }
        return NOP;
    }
}
