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
 *   <li><b>Leak check.</b> After each test, every verbs object the test opened and left open is
 *       reported, whatever opened it: what was made from an injected context (protection
 *       domains, memory regions, completion queues and channels, queue pairs, SRQs, address
 *       handles), contexts the test opened itself and what was made from them, rdma_cm event
 *       channels and their ids, and the owners of the layers above ({@code RdmaConnection},
 *       {@code RdmaServer}, a channel, its group and server, any owner that calls
 *       {@link io.github.verbs4j.CloseState#opened(Object)}). The test fails naming them (the
 *       object opened last first, each followed by what was made from it), and the harness closes
 *       them, in that order with children first, so that the next test starts clean. "Opened by
 *       the test" means after the harness's {@code beforeEach}: what a static initializer or an
 *       {@code @BeforeAll} method opened is the class's, and what is made on it during a test is
 *       not checked. When something is left open, the check first waits up to two seconds for
 *       closes that other threads are finishing. {@link #leakCheck()} turns the report off;
 *       what a test left open is closed all the same.</li>
 *   <li><b>One test at a time.</b> The leak check compares what is open in the whole JVM before
 *       and after a test, so the tests of a JVM must not run concurrently (JUnit's default): a
 *       test that starts while another runs on another thread fails with
 *       {@link org.junit.jupiter.api.extension.ExtensionConfigurationException} saying so. A
 *       test that runs another class through the engine on its own thread ({@code EngineTestKit})
 *       is fine.</li>
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
     * Whether a test fails when verbs objects it opened are still open after it (they are closed
     * either way).
     *
     * @return {@code true} (the default) to check
     */
    boolean leakCheck() default true;
}
