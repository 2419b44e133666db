/**
 * verbs4j cm: librdmacm for Java.
 *
 * <p>The generated bindings ({@code io.github.verbs4j.cm.ffi}) are not exported.
 */
module io.github.verbs4j.cm {
    requires transitive io.github.verbs4j.core;
    exports io.github.verbs4j.cm;
}
