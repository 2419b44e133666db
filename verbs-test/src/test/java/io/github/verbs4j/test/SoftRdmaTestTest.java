package io.github.verbs4j.test;

import io.github.verbs4j.Context;
import io.github.verbs4j.Verbs;
import io.github.verbs4j.raw.NativeLibraries;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The harness as a user meets it: softrdma from the jar, injected contexts, a two-sided exchange. */
@SoftRdmaTest
class SoftRdmaTestTest {

    private Context fromBeforeEach;

    @BeforeEach
    void remember(Context ctx) {
        fromBeforeEach = ctx;
    }

    @Test
    void runsOnSoftRdmaExtractedFromTheJar() {
        // this module's surefire sets no library path and no LD_LIBRARY_PATH: the jar is the only source
        Path dir = NativeLibraries.softRdmaDirectory().orElseThrow();
        assertEquals(dir.resolve("libibverbs.so.1"), NativeLibraries.verbsPath().orElseThrow());
        assertTrue(dir.getFileName().toString().startsWith("linux-"), dir.toString());
        Verbs.useSoftRdma(); // again, after first use: idempotent while softrdma is what was loaded
    }

    @Test
    void saysItRunsOnSoftRdmaFromTheLoadedLibraryItself() {
        assertTrue(SoftRdmaExtension.onSoftRdma(), "libibverbs from " + NativeLibraries.verbsPath());
    }

    @Test
    void injectsOneContextPerTestAndASecondForThePeer(Context ctx, @Peer Context peer) {
        assertSame(fromBeforeEach, ctx, "a test and its @BeforeEach share the context");
        assertNotSame(ctx, peer);
        assertEquals("softrdma0", ctx.device().name());
        assertEquals("softrdma0", peer.device().name());
    }

    @Test
    void rdmaWriteBetweenTheTwoContexts(Context ctx, @Peer Context peer) {
        try (Wire wire = new Wire(ctx, peer)) {
            wire.write(0x1122334455667788L);
        }
    }
}
