package io.github.verbs4j;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The toolkit the layers above core build their lifecycles with: Closer, Deadline, CloseState. */
class ToolkitTest {

    @Test
    void closerClosesInReverseAndKeepsEveryFailure() {
        List<String> order = new ArrayList<>();
        IllegalStateException second = new IllegalStateException("b failed");
        IllegalArgumentException third = new IllegalArgumentException("a failed");
        Closer closer = new Closer();
        closer.register(() -> { order.add("a"); throw third; });
        closer.register(() -> { order.add("b"); throw second; });
        closer.register(() -> order.add("c"));
        RuntimeException e = assertThrows(RuntimeException.class, closer::close);
        assertSame(second, e, "the first failure (in closing order) is thrown as it is");
        assertArrayEquals(new Throwable[] {third}, e.getSuppressed());
        assertEquals(List.of("c", "b", "a"), order);
        closer.close(); // a second close closes nothing
        assertEquals(3, order.size());
    }

    @Test
    void closerWrapsCheckedFailuresOnceAndAddsToAPrimary() {
        IOException io = new IOException("disk");
        Closer c1 = new Closer();
        c1.register(() -> { throw io; });
        IllegalStateException wrapped = assertThrows(IllegalStateException.class, c1::close);
        assertSame(io, wrapped.getCause());

        List<String> order = new ArrayList<>();
        RuntimeException primary = new RuntimeException("open failed");
        Closer c2 = new Closer();
        c2.register(() -> order.add("x"));
        c2.register(() -> { throw io; });
        c2.closeSuppressingInto(primary);
        assertEquals(List.of("x"), order);
        assertArrayEquals(new Throwable[] {io}, primary.getSuppressed());
    }

    @Test
    void closeAllClosesInOrderAndSkipsNulls() {
        List<String> order = new ArrayList<>();
        AutoCloseable a = () -> order.add("a");
        AutoCloseable b = () -> order.add("b");
        Closer.closeAll(Arrays.asList(a, null, b));
        assertEquals(List.of("a", "b"), order);
        assertThrows(NullPointerException.class, () -> new Closer().register(null));
    }

    @Test
    void deadlineReadsTheTimeoutAsEveryTimedMethodDoes() {
        assertThrows(NullPointerException.class, () -> Deadline.after(null));
        assertThrows(IllegalArgumentException.class, () -> Deadline.after(Duration.ofMillis(-1)));
        Deadline now = Deadline.after(Duration.ZERO);
        assertTrue(now.expired());
        assertEquals(Duration.ZERO, now.remaining());
        assertEquals(0, now.remainingMillis());
        Deadline later = Deadline.after(Duration.ofHours(1));
        assertFalse(later.expired());
        long left = later.remainingMillis();
        assertTrue(left > 3_590_000 && left <= 3_600_000, "left " + left);
        Deadline forever = Deadline.after(Duration.ofSeconds(Long.MAX_VALUE));
        assertFalse(forever.expired(), "a huge timeout does not overflow into the past");
        assertTrue(forever.remainingNanos() > 0);
    }

    @Test
    void timeoutsAreTypedAndNameAVerbOnlyWhenOneTimedOut() {
        Deadline d = Deadline.after(Duration.ofMillis(250));
        RdmaTimeoutException own = d.timedOut("3 more ranks");
        assertNull(own.verb());
        assertTrue(own.is(Errno.ETIMEDOUT));
        assertEquals("timed out after 250 ms waiting for 3 more ranks (ETIMEDOUT)", own.getMessage());
        assertEquals(Duration.ofMillis(250), own.timeout());
        assertEquals("3 more ranks", own.awaited());

        RdmaTimeoutException verb = d.timedOut("ibv_poll_cq", "a completion");
        assertEquals("ibv_poll_cq", verb.verb());
        assertEquals("timed out after 250 ms waiting for a completion (ibv_poll_cq: ETIMEDOUT)", verb.getMessage());
        assertInstanceOf(RdmaTimeoutException.class,
                VerbsException.timedOut("rdma_get_cm_event", "an event", Duration.ofSeconds(1)));
        assertInstanceOf(RdmaException.class, own);
    }

    @Test
    void closeStateLetsOnlyTheFirstCloseRelease() {
        CloseState s = new CloseState();
        s.ensureOpen("Owner[x]");
        assertFalse(s.isClosed());
        assertTrue(s.beginClose());
        assertTrue(s.isClosed());
        assertFalse(s.beginClose());
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> s.ensureOpen("Owner[x]"));
        assertEquals("Owner[x] is closed", e.getMessage());
    }
}
