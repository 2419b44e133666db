package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_mr;

import java.lang.foreign.MemorySegment;

/**
 * The fields of {@code struct ibv_mr} that verbs-core reads, as the registration verbs
 * ({@code ibv_reg_mr}, {@code ibv_rereg_mr}) leave them: the registered range and the two keys.
 * An implicit on-demand region has {@code addr} NULL and {@code length} {@code SIZE_MAX}, read
 * as 0 and -1.
 *
 * @param address {@code addr}, as a number
 * @param length  {@code length} ({@code size_t})
 * @param lkey    {@code lkey}
 * @param rkey    {@code rkey}
 */
public record MrFields(long address, long length, int lkey, int rkey) {

    /** {@code sizeof(struct ibv_mr)}. */
    private static final long SIZE = ibv_mr.layout().byteSize();

    /** {@code mr}, an address a registration verb returned, sized to the struct. */
    public static MemorySegment of(MemorySegment mr) {
        return mr.reinterpret(SIZE);
    }

    /**
     * {@code mr->handle}: the region's kernel handle, what {@code ibv_import_mr} names it by
     * (read on its own: only the shared-PD flow needs it).
     */
    public static int handle(MemorySegment mr) {
        return ibv_mr.handle(mr);
    }

    /** Reads the struct at {@code mr}. */
    public static MrFields read(MemorySegment mr) {
        return new MrFields(ibv_mr.addr(mr).address(), ibv_mr.length(mr), ibv_mr.lkey(mr), ibv_mr.rkey(mr));
    }
}
