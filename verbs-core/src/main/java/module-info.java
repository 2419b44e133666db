/**
 * verbs4j core: libibverbs for Java on the Foreign Function and Memory API.
 *
 * <p>Applications use the owners in {@code io.github.verbs4j}. The generated bindings and the
 * raw layer live in module {@code io.github.verbs4j.ffi}, which exports them to verbs4j only.
 */
module io.github.verbs4j.core {
    requires io.github.verbs4j.ffi;
    requires jdk.jfr; // the JFR events of internal.Telemetry
    exports io.github.verbs4j;
    // for verbs-cm (and the test harness's leak check): the owners' shared lifecycle and the
    // bridge to package-private parts; for verbs-channel: internal.Tuning, the one reader of the
    // tuning properties
    exports io.github.verbs4j.internal to io.github.verbs4j.cm, io.github.verbs4j.channel, io.github.verbs4j.test,
            jdk.jfr;
}
