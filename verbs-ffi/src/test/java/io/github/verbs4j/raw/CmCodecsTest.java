package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_ah_attr;
import io.github.verbs4j.ffi.rdma_cm_event;
import io.github.verbs4j.ffi.rdma_cm_id;
import io.github.verbs4j.ffi.rdma_conn_param;
import io.github.verbs4j.ffi.rdma_event_channel;
import io.github.verbs4j.ffi.rdma_ud_param;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.HashSet;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The encodings of librdmacm's structs: connection parameters both ways (private data copied,
 * NULL when empty, byte fields unsigned), the UD parameters and the event read where the
 * generated layouts put them, and the id and channel fields verbs-cm reads.
 */
class CmCodecsTest {

    @Test
    void connectionParametersWriteAndReadBack() {
        byte[] data = {1, 2, 3, (byte) 0xff};
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment cp = new ConnParam(data, 200, 3, 7, 6, 0x123456).write(arena);
            assertEquals(rdma_conn_param.layout().byteSize(), cp.byteSize());
            assertEquals(4, rdma_conn_param.private_data_len(cp));
            assertArrayEquals(data, rdma_conn_param.private_data(cp).reinterpret(4).toArray(ValueLayout.JAVA_BYTE));
            assertEquals((byte) 200, rdma_conn_param.responder_resources(cp));
            assertEquals(3, rdma_conn_param.initiator_depth(cp));
            assertEquals(7, rdma_conn_param.retry_count(cp));
            assertEquals(6, rdma_conn_param.rnr_retry_count(cp));
            assertEquals(0x123456, rdma_conn_param.qp_num(cp));
            assertEquals(0, rdma_conn_param.flow_control(cp));
            ConnParam back = ConnParam.read(cp);
            assertArrayEquals(data, back.privateData());
            assertEquals(200, back.responderResources());
            assertEquals(new ConnParam(back.privateData(), 200, 3, 7, 6, 0x123456), back);
        }
    }

    @Test
    void noPrivateDataIsANullPointerAndReadsEmpty() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment cp = new ConnParam(new byte[0], 1, 1, 7, 7, 0).write(arena);
            assertEquals(0, rdma_conn_param.private_data(cp).address());
            assertEquals(0, rdma_conn_param.private_data_len(cp));
            assertEquals(0, ConnParam.read(cp).privateData().length);
        }
        assertThrows(IllegalArgumentException.class, () -> new ConnParam(new byte[256], 1, 1, 7, 7, 0));
    }

    @Test
    void anEventAndItsUdParametersReadFromTheLayout() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ev = arena.allocate(rdma_cm_event.layout());
            rdma_cm_event.event(ev, RdmaCore.RDMA_CM_EVENT_ESTABLISHED());
            rdma_cm_event.status(ev, -110);
            rdma_cm_event.id(ev, MemorySegment.ofAddress(0x7000));
            rdma_cm_event.listen_id(ev, MemorySegment.ofAddress(0x8000));
            MemorySegment ud = rdma_cm_event.param(ev);
            byte[] data = {9, 8, 7};
            rdma_ud_param.private_data(ud, arena.allocateFrom(ValueLayout.JAVA_BYTE, data));
            rdma_ud_param.private_data_len(ud, (byte) 3);
            rdma_ud_param.qp_num(ud, 0xabcdef);
            rdma_ud_param.qkey(ud, 0x11111111);
            ibv_ah_attr.port_num(rdma_ud_param.ah_attr(ud), (byte) 1);
            ibv_ah_attr.dlid(rdma_ud_param.ah_attr(ud), (short) 0x1234);

            CmEventFields read = CmEventFields.read(MemorySegment.ofAddress(ev.address()));
            assertEquals(CmStructs.EVENT_ESTABLISHED, read.event());
            assertEquals(-110, read.status());
            assertEquals(0x7000, read.id().address());
            assertEquals(0x8000, read.listenId().address());
            UdParam param = UdParam.read(read.param());
            assertArrayEquals(data, param.privateData());
            assertEquals(0xabcdef, param.qpNum());
            assertEquals(0x11111111, param.qkey());
            assertEquals(1, param.ahAttr().portNum());
            assertEquals(0x1234, param.ahAttr().dlid());
        }
    }

    @Test
    void idAndChannelFieldsReadFromTheLayout() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment id = arena.allocate(rdma_cm_id.layout());
            rdma_cm_id.verbs(id, MemorySegment.ofAddress(0x9000));
            rdma_cm_id.qp(id, MemorySegment.ofAddress(0xa000));
            rdma_cm_id.port_num(id, (byte) 200);
            assertEquals(0x9000, CmStructs.idVerbs(id).address());
            assertEquals(0xa000, CmStructs.idQp(id).address());
            assertEquals(200, CmStructs.idPortNum(id));
            assertEquals(rdma_cm_id.layout().byteSize(), CmStructs.ID_SIZE);
            long storage = SocketAddresses.STORAGE_SIZE;
            assertTrue(CmStructs.ID_SRC_ADDR + storage <= CmStructs.ID_DST_ADDR);
            assertTrue(CmStructs.ID_DST_ADDR + storage <= CmStructs.ID_SIZE);

            MemorySegment ch = arena.allocate(rdma_event_channel.layout());
            rdma_event_channel.fd(ch, 42);
            assertEquals(42, CmStructs.eventChannelFd(ch));
        }
    }

    @Test
    void theEnumValuesAreDistinct() {
        int[] events = {CmStructs.EVENT_ADDR_RESOLVED, CmStructs.EVENT_ADDR_ERROR, CmStructs.EVENT_ROUTE_RESOLVED,
                CmStructs.EVENT_ROUTE_ERROR, CmStructs.EVENT_CONNECT_REQUEST, CmStructs.EVENT_CONNECT_RESPONSE,
                CmStructs.EVENT_CONNECT_ERROR, CmStructs.EVENT_UNREACHABLE, CmStructs.EVENT_REJECTED,
                CmStructs.EVENT_ESTABLISHED, CmStructs.EVENT_DISCONNECTED, CmStructs.EVENT_DEVICE_REMOVAL,
                CmStructs.EVENT_MULTICAST_JOIN, CmStructs.EVENT_MULTICAST_ERROR, CmStructs.EVENT_ADDR_CHANGE,
                CmStructs.EVENT_TIMEWAIT_EXIT};
        Set<Integer> seen = new HashSet<>();
        for (int e : events) {
            assertTrue(seen.add(e));
        }
        // enum rdma_cm_event_type counts from 0 in rdma_cma.h
        assertEquals(0, CmStructs.EVENT_ADDR_RESOLVED);
        assertEquals(15, CmStructs.EVENT_TIMEWAIT_EXIT);
        assertEquals(0x0106, CmStructs.PS_TCP);
        assertEquals(0x0111, CmStructs.PS_UDP);
    }
}
