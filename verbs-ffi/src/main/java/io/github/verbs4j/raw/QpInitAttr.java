package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_qp_init_attr;
import io.github.verbs4j.ffi.ibv_qp_init_attr_ex;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.util.Objects;

/**
 * The creation attributes of a queue pair, and their one encoding into
 * {@code struct ibv_qp_init_attr} ({@code ibv_create_qp}, {@code rdma_create_qp}) and
 * {@code struct ibv_qp_init_attr_ex} ({@code ibv_create_qp_ex}). The queues are native
 * pointers ({@link MemorySegment#NULL} for none); {@code qpType} is an {@code IBV_QPT_*} value.
 *
 * <p>With an SRQ the receive sizes are written as 0 whatever {@code cap} says: the QP then has
 * no receive queue of its own, and some providers refuse sizes for one.
 *
 * <p>The device writes the sizes it granted back into the struct: {@link #grantedCap} and
 * {@link #grantedCapExtended} read them after the create call.
 */
public record QpInitAttr(MemorySegment sendCq, MemorySegment recvCq, MemorySegment srq, QpCap cap, int qpType,
        boolean signalAll) {

    public QpInitAttr {
        Objects.requireNonNull(sendCq, "sendCq");
        Objects.requireNonNull(recvCq, "recvCq (MemorySegment.NULL for none)");
        Objects.requireNonNull(srq, "srq (MemorySegment.NULL for none)");
        Objects.requireNonNull(cap, "cap");
    }

    /** The sizes as written: without receive sizes when the QP receives from an SRQ. */
    private QpCap capAsWritten() {
        return srq.equals(MemorySegment.NULL) ? cap : cap.withoutReceiveQueue();
    }

    /** A zeroed {@code struct ibv_qp_init_attr} from {@code allocator} holding these attributes. */
    public MemorySegment write(SegmentAllocator allocator) {
        MemorySegment init = allocator.allocate(ibv_qp_init_attr.layout());
        init.fill((byte) 0);
        ibv_qp_init_attr.send_cq(init, sendCq);
        ibv_qp_init_attr.recv_cq(init, recvCq);
        ibv_qp_init_attr.srq(init, srq);
        capAsWritten().write(ibv_qp_init_attr.cap(init));
        ibv_qp_init_attr.qp_type(init, qpType);
        ibv_qp_init_attr.sq_sig_all(init, signalAll ? 1 : 0);
        return init;
    }

    /**
     * A zeroed {@code struct ibv_qp_init_attr_ex} holding these attributes, the protection domain
     * and the post-send operations ({@code IBV_QP_EX_WITH_*} flags), with the comp_mask that
     * names the two.
     */
    public MemorySegment writeExtended(SegmentAllocator allocator, MemorySegment pd, long sendOpsFlags) {
        MemorySegment init = allocator.allocate(ibv_qp_init_attr_ex.layout());
        init.fill((byte) 0);
        ibv_qp_init_attr_ex.send_cq(init, sendCq);
        ibv_qp_init_attr_ex.recv_cq(init, recvCq);
        ibv_qp_init_attr_ex.srq(init, srq);
        capAsWritten().write(ibv_qp_init_attr_ex.cap(init));
        ibv_qp_init_attr_ex.qp_type(init, qpType);
        ibv_qp_init_attr_ex.sq_sig_all(init, signalAll ? 1 : 0);
        ibv_qp_init_attr_ex.comp_mask(init, RdmaCore.IBV_QP_INIT_ATTR_PD() | RdmaCore.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS());
        ibv_qp_init_attr_ex.pd(init, pd);
        ibv_qp_init_attr_ex.send_ops_flags(init, sendOpsFlags);
        return init;
    }

    /**
     * A zeroed {@code struct ibv_qp_init_attr_ex} for the receiving end of XRC (type
     * {@code IBV_QPT_XRC_RECV} in {@code xrcd}): no queues, no sizes.
     */
    public static MemorySegment writeXrcReceive(SegmentAllocator allocator, MemorySegment xrcd) {
        MemorySegment init = allocator.allocate(ibv_qp_init_attr_ex.layout());
        init.fill((byte) 0);
        ibv_qp_init_attr_ex.qp_type(init, RdmaCore.IBV_QPT_XRC_RECV());
        ibv_qp_init_attr_ex.comp_mask(init, RdmaCore.IBV_QP_INIT_ATTR_XRCD());
        ibv_qp_init_attr_ex.xrcd(init, xrcd);
        return init;
    }

    /** A zeroed {@code struct ibv_qp_init_attr}: room for {@code ibv_query_qp} to fill. */
    public static MemorySegment allocate(SegmentAllocator allocator) {
        MemorySegment init = allocator.allocate(ibv_qp_init_attr.layout());
        init.fill((byte) 0);
        return init;
    }

    /** The sizes the device granted, from a struct made by {@link #write} after the create call. */
    public static QpCap grantedCap(MemorySegment init) {
        return QpCap.read(ibv_qp_init_attr.cap(init));
    }

    /** The sizes the device granted, from a struct made by {@link #writeExtended} after the create call. */
    public static QpCap grantedCapExtended(MemorySegment init) {
        return QpCap.read(ibv_qp_init_attr_ex.cap(init));
    }
}
