package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_ah_attr;
import io.github.verbs4j.ffi.ibv_global_route;
import io.github.verbs4j.ffi.ibv_qp_attr;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * The one encoding of {@code struct ibv_qp_attr} and {@code struct ibv_ah_attr}: fields land
 * where the generated layout puts them, byte-wide fields read back unsigned, the GRH is written
 * only with a destination GID, and what is written reads back equal.
 */
class QpAttrFieldsTest {

    static final byte[] GID = {(byte) 0xfe, (byte) 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, (byte) 0xff};

    @Test
    void writesEveryFieldWhereTheLayoutHasIt() {
        AhAttr ah = new AhAttr(0xbeef, 5, 3, 2, 1, GID, 7, 64, 0xa0, 0xfffff);
        QpAttrFields fields = new QpAttrFields(RdmaCore.IBV_QPS_RTR(), RdmaCore.IBV_MTU_4096(), 0x11111111,
                0xabcdef, 0x123456, 0x654321, RdmaCore.IBV_ACCESS_REMOTE_WRITE(), new QpCap(1, 2, 3, 4, 5), ah,
                0xffff, 200, 255, 31, 254, 14, 7, 6);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = fields.write(arena);
            assertEquals(ibv_qp_attr.layout().byteSize(), a.byteSize());
            assertEquals(RdmaCore.IBV_QPS_RTR(), ibv_qp_attr.qp_state(a));
            assertEquals(0, ibv_qp_attr.cur_qp_state(a));
            assertEquals(RdmaCore.IBV_MTU_4096(), ibv_qp_attr.path_mtu(a));
            assertEquals(0x11111111, ibv_qp_attr.qkey(a));
            assertEquals(0xabcdef, ibv_qp_attr.rq_psn(a));
            assertEquals(0x123456, ibv_qp_attr.sq_psn(a));
            assertEquals(0x654321, ibv_qp_attr.dest_qp_num(a));
            assertEquals(RdmaCore.IBV_ACCESS_REMOTE_WRITE(), ibv_qp_attr.qp_access_flags(a));
            assertEquals((short) 0xffff, ibv_qp_attr.pkey_index(a));
            assertEquals((byte) 200, ibv_qp_attr.max_rd_atomic(a));
            assertEquals((byte) 255, ibv_qp_attr.max_dest_rd_atomic(a));
            assertEquals(31, ibv_qp_attr.min_rnr_timer(a));
            assertEquals((byte) 254, ibv_qp_attr.port_num(a));
            assertEquals(14, ibv_qp_attr.timeout(a));
            assertEquals(7, ibv_qp_attr.retry_cnt(a));
            assertEquals(6, ibv_qp_attr.rnr_retry(a));
            MemorySegment av = ibv_qp_attr.ah_attr(a);
            assertEquals((short) 0xbeef, ibv_ah_attr.dlid(av));
            assertEquals(5, ibv_ah_attr.sl(av));
            assertEquals(1, ibv_ah_attr.is_global(av));
            assertEquals(1, ibv_ah_attr.port_num(av));
            MemorySegment grh = ibv_ah_attr.grh(av);
            assertArrayEquals(GID, ibv_global_route.dgid(grh).toArray(ValueLayout.JAVA_BYTE));
            assertEquals(7, ibv_global_route.sgid_index(grh));
            assertEquals(64, ibv_global_route.hop_limit(grh));
            assertEquals((byte) 0xa0, ibv_global_route.traffic_class(grh));
            assertEquals(0xfffff, ibv_global_route.flow_label(grh));
            // nothing verbs4j does not set: the alternate path stays zero
            assertEquals(0, ibv_ah_attr.port_num(ibv_qp_attr.alt_ah_attr(a)));

            QpAttrFields back = QpAttrFields.read(a);
            assertArrayEquals(GID, back.ahAttr().dgid());
            assertEquals(new QpAttrFields(fields.state(), fields.pathMtu(), fields.qkey(), fields.rqPsn(),
                    fields.sqPsn(), fields.destQpNum(), fields.accessFlags(), fields.cap(), back.ahAttr(),
                    fields.pkeyIndex(), fields.maxRdAtomic(), fields.maxDestRdAtomic(), fields.minRnrTimer(),
                    fields.portNum(), fields.timeout(), fields.retryCount(), fields.rnrRetry()), back);
            assertEquals(new AhAttr(0xbeef, 5, 3, 2, 1, back.ahAttr().dgid(), 7, 64, 0xa0, 0xfffff), back.ahAttr());
        }
    }

    @Test
    void withoutAGidNoGlobalRouteIsWrittenOrRead() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ah = new AhAttr(7, 0, 0, 0, 2, null, 9, 64, 3, 5).write(arena);
            assertEquals(ibv_ah_attr.layout().byteSize(), ah.byteSize());
            assertEquals(0, ibv_ah_attr.is_global(ah));
            assertEquals(0, ibv_global_route.hop_limit(ibv_ah_attr.grh(ah)));
            AhAttr back = AhAttr.read(ah);
            assertNull(back.dgid());
            assertEquals(new AhAttr(7, 0, 0, 0, 2, null, 0, 0, 0, 0), back);
        }
    }

    @Test
    void aStateOnlyStructNamesTheStateAndNothingElse() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = QpAttrFields.forState(arena, RdmaCore.IBV_QPS_RTS());
            QpAttrFields read = QpAttrFields.read(a);
            assertEquals(RdmaCore.IBV_QPS_RTS(), read.state());
            assertEquals(new QpCap(0, 0, 0, 0, 0), read.cap());
            assertEquals(0, read.ahAttr().portNum());
            assertEquals(0, read.destQpNum());
        }
    }

    @Test
    void theMaskBitsAreRdmaCoresAndDistinct() {
        int[] bits = {QpAttrFields.STATE, QpAttrFields.ACCESS_FLAGS, QpAttrFields.PKEY_INDEX, QpAttrFields.PORT,
                QpAttrFields.QKEY, QpAttrFields.AV, QpAttrFields.PATH_MTU, QpAttrFields.TIMEOUT, QpAttrFields.RETRY_CNT,
                QpAttrFields.RNR_RETRY, QpAttrFields.RQ_PSN, QpAttrFields.MAX_QP_RD_ATOMIC, QpAttrFields.MIN_RNR_TIMER,
                QpAttrFields.SQ_PSN, QpAttrFields.MAX_DEST_RD_ATOMIC, QpAttrFields.CAP, QpAttrFields.DEST_QPN};
        int all = 0;
        for (int bit : bits) {
            assertEquals(1, Integer.bitCount(bit));
            assertEquals(0, all & bit);
            all |= bit;
        }
        // enum ibv_qp_attr_mask in verbs.h: IBV_QP_STATE is bit 0, IBV_QP_DEST_QPN bit 20
        assertEquals(1, QpAttrFields.STATE);
        assertEquals(1 << 20, QpAttrFields.DEST_QPN);
    }

    @Test
    void aGidHasSixteenBytes() {
        assertThrows(IllegalArgumentException.class, () -> new AhAttr(0, 0, 0, 0, 1, new byte[15], 0, 0, 0, 0));
    }
}
