package io.github.verbs4j.netty;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** {@link RdmaTransportOptions} as a value: defaults, a wither per field, validation (no device). */
class RdmaTransportOptionsTest {

    @Test
    void defaultsAndAWitherPerField() {
        RdmaTransportOptions d = RdmaTransportOptions.defaults();
        assertEquals(new RdmaTransportOptions(50_000, RdmaNotificationMode.ADAPTIVE), d);
        assertEquals(new RdmaTransportOptions(0, RdmaNotificationMode.ADAPTIVE), d.withBusyPollNanos(0));
        for (RdmaNotificationMode mode : RdmaNotificationMode.values()) {
            assertEquals(new RdmaTransportOptions(50_000, mode), d.withMode(mode));
        }
        assertEquals(new RdmaTransportOptions(50_000, RdmaNotificationMode.ADAPTIVE), d, "a wither leaves the original alone");
    }

    @Test
    void eachValueIsCheckedWhereTheOptionsAreMade() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> RdmaTransportOptions.defaults().withBusyPollNanos(-1));
        assertEquals("busyPollNanos must not be negative, got -1", e.getMessage());
        assertThrows(NullPointerException.class, () -> RdmaTransportOptions.defaults().withMode(null));
    }
}
