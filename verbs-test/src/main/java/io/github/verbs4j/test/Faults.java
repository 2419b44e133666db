package io.github.verbs4j.test;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Fault injection on softrdma's packet path for a {@link SoftRdmaTest} class: the knobs of
 * softrdma's {@code SOFTRDMA_FAULTS} (docs/softrdma.md), applied to every packet a queue pair
 * sends. The application sees correct data or the correct error status; with faults set, the
 * queue pairs of one process also go through the packet path, so an injected {@link Peer}
 * context is affected too.
 *
 * <pre>{@code
 * @SoftRdmaTest
 * @Faults(drop = 0.05, reorder = 0.05, delay = 0.1, delayTime = "2ms")
 * class LossyLinkTest { ... }
 * }</pre>
 *
 * <p><b>Per JVM, not per test.</b> softrdma reads {@code SOFTRDMA_FAULTS} once per process, when
 * its packet path starts, and has no control to change it afterwards. So faults are declared per
 * class, set (with {@code setenv}) before softrdma is loaded, and a class whose faults differ
 * from those the JVM's softrdma already runs with fails at once, saying so. Run classes with
 * different faults in separate JVMs: with Maven Surefire, {@code <reuseForks>false</reuseForks>}
 * (each test class gets its own JVM), or one execution per fault profile. A class without
 * {@code @Faults} runs with the {@code SOFTRDMA_FAULTS} of the environment the JVM started in
 * (normally none).
 *
 * <p>RNR (receiver not ready) is not a packet fault: provoke it as on hardware, by sending to a
 * queue pair with no receive posted ({@code ConnectOptions} sets the RNR retry count and timer).
 */
@Documented
@Inherited
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.TYPE)
public @interface Faults {

    /**
     * The whole {@code SOFTRDMA_FAULTS} value, e.g. {@code "seed=7,drop=0.05"}; when set, the
     * other elements must stay at their defaults.
     *
     * @return the raw specification, or {@code ""} to build it from the other elements
     */
    String value() default "";

    /**
     * Probability that a transmitted packet is dropped (the sender retransmits).
     *
     * @return 0 to 1
     */
    double drop() default 0;

    /**
     * Probability that a packet is sent twice.
     *
     * @return 0 to 1
     */
    double dup() default 0;

    /**
     * Probability that a packet is held back (about 0.3 ms) so that later ones overtake it.
     *
     * @return 0 to 1
     */
    double reorder() default 0;

    /**
     * Probability that a packet is held for {@link #delayTime()}.
     *
     * @return 0 to 1
     */
    double delay() default 0;

    /**
     * How long a delayed packet is held: a number with {@code us}, {@code ms} or no unit (seconds).
     *
     * @return the delay, {@code "2ms"} by default
     */
    String delayTime() default "2ms";

    /**
     * The seed of softrdma's fault generator: the same seed gives the same sequence of decisions.
     *
     * @return the seed
     */
    long seed() default 42;
}
