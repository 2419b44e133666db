package io.github.verbs4j.internal;

import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
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

    /**
     * A record cached by a request object is taken only by its own thread: another thread using
     * the same object gets its own record (and caches that), and a close waits for a call marked
     * through the cache as for one marked through the thread-local.
     */
    @Test
    void aCachedRecordIsTheCallingThreadsOwn() throws Exception {
        try (Arena arena = Arena.ofConfined()) {
            NativeHandle handle = new NativeHandle(arena.allocate(64), 64);
            InFlight mine = handle.enter(null, "qp 2", "ibv_post_send");
            mine.exit();
            assertSame(InFlight.current(), mine, "no cache: the thread-local's record");
            assertSame(mine, handle.enter(mine, "qp 2", "ibv_post_send"), "the cache is this thread's record");
            mine.exit();

            // another thread handed this thread's record (a request object shared between threads)
            InFlight[] theirs = new InFlight[2];
            Thread other = Thread.ofPlatform().start(() -> {
                theirs[0] = InFlight.of(mine);
                theirs[1] = InFlight.current();
            });
            other.join(10_000);
            assertNotSame(mine, theirs[0], "another thread must never take this thread's record");
            assertSame(theirs[1], theirs[0], "it takes its own");
            assertSame(mine, InFlight.of(theirs[0]), "and this thread its own, whatever the cache holds");

            // a close waits for a call marked through the cache
            CountDownLatch inside = new CountDownLatch(1);
            CountDownLatch leave = new CountDownLatch(1);
            CompletableFuture<Void> caller = CompletableFuture.runAsync(() -> {
                InFlight cached = InFlight.current();
                InFlight mark = handle.enter(cached, "qp 2", "ibv_post_send");
                try {
                    inside.countDown();
                    leave.await();
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                } finally {
                    mark.exit();
                }
            }, r -> Thread.ofPlatform().start(r));
            assertTrue(inside.await(10, TimeUnit.SECONDS));
            CompletableFuture<Void> close = CompletableFuture.runAsync(() -> handle.retire("qp 2"),
                    r -> Thread.ofPlatform().start(r));
            Thread.sleep(200);
            assertFalse(close.isDone(), "retire returned while a call marked through a cached record was inside");
            assertThrows(IllegalStateException.class, () -> handle.enter(mine, "qp 2", "ibv_poll_cq"));
            leave.countDown();
            caller.get(10, TimeUnit.SECONDS);
            close.get(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void aCachedRecordDoesNotKeepItsEndedThreadReachable() throws Exception {
        // a request object kept in a pool caches the record of the thread that used it last; when
        // that thread has ended, the record must not hold the Thread (its name, its context loader)
        InFlight[] cachedByAnObject = new InFlight[1];
        Thread user = Thread.ofPlatform().start(() -> cachedByAnObject[0] = InFlight.current());
        user.join(10_000);
        assertFalse(user.isAlive());
        ReferenceQueue<Thread> cleared = new ReferenceQueue<>();
        WeakReference<Thread> ended = new WeakReference<>(user, cleared);
        user = null;
        Reference<? extends Thread> seen = null;
        for (int i = 0; i < 50 && seen == null; i++) {
            System.gc();
            seen = cleared.remove(100);
        }
        assertSame(ended, seen, "the ended thread stayed reachable through the record an object cached");
        assertNotSame(cachedByAnObject[0], InFlight.of(cachedByAnObject[0]), "and the record is not this thread's");
    }

    @Test
    void theGuardModeIsReported() {
        String mode = InFlight.mode();
        assertEquals("off".equalsIgnoreCase(System.getProperty("verbs4j.closeGuard")), mode.equals("off"), mode);
        assertTrue(mode.equals("membarrier") || mode.equals("fence") || mode.equals("off"), mode);
        System.out.println("close guard mode: " + mode);
    }
}
