package io.github.verbs4j.examples.channel;

import io.github.verbs4j.examples.JitCompilation;

import java.util.Locale;

/**
 * The untimed stream before channel-bench times its stream (the channel's and {@code --raw}'s
 * alike): messages until the JIT has compiled nothing for {@link #QUIET_NANOS}, at least
 * {@link #MIN_NANOS} and {@link #MIN_MESSAGES} messages, and at most {@code maxNanos}. Timed from the first message, a stream of the
 * default length measured mostly the JIT (docs/measurements/channel.md, "The stream next to
 * {@code ib_write_bw}": a fixed 0.6 to 0.9 s of warm-up in runs of 0.3 to 1 s); perftest has
 * nothing to compile, so the benchmark times both in their steady state. Where the JVM does not
 * report compilation time the warm-up lasts {@link #MIN_NANOS}.
 */
final class StreamWarmUp {

    /** How long the JIT must have compiled nothing for the warm-up to end. */
    static final long QUIET_NANOS = 200_000_000L;
    /** The shortest warm-up. */
    static final long MIN_NANOS = 300_000_000L;
    /**
     * The fewest messages: twice C2's default compile threshold (15,000 invocations and loop
     * turns), so that the send path was run often enough to be compiled. On a loaded machine
     * a slow stream showed the JIT quiet for 200 ms after 8,192 messages, before the hot path
     * had reached the threshold, and the timed stream then ran it uncompiled.
     */
    static final long MIN_MESSAGES = 30_000;
    /** The default longest warm-up (a loaded machine keeps the JIT busy longer). */
    static final long DEFAULT_MAX_NANOS = 5_000_000_000L;
    /** Messages between two looks at the clock and the JIT. */
    private static final int LOOK_EVERY = 256;

    private final long maxNanos;
    private final long began = System.nanoTime();
    private long compiled = JitCompilation.millis();
    private long lastCompiled = began;
    private long messages;
    private double seconds;
    private boolean quiet;

    /** A warm-up of at most {@code maxNanos} (0: none). */
    StreamWarmUp(long maxNanos) {
        this.maxNanos = maxNanos;
    }

    /** Whether the warm-up is over after {@code sent} messages: called after each message until it answers true. */
    boolean over(long sent) {
        if (maxNanos == 0) {
            return end(sent, false);
        }
        if (sent % LOOK_EVERY != 0) {
            return false;
        }
        long now = System.nanoTime();
        long c = JitCompilation.millis();
        if (c != compiled) {
            compiled = c;
            lastCompiled = now;
        }
        if (now - began >= maxNanos) {
            return end(sent, false);
        }
        if (now - began < MIN_NANOS || sent < MIN_MESSAGES) {
            return false;
        }
        if (!JitCompilation.known()) {
            return end(sent, false);
        }
        return now - lastCompiled >= QUIET_NANOS && end(sent, true);
    }

    private boolean end(long sent, boolean jitQuiet) {
        messages = sent;
        seconds = (System.nanoTime() - began) / 1e9;
        quiet = jitQuiet;
        return true;
    }

    /** The messages the warm-up streamed. */
    long messages() {
        return messages;
    }

    /** The line the bench prints about it: how many messages, how long, and why it ended. */
    String describe() {
        return String.format(Locale.ROOT, " Stream warm-up : %d messages in %.2f s, not timed (%s)", messages, seconds,
                maxNanos == 0 ? "none asked for"
                        : quiet ? "ended when the JIT had compiled nothing for " + QUIET_NANOS / 1_000_000 + " ms, after at least "
                                + MIN_MESSAGES + " messages"
                        : JitCompilation.known() ? "ended at the limit of " + maxNanos / 1_000_000 + " ms, the JIT still "
                                + "compiling or fewer than " + MIN_MESSAGES + " messages streamed"
                        : "no JIT compilation time to watch: " + MIN_NANOS / 1_000_000 + " ms and " + MIN_MESSAGES + " messages");
    }
}
