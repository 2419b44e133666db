package io.github.verbs4j;

import org.junit.jupiter.api.Test;

import java.util.HashSet;
import java.util.List;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code ibv_query_gid_table} ({@link Context#gidTable()}) and {@code ibv_query_gid_ex}
 * ({@link Port#gidEntry(int)}): the whole table in one call agrees entry by entry with the
 * per-index queries, each entry with its port, type and network interface (RoCE). On siw0
 * (iWARP) the table holds the one GID made from the MAC, with type IB and no interface.
 */
class GidTableTest {

    @Test
    void tableAgreesWithThePerIndexQueries() {
        try (Context ctx = Rig.open()) {
            List<GidEntry> table = ctx.gidTable();
            int ports = ctx.queryDevice().physicalPortCount();
            Set<GidEntry> perIndex = new HashSet<>();
            for (int p = 1; p <= ports; p++) {
                perIndex.addAll(ctx.port(p).gids());
            }
            assertFalse(table.isEmpty(), "every port has a GID");
            if (Rig.iwarp(ctx)) {
                // where the per-index query falls back to ibv_query_gid the type is unknown: compare the rest
                assertEquals(keys(perIndex), keys(table), "one call and the per-index queries list the same GIDs");
            } else {
                assertEquals(perIndex, new HashSet<>(table), "one call and the per-index queries list the same entries");
            }
            assertEquals(table.size(), new HashSet<>(table).size(), "no entry twice");
            for (GidEntry e : table) {
                assertTrue(e.port() >= 1 && e.port() <= ports, e.toString());
                assertNotNull(e.type(), e.toString());
                assertFalse(e.gid().isZero(), "only valid entries: " + e);
                if (!Rig.iwarp(ctx)) {
                    assertEquals(e, ctx.port(e.port()).gidEntry(e.index()), "ibv_query_gid_ex of the same index");
                }
                assertEquals(e.gid(), ctx.port(e.port()).gid(e.index()));
                if (Rig.iwarp(ctx)) {
                    // siw0: its one GID, made from the MAC, listed with type IB and no interface
                    assertEquals(GidType.IB, e.type(), e.toString());
                } else if (ctx.port(e.port()).query().linkLayer() == LinkLayer.ETHERNET) {
                    assertTrue(e.ndevIfindex() > 0, "a RoCE entry names its network interface: " + e);
                    assertTrue(e.type() == GidType.ROCE_V1 || e.type() == GidType.ROCE_V2, e.toString());
                }
            }
            if (Rig.onSoftrdma()) {
                // softrdma's table: RoCE v2 entries of port 1 (the link-local GID, then the IPv4 one)
                for (GidEntry e : table) {
                    assertEquals(1, e.port());
                    assertEquals(GidType.ROCE_V2, e.type());
                }
                assertTrue(table.stream().anyMatch(e -> e.gid().isIpv4Mapped()), "an IPv4-mapped GID: " + table);
            }
        }
    }

    private static Set<String> keys(java.util.Collection<GidEntry> entries) {
        Set<String> keys = new HashSet<>();
        for (GidEntry e : entries) {
            keys.add(e.port() + "/" + e.index() + "/" + e.gid());
        }
        return keys;
    }

    @Test
    void indexBeyondTheTableIsRefusedWithItsErrno() {
        try (Context ctx = Rig.open()) {
            Port port = ctx.port(1);
            int length = port.query().gidTableLength();
            VerbsException e = assertThrows(VerbsException.class, () -> port.gidEntry(length));
            assertTrue(e.getMessage().contains("ibv_query_gid"), e.getMessage());
            if (!Rig.iwarp(ctx)) {
                assertTrue(e.is(Errno.EINVAL), e.getMessage());
            }
            assertThrows(IllegalArgumentException.class, () -> ctx.port(0));
            ctx.close();
            assertThrows(IllegalStateException.class, ctx::gidTable);
        }
    }
}
