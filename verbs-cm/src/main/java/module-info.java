/**
 * verbs4j cm: librdmacm for Java.
 *
 * <p>The bindings it calls live in module {@code io.github.verbs4j.ffi} (exported to verbs4j only).
 */
module io.github.verbs4j.cm {
    requires transitive io.github.verbs4j.core;
    requires io.github.verbs4j.ffi;
    requires jdk.jfr; // CmTelemetry's JFR event
    exports io.github.verbs4j.cm;
}
