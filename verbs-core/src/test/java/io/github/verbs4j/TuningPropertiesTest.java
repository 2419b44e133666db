package io.github.verbs4j;

import io.github.verbs4j.testsupport.PeerJvm;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * verbs-core's tuning properties with a bad value, each in a fresh JVM (they are read once, when
 * their class is initialised): the JVM opens a device, creates a queue and polls it as usual and
 * exits 0, with one warning on stderr naming the property, the value given and the default used
 * (the policy of {@code internal.Tuning}). Before that policy a value out of range made the
 * first use of {@code CompletionQueue} (or {@code InFlight}) fail with
 * {@code ExceptionInInitializerError}, and a non-number of {@code emptyPollYieldEvery} was
 * taken as the default without a word.
 */
class TuningPropertiesTest {

    @Test
    void aYieldPeriodThatIsNotANumberIsWarnedAboutAndTheDefaultUsed() throws Exception {
        PeerJvm.Ended child = run("-Dverbs4j.emptyPollYieldEvery=often");
        assertEquals(0, child.exitCode(), child::toString);
        assertWarned(child, "verbs4j.emptyPollYieldEvery=\"often\" is not a number", "using the default, 4096");
        assertTrue(child.stdout().contains("yieldMask=4095"), child::toString);
    }

    @Test
    void aYieldPeriodThatIsNotAPowerOfTwoIsWarnedAboutAndTheDefaultUsed() throws Exception {
        PeerJvm.Ended child = run("-Dverbs4j.emptyPollYieldEvery=1000");
        assertEquals(0, child.exitCode(), child::toString);
        assertWarned(child, "verbs4j.emptyPollYieldEvery=\"1000\" is out of range", "using the default, 4096");
        assertTrue(child.stdout().contains("yieldMask=4095"), child::toString);
    }

    @Test
    void aYieldPeriodBelow1024IsWarnedAboutAndTheDefaultUsed() throws Exception {
        PeerJvm.Ended child = run("-Dverbs4j.emptyPollYieldEvery=512");
        assertEquals(0, child.exitCode(), child::toString);
        assertWarned(child, "verbs4j.emptyPollYieldEvery=\"512\" is out of range", "using the default, 4096");
        assertTrue(child.stdout().contains("yieldMask=4095"), child::toString);
    }

    @Test
    void aGoodYieldPeriodIsTakenWithoutAWarning() throws Exception {
        PeerJvm.Ended child = run("-Dverbs4j.emptyPollYieldEvery=0");
        assertEquals(0, child.exitCode(), child::toString);
        assertTrue(child.stdout().contains("yieldMask=-1"), child::toString);
        assertTrue(!child.stderr().contains("verbs4j.emptyPollYieldEvery"), child::toString);
    }

    @Test
    void anUnknownCloseGuardModeIsWarnedAboutAndTheDefaultUsed() throws Exception {
        PeerJvm.Ended child = run("-Dverbs4j.closeGuard=sometimes");
        assertEquals(0, child.exitCode(), child::toString);
        assertWarned(child, "verbs4j.closeGuard=\"sometimes\" is not one of membarrier, fence, off",
                "using the default, membarrier");
        // the default: membarrier, or a fence where the kernel refuses it; never off
        assertTrue(child.stdout().contains("closeGuard=membarrier") || child.stdout().contains("closeGuard=fence"),
                child::toString);
    }

    private static void assertWarned(PeerJvm.Ended child, String... parts) {
        List<String> lines = child.stderr().lines().filter(l -> l.contains(parts[0])).toList();
        assertEquals(1, lines.size(), () -> "one warning expected, containing " + List.of(parts) + "; " + child);
        for (String part : parts) {
            assertTrue(lines.get(0).contains(part), () -> "the warning lacks '" + part + "': " + child);
        }
    }

    /** {@link TuningPropertiesChild} in a fresh JVM like this one, with {@code options}. */
    static PeerJvm.Ended run(String... options) throws Exception {
        assumeTrue(Verbs.isAvailable(), () -> "no RDMA: " + Verbs.unavailabilityCause());
        List<String> jvmOptions = new ArrayList<>(PeerJvm.QUICK_START);
        jvmOptions.addAll(List.of(options));
        return PeerJvm.runToEnd(jvmOptions, TuningPropertiesChild.class);
    }
}
