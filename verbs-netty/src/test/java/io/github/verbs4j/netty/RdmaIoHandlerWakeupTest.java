package io.github.verbs4j.netty;

import io.netty.channel.IoHandler;
import io.netty.util.concurrent.ThreadAwareExecutor;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * {@link RdmaIoHandler#wakeup()} is called from any thread, also while and after the loop ends
 * (a task handed to a loop that is shutting down): it neither fails nor writes to the closed
 * eventfd, and the loop's end does not fail on a wakeup in flight (it did: its arena close threw
 * "Session is acquired by 1 clients" on the loop's thread).
 */
@Timeout(120)
public class RdmaIoHandlerWakeupTest {

    /** The handler's executor: only asked whether a thread is its own. */
    private static final ThreadAwareExecutor NO_LOOP = new ThreadAwareExecutor() {
        @Override
        public boolean isExecutorThread(Thread thread) {
            return false;
        }

        @Override
        public void execute(Runnable command) {
            throw new UnsupportedOperationException("no loop in this test");
        }
    };

    @Test
    void wakeupsRacingTheEndOfTheLoopNeitherFailNorReachTheClosedFd() throws Exception {
        for (int round = 0; round < 50; round++) {
            IoHandler handler = RdmaIoHandler.newFactory().newHandler(NO_LOOP);
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> wakers = new ArrayList<>();
            for (int t = 0; t < 2; t++) {
                Thread w = new Thread(() -> {
                    try {
                        while (!stop.get()) {
                            handler.wakeup();
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                });
                w.start();
                wakers.add(w);
            }
            Thread.sleep(2);
            try {
                handler.destroy(); // while the wakers write
                Thread.sleep(2);   // and they go on after it
                handler.wakeup();
            } finally {
                stop.set(true);
                for (Thread w : wakers) {
                    w.join();
                }
            }
            assertNull(failure.get(), "round " + round + ": a wakeup failed");
        }
    }
}
