package io.github.verbs4j.examples;

import java.io.Console;
import java.io.PrintStream;

/**
 * A one-line progress indication on stderr for runs longer than a couple of seconds: shown only
 * when the tool runs on a terminal (stdin and stdout, as {@link java.io.Console#isTerminal()} tells)
 * or {@code --progress} asks for it, so that logs and pipes stay clean.
 * {@link #tick(long)} is cheap (a counter test) and allocation-free until a line is due.
 */
final class Progress {

    /**
     * Runs shorter than this show nothing; {@code -Dverbs4j.progress.after.ms} changes it (the
     * tests set 0 to see the line without a long run).
     */
    private static final long FIRST_AFTER_NANOS = Long.getLong("verbs4j.progress.after.ms", 2000) * 1_000_000L;
    private static final long EVERY_NANOS = 500_000_000L;

    private final boolean enabled;
    private final String what;
    private final long total;
    private final PrintStream err = System.err;
    private long started;
    private long nextAt;
    private boolean shown;

    Progress(boolean forced, String what, long total) {
        // Console.isTerminal: since JDK 22 System.console() may be non-null when redirected
        Console console = System.console();
        this.enabled = forced || (console != null && console.isTerminal());
        this.what = what;
        this.total = total;
    }

    /**
     * A meter that never shows anything but takes the same branches as one made with {@code forced}
     * (the ping-pong warm-up's: the JIT then compiles the timed run's {@code tick} calls as they
     * will run).
     */
    static Progress silent(boolean forced) {
        Progress p = new Progress(forced, "warm-up", 0);
        p.silent = true;
        return p;
    }

    private boolean silent;

    void start() {
        started = System.nanoTime();
        nextAt = silent ? Long.MAX_VALUE : started + FIRST_AFTER_NANOS;
    }

    /** Call with the number of units done; prints at most twice a second, after the first two seconds. */
    void tick(long done) {
        if (!enabled || (done & 0xff) != 0) {
            return;
        }
        long now = System.nanoTime();
        if (now < nextAt) {
            return;
        }
        nextAt = now + EVERY_NANOS;
        shown = true;
        err.printf("\r%s: %d/%d (%d%%), %.1f s", what, done, total, total == 0 ? 100 : done * 100 / total,
                (now - started) / 1e9);
        err.flush();
    }

    /** Ends the progress line, if one was shown. */
    void finish() {
        if (shown) {
            err.println();
            err.flush();
            shown = false;
        }
    }
}
