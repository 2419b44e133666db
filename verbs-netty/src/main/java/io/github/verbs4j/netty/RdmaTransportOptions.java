package io.github.verbs4j.netty;

/**
 * Per-event-loop settings of {@link RdmaIoHandler}: start from {@link #defaults()} and name what
 * differs, as every options type of verbs4j does.
 *
 * <pre>{@code
 * RdmaTransportOptions options = RdmaTransportOptions.defaults().withBusyPollNanos(20_000);
 * }</pre>
 *
 * <p>Immutable; each {@code withX} returns new options (its result must be used).
 *
 * @param busyPollNanos how long a loop keeps polling its completion queues after the last work
 *                      before it arms notification and blocks ({@link RdmaNotificationMode#ADAPTIVE})
 * @param mode          how the loop waits for completions
 */
public record RdmaTransportOptions(long busyPollNanos, RdmaNotificationMode mode) {

    /** Checks the values. */
    public RdmaTransportOptions {
        if (busyPollNanos < 0) {
            throw new IllegalArgumentException("busyPollNanos must not be negative, got " + busyPollNanos);
        }
        if (mode == null) {
            throw new NullPointerException("mode");
        }
    }

    /** 50 microseconds of busy polling, then blocking ({@link RdmaNotificationMode#ADAPTIVE}). */
    public static RdmaTransportOptions defaults() {
        return new RdmaTransportOptions(50_000, RdmaNotificationMode.ADAPTIVE);
    }

    /** These options polling for {@code nanos} after the last work before blocking (not negative). */
    public RdmaTransportOptions withBusyPollNanos(long nanos) {
        return new RdmaTransportOptions(nanos, mode);
    }

    /** These options waiting for completions as {@code mode} says. */
    public RdmaTransportOptions withMode(RdmaNotificationMode mode) {
        return new RdmaTransportOptions(busyPollNanos, mode);
    }
}
