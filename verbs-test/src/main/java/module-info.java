/**
 * verbs4j's JUnit 5 harness: {@link io.github.verbs4j.test.SoftRdmaTest} runs a test class on
 * softrdma from the {@code verbs4j-softrdma} jar, injects {@link io.github.verbs4j.Context}s,
 * applies {@link io.github.verbs4j.test.Faults} and fails tests that leak verbs objects.
 */
module io.github.verbs4j.test {
    requires transitive io.github.verbs4j.core;
    requires transitive org.junit.jupiter.api;
    requires io.github.verbs4j.ffi;
    exports io.github.verbs4j.test;
}
