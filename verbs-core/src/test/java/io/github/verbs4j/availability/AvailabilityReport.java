package io.github.verbs4j.availability;

import io.github.verbs4j.Verbs;
import io.github.verbs4j.VerbsException;

/**
 * Run in a fresh JVM by {@link AvailabilityTest}: answers the availability questions once, in
 * a JVM whose library selection and native-access flags the test chose, as key=value lines.
 */
public final class AvailabilityReport {

    private AvailabilityReport() {
    }

    public static void main(String[] args) {
        System.out.println("available=" + Verbs.isAvailable());
        Throwable cause = Verbs.unavailabilityCause();
        System.out.println("causeClass=" + (cause == null ? "" : cause.getClass().getName()));
        System.out.println("cause=" + (cause == null ? "" : oneLine(cause.getMessage())));
        try {
            System.out.println("devices=" + Verbs.devices().size());
        } catch (VerbsException e) {
            System.out.println("devicesVerb=" + e.verb());
            System.out.println("devicesErrno=" + e.errnoName());
            System.out.println("devicesError=" + oneLine(e.getMessage()));
        } catch (RuntimeException | LinkageError e) {
            System.out.println("devicesError=" + e.getClass().getName() + ": " + oneLine(e.getMessage()));
        }
    }

    private static String oneLine(String s) {
        return s == null ? "" : s.replace('\n', ' ');
    }
}
