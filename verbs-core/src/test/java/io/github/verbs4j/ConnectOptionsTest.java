package io.github.verbs4j;

import org.junit.jupiter.api.Test;

import java.util.EnumSet;
import java.util.Set;
import java.util.function.Supplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link ConnectOptions} as a value (defaults, one wither per field, validation where the
 * options are made), and its values reaching the queue pair (softrdma).
 */
class ConnectOptionsTest {

    private static final Set<Access> REMOTE_ALL = EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC);

    @Test
    void defaultsAreTheDocumentedValues() {
        ConnectOptions d = ConnectOptions.defaults();
        assertEquals(1, d.port());
        assertEquals(0, d.pkeyIndex());
        assertEquals(ConnectOptions.AUTOMATIC_GID_INDEX, d.gidIndex());
        assertEquals(-1, ConnectOptions.AUTOMATIC_GID_INDEX);
        assertNull(d.mtu(), "null: the port's active MTU");
        assertEquals(REMOTE_ALL, d.access());
        assertEquals(14, d.timeout());
        assertEquals(7, d.retryCount());
        assertEquals(7, d.rnrRetry());
        assertEquals(12, d.minRnrTimer());
        assertEquals(1, d.maxRdAtomic());
        assertEquals(1, d.maxDestRdAtomic());
        assertEquals(0x11111111, d.qkey());
        assertEquals(ConnectOptions.DEFAULT_QKEY, d.qkey());
        assertEquals(0, d.serviceLevel());
    }

    @Test
    void eachWitherChangesItsFieldOnlyAndLeavesTheOriginalAlone() {
        ConnectOptions d = ConnectOptions.defaults();
        assertEquals(new ConnectOptions(2, 0, -1, null, REMOTE_ALL, 14, 7, 7, 12, 1, 1, 0x11111111, 0), d.withPort(2));
        assertEquals(new ConnectOptions(1, 3, -1, null, REMOTE_ALL, 14, 7, 7, 12, 1, 1, 0x11111111, 0), d.withPkeyIndex(3));
        assertEquals(new ConnectOptions(1, 0, 4, null, REMOTE_ALL, 14, 7, 7, 12, 1, 1, 0x11111111, 0), d.withGidIndex(4));
        assertEquals(new ConnectOptions(1, 0, -1, Mtu.MTU_1024, REMOTE_ALL, 14, 7, 7, 12, 1, 1, 0x11111111, 0),
                d.withMtu(Mtu.MTU_1024));
        assertEquals(new ConnectOptions(1, 0, -1, null, Set.of(Access.REMOTE_READ), 14, 7, 7, 12, 1, 1, 0x11111111, 0),
                d.withAccess(Access.REMOTE_READ));
        assertEquals(new ConnectOptions(1, 0, -1, null, REMOTE_ALL, 20, 7, 7, 12, 1, 1, 0x11111111, 0), d.withTimeout(20));
        assertEquals(new ConnectOptions(1, 0, -1, null, REMOTE_ALL, 14, 3, 7, 12, 1, 1, 0x11111111, 0), d.withRetryCount(3));
        assertEquals(new ConnectOptions(1, 0, -1, null, REMOTE_ALL, 14, 7, 0, 12, 1, 1, 0x11111111, 0), d.withRnrRetry(0));
        assertEquals(new ConnectOptions(1, 0, -1, null, REMOTE_ALL, 14, 7, 7, 5, 1, 1, 0x11111111, 0), d.withMinRnrTimer(5));
        assertEquals(new ConnectOptions(1, 0, -1, null, REMOTE_ALL, 14, 7, 7, 12, 8, 1, 0x11111111, 0), d.withMaxRdAtomic(8));
        assertEquals(new ConnectOptions(1, 0, -1, null, REMOTE_ALL, 14, 7, 7, 12, 1, 9, 0x11111111, 0), d.withMaxDestRdAtomic(9));
        assertEquals(new ConnectOptions(1, 0, -1, null, REMOTE_ALL, 14, 7, 7, 12, 1, 1, 0x80000001, 0), d.withQkey(0x80000001));
        assertEquals(new ConnectOptions(1, 0, -1, null, REMOTE_ALL, 14, 7, 7, 12, 1, 1, 0x11111111, 15), d.withServiceLevel(15));
        assertEquals(d, ConnectOptions.defaults(), "the withers made new options; the defaults are unchanged");
        assertEquals(new ConnectOptions(1, 0, -1, null, REMOTE_ALL, 14, 7, 7, 12, 1, 1, 0x11111111, 0), d);
        assertEquals(d.hashCode(), d.withPort(2).withPort(1).hashCode());
        assertNotEquals(d, d.withMtu(Mtu.MTU_256));
        assertEquals(d, d.withMtu(Mtu.MTU_256).withMtu(null), "withMtu(null) returns to the port's active MTU");
    }

    @Test
    void eachValueIsCheckedWhereTheOptionsAreMade() {
        ConnectOptions d = ConnectOptions.defaults();
        rejects("port must be within 1..255, got 0", () -> d.withPort(0));
        rejects("port must be within 1..255, got 256", () -> d.withPort(256));
        rejects("pkeyIndex must be within 0..65535, got 65536", () -> d.withPkeyIndex(65536));
        rejects("gidIndex must be within -1..255, got -2", () -> d.withGidIndex(-2));
        rejects("gidIndex must be within -1..255, got 256", () -> d.withGidIndex(256));
        rejects("timeout must be within 0..31, got 32", () -> d.withTimeout(32));
        rejects("retryCount must be within 0..7, got 8", () -> d.withRetryCount(8));
        rejects("rnrRetry must be within 0..7, got -1", () -> d.withRnrRetry(-1));
        rejects("minRnrTimer must be within 0..31, got 32", () -> d.withMinRnrTimer(32));
        rejects("maxRdAtomic must be within 0..255, got 256", () -> d.withMaxRdAtomic(256));
        rejects("maxDestRdAtomic must be within 0..255, got -1", () -> d.withMaxDestRdAtomic(-1));
        rejects("serviceLevel must be within 0..15, got 16", () -> d.withServiceLevel(16));
        rejects("timeout must be within 0..31, got 40",
                () -> new ConnectOptions(1, 0, -1, null, Set.of(), 40, 7, 7, 12, 1, 1, 0, 0));
        assertThrows(NullPointerException.class, () -> d.withAccess(Access.REMOTE_READ, null));
        assertThrows(NullPointerException.class,
                () -> new ConnectOptions(1, 0, -1, null, null, 14, 7, 7, 12, 1, 1, 0, 0));
        assertEquals(0, d.withQkey(0).qkey());
        assertEquals(-1, d.withQkey(-1).qkey(), "a Q_Key is any 32 bits");
    }

    @Test
    void accessIsCopiedAndUnmodifiable() {
        EnumSet<Access> mine = EnumSet.of(Access.REMOTE_WRITE);
        ConnectOptions o = new ConnectOptions(1, 0, -1, null, mine, 14, 7, 7, 12, 1, 1, 0, 0);
        mine.add(Access.REMOTE_READ);
        assertEquals(Set.of(Access.REMOTE_WRITE), o.access(), "the options keep their own copy");
        assertThrows(UnsupportedOperationException.class, () -> o.access().add(Access.REMOTE_ATOMIC));
        assertTrue(ConnectOptions.defaults().withAccess().access().isEmpty(), "no arguments: no remote access");
        assertEquals("[REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC]", ConnectOptions.defaults().access().toString(),
                "in the enum's order, so toString is stable");
    }

    @Test
    void theValuesReachTheQueuePair() {
        ConnectOptions options = ConnectOptions.defaults().withMtu(Mtu.MTU_1024).withAccess(Access.REMOTE_READ)
                .withTimeout(17).withRetryCount(5).withRnrRetry(3).withMinRnrTimer(9).withMaxRdAtomic(2)
                // powers of two: the kernel's rxe rounds both READ/atomic depths up to one
                // (rxe_qp.c, roundup_pow_of_two), so 3 reads back as 4 there
                .withMaxDestRdAtomic(4);
        try (Rig rig = Rig.create(QpType.RC, options, Access.LOCAL_WRITE)) {
            for (QueuePair qp : new QueuePair[] {rig.a, rig.b}) {
                QpAttributes q = qp.query();
                assertEquals(QpState.RTS, q.state());
                assertEquals(1, q.portNumber());
                assertEquals(0, q.pkeyIndex());
                assertEquals(Mtu.MTU_1024, q.pathMtu());
                assertEquals(Set.of(Access.REMOTE_READ), q.access());
                assertEquals(17, q.timeout());
                assertEquals(5, q.retryCount());
                assertEquals(3, q.rnrRetry());
                assertEquals(9, q.minRnrTimer());
                assertEquals(2, q.maxRdAtomic());
                assertEquals(4, q.maxDestRdAtomic());
            }
        }
        try (Rig rig = Rig.create(QpType.UD, ConnectOptions.defaults().withQkey(0x2468ace0), Access.LOCAL_WRITE)) {
            assertEquals(0x2468ace0, rig.a.query().qkey());
            assertEquals(QpState.RTS, rig.b.query().state());
        }
    }

    private static void rejects(String message, Supplier<ConnectOptions> make) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, make::get);
        assertEquals(message, e.getMessage());
    }
}
