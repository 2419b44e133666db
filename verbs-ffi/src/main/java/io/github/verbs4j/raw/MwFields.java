package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_mw;

import java.lang.foreign.MemorySegment;

/**
 * The field of {@code struct ibv_mw} that verbs-core uses: the rkey, which a bind changes. As
 * rdma-core's {@code ibv_bind_mw} does for a type 1 window, the owner writes the new key into
 * the struct when it posts a bind.
 */
public final class MwFields {

    private MwFields() {
    }

    /** {@code sizeof(struct ibv_mw)}. */
    private static final long SIZE = ibv_mw.layout().byteSize();

    /** {@code mw}, an address {@code ibv_alloc_mw} returned, sized to the struct. */
    public static MemorySegment of(MemorySegment mw) {
        return mw.reinterpret(SIZE);
    }

    /** {@code mw->rkey}. */
    public static int rkey(MemorySegment mw) {
        return ibv_mw.rkey(mw);
    }

    /** Sets {@code mw->rkey}. */
    public static void rkey(MemorySegment mw, int rkey) {
        ibv_mw.rkey(mw, rkey);
    }
}
