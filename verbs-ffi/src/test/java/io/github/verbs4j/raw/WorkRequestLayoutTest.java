package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_mw_bind_info;
import io.github.verbs4j.ffi.ibv_qp_ex;
import io.github.verbs4j.ffi.ibv_recv_wr;
import io.github.verbs4j.ffi.ibv_send_wr;
import io.github.verbs4j.ffi.ibv_sge;
import io.github.verbs4j.layout.CLayouts;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The one encoding of a work request: each field written at {@link WorkRequestLayout}'s offset
 * reads back through the generated accessor of that field (so it lands where the generated
 * layout puts it), each offset and size is what gcc says for the system's {@code verbs.h}, and
 * each flag is the header's value.
 */
class WorkRequestLayoutTest {

    @Test
    void sendRequestFieldsLandWhereTheGeneratedLayoutHasThem() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment wr = arena.allocate(ibv_send_wr.layout());
            assertEquals(ibv_send_wr.layout().byteSize(), WorkRequestLayout.SEND_WR_SIZE);
            wr.set(ValueLayout.JAVA_LONG, WorkRequestLayout.SEND_WR_ID, 0x1122334455667788L);
            wr.set(ValueLayout.ADDRESS, WorkRequestLayout.SEND_NEXT, MemorySegment.ofAddress(0x1000));
            wr.set(ValueLayout.ADDRESS, WorkRequestLayout.SEND_SG_LIST, MemorySegment.ofAddress(0x2000));
            wr.set(ValueLayout.JAVA_INT, WorkRequestLayout.SEND_NUM_SGE, 3);
            wr.set(ValueLayout.JAVA_INT, WorkRequestLayout.SEND_OPCODE, RdmaCore.IBV_WR_RDMA_READ());
            wr.set(ValueLayout.JAVA_INT, WorkRequestLayout.SEND_FLAGS, 0x0f);
            wr.set(ValueLayout.JAVA_INT, WorkRequestLayout.SEND_IMM_DATA, 0x0a0b0c0d);
            wr.set(ValueLayout.JAVA_INT, WorkRequestLayout.SEND_XRC_REMOTE_SRQN, 0x77);
            assertEquals(0x1122334455667788L, ibv_send_wr.wr_id(wr));
            assertEquals(0x1000, ibv_send_wr.next(wr).address());
            assertEquals(0x2000, ibv_send_wr.sg_list(wr).address());
            assertEquals(3, ibv_send_wr.num_sge(wr));
            assertEquals(RdmaCore.IBV_WR_RDMA_READ(), ibv_send_wr.opcode(wr));
            assertEquals(0x0f, ibv_send_wr.send_flags(wr));
            assertEquals(0x0a0b0c0d, ibv_send_wr.imm_data(wr));
            assertEquals(0x77, ibv_send_wr.qp_type.xrc.remote_srqn(ibv_send_wr.qp_type.xrc(ibv_send_wr.qp_type(wr))));

            // imm_data and invalidate_rkey share their storage
            wr.set(ValueLayout.JAVA_INT, WorkRequestLayout.SEND_INVALIDATE_RKEY, 0x5151);
            assertEquals(0x5151, ibv_send_wr.invalidate_rkey(wr));
            assertEquals(0x5151, ibv_send_wr.imm_data(wr));
        }
    }

    @Test
    void eachArmOfTheWrUnionLandsInItsMember() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment rdma = arena.allocate(ibv_send_wr.layout());
            rdma.set(ValueLayout.JAVA_LONG, WorkRequestLayout.SEND_RDMA_REMOTE_ADDR, 0xdead_beef_0000L);
            rdma.set(ValueLayout.JAVA_INT, WorkRequestLayout.SEND_RDMA_RKEY, 0x1234);
            MemorySegment r = ibv_send_wr.wr.rdma(ibv_send_wr.wr(rdma));
            assertEquals(0xdead_beef_0000L, ibv_send_wr.wr.rdma.remote_addr(r));
            assertEquals(0x1234, ibv_send_wr.wr.rdma.rkey(r));

            MemorySegment atomic = arena.allocate(ibv_send_wr.layout());
            atomic.set(ValueLayout.JAVA_LONG, WorkRequestLayout.SEND_ATOMIC_REMOTE_ADDR, 0x8000L);
            atomic.set(ValueLayout.JAVA_LONG, WorkRequestLayout.SEND_ATOMIC_COMPARE_ADD, 41L);
            atomic.set(ValueLayout.JAVA_LONG, WorkRequestLayout.SEND_ATOMIC_SWAP, 42L);
            atomic.set(ValueLayout.JAVA_INT, WorkRequestLayout.SEND_ATOMIC_RKEY, 0x4321);
            MemorySegment a = ibv_send_wr.wr.atomic(ibv_send_wr.wr(atomic));
            assertEquals(0x8000L, ibv_send_wr.wr.atomic.remote_addr(a));
            assertEquals(41L, ibv_send_wr.wr.atomic.compare_add(a));
            assertEquals(42L, ibv_send_wr.wr.atomic.swap(a));
            assertEquals(0x4321, ibv_send_wr.wr.atomic.rkey(a));

            MemorySegment ud = arena.allocate(ibv_send_wr.layout());
            ud.set(ValueLayout.ADDRESS, WorkRequestLayout.SEND_UD_AH, MemorySegment.ofAddress(0x3000));
            ud.set(ValueLayout.JAVA_INT, WorkRequestLayout.SEND_UD_REMOTE_QPN, 0xabc);
            ud.set(ValueLayout.JAVA_INT, WorkRequestLayout.SEND_UD_REMOTE_QKEY, 0x11111111);
            MemorySegment u = ibv_send_wr.wr.ud(ibv_send_wr.wr(ud));
            assertEquals(0x3000, ibv_send_wr.wr.ud.ah(u).address());
            assertEquals(0xabc, ibv_send_wr.wr.ud.remote_qpn(u));
            assertEquals(0x11111111, ibv_send_wr.wr.ud.remote_qkey(u));
        }
    }

    @Test
    void aBindRequestLandsInBindMwAndItsBindInfo() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment wr = arena.allocate(ibv_send_wr.layout());
            wr.set(ValueLayout.ADDRESS, WorkRequestLayout.SEND_BIND_MW_MW, MemorySegment.ofAddress(0x4000));
            wr.set(ValueLayout.JAVA_INT, WorkRequestLayout.SEND_BIND_MW_RKEY, 0x99);
            wr.set(ValueLayout.ADDRESS, WorkRequestLayout.SEND_BIND_MW_MR, MemorySegment.ofAddress(0x5000));
            wr.set(ValueLayout.JAVA_LONG, WorkRequestLayout.SEND_BIND_MW_ADDR, 0x6000L);
            wr.set(ValueLayout.JAVA_LONG, WorkRequestLayout.SEND_BIND_MW_LENGTH, 4096L);
            wr.set(ValueLayout.JAVA_INT, WorkRequestLayout.SEND_BIND_MW_ACCESS, 0x0e);
            MemorySegment bind = ibv_send_wr.bind_mw(wr);
            assertEquals(0x4000, ibv_send_wr.bind_mw.mw(bind).address());
            assertEquals(0x99, ibv_send_wr.bind_mw.rkey(bind));
            MemorySegment info = ibv_send_wr.bind_mw.bind_info(bind);
            assertEquals(0x5000, ibv_mw_bind_info.mr(info).address());
            assertEquals(0x6000L, ibv_mw_bind_info.addr(info));
            assertEquals(4096L, ibv_mw_bind_info.length(info));
            assertEquals(0x0e, ibv_mw_bind_info.mw_access_flags(info));
        }
    }

    @Test
    void receiveRequestAndScatterGatherEntryFieldsLandWhereTheGeneratedLayoutHasThem() {
        try (Arena arena = Arena.ofConfined()) {
            assertEquals(ibv_recv_wr.layout().byteSize(), WorkRequestLayout.RECV_WR_SIZE);
            MemorySegment wr = arena.allocate(ibv_recv_wr.layout());
            wr.set(ValueLayout.JAVA_LONG, WorkRequestLayout.RECV_WR_ID, -2L);
            wr.set(ValueLayout.ADDRESS, WorkRequestLayout.RECV_NEXT, MemorySegment.ofAddress(0x7000));
            wr.set(ValueLayout.ADDRESS, WorkRequestLayout.RECV_SG_LIST, MemorySegment.ofAddress(0x8000));
            wr.set(ValueLayout.JAVA_INT, WorkRequestLayout.RECV_NUM_SGE, 2);
            assertEquals(-2L, ibv_recv_wr.wr_id(wr));
            assertEquals(0x7000, ibv_recv_wr.next(wr).address());
            assertEquals(0x8000, ibv_recv_wr.sg_list(wr).address());
            assertEquals(2, ibv_recv_wr.num_sge(wr));

            // the second entry of an array: the stride is the struct's size
            assertEquals(ibv_sge.layout().byteSize(), WorkRequestLayout.SGE_SIZE);
            MemorySegment sges = arena.allocate(ibv_sge.layout(), 2);
            long base = WorkRequestLayout.SGE_SIZE;
            sges.set(ValueLayout.JAVA_LONG, base + WorkRequestLayout.SGE_ADDR, 0x9000L);
            sges.set(ValueLayout.JAVA_INT, base + WorkRequestLayout.SGE_LENGTH, 64);
            sges.set(ValueLayout.JAVA_INT, base + WorkRequestLayout.SGE_LKEY, 0x55);
            MemorySegment second = ibv_sge.asSlice(sges, 1);
            assertEquals(0x9000L, ibv_sge.addr(second));
            assertEquals(64, ibv_sge.length(second));
            assertEquals(0x55, ibv_sge.lkey(second));
            assertEquals(0L, ibv_sge.addr(ibv_sge.asSlice(sges, 0)));
        }
    }

    @Test
    void offsetsAndSizesAreWhatTheCompilerSays() {
        Map<CLayouts.Query, Long> offsets = new LinkedHashMap<>();
        String send = "struct ibv_send_wr";
        offsets.put(CLayouts.Query.member(send, "wr_id"), WorkRequestLayout.SEND_WR_ID);
        offsets.put(CLayouts.Query.member(send, "next"), WorkRequestLayout.SEND_NEXT);
        offsets.put(CLayouts.Query.member(send, "sg_list"), WorkRequestLayout.SEND_SG_LIST);
        offsets.put(CLayouts.Query.member(send, "num_sge"), WorkRequestLayout.SEND_NUM_SGE);
        offsets.put(CLayouts.Query.member(send, "opcode"), WorkRequestLayout.SEND_OPCODE);
        offsets.put(CLayouts.Query.member(send, "send_flags"), WorkRequestLayout.SEND_FLAGS);
        offsets.put(CLayouts.Query.member(send, "imm_data"), WorkRequestLayout.SEND_IMM_DATA);
        offsets.put(CLayouts.Query.member(send, "invalidate_rkey"), WorkRequestLayout.SEND_INVALIDATE_RKEY);
        offsets.put(CLayouts.Query.member(send, "wr.rdma.remote_addr"), WorkRequestLayout.SEND_RDMA_REMOTE_ADDR);
        offsets.put(CLayouts.Query.member(send, "wr.rdma.rkey"), WorkRequestLayout.SEND_RDMA_RKEY);
        offsets.put(CLayouts.Query.member(send, "wr.atomic.remote_addr"), WorkRequestLayout.SEND_ATOMIC_REMOTE_ADDR);
        offsets.put(CLayouts.Query.member(send, "wr.atomic.compare_add"), WorkRequestLayout.SEND_ATOMIC_COMPARE_ADD);
        offsets.put(CLayouts.Query.member(send, "wr.atomic.swap"), WorkRequestLayout.SEND_ATOMIC_SWAP);
        offsets.put(CLayouts.Query.member(send, "wr.atomic.rkey"), WorkRequestLayout.SEND_ATOMIC_RKEY);
        offsets.put(CLayouts.Query.member(send, "wr.ud.ah"), WorkRequestLayout.SEND_UD_AH);
        offsets.put(CLayouts.Query.member(send, "wr.ud.remote_qpn"), WorkRequestLayout.SEND_UD_REMOTE_QPN);
        offsets.put(CLayouts.Query.member(send, "wr.ud.remote_qkey"), WorkRequestLayout.SEND_UD_REMOTE_QKEY);
        offsets.put(CLayouts.Query.member(send, "qp_type.xrc.remote_srqn"), WorkRequestLayout.SEND_XRC_REMOTE_SRQN);
        offsets.put(CLayouts.Query.member(send, "bind_mw.mw"), WorkRequestLayout.SEND_BIND_MW_MW);
        offsets.put(CLayouts.Query.member(send, "bind_mw.rkey"), WorkRequestLayout.SEND_BIND_MW_RKEY);
        offsets.put(CLayouts.Query.member(send, "bind_mw.bind_info.mr"), WorkRequestLayout.SEND_BIND_MW_MR);
        offsets.put(CLayouts.Query.member(send, "bind_mw.bind_info.addr"), WorkRequestLayout.SEND_BIND_MW_ADDR);
        offsets.put(CLayouts.Query.member(send, "bind_mw.bind_info.length"), WorkRequestLayout.SEND_BIND_MW_LENGTH);
        offsets.put(CLayouts.Query.member(send, "bind_mw.bind_info.mw_access_flags"), WorkRequestLayout.SEND_BIND_MW_ACCESS);
        String recv = "struct ibv_recv_wr";
        offsets.put(CLayouts.Query.member(recv, "wr_id"), WorkRequestLayout.RECV_WR_ID);
        offsets.put(CLayouts.Query.member(recv, "next"), WorkRequestLayout.RECV_NEXT);
        offsets.put(CLayouts.Query.member(recv, "sg_list"), WorkRequestLayout.RECV_SG_LIST);
        offsets.put(CLayouts.Query.member(recv, "num_sge"), WorkRequestLayout.RECV_NUM_SGE);
        String sge = "struct ibv_sge";
        offsets.put(CLayouts.Query.member(sge, "addr"), WorkRequestLayout.SGE_ADDR);
        offsets.put(CLayouts.Query.member(sge, "length"), WorkRequestLayout.SGE_LENGTH);
        offsets.put(CLayouts.Query.member(sge, "lkey"), WorkRequestLayout.SGE_LKEY);
        offsets.put(CLayouts.Query.member("struct ibv_qp_ex", "wr_set_xrc_srqn"), ExtendedOps.WR_SET_XRC_SRQN);
        Map<CLayouts.Query, Long> sizes = Map.of(
                CLayouts.Query.type(send), WorkRequestLayout.SEND_WR_SIZE,
                CLayouts.Query.type(recv), WorkRequestLayout.RECV_WR_SIZE,
                CLayouts.Query.type(sge), WorkRequestLayout.SGE_SIZE);

        List<CLayouts.Query> all = new java.util.ArrayList<>(offsets.keySet());
        all.addAll(sizes.keySet());
        Map<CLayouts.Query, CLayouts.Answer> c = CLayouts.verbs().measure(all);
        assertAll(offsets.entrySet().stream().map(e -> () ->
                assertEquals(c.get(e.getKey()).offset(), e.getValue(), "offsetof(" + e.getKey() + ")")));
        assertAll(sizes.entrySet().stream().map(e -> () ->
                assertEquals(c.get(e.getKey()).size(), e.getValue(), "sizeof(" + e.getKey() + ")")));
        assertEquals(ibv_qp_ex.wr_set_xrc_srqn$offset(), ExtendedOps.WR_SET_XRC_SRQN);
    }

    @Test
    void flagsAndOperationBitsAreTheHeadersValues() {
        // fixed by the ABI (verbs.h): IBV_SEND_FENCE = 1 << 0, SIGNALED 1 << 1, SOLICITED 1 << 2, INLINE 1 << 3
        assertEquals(1, WorkRequestLayout.SEND_FENCE);
        assertEquals(2, WorkRequestLayout.SEND_SIGNALED);
        assertEquals(4, WorkRequestLayout.SEND_SOLICITED);
        assertEquals(8, WorkRequestLayout.SEND_INLINE);
        // IBV_QP_EX_WITH_*: RDMA_WRITE 1 << 0 ... BIND_MW 1 << 8, SEND_WITH_INV 1 << 9
        assertEquals(1 << 0, WorkRequestLayout.QP_EX_WITH_RDMA_WRITE);
        assertEquals(1 << 1, WorkRequestLayout.QP_EX_WITH_RDMA_WRITE_WITH_IMM);
        assertEquals(1 << 2, WorkRequestLayout.QP_EX_WITH_SEND);
        assertEquals(1 << 3, WorkRequestLayout.QP_EX_WITH_SEND_WITH_IMM);
        assertEquals(1 << 4, WorkRequestLayout.QP_EX_WITH_RDMA_READ);
        assertEquals(1 << 5, WorkRequestLayout.QP_EX_WITH_ATOMIC_CMP_AND_SWP);
        assertEquals(1 << 6, WorkRequestLayout.QP_EX_WITH_ATOMIC_FETCH_AND_ADD);
        assertEquals(1 << 7, WorkRequestLayout.QP_EX_WITH_LOCAL_INV);
        assertEquals(1 << 8, WorkRequestLayout.QP_EX_WITH_BIND_MW);
        assertEquals(1 << 9, WorkRequestLayout.QP_EX_WITH_SEND_WITH_INV);
    }
}
