package io.github.verbs4j.test;

import io.github.verbs4j.Verbs;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Verbs.useSoftRdma() after verbs4j already looked for the system's libibverbs: refused, saying
 * why (this class runs in a JVM of its own, without the harness, so nothing selected softrdma).
 */
class UseSoftRdmaTooLateTest {

    @Test
    void selectingSoftRdmaAfterFirstUseIsRefused() {
        Verbs.isAvailable(); // loads (or fails to load) the system's library
        IllegalStateException e = assertThrows(IllegalStateException.class, Verbs::useSoftRdma);
        assertTrue(e.getMessage().startsWith("verbs4j: useSoftRdma() comes too late: libibverbs was already "),
                e.getMessage());
        assertTrue(e.getMessage().endsWith("call it before the first use of verbs4j, or run with"
                + " -Dverbs4j.substrate=softrdma"), e.getMessage());
    }
}
