package io.github.verbs4j.examples.channel;

import org.junit.jupiter.api.Test;

import java.io.PrintWriter;
import java.io.StringWriter;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** {@link RoundTripTail}'s summary of made-up round trips, whose slow ones and gaps are known. */
class RoundTripTailTest {

    @Test
    void countsTheSlowRoundTripsAndTheGapsBetweenThem() {
        // 1000 round trips of 2 us, one every 10 us; every 100th (from the 50th) takes 1 ms
        // (over 10 x the median), one more (the 75th) 7 us (over 3 x, under 10 x)
        int n = 1000;
        long[] start = new long[n];
        long[] rtt = new long[n];
        for (int i = 0; i < n; i++) {
            start[i] = 10_000L * i;
            rtt[i] = i % 100 == 50 ? 1_000_000 : 2_000;
        }
        rtt[75] = 7_000;
        StringWriter text = new StringWriter();
        try (PrintWriter out = new PrintWriter(text)) {
            RoundTripTail.print(out, start, rtt);
        }
        String[] lines = text.toString().split("\n");
        assertEquals(2, lines.length, text.toString());
        // the span: the last began at 9990 us and took 2; 11 slow: the ten 1 ms ones and the 7 us one, 10 of them
        // over 10 x; each added (10 x 998 us + 5 us) / 11 = 907.7 us
        assertEquals(" tail: 1000 round trips over 10.0 ms, median 2.00 us; 11 (1.10 %) over 3 x median, 10 over 10 x,"
                + " max 1000.0 us; the slow ones added 907.7 us each beyond the median", lines[0]);
        // gaps: 50 -> 75 (250 us), 75 -> 150 (750 us), then 1000 us between the 1 ms ones, 8 times
        assertEquals(" tail: gaps between slow round trips (us): 0-10: 0; 10-100: 0; 100-900: 2; 900-1100: 8; 1100-10000: 0;"
                + " 10000-190000: 0; 190000-210000: 0; 210000-: 0;", lines[1]);
    }
}
