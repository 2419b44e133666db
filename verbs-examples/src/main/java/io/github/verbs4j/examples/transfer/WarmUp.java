package io.github.verbs4j.examples.transfer;

import io.github.verbs4j.examples.JitCompilation;

/**
 * The untimed warm-up of a transfer-bench stream: at least {@code min} batches, then rounds of
 * {@link #ROUND} batches until one round compiles nothing (the JIT's total compilation time did
 * not move), or {@link #MAX_EXTRA_NANOS} passed after the minimum. Without it a run of a few
 * hundred batches (0.3 s) timed mostly the JIT: on the 2-CPU machine, idle, 200 batches gave WRITE
 * 3.38 GB/s where 2,000 gave 6.42, and a profile of a 3,000-batch READ client still found the C1
 * and C2 compiler threads in 30 % of its samples.
 */
final class WarmUp {

    /** The batches of each round after the minimum (64 chunks each: about 0.1 s at a few GB/s). */
    static final int ROUND = 200;
    /** The longest the rounds after the minimum may take (a loaded machine makes each slow). */
    static final long MAX_EXTRA_NANOS = 3_000_000_000L;

    private final int min;
    private final boolean untilQuiet;
    private final long began = System.nanoTime();
    private long extraSince;
    private long compiledAtRound;
    private int batches;
    private double seconds;
    private boolean quiet;

    /** At least {@code min} batches; then, with {@code untilQuiet}, the rounds until the JIT is quiet. */
    WarmUp(int min, boolean untilQuiet) {
        this.min = min;
        this.untilQuiet = untilQuiet;
    }

    /**
     * Whether the warm-up is over with {@code done} batches completed: called after each batch
     * until it answers true, then no more.
     */
    boolean over(int done) {
        if (done < min) {
            return false;
        }
        if (done == min) {
            extraSince = System.nanoTime();
            compiledAtRound = JitCompilation.millis();
            return !(untilQuiet && JitCompilation.known()) && end(done, false);
        }
        if ((done - min) % ROUND != 0) {
            return false;
        }
        long now = JitCompilation.millis();
        if (now == compiledAtRound) {
            return end(done, true);
        }
        compiledAtRound = now;
        return System.nanoTime() - extraSince > MAX_EXTRA_NANOS && end(done, false);
    }

    private boolean end(int done, boolean jitQuiet) {
        batches = done;
        seconds = (System.nanoTime() - began) / 1e9;
        quiet = jitQuiet;
        return true;
    }

    /** The line the bench prints about it: how many batches, how long, and why it ended. */
    String describe() {
        return String.format(" warm-up, not timed: %d batches in %.2f s (%s)", batches, seconds,
                quiet ? "ended when a round of " + ROUND + " batches compiled nothing"
                        : JitCompilation.known() ? "ended after " + MAX_EXTRA_NANOS / 1_000_000_000L + " s more, the JIT still compiling"
                        : "no JIT compilation time to watch: the minimum only");
    }
}
