package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_qp_cap;
import io.github.verbs4j.ffi.ibv_qp_init_attr;
import io.github.verbs4j.ffi.ibv_qp_init_attr_ex;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * The one encoding of a queue pair's creation attributes: every field lands where the generated
 * layout puts it, an SRQ drops the receive sizes, the extended form names what it carries in
 * comp_mask, and the granted sizes are read back from the struct the device wrote.
 */
class QpInitAttrTest {

    static final MemorySegment SEND_CQ = MemorySegment.ofAddress(0x1000);
    static final MemorySegment RECV_CQ = MemorySegment.ofAddress(0x2000);
    static final MemorySegment SRQ = MemorySegment.ofAddress(0x3000);
    static final QpCap CAP = new QpCap(64, 32, 3, 2, 128);

    @Test
    void writesEveryFieldWhereTheLayoutHasIt() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment init = new QpInitAttr(SEND_CQ, RECV_CQ, MemorySegment.NULL, CAP, RdmaCore.IBV_QPT_RC(), true)
                    .write(arena);
            assertEquals(ibv_qp_init_attr.layout().byteSize(), init.byteSize());
            assertEquals(0x1000, ibv_qp_init_attr.send_cq(init).address());
            assertEquals(0x2000, ibv_qp_init_attr.recv_cq(init).address());
            assertEquals(0, ibv_qp_init_attr.srq(init).address());
            assertEquals(0, ibv_qp_init_attr.qp_context(init).address());
            MemorySegment cap = ibv_qp_init_attr.cap(init);
            assertEquals(64, ibv_qp_cap.max_send_wr(cap));
            assertEquals(32, ibv_qp_cap.max_recv_wr(cap));
            assertEquals(3, ibv_qp_cap.max_send_sge(cap));
            assertEquals(2, ibv_qp_cap.max_recv_sge(cap));
            assertEquals(128, ibv_qp_cap.max_inline_data(cap));
            assertEquals(RdmaCore.IBV_QPT_RC(), ibv_qp_init_attr.qp_type(init));
            assertEquals(1, ibv_qp_init_attr.sq_sig_all(init));
            assertEquals(CAP, QpInitAttr.grantedCap(init));
        }
    }

    @Test
    void anSrqLeavesNoReceiveSizes() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment init = new QpInitAttr(SEND_CQ, RECV_CQ, SRQ, CAP, RdmaCore.IBV_QPT_UD(), false).write(arena);
            assertEquals(0x3000, ibv_qp_init_attr.srq(init).address());
            assertEquals(new QpCap(64, 0, 3, 0, 128), QpInitAttr.grantedCap(init));
            assertEquals(0, ibv_qp_init_attr.sq_sig_all(init));
            assertEquals(RdmaCore.IBV_QPT_UD(), ibv_qp_init_attr.qp_type(init));
        }
    }

    @Test
    void theExtendedFormCarriesTheDomainAndTheSendOperations() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment pd = MemorySegment.ofAddress(0x4000);
            long ops = RdmaCore.IBV_QP_EX_WITH_SEND() | RdmaCore.IBV_QP_EX_WITH_RDMA_WRITE();
            MemorySegment init = new QpInitAttr(SEND_CQ, RECV_CQ, MemorySegment.NULL, CAP, RdmaCore.IBV_QPT_RC(), false)
                    .writeExtended(arena, pd, ops);
            assertEquals(ibv_qp_init_attr_ex.layout().byteSize(), init.byteSize());
            assertEquals(0x1000, ibv_qp_init_attr_ex.send_cq(init).address());
            assertEquals(0x2000, ibv_qp_init_attr_ex.recv_cq(init).address());
            assertEquals(0x4000, ibv_qp_init_attr_ex.pd(init).address());
            assertEquals(ops, ibv_qp_init_attr_ex.send_ops_flags(init));
            assertEquals(RdmaCore.IBV_QP_INIT_ATTR_PD() | RdmaCore.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS(),
                    ibv_qp_init_attr_ex.comp_mask(init));
            assertEquals(0, ibv_qp_init_attr_ex.xrcd(init).address());
            assertEquals(CAP, QpInitAttr.grantedCapExtended(init));
        }
    }

    @Test
    void anXrcReceiveQpNamesOnlyItsDomain() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment init = QpInitAttr.writeXrcReceive(arena, MemorySegment.ofAddress(0x5000));
            assertEquals(RdmaCore.IBV_QPT_XRC_RECV(), ibv_qp_init_attr_ex.qp_type(init));
            assertEquals(RdmaCore.IBV_QP_INIT_ATTR_XRCD(), ibv_qp_init_attr_ex.comp_mask(init));
            assertEquals(0x5000, ibv_qp_init_attr_ex.xrcd(init).address());
            assertEquals(0, ibv_qp_init_attr_ex.send_cq(init).address());
            assertEquals(new QpCap(0, 0, 0, 0, 0), QpInitAttr.grantedCapExtended(init));
        }
    }

    @Test
    void aMissingQueueIsNullNotJavaNull() {
        assertThrows(NullPointerException.class,
                () -> new QpInitAttr(SEND_CQ, null, MemorySegment.NULL, CAP, RdmaCore.IBV_QPT_RC(), false));
    }
}
