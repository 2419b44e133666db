package io.github.verbs4j.testsupport;

import java.util.concurrent.atomic.AtomicReference;

/**
 * A call made from a thread that does not own the objects it touches, for the tests of
 * confinement ({@code QueuePair.confine()}, {@code CompletionQueue.confine()}): verbs-core's
 * {@code ConfinementTest} and verbs-cm's {@code CmConfinedQueuePairTest}.
 */
public final class OtherThread {

    private OtherThread() {
    }

    /** Runs {@code action} on a new thread named "not-the-owner", waits for it, and returns what it threw (null when nothing). */
    public static Throwable thrownBy(Runnable action) throws InterruptedException {
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        Thread t = new Thread(() -> {
            try {
                action.run();
            } catch (Throwable e) {
                thrown.set(e);
            }
        }, "not-the-owner");
        t.start();
        t.join();
        return thrown.get();
    }

    /**
     * Asserts that {@code thrown} is a {@link WrongThreadException} whose message names
     * {@code owner} (its {@code toString()}) and the calling thread, the one the object is confined to.
     */
    public static void assertWrongThread(Throwable thrown, Object owner) {
        if (!(thrown instanceof WrongThreadException)) {
            throw new AssertionError("expected WrongThreadException naming " + owner + ", got " + thrown, thrown);
        }
        if (!thrown.getMessage().contains(owner.toString())) {
            throw new AssertionError("the object not named: " + thrown.getMessage(), thrown);
        }
        if (!thrown.getMessage().contains(Thread.currentThread().getName())) {
            throw new AssertionError("the owner thread not named: " + thrown.getMessage(), thrown);
        }
    }
}
