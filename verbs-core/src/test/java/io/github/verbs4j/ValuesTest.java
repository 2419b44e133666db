package io.github.verbs4j;

import io.github.verbs4j.raw.VerbsConstants;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The value types and their stable encodings (no device needed). */
class ValuesTest {

    private static final Gid GID = Gid.parse("0000:0000:0000:0000:0000:ffff:0a00:020f");

    @Test
    void gidFormsAndIpv4Mapping() throws Exception {
        assertEquals("0000:0000:0000:0000:0000:ffff:0a00:020f", GID.toString());
        assertEquals("00000000000000000000ffff0a00020f", GID.toHex());
        assertEquals(GID, Gid.parse(GID.toHex()));
        assertEquals(GID, Gid.of(InetAddress.getByName("10.0.2.15")));
        assertTrue(GID.isIpv4Mapped());
        assertEquals(InetAddress.getByName("10.0.2.15"), GID.toInetAddress());
        Gid v6 = Gid.of(InetAddress.getByName("fe80::1"));
        assertEquals("fe80:0000:0000:0000:0000:0000:0000:0001", v6.toString());
        assertFalse(v6.isIpv4Mapped());
        assertTrue(Gid.ZERO.isZero());
        assertThrows(IllegalArgumentException.class, () -> Gid.parse("fe80::1"));
        assertThrows(IllegalArgumentException.class, () -> Gid.of(new byte[15]));
        byte[] raw = GID.bytes();
        raw[0] = 1;
        assertEquals(0, GID.bytes()[0], "a Gid is immutable: bytes() is a copy");
    }

    @Test
    void endpointTextAndBytesRoundTrip() {
        Endpoint e = new Endpoint(0x12, 0xabcdef, 0x123456, GID);
        assertEquals("0012:abcdef:123456:00000000000000000000ffff0a00020f", e.toString());
        assertEquals(e, Endpoint.parse(e.toString()));
        byte[] bytes = e.toBytes();
        assertEquals(Endpoint.BYTES, bytes.length);
        assertArrayEquals(new byte[] {0x00, 0x12, 0x00, (byte) 0xab, (byte) 0xcd, (byte) 0xef, 0x00, 0x12, 0x34, 0x56},
                java.util.Arrays.copyOf(bytes, 10), "big-endian LID, QPN, PSN");
        assertEquals(e, Endpoint.fromBytes(bytes));
        assertThrows(IllegalArgumentException.class, () -> new Endpoint(0, 1 << 24, 0, GID));
        assertThrows(IllegalArgumentException.class, () -> Endpoint.parse("12:34"));
        assertThrows(IllegalArgumentException.class, () -> Endpoint.fromBytes(new byte[25]));
    }

    @Test
    void remoteBufferTextBytesAndSlices() {
        RemoteBuffer b = new RemoteBuffer(0x7f00_1234_5000L, 65536, 0xdeadbeef);
        assertEquals("00007f0012345000:0000000000010000:deadbeef", b.toString());
        assertEquals(b, RemoteBuffer.parse(b.toString()));
        assertEquals(b, RemoteBuffer.fromBytes(b.toBytes()));
        assertEquals(new RemoteBuffer(0x7f00_1234_5100L, 16, 0xdeadbeef), b.slice(0x100, 16));
        assertThrows(IndexOutOfBoundsException.class, () -> b.slice(65530, 16));
    }

    @Test
    void statusAndOpcodeLookupsMatchTheCValues() {
        assertSame(WcStatus.SUCCESS, WcStatus.of(0));
        assertSame(WcStatus.LOCAL_PROTECTION_ERROR, WcStatus.of(4));
        assertSame(WcStatus.WR_FLUSH_ERROR, WcStatus.of(5));
        assertSame(WcStatus.REMOTE_ACCESS_ERROR, WcStatus.of(10));
        assertSame(WcStatus.RNR_RETRY_EXCEEDED, WcStatus.of(13));
        assertSame(WcStatus.UNKNOWN, WcStatus.of(999));
        assertSame(WcStatus.UNKNOWN, WcStatus.of(-3));
        assertEquals("IBV_WC_RNR_RETRY_EXC_ERR", WcStatus.RNR_RETRY_EXCEEDED.cName());
        for (WcStatus s : WcStatus.values()) {
            if (s != WcStatus.UNKNOWN) {
                assertSame(s, WcStatus.of(s.value()));
            }
        }
        for (WcOpcode o : WcOpcode.values()) {
            if (o != WcOpcode.UNKNOWN) {
                assertSame(o, WcOpcode.of(o.value()), o::name);
            }
        }
        assertEquals(128, WcOpcode.RECV.value());
        assertEquals(0, SendOpcode.RDMA_WRITE.value());
        assertEquals(2, SendOpcode.SEND.value());
        assertSame(Mtu.MTU_4096, Mtu.of(5));
        assertEquals(Access.LOCAL_WRITE.flag() | Access.REMOTE_READ.flag(),
                Access.mask(java.util.EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_READ)));
        assertEquals(java.util.EnumSet.of(Access.REMOTE_WRITE), Access.fromMask(2));
    }

    @Test
    void qpAttrRangesAreChecked() {
        assertThrows(IllegalArgumentException.class, () -> new QpAttr().port(0));
        assertThrows(IllegalArgumentException.class, () -> new QpAttr().rqPsn(1 << 24));
        assertThrows(IllegalArgumentException.class, () -> new QpAttr().rnrRetry(8));
        assertThrows(IllegalArgumentException.class, () -> new QpAttr().timeout(32));
        assertEquals("QpAttr[port (IBV_QP_PORT), qkey (IBV_QP_QKEY)]", new QpAttr().qkey(1).port(1).toString());
    }

    @Test
    void transportTypesAreRdmaCoresValues() {
        assertEquals(VerbsConstants.IBV_TRANSPORT_UNKNOWN, TransportType.UNKNOWN.value());
        assertEquals(VerbsConstants.IBV_TRANSPORT_IB, TransportType.IB.value());
        assertEquals(VerbsConstants.IBV_TRANSPORT_IWARP, TransportType.IWARP.value());
        assertEquals(VerbsConstants.IBV_TRANSPORT_USNIC, TransportType.USNIC.value());
        assertEquals(VerbsConstants.IBV_TRANSPORT_USNIC_UDP, TransportType.USNIC_UDP.value());
        assertEquals(VerbsConstants.IBV_TRANSPORT_UNSPECIFIED, TransportType.UNSPECIFIED.value());
        assertSame(TransportType.IWARP, TransportType.of(1));
        assertSame(TransportType.UNKNOWN, TransportType.of(99));
        assertSame(TransportType.IWARP, new Device("x", 0, 4, 1).transport());
    }
}
