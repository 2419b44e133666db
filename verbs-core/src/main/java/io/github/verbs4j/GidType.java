package io.github.verbs4j;

import io.github.verbs4j.raw.VerbsConstants;

/** The type of a GID table entry ({@code enum ibv_gid_type}). */
public enum GidType {
    /** InfiniBand. */
    IB(VerbsConstants.IBV_GID_TYPE_IB),
    /** RoCE v1 (Ethernet frames, EtherType 0x8915). */
    ROCE_V1(VerbsConstants.IBV_GID_TYPE_ROCE_V1),
    /** RoCE v2 (UDP/IP, port 4791): the routable one, chosen for IP addresses. */
    ROCE_V2(VerbsConstants.IBV_GID_TYPE_ROCE_V2);

    private final int value;

    GidType(int value) {
        this.value = value;
    }

    /** The C enum value. */
    public int value() {
        return value;
    }

    static GidType of(int value) {
        for (GidType t : values()) {
            if (t.value == value) {
                return t;
            }
        }
        throw new IllegalArgumentException("unknown enum ibv_gid_type value: " + value);
    }
}
