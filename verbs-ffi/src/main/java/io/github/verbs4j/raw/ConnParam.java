package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.rdma_conn_param;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.util.Objects;

/**
 * {@code struct rdma_conn_param} as Java values: what {@code rdma_connect} and
 * {@code rdma_accept} send, and what a CONNECT_REQUEST or ESTABLISHED event of a TCP-space id
 * carries. The private data is copied both ways (at most 255 bytes fit its length field; the
 * CM carries fewer). Byte-wide fields are read unsigned.
 */
public record ConnParam(byte[] privateData, int responderResources, int initiatorDepth, int retryCount,
        int rnrRetryCount, int qpNum) {

    public ConnParam {
        Objects.requireNonNull(privateData, "privateData (empty for none)");
        if (privateData.length > 255) {
            throw new IllegalArgumentException("private_data_len is one byte: at most 255 bytes, got "
                    + privateData.length);
        }
    }

    /** A zeroed {@code struct rdma_conn_param} from {@code allocator}, its private data copied there too. */
    public MemorySegment write(SegmentAllocator allocator) {
        MemorySegment cp = allocator.allocate(rdma_conn_param.layout());
        cp.fill((byte) 0);
        rdma_conn_param.private_data(cp, privateData.length == 0 ? MemorySegment.NULL
                : allocator.allocateFrom(ValueLayout.JAVA_BYTE, privateData));
        rdma_conn_param.private_data_len(cp, (byte) privateData.length);
        rdma_conn_param.responder_resources(cp, (byte) responderResources);
        rdma_conn_param.initiator_depth(cp, (byte) initiatorDepth);
        rdma_conn_param.retry_count(cp, (byte) retryCount);
        rdma_conn_param.rnr_retry_count(cp, (byte) rnrRetryCount);
        rdma_conn_param.qp_num(cp, qpNum);
        return cp;
    }

    /** Reads the {@code struct rdma_conn_param} at {@code cp}, copying its private data. */
    public static ConnParam read(MemorySegment cp) {
        return new ConnParam(CmStructs.copyBytes(rdma_conn_param.private_data(cp),
                Byte.toUnsignedInt(rdma_conn_param.private_data_len(cp))),
                Byte.toUnsignedInt(rdma_conn_param.responder_resources(cp)),
                Byte.toUnsignedInt(rdma_conn_param.initiator_depth(cp)),
                Byte.toUnsignedInt(rdma_conn_param.retry_count(cp)),
                Byte.toUnsignedInt(rdma_conn_param.rnr_retry_count(cp)), rdma_conn_param.qp_num(cp));
    }
}
