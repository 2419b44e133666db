package io.github.verbs4j.internal;

import org.junit.jupiter.api.Test;

import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The reading of a caller's timeout: milliseconds rounded up, capped, no negative or null. */
class TimeoutsTest {

    static final long CAP = Long.MAX_VALUE / 4_000_000L;

    @Test
    void millisecondsRoundedUp() {
        assertEquals(0, Timeouts.millis(Duration.ZERO));
        assertEquals(1, Timeouts.millis(Duration.ofNanos(1)));
        assertEquals(1, Timeouts.millis(Duration.ofMillis(1)));
        assertEquals(2, Timeouts.millis(Duration.ofNanos(1_000_001)));
        assertEquals(1500, Timeouts.millis(Duration.ofMillis(1500)));
        assertEquals(20_000, Timeouts.millis(Duration.ofSeconds(20)));
        assertEquals(20_001, Timeouts.millis(Duration.ofSeconds(20, 1)));
        assertEquals(21_000, Timeouts.millis(Duration.ofSeconds(20, 999_999_999)));
    }

    @Test
    void cappedSoThatTheDeadlineCannotOverflow() {
        assertEquals(CAP - 1, Timeouts.millis(Duration.ofMillis(CAP - 1)));
        assertEquals(CAP, Timeouts.millis(Duration.ofMillis(CAP - 1).plusNanos(1)));
        assertEquals(CAP, Timeouts.millis(Duration.ofMillis(CAP)));
        assertEquals(CAP, Timeouts.millis(Duration.ofDays(365L * 1000)));
        assertEquals(CAP, Timeouts.millis(Duration.ofSeconds(Long.MAX_VALUE, 999_999_999)));
        long now = System.nanoTime();
        long deadline = Timeouts.deadline(Duration.ofSeconds(Long.MAX_VALUE));
        assertTrue(deadline - now > 0, "the deadline wrapped around");
    }

    @Test
    void negativeAndNullAreRefused() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Timeouts.millis(Duration.ofNanos(-1)));
        assertTrue(e.getMessage().startsWith("negative timeout PT-0.000000001S"), e.getMessage());
        assertThrows(NullPointerException.class, () -> Timeouts.millis(null));
    }
}
