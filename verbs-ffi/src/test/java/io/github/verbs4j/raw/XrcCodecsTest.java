package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_qp_open_attr;
import io.github.verbs4j.ffi.ibv_xrcd;
import io.github.verbs4j.ffi.ibv_xrcd_init_attr;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * XRC's structs where the generated layouts put them: the domain's init attributes (file and
 * flags, both named in comp_mask) and the attributes that open an XRC receive QP by number.
 */
class XrcCodecsTest {

    private static final int O_CREAT = 0100;
    private static final int O_EXCL = 0200;

    @Test
    void domainInitAttributes() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment attr = new XrcdInitAttr(7, O_CREAT | O_EXCL).write(ContextCodecsTest.dirty(arena));
            assertEquals(ibv_xrcd_init_attr.layout().byteSize(), attr.byteSize());
            assertEquals(RdmaCore.IBV_XRCD_INIT_ATTR_FD() | RdmaCore.IBV_XRCD_INIT_ATTR_OFLAGS(),
                    ibv_xrcd_init_attr.comp_mask(attr));
            assertEquals(7, ibv_xrcd_init_attr.fd(attr));
            assertEquals(O_CREAT | O_EXCL, ibv_xrcd_init_attr.oflags(attr));
            assertEquals(ibv_xrcd.layout().byteSize(), XrcOps.XRCD_SIZE);
        }
    }

    @Test
    void openQpAttributesNameAnXrcReceiveQp() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment attr = new QpOpenAttr(0xabcdef, MemorySegment.ofAddress(0x6000)).write(ContextCodecsTest.dirty(arena));
            assertEquals(ibv_qp_open_attr.layout().byteSize(), attr.byteSize());
            assertEquals(RdmaCore.IBV_QP_OPEN_ATTR_NUM() | RdmaCore.IBV_QP_OPEN_ATTR_XRCD()
                    | RdmaCore.IBV_QP_OPEN_ATTR_TYPE(), ibv_qp_open_attr.comp_mask(attr));
            assertEquals(0xabcdef, ibv_qp_open_attr.qp_num(attr));
            assertEquals(0x6000, ibv_qp_open_attr.xrcd(attr).address());
            assertEquals(RdmaCore.IBV_QPT_XRC_RECV(), ibv_qp_open_attr.qp_type(attr));
            assertEquals(0, ibv_qp_open_attr.qp_context(attr).address());
            assertThrows(NullPointerException.class, () -> new QpOpenAttr(1, null));
        }
    }
}
