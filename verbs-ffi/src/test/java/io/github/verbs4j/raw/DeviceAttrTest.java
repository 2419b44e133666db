package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.ibv_device_attr;
import io.github.verbs4j.ffi.ibv_device_attr_ex;
import io.github.verbs4j.ffi.ibv_odp_caps;
import io.github.verbs4j.ffi.ibv_port_attr;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The device and port attributes read where the generated layouts put them: the firmware
 * string, GUIDs from network byte order, narrow fields unsigned.
 */
class DeviceAttrTest {

    @Test
    void deviceAttributesReadFromTheLayout() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = DeviceAttr.allocate(arena);
            assertEquals(ibv_device_attr.layout().byteSize(), a.byteSize());
            ibv_device_attr.fw_ver(a).setString(0, "1.2.3");
            // the GUID 00:11:22:33:44:55:66:77 as the device stores it: its bytes in network order
            a.set(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN), ibv_device_attr.node_guid$offset(),
                    0x0011223344556677L);
            ibv_device_attr.max_mr_size(a, -1L);
            ibv_device_attr.max_qp(a, 1 << 20);
            ibv_device_attr.device_cap_flags(a, 1 << 20);
            ibv_device_attr.max_srq_sge(a, 31);
            ibv_device_attr.max_pkeys(a, (short) 0xffff);
            ibv_device_attr.local_ca_ack_delay(a, (byte) 200);
            ibv_device_attr.phys_port_cnt(a, (byte) 2);
            ibv_device_attr.max_mw(a, 7);
            DeviceAttr d = DeviceAttr.read(a);
            assertEquals("1.2.3", d.fwVer());
            assertEquals(0x0011223344556677L, d.nodeGuid());
            assertEquals(0, d.sysImageGuid());
            assertEquals(-1L, d.maxMrSize());
            assertEquals(1 << 20, d.maxQp());
            assertEquals(1 << 20, d.deviceCapFlags());
            assertEquals(31, d.maxSrqSge());
            assertEquals(0xffff, d.maxPkeys());
            assertEquals(200, d.localCaAckDelay());
            assertEquals(2, d.physPortCnt());
            assertEquals(7, d.maxMw());
        }
    }

    @Test
    void odpCapabilitiesReadFromTheExtendedLayout() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = DeviceAttr.OdpCaps.allocateExtended(arena);
            assertEquals(ibv_device_attr_ex.layout().byteSize(), a.byteSize());
            MemorySegment caps = ibv_device_attr_ex.odp_caps(a);
            ibv_odp_caps.general_caps(caps, 3L);
            MemorySegment transport = ibv_odp_caps.per_transport_caps(caps);
            ibv_odp_caps.per_transport_caps.rc_odp_caps(transport, 1);
            ibv_odp_caps.per_transport_caps.uc_odp_caps(transport, 2);
            ibv_odp_caps.per_transport_caps.ud_odp_caps(transport, 4);
            ibv_device_attr_ex.xrc_odp_caps(a, 8);
            assertEquals(new DeviceAttr.OdpCaps(3L, 1, 2, 4, 8), DeviceAttr.OdpCaps.read(a));
        }
    }

    @Test
    void portAttributesReadFromTheLayout() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment a = PortAttr.allocate(arena);
            assertEquals(ibv_port_attr.layout().byteSize(), a.byteSize());
            ibv_port_attr.state(a, RdmaCore.IBV_PORT_ACTIVE());
            ibv_port_attr.max_mtu(a, RdmaCore.IBV_MTU_4096());
            ibv_port_attr.active_mtu(a, RdmaCore.IBV_MTU_1024());
            ibv_port_attr.gid_tbl_len(a, 128);
            ibv_port_attr.max_msg_sz(a, 0x80000000);
            ibv_port_attr.pkey_tbl_len(a, (short) 0xffff);
            ibv_port_attr.lid(a, (short) 0xc001);
            ibv_port_attr.lmc(a, (byte) 7);
            ibv_port_attr.phys_state(a, (byte) 5);
            ibv_port_attr.link_layer(a, (byte) RdmaCore.IBV_LINK_LAYER_ETHERNET());
            assertEquals(new PortAttr(RdmaCore.IBV_PORT_ACTIVE(), RdmaCore.IBV_MTU_4096(), RdmaCore.IBV_MTU_1024(), 128,
                    0, 0x80000000L, 0xffff, 0xc001, 0, 7, 0, 0, 5, RdmaCore.IBV_LINK_LAYER_ETHERNET()), PortAttr.read(a));
        }
    }
}
