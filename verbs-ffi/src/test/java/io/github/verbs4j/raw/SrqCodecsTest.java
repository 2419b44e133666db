package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_srq;
import io.github.verbs4j.ffi.ibv_srq_attr;
import io.github.verbs4j.ffi.ibv_srq_init_attr;
import io.github.verbs4j.ffi.ibv_srq_init_attr_ex;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * The shared receive queue's structs: the attributes written and read where the generated layout
 * puts them, the init attributes (plain and XRC) zeroed around what they set, with comp_mask
 * naming what the XRC form carries, and the granted sizes read back from the embedded attributes.
 */
class SrqCodecsTest {

    @Test
    void attributesWriteAndReadBack() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment attr = new SrqAttr(1024, 4, 16).write(ContextCodecsTest.dirty(arena));
            assertEquals(ibv_srq_attr.layout().byteSize(), attr.byteSize());
            assertEquals(1024, ibv_srq_attr.max_wr(attr));
            assertEquals(4, ibv_srq_attr.max_sge(attr));
            assertEquals(16, ibv_srq_attr.srq_limit(attr));
            assertEquals(new SrqAttr(1024, 4, 16), SrqAttr.read(attr));

            MemorySegment empty = SrqAttr.allocate(ContextCodecsTest.dirty(arena));
            assertEquals(new SrqAttr(0, 0, 0), SrqAttr.read(empty));
            assertEquals(ibv_srq.layout().byteSize(), SrqFields.SIZE);
        }
    }

    @Test
    void initAttributesCarryTheSizesAndReadBackWhatWasGranted() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment init = new SrqInitAttr(new SrqAttr(100, 2, 0)).write(ContextCodecsTest.dirty(arena));
            assertEquals(ibv_srq_init_attr.layout().byteSize(), init.byteSize());
            assertEquals(0, ibv_srq_init_attr.srq_context(init).address());
            MemorySegment attr = ibv_srq_init_attr.attr(init);
            assertEquals(100, ibv_srq_attr.max_wr(attr));
            assertEquals(2, ibv_srq_attr.max_sge(attr));
            assertEquals(0, ibv_srq_attr.srq_limit(attr));
            // the device writes back what it granted
            ibv_srq_attr.max_wr(attr, 128);
            ibv_srq_attr.max_sge(attr, 3);
            assertEquals(new SrqAttr(128, 3, 0), SrqInitAttr.granted(init));
            assertThrows(NullPointerException.class, () -> new SrqInitAttr(null));
        }
    }

    @Test
    void theXrcFormNamesItsDomainsAndCompletionQueue() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment init = new SrqInitAttr(new SrqAttr(64, 1, 0)).writeXrc(ContextCodecsTest.dirty(arena),
                    MemorySegment.ofAddress(0x1000), MemorySegment.ofAddress(0x2000), MemorySegment.ofAddress(0x3000));
            assertEquals(ibv_srq_init_attr_ex.layout().byteSize(), init.byteSize());
            assertEquals(RdmaCore.IBV_SRQ_INIT_ATTR_TYPE() | RdmaCore.IBV_SRQ_INIT_ATTR_PD()
                    | RdmaCore.IBV_SRQ_INIT_ATTR_XRCD() | RdmaCore.IBV_SRQ_INIT_ATTR_CQ(), ibv_srq_init_attr_ex.comp_mask(init));
            assertEquals(RdmaCore.IBV_SRQT_XRC(), ibv_srq_init_attr_ex.srq_type(init));
            assertEquals(0x1000, ibv_srq_init_attr_ex.pd(init).address());
            assertEquals(0x2000, ibv_srq_init_attr_ex.xrcd(init).address());
            assertEquals(0x3000, ibv_srq_init_attr_ex.cq(init).address());
            assertEquals(0, ibv_srq_init_attr_ex.srq_context(init).address());
            MemorySegment tm = ibv_srq_init_attr_ex.tm_cap(init);
            assertArrayEquals(new byte[(int) tm.byteSize()], tm.toArray(ValueLayout.JAVA_BYTE));
            assertEquals(new SrqAttr(64, 1, 0), SrqInitAttr.grantedExtended(init));
        }
    }
}
