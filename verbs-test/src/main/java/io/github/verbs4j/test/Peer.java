package io.github.verbs4j.test;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Marks an injected {@link io.github.verbs4j.Context} parameter as the second one of a test: the
 * other side of a two-sided exchange, opened on the same device as the unannotated one but a
 * context of its own (its own protection domains, queues and agent).
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.PARAMETER)
public @interface Peer {
}
