package io.github.verbs4j;

import io.github.verbs4j.internal.InFlight;

/**
 * The child JVM of {@link TuningPropertiesTest}: opens the first device, creates a completion
 * queue and polls it empty past the empty-poll counter's rare paths, then prints the values the
 * tuning properties gave ({@code yieldMask=}, {@code closeGuard=}) and exits 0.
 */
public final class TuningPropertiesChild {

    private TuningPropertiesChild() {
    }

    public static void main(String[] args) throws Exception {
        try (Context ctx = Verbs.openFirst(); CompletionQueue cq = ctx.createCq(16)) {
            Completions wcs = cq.completions(4);
            int polled = 0;
            for (int i = 0; i < 3 * 4096; i++) { // past the safepoint call and the default yield
                polled += cq.poll(wcs);
            }
            System.out.println("polled=" + polled);
            System.out.println("yieldMask=" + CompletionQueue.YIELD_EVERY_EMPTY_POLLS_MASK);
            System.out.println("closeGuard=" + InFlight.mode());
        }
    }
}
