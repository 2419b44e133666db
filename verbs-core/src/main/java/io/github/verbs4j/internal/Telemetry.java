package io.github.verbs4j.internal;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Enabled;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

import java.lang.System.Logger.Level;

/**
 * verbs4j's observability: {@link System.Logger} {@code io.github.verbs4j} for the control path
 * (devices opened, QP transitions, async events; verbs-cm logs CM events to
 * {@code io.github.verbs4j.cm}) and JDK Flight Recorder events.
 *
 * <p>The JFR events are disabled unless a recording enables them by name (they are
 * {@link Enabled @Enabled(false)}, so even a recording with the default settings leaves them
 * off): {@code -XX:StartFlightRecording:+io.github.verbs4j.QpStateChange#enabled=true,...}.
 * While off, each site costs one read of a static flag, and the poll loop checks it once per
 * poll that returned completions.
 */
public final class Telemetry {

    /** The control-path logger. */
    public static final System.Logger LOG = System.getLogger("io.github.verbs4j");

    private static final ErrorCompletion ERROR_COMPLETION_PROBE = new ErrorCompletion();
    private static final QpStateChange QP_STATE_PROBE = new QpStateChange();
    private static final AsyncEventRecord ASYNC_PROBE = new AsyncEventRecord();

    private Telemetry() {
    }

    /** A QP moved from one state to another ({@code ibv_modify_qp}, or librdmacm on connect). */
    @Name("io.github.verbs4j.QpStateChange")
    @Label("QP State Change")
    @Category({"verbs4j"})
    @Description("A queue pair changed state")
    @Enabled(false)
    public static final class QpStateChange extends Event {
        @Label("Device") public String device;
        @Label("QP Number") public int qpNumber;
        @Label("QP Type") public String qpType;
        @Label("From") public String from;
        @Label("To") public String to;
    }

    /** A completion with a status other than success, seen by {@code CompletionQueue.poll}. */
    @Name("io.github.verbs4j.ErrorCompletion")
    @Label("Error Completion")
    @Category({"verbs4j"})
    @Description("A work completion with an error status")
    @Enabled(false)
    @StackTrace(false)
    public static final class ErrorCompletion extends Event {
        @Label("QP Number") public int qpNumber;
        @Label("Work Request Id") public long wrId;
        @Label("Status") public String status;
        @Label("Vendor Error") public int vendorError;
    }

    /** An asynchronous event of a device ({@code ibv_get_async_event}). */
    @Name("io.github.verbs4j.AsyncEvent")
    @Label("Async Event")
    @Category({"verbs4j"})
    @Description("An asynchronous event reported by the device")
    @Enabled(false)
    @StackTrace(false)
    public static final class AsyncEventRecord extends Event {
        @Label("Device") public String device;
        @Label("Type") public String type;
        @Label("Port") public int port;
        @Label("QP Number") public int qpNumber;
    }

    /** Whether error completions are recorded: checked once per poll that returned completions. */
    public static boolean errorCompletionsEnabled() {
        return ERROR_COMPLETION_PROBE.isEnabled();
    }

    /** Records one error completion. */
    public static void errorCompletion(int qpNumber, long wrId, String status, int vendorError) {
        ErrorCompletion e = new ErrorCompletion();
        e.qpNumber = qpNumber;
        e.wrId = wrId;
        e.status = status;
        e.vendorError = vendorError;
        e.commit();
    }

    /** Logs and records a QP state change. */
    public static void qpStateChange(String device, int qpNumber, String qpType, Object from, Object to) {
        if (LOG.isLoggable(Level.DEBUG)) {
            LOG.log(Level.DEBUG, "{0} QP 0x{1} on {2}: {3} -> {4}", qpType, Integer.toHexString(qpNumber), device,
                    from, to);
        }
        if (QP_STATE_PROBE.isEnabled()) {
            QpStateChange e = new QpStateChange();
            e.device = device;
            e.qpNumber = qpNumber;
            e.qpType = qpType;
            e.from = String.valueOf(from);
            e.to = String.valueOf(to);
            e.commit();
        }
    }

    /** Logs and records an async event. */
    public static void asyncEvent(String device, Object type, int port, int qpNumber) {
        if (LOG.isLoggable(Level.DEBUG)) {
            LOG.log(Level.DEBUG, "async event {0} on {1} (port {2}, QP 0x{3})", type, device, port,
                    Integer.toHexString(qpNumber));
        }
        if (ASYNC_PROBE.isEnabled()) {
            AsyncEventRecord e = new AsyncEventRecord();
            e.device = device;
            e.type = String.valueOf(type);
            e.port = port;
            e.qpNumber = qpNumber;
            e.commit();
        }
    }
}
