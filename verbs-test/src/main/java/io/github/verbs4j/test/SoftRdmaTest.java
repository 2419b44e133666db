package io.github.verbs4j.test;

import org.junit.jupiter.api.extension.ExtendWith;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Runs a JUnit 5 test class on softrdma, the software RDMA device, from the
 * {@code io.github.verbs4j:verbs4j-softrdma} jar: no RDMA hardware, no native build, no system
 * properties to wire.
 *
 * <pre>{@code
 * @SoftRdmaTest
 * class MyRdmaTest {
 *     @Test
 *     void writes(Context ctx, @Peer Context peer) {
 *         try (ProtectionDomain pd = ctx.allocatePd()) { ... }
 *     }
 * }
 * }</pre>
 *
 * <ul>
 *   <li><b>Substrate.</b> Before the class's first test, {@link io.github.verbs4j.Verbs#useSoftRdma()}
 *       selects softrdma from the jar (extracted once into {@code ~/.cache/verbs4j}). When
 *       {@code -Dverbs4j.libibverbs} names a library, that one is used instead (for example a
 *       softrdma build folder).</li>
 *   <li><b>Injection.</b> A test method (or a {@code @BeforeEach}/{@code @AfterEach} method) may
 *       declare a parameter of type {@link io.github.verbs4j.Context}: the harness opens the first
 *       device for the test and closes it after. A second parameter annotated {@link Peer} gets a
 *       second context on the same device, for the other side of a two-sided test.</li>
 *   <li><b>Leak check.</b> After each test, every verbs object still open that was made from an
 *       injected context (protection domains, memory regions, completion queues and channels,
 *       queue pairs, SRQs, address handles) is reported: the test fails naming them, and the
 *       harness closes them so that the next test starts clean. {@link #leakCheck()} turns it off.</li>
 *   <li><b>Faults.</b> {@link Faults} on the class sets softrdma's packet-path fault injection.</li>
 * </ul>
 */
@Documented
@Inherited
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.TYPE)
@ExtendWith(SoftRdmaExtension.class)
public @interface SoftRdmaTest {

    /**
     * Whether a test fails when verbs objects made from its injected contexts are still open
     * after it.
     *
     * @return {@code true} (the default) to check
     */
    boolean leakCheck() default true;
}
