package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_srq;

/** {@code struct ibv_srq}, which verbs-core holds as a handle and reads nothing of: its size. */
public final class SrqFields {

    private SrqFields() {
    }

    /** {@code sizeof(struct ibv_srq)}. */
    public static final long SIZE = ibv_srq.layout().byteSize();
}
