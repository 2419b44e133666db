package io.github.verbs4j.test;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.ExtensionConfigurationException;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.testkit.engine.EngineExecutionResults;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Event;

import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

/**
 * The leak check compares the objects open in the whole JVM, so the harness refuses a test that
 * starts while another runs on another thread. Not itself under the harness: its own test would
 * be the one running.
 */
class ParallelTestsTest {

    /**
     * Two tests run at once: the first to start waits until the other has ended (refused, in
     * the harness's beforeEach), so that the refusal cannot depend on timing.
     */
    @SoftRdmaTest
    @ExtendWith(ParallelTestsTest.CountEnds.class)
    static class TwoAtOnce {
        static final CountDownLatch ONE_ENDED = new CountDownLatch(1);

        @Test
        void one() throws InterruptedException {
            assertTrue(ONE_ENDED.await(60, TimeUnit.SECONDS), "the other test never ended");
        }

        @Test
        void two() throws InterruptedException {
            one();
        }
    }

    static final class CountEnds implements AfterEachCallback {
        @Override
        public void afterEach(ExtensionContext context) {
            TwoAtOnce.ONE_ENDED.countDown();
        }
    }

    @Test
    void aTestStartingWhileAnotherRunsOnAnotherThreadIsRefusedSayingWhy() {
        EngineExecutionResults results = EngineTestKit.engine("junit-jupiter")
                .configurationParameter("junit.jupiter.execution.parallel.enabled", "true")
                .configurationParameter("junit.jupiter.execution.parallel.mode.default", "concurrent")
                .configurationParameter("junit.jupiter.execution.parallel.config.strategy", "fixed")
                .configurationParameter("junit.jupiter.execution.parallel.config.fixed.parallelism", "2")
                .selectors(selectClass(TwoAtOnce.class)).execute();
        assertEquals(1, results.testEvents().succeeded().count());
        List<Event> failed = results.testEvents().failed().list();
        assertEquals(1, failed.size());
        Throwable refusal = failed.getFirst().getPayload(TestExecutionResult.class).orElseThrow().getThrowable().orElseThrow();
        assertInstanceOf(ExtensionConfigurationException.class, refusal);
        assertTrue(refusal.getMessage().contains("while a test runs on"), refusal.getMessage());
        assertTrue(refusal.getMessage().contains("the tests of a JVM must run one at a time"), refusal.getMessage());
    }
}
