package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_async_event;
import io.github.verbs4j.ffi.ibv_comp_channel;
import io.github.verbs4j.ffi.ibv_context;
import io.github.verbs4j.ffi.ibv_cq_init_attr_ex;
import io.github.verbs4j.ffi.ibv_device;
import io.github.verbs4j.ffi.ibv_gid_entry;
import io.github.verbs4j.ffi.ibv_qp;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * The context-level structs read and written where the generated layouts put them: the fields of
 * {@code ibv_context}, {@code ibv_device}, {@code ibv_qp} and {@code ibv_comp_channel} read in
 * place, GID entries out of an array, an async event's union by member, and the extended CQ's
 * init attributes written over memory that was not zero.
 */
class ContextCodecsTest {

    /** An allocator handing out memory full of 0xff: a writer must zero what it does not set. */
    static SegmentAllocator dirty(Arena arena) {
        MemorySegment block = arena.allocate(4096, 16);
        block.fill((byte) 0xff);
        return SegmentAllocator.slicingAllocator(block);
    }

    @Test
    void contextFieldsAndItsDevice() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment dev = arena.allocate(ibv_device.layout());
            ibv_device.node_type(dev, RdmaCore.IBV_NODE_RNIC());
            ibv_device.transport_type(dev, RdmaCore.IBV_TRANSPORT_IWARP());
            MemorySegment ctx = arena.allocate(ibv_context.layout());
            ibv_context.device(ctx, dev);
            ibv_context.async_fd(ctx, 17);
            ibv_context.num_comp_vectors(ctx, 4);
            ibv_context.cmd_fd(ctx, 23);

            MemorySegment sized = ContextFields.of(MemorySegment.ofAddress(ctx.address()));
            assertEquals(ibv_context.layout().byteSize(), sized.byteSize());
            assertEquals(17, ContextFields.asyncFd(sized));
            assertEquals(4, ContextFields.compVectorCount(sized));
            assertEquals(23, ContextFields.cmdFd(sized));
            MemorySegment device = ContextFields.device(sized);
            assertEquals(dev.address(), device.address());
            assertEquals(ibv_device.layout().byteSize(), device.byteSize());
            assertEquals(RdmaCore.IBV_NODE_RNIC(), DeviceFields.nodeType(device));
            assertEquals(RdmaCore.IBV_TRANSPORT_IWARP(), DeviceFields.transportType(device));
            assertEquals(DeviceFields.SIZE, DeviceFields.of(MemorySegment.ofAddress(dev.address())).byteSize());
        }
    }

    @Test
    void qpAndChannelFieldsReadInPlace() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment qp = arena.allocate(ibv_qp.layout());
            ibv_qp.qp_num(qp, 0xfedcba);
            ibv_qp.state(qp, RdmaCore.IBV_QPS_RTS());
            MemorySegment sized = QpFields.of(MemorySegment.ofAddress(qp.address()));
            assertEquals(ibv_qp.layout().byteSize(), sized.byteSize());
            assertEquals(0xfedcba, QpFields.qpNum(sized));
            assertEquals(RdmaCore.IBV_QPS_RTS(), QpFields.state(sized));
            // a QP number uses 24 bits, but the field is 32: the top bit survives as it is
            ibv_qp.qp_num(qp, 0x80000001);
            assertEquals(0x80000001, QpFields.qpNum(sized));

            MemorySegment ch = arena.allocate(ibv_comp_channel.layout());
            ibv_comp_channel.fd(ch, 23);
            assertEquals(ibv_comp_channel.layout().byteSize(), CompChannelFields.SIZE);
            assertEquals(23, CompChannelFields.fd(ch));
        }
    }

    @Test
    void gidEntriesReadOutOfAnArray() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment entries = GidEntryFields.allocate(dirty(arena), 3);
            assertEquals(3 * ibv_gid_entry.layout().byteSize(), entries.byteSize());
            assertEquals(ibv_gid_entry.layout().byteSize(), GidEntryFields.SIZE);
            assertArrayEquals(new byte[(int) entries.byteSize()], entries.toArray(ValueLayout.JAVA_BYTE));
            MemorySegment second = entries.asSlice(GidEntryFields.SIZE, GidEntryFields.SIZE);
            byte[] gid = new byte[16];
            for (int i = 0; i < gid.length; i++) {
                gid[i] = (byte) (0xf0 + i);
            }
            MemorySegment.copy(gid, 0, ibv_gid_entry.gid(second), ValueLayout.JAVA_BYTE, 0, 16);
            ibv_gid_entry.gid_index(second, 5);
            ibv_gid_entry.port_num(second, 2);
            ibv_gid_entry.gid_type(second, RdmaCore.IBV_GID_TYPE_ROCE_V2());
            ibv_gid_entry.ndev_ifindex(second, 9);
            GidEntryFields e = GidEntryFields.read(entries, 1);
            assertArrayEquals(gid, e.gid());
            assertEquals(5, e.gidIndex());
            assertEquals(2, e.portNum());
            assertEquals(RdmaCore.IBV_GID_TYPE_ROCE_V2(), e.gidType());
            assertEquals(9, e.ndevIfindex());
            GidEntryFields first = GidEntryFields.read(entries, 0);
            assertArrayEquals(new byte[16], first.gid());
            assertEquals(0, first.gidIndex());
            assertThrows(IndexOutOfBoundsException.class, () -> GidEntryFields.read(entries, 3));
        }
    }

    @Test
    void asyncEventReadByUnionMember() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment event = AsyncEventFields.allocate(dirty(arena));
            assertEquals(ibv_async_event.layout().byteSize(), event.byteSize());
            assertEquals(new AsyncEventFields(0, MemorySegment.NULL, MemorySegment.NULL, MemorySegment.NULL, 0),
                    AsyncEventFields.read(event));
            ibv_async_event.event_type(event, RdmaCore.IBV_EVENT_QP_FATAL());
            ibv_async_event.element.qp(ibv_async_event.element(event), MemorySegment.ofAddress(0x1234_5678_9abcL));
            AsyncEventFields qpEvent = AsyncEventFields.read(event);
            assertEquals(RdmaCore.IBV_EVENT_QP_FATAL(), qpEvent.eventType());
            assertEquals(0x1234_5678_9abcL, qpEvent.qp().address());
            // a union: the CQ and SRQ members see the same pointer
            assertEquals(0x1234_5678_9abcL, qpEvent.cq().address());
            assertEquals(0x1234_5678_9abcL, qpEvent.srq().address());

            event.fill((byte) 0);
            ibv_async_event.event_type(event, RdmaCore.IBV_EVENT_PORT_ACTIVE());
            ibv_async_event.element.port_num(ibv_async_event.element(event), 2);
            AsyncEventFields portEvent = AsyncEventFields.read(event);
            assertEquals(RdmaCore.IBV_EVENT_PORT_ACTIVE(), portEvent.eventType());
            assertEquals(2, portEvent.portNum());
        }
    }

    @Test
    void extendedCqAttributesWrittenOverDirtyMemory() {
        try (Arena arena = Arena.ofConfined()) {
            long flags = RdmaCore.IBV_WC_EX_WITH_BYTE_LEN() | RdmaCore.IBV_WC_EX_WITH_IMM();
            MemorySegment attr = new CqInitAttrEx(256, MemorySegment.ofAddress(0x5000), 3, flags).write(dirty(arena));
            assertEquals(ibv_cq_init_attr_ex.layout().byteSize(), attr.byteSize());
            assertEquals(256, ibv_cq_init_attr_ex.cqe(attr));
            assertEquals(0x5000, ibv_cq_init_attr_ex.channel(attr).address());
            assertEquals(3, ibv_cq_init_attr_ex.comp_vector(attr));
            assertEquals(flags, ibv_cq_init_attr_ex.wc_flags(attr));
            assertEquals(0, ibv_cq_init_attr_ex.cq_context(attr).address());
            assertEquals(0, ibv_cq_init_attr_ex.comp_mask(attr));
            assertEquals(0, ibv_cq_init_attr_ex.flags(attr));
            assertEquals(0, ibv_cq_init_attr_ex.parent_domain(attr).address());
            assertThrows(NullPointerException.class, () -> new CqInitAttrEx(1, null, 0, 0));
        }
    }
}
