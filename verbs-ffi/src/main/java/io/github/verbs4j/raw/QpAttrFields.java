package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_qp_attr;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;

/**
 * {@code struct ibv_qp_attr} as Java values, in the struct's order, and the {@code attr_mask}
 * bits that say which of them a call reads or fills ({@code ibv_modify_qp}, {@code ibv_query_qp},
 * {@code rdma_init_qp_attr}). Only the fields verbs4j uses are here (no alternate path, no
 * rate limit); the others are written as 0. Unsigned C fields are read unsigned; each value is
 * cut to its field's width when written, as C does (the owners check ranges first).
 *
 * @param state        {@code qp_state} ({@code IBV_QPS_*})
 * @param pathMtu      {@code path_mtu} ({@code IBV_MTU_*}; 0 = none)
 * @param cap          {@code cap}: the queue sizes ({@code null} writes zeros)
 * @param ahAttr       {@code ah_attr}: the primary path ({@code null} writes zeros)
 */
public record QpAttrFields(int state, int pathMtu, int qkey, int rqPsn, int sqPsn, int destQpNum, int accessFlags,
        QpCap cap, AhAttr ahAttr, int pkeyIndex, int maxRdAtomic, int maxDestRdAtomic, int minRnrTimer, int portNum,
        int timeout, int retryCount, int rnrRetry) {

    public static final int STATE = RdmaCore.IBV_QP_STATE();
    public static final int ACCESS_FLAGS = RdmaCore.IBV_QP_ACCESS_FLAGS();
    public static final int PKEY_INDEX = RdmaCore.IBV_QP_PKEY_INDEX();
    public static final int PORT = RdmaCore.IBV_QP_PORT();
    public static final int QKEY = RdmaCore.IBV_QP_QKEY();
    public static final int AV = RdmaCore.IBV_QP_AV();
    public static final int PATH_MTU = RdmaCore.IBV_QP_PATH_MTU();
    public static final int TIMEOUT = RdmaCore.IBV_QP_TIMEOUT();
    public static final int RETRY_CNT = RdmaCore.IBV_QP_RETRY_CNT();
    public static final int RNR_RETRY = RdmaCore.IBV_QP_RNR_RETRY();
    public static final int RQ_PSN = RdmaCore.IBV_QP_RQ_PSN();
    public static final int MAX_QP_RD_ATOMIC = RdmaCore.IBV_QP_MAX_QP_RD_ATOMIC();
    public static final int MIN_RNR_TIMER = RdmaCore.IBV_QP_MIN_RNR_TIMER();
    public static final int SQ_PSN = RdmaCore.IBV_QP_SQ_PSN();
    public static final int MAX_DEST_RD_ATOMIC = RdmaCore.IBV_QP_MAX_DEST_RD_ATOMIC();
    public static final int CAP = RdmaCore.IBV_QP_CAP();
    public static final int DEST_QPN = RdmaCore.IBV_QP_DEST_QPN();

    /** A zeroed {@code struct ibv_qp_attr} from {@code allocator} holding these values. */
    public MemorySegment write(SegmentAllocator allocator) {
        MemorySegment attr = forState(allocator, state);
        ibv_qp_attr.path_mtu(attr, pathMtu);
        ibv_qp_attr.qkey(attr, qkey);
        ibv_qp_attr.rq_psn(attr, rqPsn);
        ibv_qp_attr.sq_psn(attr, sqPsn);
        ibv_qp_attr.dest_qp_num(attr, destQpNum);
        ibv_qp_attr.qp_access_flags(attr, accessFlags);
        if (cap != null) {
            cap.write(ibv_qp_attr.cap(attr));
        }
        if (ahAttr != null) {
            ahAttr.writeInto(ibv_qp_attr.ah_attr(attr));
        }
        ibv_qp_attr.pkey_index(attr, (short) pkeyIndex);
        ibv_qp_attr.max_rd_atomic(attr, (byte) maxRdAtomic);
        ibv_qp_attr.max_dest_rd_atomic(attr, (byte) maxDestRdAtomic);
        ibv_qp_attr.min_rnr_timer(attr, (byte) minRnrTimer);
        ibv_qp_attr.port_num(attr, (byte) portNum);
        ibv_qp_attr.timeout(attr, (byte) timeout);
        ibv_qp_attr.retry_cnt(attr, (byte) retryCount);
        ibv_qp_attr.rnr_retry(attr, (byte) rnrRetry);
        return attr;
    }

    /**
     * A zeroed {@code struct ibv_qp_attr} naming only {@code qp_state}: the input of
     * {@code rdma_init_qp_attr} (the state to reach), and room for {@code ibv_query_qp} to fill.
     */
    public static MemorySegment forState(SegmentAllocator allocator, int state) {
        MemorySegment attr = allocator.allocate(ibv_qp_attr.layout());
        attr.fill((byte) 0);
        ibv_qp_attr.qp_state(attr, state);
        return attr;
    }

    /** Reads every field of the {@code struct ibv_qp_attr} at {@code attr}; the mask says which are meaningful. */
    public static QpAttrFields read(MemorySegment attr) {
        return new QpAttrFields(ibv_qp_attr.qp_state(attr), ibv_qp_attr.path_mtu(attr), ibv_qp_attr.qkey(attr),
                ibv_qp_attr.rq_psn(attr), ibv_qp_attr.sq_psn(attr), ibv_qp_attr.dest_qp_num(attr),
                ibv_qp_attr.qp_access_flags(attr), QpCap.read(ibv_qp_attr.cap(attr)),
                AhAttr.read(ibv_qp_attr.ah_attr(attr)), Short.toUnsignedInt(ibv_qp_attr.pkey_index(attr)),
                Byte.toUnsignedInt(ibv_qp_attr.max_rd_atomic(attr)), Byte.toUnsignedInt(ibv_qp_attr.max_dest_rd_atomic(attr)),
                Byte.toUnsignedInt(ibv_qp_attr.min_rnr_timer(attr)), Byte.toUnsignedInt(ibv_qp_attr.port_num(attr)),
                Byte.toUnsignedInt(ibv_qp_attr.timeout(attr)), Byte.toUnsignedInt(ibv_qp_attr.retry_cnt(attr)),
                Byte.toUnsignedInt(ibv_qp_attr.rnr_retry(attr)));
    }
}
