package io.github.verbs4j;

import io.github.verbs4j.layout.CLayouts;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The few offsets verbs4j writes by hand (jextract filters them out or cannot see them), checked
 * against gcc's {@code offsetof}/{@code sizeof} on the installed headers.
 */
class HandWrittenLayoutTest {

    @Test
    void verbsContextOffsetsUsedForTheExtendedQueryPort() {
        assertEquals(CLayouts.sizeOf("struct verbs_context"), Context.VERBS_CONTEXT_SIZE);
        assertEquals(CLayouts.offsetOf("struct verbs_context", "context"), Context.CONTEXT_IN_VCTX);
        assertEquals(CLayouts.offsetOf("struct verbs_context", "query_port"), Context.VCTX_QUERY_PORT);
        assertEquals(CLayouts.offsetOf("struct verbs_context", "sz"), Context.VCTX_SZ);
    }

    @Test
    void pollfdUsedForChannelWaits() {
        CLayouts poll = CLayouts.of("poll.h");
        assertEquals(poll.typeSize("struct pollfd"), Lib.POLLFD_SIZE);
        assertEquals(poll.memberOffset("struct pollfd", "fd"), Lib.POLLFD_FD);
        assertEquals(poll.memberOffset("struct pollfd", "events"), Lib.POLLFD_EVENTS);
        assertEquals(poll.memberOffset("struct pollfd", "revents"), Lib.POLLFD_REVENTS);
    }
}
