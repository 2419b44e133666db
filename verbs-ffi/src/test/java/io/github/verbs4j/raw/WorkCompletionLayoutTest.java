package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_cq;
import io.github.verbs4j.ffi.ibv_cq_ex;
import io.github.verbs4j.ffi.ibv_poll_cq_attr;
import io.github.verbs4j.ffi.ibv_wc;
import io.github.verbs4j.layout.CLayouts;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The one decoding of a work completion: each field the generated accessors write into an
 * {@code ibv_wc} (the second of an array, as {@code ibv_poll_cq} fills it) reads back at
 * {@link WorkCompletionLayout}'s offset; each offset and size is what gcc says; each flag is
 * the header's value; {@code cqe} reads the same for a classic and an extended queue.
 */
class WorkCompletionLayoutTest {

    @Test
    void everyFieldTheProviderWritesIsReadWhereTheGeneratedLayoutHasIt() {
        try (Arena arena = Arena.ofConfined()) {
            assertEquals(ibv_wc.layout().byteSize(), WorkCompletionLayout.WC_SIZE);
            assertEquals(ibv_wc.layout().byteAlignment(), WorkCompletionLayout.WC_ALIGNMENT);
            MemorySegment array = arena.allocate(ibv_wc.layout(), 2);
            MemorySegment wc = ibv_wc.asSlice(array, 1);
            ibv_wc.wr_id(wc, 0x0102030405060708L);
            ibv_wc.status(wc, RdmaCore.IBV_WC_RETRY_EXC_ERR());
            ibv_wc.opcode(wc, RdmaCore.IBV_WC_RECV_RDMA_WITH_IMM());
            ibv_wc.vendor_err(wc, 0x81);
            ibv_wc.byte_len(wc, 4096);
            ibv_wc.imm_data(wc, 0x11223344);
            ibv_wc.qp_num(wc, 0x123456);
            ibv_wc.src_qp(wc, 0x654321);
            ibv_wc.wc_flags(wc, RdmaCore.IBV_WC_GRH() | RdmaCore.IBV_WC_WITH_IMM());
            ibv_wc.pkey_index(wc, (short) 0xfffe);
            ibv_wc.slid(wc, (short) 0x8001);
            ibv_wc.sl(wc, (byte) 0x0f);

            long base = WorkCompletionLayout.WC_SIZE; // slot 1
            assertEquals(0x0102030405060708L, array.get(ValueLayout.JAVA_LONG, base + WorkCompletionLayout.WC_WR_ID));
            assertEquals(RdmaCore.IBV_WC_RETRY_EXC_ERR(), array.get(ValueLayout.JAVA_INT, base + WorkCompletionLayout.WC_STATUS));
            assertEquals(RdmaCore.IBV_WC_RECV_RDMA_WITH_IMM(),
                    array.get(ValueLayout.JAVA_INT, base + WorkCompletionLayout.WC_OPCODE));
            assertEquals(0x81, array.get(ValueLayout.JAVA_INT, base + WorkCompletionLayout.WC_VENDOR_ERR));
            assertEquals(4096, array.get(ValueLayout.JAVA_INT, base + WorkCompletionLayout.WC_BYTE_LEN));
            assertEquals(0x11223344, array.get(ValueLayout.JAVA_INT, base + WorkCompletionLayout.WC_IMM_DATA));
            assertEquals(0x123456, array.get(ValueLayout.JAVA_INT, base + WorkCompletionLayout.WC_QP_NUM));
            assertEquals(0x654321, array.get(ValueLayout.JAVA_INT, base + WorkCompletionLayout.WC_SRC_QP));
            assertEquals(WorkCompletionLayout.WC_GRH | WorkCompletionLayout.WC_WITH_IMM,
                    array.get(ValueLayout.JAVA_INT, base + WorkCompletionLayout.WC_FLAGS));
            assertEquals((short) 0xfffe, array.get(ValueLayout.JAVA_SHORT, base + WorkCompletionLayout.WC_PKEY_INDEX));
            assertEquals((short) 0x8001, array.get(ValueLayout.JAVA_SHORT, base + WorkCompletionLayout.WC_SLID));
            assertEquals((byte) 0x0f, array.get(ValueLayout.JAVA_BYTE, base + WorkCompletionLayout.WC_SL));
            // slot 0 untouched: the stride is the struct's size
            assertEquals(0L, array.get(ValueLayout.JAVA_LONG, WorkCompletionLayout.WC_WR_ID));

            // invalidated_rkey shares imm_data's storage
            ibv_wc.invalidated_rkey(wc, 0x7777);
            assertEquals(0x7777, array.get(ValueLayout.JAVA_INT, base + WorkCompletionLayout.WC_IMM_DATA));
        }
    }

    @Test
    void cqeReadsTheSameFieldOfAClassicAndAnExtendedQueue() {
        try (Arena arena = Arena.ofConfined()) {
            assertEquals(ibv_cq.layout().byteSize(), WorkCompletionLayout.CQ_SIZE);
            assertEquals(ibv_cq_ex.cqe$offset(), WorkCompletionLayout.CQ_CQE);
            MemorySegment cq = arena.allocate(ibv_cq.layout());
            ibv_cq.cqe(cq, 255);
            assertEquals(255, WorkCompletionLayout.cqe(cq));
            MemorySegment cqx = arena.allocate(ibv_cq_ex.layout());
            ibv_cq_ex.cqe(cqx, 1023);
            assertEquals(1023, WorkCompletionLayout.cqe(cqx));
            assertEquals(ibv_poll_cq_attr.layout().byteSize(), WorkCompletionLayout.POLL_CQ_ATTR_SIZE);
            assertEquals(ibv_poll_cq_attr.layout().byteAlignment(), WorkCompletionLayout.POLL_CQ_ATTR_ALIGNMENT);
        }
    }

    @Test
    void offsetsAndSizesAreWhatTheCompilerSays() {
        String wc = "struct ibv_wc";
        Map<CLayouts.Query, Long> offsets = new LinkedHashMap<>();
        offsets.put(CLayouts.Query.member(wc, "wr_id"), WorkCompletionLayout.WC_WR_ID);
        offsets.put(CLayouts.Query.member(wc, "status"), WorkCompletionLayout.WC_STATUS);
        offsets.put(CLayouts.Query.member(wc, "opcode"), WorkCompletionLayout.WC_OPCODE);
        offsets.put(CLayouts.Query.member(wc, "vendor_err"), WorkCompletionLayout.WC_VENDOR_ERR);
        offsets.put(CLayouts.Query.member(wc, "byte_len"), WorkCompletionLayout.WC_BYTE_LEN);
        offsets.put(CLayouts.Query.member(wc, "imm_data"), WorkCompletionLayout.WC_IMM_DATA);
        offsets.put(CLayouts.Query.member(wc, "invalidated_rkey"), WorkCompletionLayout.WC_IMM_DATA);
        offsets.put(CLayouts.Query.member(wc, "qp_num"), WorkCompletionLayout.WC_QP_NUM);
        offsets.put(CLayouts.Query.member(wc, "src_qp"), WorkCompletionLayout.WC_SRC_QP);
        offsets.put(CLayouts.Query.member(wc, "wc_flags"), WorkCompletionLayout.WC_FLAGS);
        offsets.put(CLayouts.Query.member(wc, "pkey_index"), WorkCompletionLayout.WC_PKEY_INDEX);
        offsets.put(CLayouts.Query.member(wc, "slid"), WorkCompletionLayout.WC_SLID);
        offsets.put(CLayouts.Query.member(wc, "sl"), WorkCompletionLayout.WC_SL);
        offsets.put(CLayouts.Query.member("struct ibv_cq", "cqe"), WorkCompletionLayout.CQ_CQE);
        offsets.put(CLayouts.Query.member("struct ibv_cq_ex", "cqe"), WorkCompletionLayout.CQ_CQE);
        Map<CLayouts.Query, Long> sizes = Map.of(
                CLayouts.Query.type(wc), WorkCompletionLayout.WC_SIZE,
                CLayouts.Query.type("struct ibv_cq"), WorkCompletionLayout.CQ_SIZE,
                CLayouts.Query.type("struct ibv_poll_cq_attr"), WorkCompletionLayout.POLL_CQ_ATTR_SIZE);

        List<CLayouts.Query> all = new ArrayList<>(offsets.keySet());
        all.addAll(sizes.keySet());
        Map<CLayouts.Query, CLayouts.Answer> c = CLayouts.verbs().measure(all);
        assertAll(offsets.entrySet().stream().map(e -> () ->
                assertEquals(c.get(e.getKey()).offset(), e.getValue(), "offsetof(" + e.getKey() + ")")));
        assertAll(sizes.entrySet().stream().map(e -> () ->
                assertEquals(c.get(e.getKey()).size(), e.getValue(), "sizeof(" + e.getKey() + ")")));
        assertEquals(c.get(CLayouts.Query.type(wc)).alignment(), WorkCompletionLayout.WC_ALIGNMENT, "_Alignof(struct ibv_wc)");
    }

    @Test
    void flagsAreTheHeadersValues() {
        // verbs.h: IBV_WC_GRH = 1 << 0, IBV_WC_WITH_IMM = 1 << 1, IBV_WC_WITH_INV = 1 << 3
        assertEquals(1, WorkCompletionLayout.WC_GRH);
        assertEquals(2, WorkCompletionLayout.WC_WITH_IMM);
        assertEquals(8, WorkCompletionLayout.WC_WITH_INV);
        // IBV_WC_EX_WITH_BYTE_LEN = 1 << 0 ... COMPLETION_TIMESTAMP = 1 << 7
        assertEquals(1 << 0, WorkCompletionLayout.WC_EX_WITH_BYTE_LEN);
        assertEquals(1 << 1, WorkCompletionLayout.WC_EX_WITH_IMM);
        assertEquals(1 << 2, WorkCompletionLayout.WC_EX_WITH_QP_NUM);
        assertEquals(1 << 3, WorkCompletionLayout.WC_EX_WITH_SRC_QP);
        assertEquals(1 << 4, WorkCompletionLayout.WC_EX_WITH_SLID);
        assertEquals(1 << 5, WorkCompletionLayout.WC_EX_WITH_SL);
        assertEquals(1 << 6, WorkCompletionLayout.WC_EX_WITH_DLID_PATH_BITS);
        assertEquals(1 << 7, WorkCompletionLayout.WC_EX_WITH_COMPLETION_TIMESTAMP);
    }
}
