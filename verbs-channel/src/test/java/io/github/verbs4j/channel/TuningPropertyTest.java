package io.github.verbs4j.channel;

import io.github.verbs4j.testsupport.PeerJvm;
import io.github.verbs4j.test.SoftRdmaTest;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code verbs4j.channel.standDownMicros} with a bad value, in a fresh JVM (it is read once, when
 * {@link ChannelGroup} is initialised): the JVM connects two groups and moves a message as usual,
 * exits 0, and stderr carries one warning naming the property, the value given and the default
 * used (the policy of verbs-core's {@code internal.Tuning}).
 */
@SoftRdmaTest
class TuningPropertyTest {

    @Test
    void aStandDownThatIsNotANumberIsWarnedAboutAndTheDefaultUsed() throws Exception {
        assertDefaultAfterWarning("1ms", "verbs4j.channel.standDownMicros=\"1ms\" is not a number");
    }

    @Test
    void aStandDownOutOfRangeIsWarnedAboutAndTheDefaultUsed() throws Exception {
        assertDefaultAfterWarning("0", "verbs4j.channel.standDownMicros=\"0\" is out of range");
    }

    private static void assertDefaultAfterWarning(String value, String warning) throws Exception {
        List<String> jvmOptions = new ArrayList<>(PeerJvm.QUICK_START);
        jvmOptions.add("-Dverbs4j.channel.standDownMicros=" + value);
        PeerJvm.Ended child = PeerJvm.runToEnd(jvmOptions, TuningPropertyChild.class);
        String all = child.toString();
        assertEquals(0, child.exitCode(), all);
        List<String> lines = child.stderr().lines().filter(l -> l.contains(warning)).toList();
        assertEquals(1, lines.size(), () -> "one warning expected, containing '" + warning + "'; " + all);
        assertTrue(lines.get(0).contains("using the default, 1000"), all);
        assertTrue(child.stdout().contains("standDownNanos=1000000"), all);
    }
}
