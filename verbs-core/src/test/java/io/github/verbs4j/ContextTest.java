package io.github.verbs4j;

import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Devices, device and port queries, GID and P_Key tables on softrdma. */
class ContextTest {

    @Test
    void openByNameFirstOrDevice() throws Exception {
        Device first = Verbs.devices().getFirst();
        try (Context a = Verbs.open(first.name()); Context b = first.open(); Context c = Verbs.openFirst()) {
            assertEquals(first.name(), a.device().name());
            assertEquals(first.guid(), b.device().guid());
            assertEquals(first.name(), c.device().name());
            assertTrue(a.asyncFd() >= 0);
            assertTrue(a.completionVectorCount() >= 1);
        }
    }

    @Test
    void queryDevice() {
        try (Context ctx = Rig.open()) {
            DeviceAttributes d = ctx.queryDevice();
            assertEquals(ctx.device().guid(), d.nodeGuid(), "node GUID in host order, as Device reports it");
            assertTrue(d.physicalPortCount() >= 1);
            assertTrue(d.maxQp() > 0 && d.maxQpWr() > 0 && d.maxCqe() > 0 && d.maxSge() > 0, d::toString);
            assertTrue(d.maxMrSize() != 0, d::toString); // unsigned: rxe and softrdma report UINT64_MAX
            assertNotNull(d.firmwareVersion());
        }
    }

    @Test
    void queryPortThroughTheExtendedOp() {
        try (Context ctx = Rig.open()) {
            assertTrue(ctx.hasExtendedQueryPort(), "softrdma provides verbs_context->query_port");
            PortAttributes p = ctx.port(1).query();
            assertTrue(p.extended());
            assertEquals(PortState.ACTIVE, p.state());
            assertEquals(LinkLayer.ETHERNET, p.linkLayer());
            assertTrue(p.needsGrh());
            assertEquals(0, p.lid(), "RoCE ports have no LID");
            // RoCE: link-local and IPv4-mapped GIDs at least; iWARP: the one GID made from the MAC
            assertTrue(p.gidTableLength() >= (Rig.iwarp(ctx) ? 1 : 2), p::toString);
            assertTrue(p.activeMtu().bytes() <= p.maxMtu().bytes(), p::toString);
            assertTrue(p.maxMessageSize() > 0, p::toString);
            assertThrows(IllegalArgumentException.class, () -> ctx.port(0));
        }
    }

    @Test
    void aMissingPortIsEinval() {
        try (Context ctx = Rig.open()) {
            VerbsException e = assertThrows(VerbsException.class, () -> ctx.port(7).query());
            assertEquals("ibv_query_port", e.verb());
            assertEquals(Errno.EINVAL, e.error());
        }
    }

    @Test
    void compatFallbackAgreesWithTheExtendedOp() {
        try (Context ctx = Rig.open()) {
            assertTrue(ctx.hasExtendedQueryPort(), "both paths are compared only where both exist");
            PortAttributes extended = ctx.queryPort(1, true);
            PortAttributes compat = ctx.queryPort(1, false);
            assertTrue(extended.extended());
            assertFalse(compat.extended(), "the compat export filled these");
            // every field verbs4j reads lies in the compat prefix of ibv_port_attr: the two agree
            assertEquals(new PortAttributes(extended.state(), extended.maxMtu(), extended.activeMtu(),
                    extended.gidTableLength(), extended.portCapFlags(), extended.maxMessageSize(),
                    extended.pkeyTableLength(), extended.lid(), extended.smLid(), extended.lmc(),
                    extended.activeWidth(), extended.activeSpeed(), extended.physicalState(), extended.linkLayer(),
                    false), compat);
            assertEquals(extended, ctx.port(1).query(), "the public query takes the extended op when present");

            // the compat path reports failures under its own name, with the provider's errno
            VerbsException e = assertThrows(VerbsException.class, () -> ctx.queryPort(7, false));
            assertEquals("ibv_query_port (compat)", e.verb());
            assertEquals(Errno.EINVAL, e.error());
        }
    }

    @Test
    void gidTableHoldsTheIpv4AddressAsRoceV2() {
        try (Context ctx = Rig.open()) {
            Rig.assumeNotIwarp(ctx, "it has no RoCE GIDs (its one GID is made from the MAC address; rdma_cm"
                    + " takes addresses from the IP stack)");
            Port port = ctx.port(1);
            Gid gid1 = port.gid(1);
            assertTrue(gid1.isIpv4Mapped(), "GID 1 is ::ffff:<IPv4>: " + gid1);
            GidEntry e1 = port.gidEntry(1);
            assertEquals(gid1, e1.gid());
            assertEquals(GidType.ROCE_V2, e1.type());
            List<GidEntry> all = port.gids();
            assertTrue(all.contains(e1), all::toString);
            for (GidEntry e : all) {
                assertFalse(e.gid().isZero());
            }
            InetAddress ip = gid1.toInetAddress();
            GidEntry chosen = port.gidFor(ip);
            assertEquals(gid1, chosen.gid());
            assertEquals(GidType.ROCE_V2, chosen.type());
        }
    }

    @Test
    void gidForAnAddressNotOnThePortNamesTheTable() throws Exception {
        try (Context ctx = Rig.open()) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> ctx.port(1).gidFor(InetAddress.getByName("203.0.113.99")));
            assertTrue(e.getMessage().contains("holds 203.0.113.99"), e.getMessage());
        }
    }

    @Test
    void gidBeyondTheTableIsAnError() {
        try (Context ctx = Rig.open()) {
            VerbsException e = assertThrows(VerbsException.class, () -> ctx.port(1).gid(5000));
            assertEquals("ibv_query_gid_ex", e.verb());
            assertEquals(Errno.EINVAL, e.error());
        }
    }

    @Test
    void pkeyTableHasTheDefaultKey() {
        try (Context ctx = Rig.open()) {
            Rig.assumeNotIwarp(ctx, "it has no P_Key table (ibv_query_pkey: ENOENT, pkey_tbl_len 0)");
            assertEquals(0xffff, ctx.port(1).pkey(0));
            List<Integer> pkeys = ctx.port(1).pkeys();
            assertEquals(ctx.port(1).query().pkeyTableLength(), pkeys.size());
            assertEquals(0xffff, pkeys.getFirst());
        }
    }

    @Test
    void dmabufRegistrationIsBoundAndReportsTheDevicesAnswer() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd()) {
            VerbsException e = assertThrows(VerbsException.class,
                    () -> pd.registerDmabuf(0, 4096, 0, 0, Access.LOCAL_WRITE));
            assertEquals("ibv_reg_dmabuf_mr", e.verb());
            assertEquals(Errno.EOPNOTSUPP, e.error(), "softrdma cannot map dma-bufs");
        }
    }

    @Test
    void memoryRegionKeysAndRemoteView() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd();
             MemoryRegion mr = pd.allocate(8192, Access.LOCAL_WRITE, Access.REMOTE_READ)) {
            assertEquals(0, mr.address() % 4096, "library-allocated memory is page aligned");
            assertEquals(8192, mr.length());
            assertEquals(mr.address(), mr.segment().address());
            RemoteBuffer rb = mr.remote();
            assertEquals(new RemoteBuffer(mr.address(), 8192, mr.rkey()), rb);
            assertEquals(mr.address() + 100, mr.slice(100, 10).address());
            assertEquals(10, mr.slice(100, 10).segment().byteSize());
            assertEquals(java.util.Set.of(Access.LOCAL_WRITE, Access.REMOTE_READ), mr.access());
        }
    }
}
