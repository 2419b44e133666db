package io.github.verbs4j.test;

import io.github.verbs4j.Access;
import io.github.verbs4j.Closer;
import io.github.verbs4j.Context;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.Verbs;
import io.github.verbs4j.cm.CmId;
import io.github.verbs4j.cm.EventChannel;
import io.github.verbs4j.cm.PortSpace;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.platform.testkit.engine.EngineExecutionResults;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Event;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertAll;
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

    /**
     * What a test opens itself, none of it from an injected context: a context and a domain on
     * it, an rdma_cm event channel and an id on it.
     */
    record Opened(Context context, ProtectionDomain pd, EventChannel events, CmId id) {

        static Opened open() {
            Context context = Verbs.openFirst();
            ProtectionDomain pd = context.allocatePd();
            EventChannel events = EventChannel.create();
            return new Opened(context, pd, events, events.createId(PortSpace.TCP));
        }

        /**
         * How the harness names them: the root opened last first, each root followed by what
         * was made from it (parents before children).
         */
        String names() {
            return events + ", " + id + ", " + context + ", " + pd;
        }

        void assertAllClosed() {
            assertAll(() -> assertTrue(id.isClosed(), "id"), () -> assertTrue(events.isClosed(), "event channel"),
                    () -> assertTrue(pd.isClosed(), "domain"), () -> assertTrue(context.isClosed(), "context"));
        }
    }

    @SoftRdmaTest
    static class LeaksWhatItOpened {
        static Opened opened;

        @Test
        void opensAndLeaves() {
            opened = Opened.open();
        }
    }

    @SoftRdmaTest(leakCheck = false)
    static class LeaksWhatItOpenedUnchecked {
        static Opened opened;

        @Test
        void opensAndLeaves() {
            opened = Opened.open();
        }
    }

    /** Objects opened before the tests (here in {@code @BeforeAll}) are not theirs: both tests use them. */
    @SoftRdmaTest
    static class SharesAFixture {
        static Context fixture;
        static EventChannel fixtureEvents;

        @BeforeAll
        static void open() {
            fixture = Verbs.openFirst();
            fixtureEvents = EventChannel.create();
        }

        @AfterAll
        static void close() {
            Closer.closeAll(List.of(fixtureEvents, fixture));
        }

        @Test
        void one() {
            try (ProtectionDomain pd = fixture.allocatePd(); CmId id = fixtureEvents.createId(PortSpace.TCP)) {
                assertFalse(pd.isClosed());
                assertFalse(id.isClosed());
            }
        }

        @Test
        void two() {
            one();
        }
    }

    /** The test ends before the thread it handed its objects to closes them: the check waits a little. */
    @SoftRdmaTest
    static class ClosedByAnotherThreadJustAfter {
        static Thread closer;

        @Test
        void handsItsObjectsToAThreadThatClosesThem() {
            Opened o = Opened.open();
            closer = Thread.ofPlatform().start(() -> {
                try {
                    Thread.sleep(200); // after the test returned: the harness sees them open first
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                Closer.closeAll(List.of(o.id(), o.events(), o.pd(), o.context()));
            });
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
    void whatATestOpenedItselfIsNamedRootsLastOpenedFirstAndClosed() {
        EngineExecutionResults results = run(LeaksWhatItOpened.class);
        List<Event> failed = results.testEvents().failed().list();
        assertEquals(1, failed.size());
        Opened o = LeaksWhatItOpened.opened;
        assertEquals("opensAndLeaves() leaked 4 verbs objects (still open after it; close them, e.g. with"
                + " try-with-resources): " + o.names(), failureOf(failed.getFirst()));
        o.assertAllClosed();
    }

    @Test
    void withTheCheckOffWhatATestLeftOpenIsClosedAllTheSame() {
        EngineExecutionResults results = run(LeaksWhatItOpenedUnchecked.class);
        assertEquals(1, results.testEvents().succeeded().count());
        assertEquals(0, results.testEvents().failed().count());
        LeaksWhatItOpenedUnchecked.opened.assertAllClosed();
    }

    @Test
    void objectsOpenedBeforeTheTestsAreNotTheirs() {
        EngineExecutionResults results = run(SharesAFixture.class);
        assertEquals(2, results.testEvents().succeeded().count());
        assertEquals(0, results.testEvents().failed().count());
        assertTrue(SharesAFixture.fixture.isClosed(), "closed by @AfterAll");
        assertTrue(SharesAFixture.fixtureEvents.isClosed(), "closed by @AfterAll");
    }

    @Test
    void objectsAnotherThreadClosesJustAfterTheTestAreNotLeaked() throws InterruptedException {
        EngineExecutionResults results = run(ClosedByAnotherThreadJustAfter.class);
        ClosedByAnotherThreadJustAfter.closer.join();
        assertEquals(0, results.testEvents().failed().count());
        assertEquals(1, results.testEvents().succeeded().count());
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
