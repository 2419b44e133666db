package io.github.verbs4j;

import io.github.verbs4j.raw.VerbsConstants;

/** A path MTU ({@code enum ibv_mtu}). */
public enum Mtu {
    MTU_256(VerbsConstants.IBV_MTU_256, 256),
    MTU_512(VerbsConstants.IBV_MTU_512, 512),
    MTU_1024(VerbsConstants.IBV_MTU_1024, 1024),
    MTU_2048(VerbsConstants.IBV_MTU_2048, 2048),
    MTU_4096(VerbsConstants.IBV_MTU_4096, 4096);

    private final int value;
    private final int bytes;

    Mtu(int value, int bytes) {
        this.value = value;
        this.bytes = bytes;
    }

    /** The C enum value (1 for 256 ... 5 for 4096). */
    public int value() {
        return value;
    }

    /** The MTU in bytes. */
    public int bytes() {
        return bytes;
    }

    /** The MTU for a C enum value. */
    public static Mtu of(int value) {
        for (Mtu m : values()) {
            if (m.value == value) {
                return m;
            }
        }
        throw new IllegalArgumentException("not an enum ibv_mtu value: " + value);
    }

    /** The smaller of two MTUs. */
    public static Mtu min(Mtu a, Mtu b) {
        return a.value <= b.value ? a : b;
    }
}
