package io.github.verbs4j.test;

import io.github.verbs4j.Access;
import io.github.verbs4j.Context;
import io.github.verbs4j.ProtectionDomain;
import org.junit.jupiter.api.Test;
import org.junit.platform.testkit.engine.EngineExecutionResults;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Event;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

/**
 * The leak check and the faults guard, judged on small test classes run through the JUnit
 * engine: their tests' outcomes are what is asserted.
 */
@SoftRdmaTest
class LeakCheckTest {

    @SoftRdmaTest
    static class Leaky {
        static ProtectionDomain leakedPd;

        @Test
        void leavesADomainAndARegionOpen(Context ctx) {
            leakedPd = ctx.allocatePd();
            leakedPd.allocate(4096, Access.LOCAL_WRITE);
        }

        @Test
        void closesEverything(Context ctx) {
            try (ProtectionDomain pd = ctx.allocatePd(); var mr = pd.allocate(4096, Access.LOCAL_WRITE)) {
                assertFalse(mr.isClosed());
            }
        }
    }

    @SoftRdmaTest(leakCheck = false)
    static class LeakyUnchecked {
        @Test
        void leaves(Context ctx) {
            ctx.allocatePd();
        }
    }

    @SoftRdmaTest
    @Faults(drop = 0.5)
    static class OtherFaults {
        @Test
        void neverRuns() {
        }
    }

    private static EngineExecutionResults run(Class<?> c) {
        return EngineTestKit.engine("junit-jupiter").selectors(selectClass(c)).execute();
    }

    private static String failureOf(Event e) {
        return e.getPayload(org.junit.platform.engine.TestExecutionResult.class).orElseThrow()
                .getThrowable().orElseThrow().getMessage();
    }

    @Test
    void leakingTestFailsNamingWhatItLeftOpenAndTheHarnessClosesIt() {
        EngineExecutionResults results = run(Leaky.class);
        assertEquals(1, results.testEvents().succeeded().count());
        List<Event> failed = results.testEvents().failed().list();
        assertEquals(1, failed.size());
        String message = failureOf(failed.getFirst());
        assertTrue(message.startsWith("leavesADomainAndARegionOpen(Context) leaked 2 verbs objects"), message);
        assertTrue(message.contains("ProtectionDomain"), message);
        assertTrue(message.contains("MemoryRegion"), message);
        assertTrue(Leaky.leakedPd.isClosed(), "the harness closes what a test leaked");
    }

    @Test
    void leakCheckCanBeTurnedOff() {
        EngineExecutionResults results = run(LeakyUnchecked.class);
        assertEquals(1, results.testEvents().succeeded().count());
        assertEquals(0, results.testEvents().failed().count());
    }

    @Test
    void classWithOtherFaultsFailsInAJvmWhoseSoftRdmaIsRunning() {
        EngineExecutionResults results = run(OtherFaults.class);
        List<Event> failed = results.containerEvents().failed().list();
        assertEquals(1, failed.size());
        String message = failureOf(failed.getFirst());
        assertTrue(message.contains("needs softrdma with SOFTRDMA_FAULTS=seed=42,drop=0.5, but this JVM's softrdma"
                + " already runs with no faults"), message);
        assertTrue(message.contains("<reuseForks>false</reuseForks>"), message);
        assertEquals(0, results.testEvents().started().count());
    }
}
