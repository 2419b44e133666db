package io.github.verbs4j;

import jdk.jfr.Configuration;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * verbs4j's JFR events: recorded when a recording enables them, absent from a recording with
 * the JDK's default settings.
 */
class JfrEventsTest {

    static final String QP_STATE = "io.github.verbs4j.QpStateChange";
    static final String ERROR_COMPLETION = "io.github.verbs4j.ErrorCompletion";

    @TempDir
    Path dir;

    /** A QP's way to RTS and into ERROR with a receive posted: transitions and one flushed receive. */
    private static int exercise() {
        try (Rig rig = Rig.rc()) {
            rig.b.postRecv(ReceiveRequest.create().id(99).local(rig.mrB, 0, 16));
            rig.b.toError();
            Completion flushed = rig.next(rig.cqB);
            assertEquals(WcStatus.WR_FLUSH_ERROR, flushed.status());
            return rig.b.qpNumber();
        }
    }

    private List<RecordedEvent> record(Recording recording) throws Exception {
        Path file = dir.resolve("verbs4j.jfr");
        recording.start();
        int qpn = exercise();
        recording.stop();
        recording.dump(file);
        List<RecordedEvent> events = RecordingFile.readAllEvents(file).stream()
                .filter(e -> e.getEventType().getName().startsWith("io.github.verbs4j."))
                .toList();
        recording.close();
        lastQpn = qpn;
        return events;
    }

    private int lastQpn;

    @Test
    void enabledEventsAreRecorded() throws Exception {
        Recording recording = new Recording();
        recording.enable(QP_STATE);
        recording.enable(ERROR_COMPLETION);
        List<RecordedEvent> events = record(recording);

        List<String> bTransitions = events.stream()
                .filter(e -> e.getEventType().getName().equals(QP_STATE) && e.getInt("qpNumber") == lastQpn)
                .map(e -> e.getString("from") + "->" + e.getString("to")).toList();
        assertEquals(List.of("RESET->INIT", "INIT->RTR", "RTR->RTS", "RTS->ERR"), bTransitions);
        RecordedEvent stateChange = events.stream().filter(e -> e.getEventType().getName().equals(QP_STATE))
                .findFirst().orElseThrow();
        assertEquals("RC", stateChange.getString("qpType"));
        assertTrue(stateChange.getString("device").startsWith("softrdma") || !Rig.onSoftrdma(),
                stateChange.getString("device"));

        List<RecordedEvent> errors = events.stream()
                .filter(e -> e.getEventType().getName().equals(ERROR_COMPLETION)).toList();
        assertEquals(1, errors.size(), errors.toString());
        assertEquals(99, errors.getFirst().getLong("wrId"));
        assertEquals(lastQpn, errors.getFirst().getInt("qpNumber"));
        assertEquals(WcStatus.WR_FLUSH_ERROR.toString(), errors.getFirst().getString("status"));
    }

    @Test
    void defaultSettingsLeaveThemOff() throws Exception {
        List<RecordedEvent> events = record(new Recording(Configuration.getConfiguration("default")));
        assertFalse(events.stream().anyMatch(e -> true), "verbs4j events in a default recording: " + events);
    }
}
