package io.github.verbs4j;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * The epoch that lets a work request checked once be re-posted without being checked again.
 *
 * <p>A post checks a request in full (opcode against the QP type, remote address, atomic shape,
 * inline size, every memory region open and in the QP's protection domain...) and remembers the
 * target and the epoch it was checked at. The request's setters forget that (every setter that
 * changes what the checks read), and anything outside the request that a check reads and that
 * can change — a memory region or address handle closing — moves the epoch on, so every request
 * checked before is checked in full again at its next post. What the epoch cannot see is
 * checked at every post, cheaply: the arena of caller-owned memory (a registered segment, inline
 * data) still alive.
 *
 * <p>The epoch is read before a check and remembered after it succeeds, so a close that
 * completes during a check is seen at the next post.
 */
final class Validity {

    private static final VarHandle EPOCH;

    static {
        try {
            EPOCH = MethodHandles.lookup().findStaticVarHandle(Validity.class, "epoch", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    @SuppressWarnings("unused") // through EPOCH
    private static volatile long epoch;

    private Validity() {
    }

    /** The epoch now (a volatile read: a plain load on x86). */
    static long epoch() {
        return epoch;
    }

    /** Moves the epoch on: called once a region or address handle has closed. */
    static void advance() {
        EPOCH.getAndAdd(1L);
    }
}
