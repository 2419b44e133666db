package io.github.verbs4j.internal;

import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The close guard without a device: {@link NativeHandle#retire} waits for a thread marked inside
 * the handle ({@link NativeHandle#enter} without its exit yet: a call still in the provider), and
 * a thread entering after the retire began is refused.
 */
class NativeHandleTest {

    @Test
    void retireWaitsForACallInsideAndLaterCallsAreRefused() throws Exception {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment object = arena.allocate(64);
            NativeHandle handle = new NativeHandle(object, 64);
            assertEquals(object.address(), handle.address());
            CountDownLatch inside = new CountDownLatch(1);
            CountDownLatch leave = new CountDownLatch(1);
            CompletableFuture<Void> caller = CompletableFuture.runAsync(() -> {
                InFlight mark = handle.enter("qp 1", "ibv_post_send");
                try {
                    inside.countDown();
                    leave.await(); // "inside the provider"
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                } finally {
                    mark.exit();
                }
            }, r -> Thread.ofPlatform().start(r));
            assertTrue(inside.await(10, TimeUnit.SECONDS));

            CompletableFuture<Void> close = CompletableFuture.runAsync(() -> handle.retire("qp 1"),
                    r -> Thread.ofPlatform().start(r));
            // the retire has begun (new calls refused) but must not finish while the call is inside
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!handle.isRetired() && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            IllegalStateException refused = assertThrows(IllegalStateException.class,
                    () -> handle.enter("qp 1", "ibv_poll_cq"));
            assertEquals("qp 1 is being closed (ibv_poll_cq refused: a close on another thread began)", refused.getMessage());
            Thread.sleep(200);
            assertFalse(close.isDone(), "retire returned while a call was still inside the handle");

            leave.countDown();
            caller.get(10, TimeUnit.SECONDS);
            close.get(10, TimeUnit.SECONDS);
            assertTrue(handle.isRetired());
            assertThrows(IllegalStateException.class, () -> handle.enter("qp 1", "ibv_post_recv"));

            handle.restore();
            handle.enter("qp 1", "ibv_post_recv").exit();
        }
    }

    @Test
    void theGuardModeIsReported() {
        String mode = InFlight.mode();
        assertTrue(mode.equals("membarrier") || mode.equals("fence"), mode);
        System.out.println("close guard mode: " + mode);
    }
}
