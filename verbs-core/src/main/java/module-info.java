/**
 * verbs4j core: libibverbs for Java on the Foreign Function and Memory API.
 *
 * <p>The generated bindings ({@code io.github.verbs4j.ffi}) are not exported: applications use
 * the owners in {@code io.github.verbs4j}.
 */
module io.github.verbs4j.core {
    exports io.github.verbs4j;
    // for verbs-cm only: native loading and downcall factories
    exports io.github.verbs4j.internal to io.github.verbs4j.cm;
}
