/**
 * verbs4j cm: librdmacm for Java.
 *
 * <p>The native layer it calls is the raw package of module {@code io.github.verbs4j.ffi} (its
 * downcalls and struct codecs, exported to verbs4j only); the generated bindings beside it are
 * exported to verbs-core alone, so nothing here touches a generated struct.
 */
module io.github.verbs4j.cm {
    requires transitive io.github.verbs4j.core;
    requires io.github.verbs4j.ffi;
    requires jdk.jfr; // CmTelemetry's JFR event
    exports io.github.verbs4j.cm;
}
