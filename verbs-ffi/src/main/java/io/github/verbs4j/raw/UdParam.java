package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.rdma_ud_param;

import java.lang.foreign.MemorySegment;

/**
 * {@code struct rdma_ud_param} as Java values: what a CONNECT_REQUEST or ESTABLISHED event of a
 * UDP-space id carries (the private data, copied; the peer's address, QP number and Q_Key).
 */
public record UdParam(byte[] privateData, AhAttr ahAttr, int qpNum, int qkey) {

    /** Reads the {@code struct rdma_ud_param} at {@code param}. */
    public static UdParam read(MemorySegment param) {
        return new UdParam(CmStructs.copyBytes(rdma_ud_param.private_data(param),
                Byte.toUnsignedInt(rdma_ud_param.private_data_len(param))),
                AhAttr.read(rdma_ud_param.ah_attr(param)), rdma_ud_param.qp_num(param), rdma_ud_param.qkey(param));
    }
}
