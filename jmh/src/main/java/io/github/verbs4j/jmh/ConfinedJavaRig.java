package io.github.verbs4j.jmh;

import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * A {@link JavaRig} with its queue pairs and completion queues confined to the benchmark thread
 * ({@code QueuePair.confine()}, {@code CompletionQueue.confine()}): the verbs4j rows of
 * {@link JavaVsC} named {@code <verb>JavaConfined}. JMH runs a thread-scoped state's trial setup
 * on the benchmark thread, which then makes every call (a call from another thread would throw
 * {@link WrongThreadException}).
 */
@State(Scope.Thread)
public class ConfinedJavaRig {

    private final JavaRig rig = new JavaRig();

    @Setup(Level.Trial)
    public void setUp() {
        rig.setUp();
        rig.confine();
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        rig.tearDown();
    }

    long sendRecv() {
        return rig.sendRecv();
    }

    long write() {
        return rig.write();
    }

    long read() {
        return rig.read();
    }

    long chain16Write() {
        return rig.chain16Write();
    }

    int pollEmpty() {
        return rig.pollEmpty();
    }
}
