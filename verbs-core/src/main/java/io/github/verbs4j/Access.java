package io.github.verbs4j;

import io.github.verbs4j.raw.VerbsConstants;

import java.util.EnumSet;
import java.util.Set;

/**
 * Access rights of a memory region or a queue pair ({@code enum ibv_access_flags}).
 *
 * <p>verbs4j's default for a memory region is local access only ({@link #LOCAL_WRITE}): remote
 * read, write and atomic access are granted only when asked for. rdma-core (and every device)
 * refuses {@link #REMOTE_WRITE} or {@link #REMOTE_ATOMIC} without {@link #LOCAL_WRITE}; verbs4j
 * says so before calling the device.
 */
public enum Access {
    /** {@code IBV_ACCESS_LOCAL_WRITE}: the device may write the memory (receives, READ results). */
    LOCAL_WRITE(VerbsConstants.IBV_ACCESS_LOCAL_WRITE),
    /** {@code IBV_ACCESS_REMOTE_WRITE}: peers may RDMA WRITE into it (needs LOCAL_WRITE). */
    REMOTE_WRITE(VerbsConstants.IBV_ACCESS_REMOTE_WRITE),
    /** {@code IBV_ACCESS_REMOTE_READ}: peers may RDMA READ it. */
    REMOTE_READ(VerbsConstants.IBV_ACCESS_REMOTE_READ),
    /** {@code IBV_ACCESS_REMOTE_ATOMIC}: peers may run atomics on it (needs LOCAL_WRITE). */
    REMOTE_ATOMIC(VerbsConstants.IBV_ACCESS_REMOTE_ATOMIC),
    /** {@code IBV_ACCESS_MW_BIND}: memory windows may be bound to it. */
    MW_BIND(VerbsConstants.IBV_ACCESS_MW_BIND),
    /** {@code IBV_ACCESS_ZERO_BASED}: remote addresses are offsets from the start. */
    ZERO_BASED(VerbsConstants.IBV_ACCESS_ZERO_BASED),
    /** {@code IBV_ACCESS_ON_DEMAND}: on-demand paging. */
    ON_DEMAND(VerbsConstants.IBV_ACCESS_ON_DEMAND),
    /** {@code IBV_ACCESS_RELAXED_ORDERING}: the device may reorder PCIe writes. */
    RELAXED_ORDERING(VerbsConstants.IBV_ACCESS_RELAXED_ORDERING);

    private final int flag;

    Access(int flag) {
        this.flag = flag;
    }

    /** The C flag value. */
    public int flag() {
        return flag;
    }

    /** The C bit mask of a set of rights. */
    public static int mask(Set<Access> access) {
        int mask = 0;
        for (Access a : access) {
            mask |= a.flag;
        }
        return mask;
    }

    /** The rights in a C bit mask (unknown bits are ignored). */
    public static Set<Access> fromMask(int mask) {
        EnumSet<Access> set = EnumSet.noneOf(Access.class);
        for (Access a : values()) {
            if ((mask & a.flag) != 0) {
                set.add(a);
            }
        }
        return set;
    }

    static EnumSet<Access> setOf(Access... access) {
        EnumSet<Access> set = EnumSet.noneOf(Access.class);
        for (Access a : access) {
            if (a == null) {
                throw new NullPointerException("access flag");
            }
            set.add(a);
        }
        return set;
    }

    /** Throws when the set asks for remote write or atomic access without local write. */
    static void checkConsistent(Set<Access> access, String what) {
        if ((access.contains(REMOTE_WRITE) || access.contains(REMOTE_ATOMIC)) && !access.contains(LOCAL_WRITE)) {
            throw new IllegalArgumentException(what + ": REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE too"
                    + " (the device would refuse with EINVAL); asked for " + access);
        }
    }
}
