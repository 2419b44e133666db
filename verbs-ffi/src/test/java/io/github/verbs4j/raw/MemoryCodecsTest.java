package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_mr;
import io.github.verbs4j.ffi.ibv_mw;
import io.github.verbs4j.ffi.ibv_mw_bind;
import io.github.verbs4j.ffi.ibv_mw_bind_info;
import io.github.verbs4j.ffi.ibv_pd;
import io.github.verbs4j.ffi.ibv_sge;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * Memory regions' and windows' structs where the generated layouts put them: a region's range
 * and keys (the implicit ODP region's SIZE_MAX length as -1, keys with the top bit set kept as
 * they are), a window's rkey both ways, a type 1 bind and advise_mr's one-entry scatter list.
 */
class MemoryCodecsTest {

    @Test
    void regionRangeAndKeysReadInPlace() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment mr = arena.allocate(ibv_mr.layout());
            ibv_mr.addr(mr, MemorySegment.ofAddress(0x7f00_1234_5000L));
            ibv_mr.length(mr, 1L << 33);
            ibv_mr.lkey(mr, 0x80000011);
            ibv_mr.rkey(mr, 0xfffffffe);
            MemorySegment sized = MrFields.of(MemorySegment.ofAddress(mr.address()));
            assertEquals(ibv_mr.layout().byteSize(), sized.byteSize());
            assertEquals(new MrFields(0x7f00_1234_5000L, 1L << 33, 0x80000011, 0xfffffffe), MrFields.read(sized));

            // an implicit on-demand region: addr NULL, length SIZE_MAX
            ibv_mr.addr(mr, MemorySegment.NULL);
            ibv_mr.length(mr, -1L);
            MrFields implicit = MrFields.read(sized);
            assertEquals(0, implicit.address());
            assertEquals(-1L, implicit.length());

            // the kernel handles the shared-PD flow names objects by (uint32_t, top bit kept)
            ibv_mr.handle(mr, 0x80000007);
            assertEquals(0x80000007, MrFields.handle(sized));
            MemorySegment pd = arena.allocate(ibv_pd.layout());
            ibv_pd.handle(pd, 0xfffffff0);
            assertEquals(0xfffffff0, ImportOps.pdHandle(MemorySegment.ofAddress(pd.address())));
        }
    }

    @Test
    void windowRkeyBothWays() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment mw = arena.allocate(ibv_mw.layout());
            ibv_mw.rkey(mw, 0x1234_56ff);
            MemorySegment sized = MwFields.of(MemorySegment.ofAddress(mw.address()));
            assertEquals(ibv_mw.layout().byteSize(), sized.byteSize());
            assertEquals(0x1234_56ff, MwFields.rkey(sized));
            MwFields.rkey(sized, 0x8000_0001);
            assertEquals(0x8000_0001, ibv_mw.rkey(mw));
            assertEquals(0, ibv_mw.handle(mw));
        }
    }

    @Test
    void aBindLandsInTheBindAndItsInfo() {
        try (Arena arena = Arena.ofConfined()) {
            int rights = RdmaCore.IBV_ACCESS_REMOTE_READ() | RdmaCore.IBV_ACCESS_REMOTE_WRITE();
            MemorySegment bind = new MwBind(0xdead_beef_cafeL, RdmaCore.IBV_SEND_SIGNALED(), MemorySegment.ofAddress(0x9000),
                    0x7f00_0000_1000L, 1L << 32, rights).write(ContextCodecsTest.dirty(arena));
            assertEquals(ibv_mw_bind.layout().byteSize(), bind.byteSize());
            assertEquals(0xdead_beef_cafeL, ibv_mw_bind.wr_id(bind));
            assertEquals(RdmaCore.IBV_SEND_SIGNALED(), ibv_mw_bind.send_flags(bind));
            MemorySegment info = ibv_mw_bind.bind_info(bind);
            assertEquals(0x9000, ibv_mw_bind_info.mr(info).address());
            assertEquals(0x7f00_0000_1000L, ibv_mw_bind_info.addr(info));
            assertEquals(1L << 32, ibv_mw_bind_info.length(info));
            assertEquals(rights, ibv_mw_bind_info.mw_access_flags(info));

            MemorySegment unsignaled = new MwBind(1, 0, MemorySegment.ofAddress(0x9000), 0, 0, 0)
                    .write(ContextCodecsTest.dirty(arena));
            assertEquals(0, ibv_mw_bind.send_flags(unsignaled));
            assertEquals(0, ibv_mw_bind_info.mw_access_flags(ibv_mw_bind.bind_info(unsignaled)));
            assertThrows(NullPointerException.class, () -> new MwBind(1, 0, null, 0, 0, 0));
        }
    }

    @Test
    void adviseRangeIsOneScatterEntry() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment sge = OdpOps.adviseRange(ContextCodecsTest.dirty(arena), 0x7f00_0000_2000L, 0x8000_0000, 0x42);
            assertEquals(ibv_sge.layout().byteSize(), sge.byteSize());
            assertEquals(0x7f00_0000_2000L, ibv_sge.addr(sge));
            // a uint32_t length of 2 GiB: the bits as C has them
            assertEquals(0x8000_0000, ibv_sge.length(sge));
            assertEquals(0x42, ibv_sge.lkey(sge));
        }
    }
}
