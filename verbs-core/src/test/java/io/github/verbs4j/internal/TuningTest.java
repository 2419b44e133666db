package io.github.verbs4j.internal;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.function.LongPredicate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * {@link Tuning}'s reading of a property's text: good values taken, and each kind of bad value
 * (not a number, blank, beyond the type, out of range, an unknown choice) turned into the default
 * and one warning naming the property, the text, what is accepted and the default.
 */
class TuningTest {

    private static final LongPredicate YIELD = v -> v == 0 || (Long.bitCount(v) == 1 && v >= 1024);
    private static final String YIELD_TEXT = "0 or a power of two >= 1024";

    private static Tuning.Read<Long> yieldPeriod(String text) {
        return Tuning.parseInt("p.yield", text, 4096, YIELD, YIELD_TEXT);
    }

    @Test
    void goodNumbersAreTakenWithoutAWarning() {
        assertEquals(new Tuning.Read<>(4096L, null), yieldPeriod(null));
        assertEquals(new Tuning.Read<>(0L, null), yieldPeriod("0"));
        assertEquals(new Tuning.Read<>(1024L, null), yieldPeriod("1024"));
        assertEquals(new Tuning.Read<>(1L << 30, null), yieldPeriod(" 1073741824\t"));
        assertEquals(new Tuning.Read<>(8192L, null), yieldPeriod("+8192"));
        assertEquals(new Tuning.Read<>(10_000_000L, null),
                Tuning.parseLong("p.long", "10000000", 1000, v -> v >= 1 && v <= 10_000_000, "1 to 10000000"));
    }

    @Test
    void aTextThatIsNotANumberGivesTheDefaultAndSaysSo() {
        assertEquals(new Tuning.Read<>(4096L,
                "p.yield=\"often\" is not a number (accepted: 0 or a power of two >= 1024): using the default, 4096"),
                yieldPeriod("often"));
        assertEquals(new Tuning.Read<>(4096L,
                "p.yield=\"\" is not a number (accepted: 0 or a power of two >= 1024): using the default, 4096"),
                yieldPeriod(""));
        assertEquals(new Tuning.Read<>(4096L,
                "p.yield=\"4k\" is not a number (accepted: 0 or a power of two >= 1024): using the default, 4096"),
                yieldPeriod("4k"));
        assertEquals(new Tuning.Read<>(4096L,
                "p.yield=\"0x1000\" is not a number (accepted: 0 or a power of two >= 1024): using the default, 4096"),
                yieldPeriod("0x1000"));
        assertEquals(new Tuning.Read<>(4096L,
                "p.yield=\"99999999999999999999\" is not a number (accepted: 0 or a power of two >= 1024): using the default, 4096"),
                yieldPeriod("99999999999999999999"));
    }

    @Test
    void aNumberOutOfRangeGivesTheDefaultAndSaysSo() {
        for (String text : List.of("1000", "512", "-4096", "4097", "4294967296", "-2147483648")) {
            assertEquals(new Tuning.Read<>(4096L, "p.yield=\"" + text + "\" is out of range (accepted: 0 or a power"
                    + " of two >= 1024): using the default, 4096"), yieldPeriod(text), text);
        }
        assertEquals(new Tuning.Read<>(1000L,
                "p.long=\"10000001\" is out of range (accepted: 1 to 10000000 microseconds): using the default, 1000"),
                Tuning.parseLong("p.long", "10000001", 1000, v -> v >= 1 && v <= 10_000_000, "1 to 10000000 microseconds"));
    }

    @Test
    void choicesIgnoreCaseAndSpaceAndAnUnknownOneGivesTheDefault() {
        List<String> modes = List.of("membarrier", "fence", "off");
        assertEquals(new Tuning.Read<>("membarrier", null), Tuning.parseChoice("p.mode", null, "membarrier", modes));
        assertEquals(new Tuning.Read<>("fence", null), Tuning.parseChoice("p.mode", "fence", "membarrier", modes));
        assertEquals(new Tuning.Read<>("off", null), Tuning.parseChoice("p.mode", " OFF ", "membarrier", modes));
        assertEquals(new Tuning.Read<>("membarrier",
                "p.mode=\"sometimes\" is not one of membarrier, fence, off: using the default, membarrier"),
                Tuning.parseChoice("p.mode", "sometimes", "membarrier", modes));
        assertEquals(new Tuning.Read<>("membarrier",
                "p.mode=\"\" is not one of membarrier, fence, off: using the default, membarrier"),
                Tuning.parseChoice("p.mode", "", "membarrier", modes));
    }

    @Test
    void aDefaultThatIsNotAcceptedIsTheLibrarysBugAndRefused() {
        assertThrows(IllegalArgumentException.class, () -> Tuning.parseInt("p.yield", null, 1000, YIELD, YIELD_TEXT));
        assertThrows(IllegalArgumentException.class,
                () -> Tuning.parseChoice("p.mode", null, "always", List.of("membarrier", "fence")));
    }

    /** Through the system property (the warning's way to stderr is TuningPropertiesTest's, in a child JVM). */
    @Test
    void thePropertyIsReadAndABadValueGivesTheDefault() {
        try {
            System.setProperty("verbs4j.test.tuning.int", "lots");
            System.setProperty("verbs4j.test.tuning.long", "0");
            System.setProperty("verbs4j.test.tuning.choice", "never");
            System.setProperty("verbs4j.test.tuning.good", "2048");
            System.setProperty("verbs4j.test.tuning.goodChoice", "Membarrier");
            assertEquals(4096, Tuning.intProperty("verbs4j.test.tuning.int", 4096, YIELD, YIELD_TEXT));
            assertEquals(1000, Tuning.longProperty("verbs4j.test.tuning.long", 1000, v -> v >= 1, "1 or more"));
            assertEquals("fence", Tuning.choiceProperty("verbs4j.test.tuning.choice", "fence", "membarrier", "fence"));
            assertEquals(2048, Tuning.intProperty("verbs4j.test.tuning.good", 4096, YIELD, YIELD_TEXT));
            assertEquals("membarrier",
                    Tuning.choiceProperty("verbs4j.test.tuning.goodChoice", "fence", "membarrier", "fence"));
            assertEquals(1024, Tuning.intProperty("verbs4j.test.tuning.unset", 1024, YIELD, YIELD_TEXT));
        } finally {
            for (String p : List.of("int", "long", "choice", "good", "goodChoice")) {
                System.clearProperty("verbs4j.test.tuning." + p);
            }
        }
    }
}
