package io.github.verbs4j.internal;

import io.github.verbs4j.VerbsException;
import org.junit.jupiter.api.Test;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The close protocol every owner of core and cm uses. */
class LifecycleTest {

    private static final String OWNER = "Owner[1]";

    @Test
    void aDestroyThatThrowsLeavesTheOwnerOpenAndRegisteredAndALaterCloseSucceeds() {
        Lifecycle parent = new Lifecycle();
        Lifecycle child = new Lifecycle();
        Object childOwner = "Child[1]";
        parent.addDependent("Parent[1]", childOwner);
        AtomicInteger unregistered = new AtomicInteger();

        RuntimeException boom = new IllegalStateException("provider crashed");
        RuntimeException thrown = assertThrows(RuntimeException.class,
                () -> child.close(childOwner, () -> { throw boom; }, () -> parent.removeDependent(childOwner)));
        assertSame(boom, thrown);
        assertFalse(child.isClosed(), "a failed destroy leaves the owner open");
        child.ensureOpen(childOwner); // usable again
        assertEquals(0, unregistered.get());
        IllegalStateException refused = assertThrows(IllegalStateException.class,
                () -> parent.close("Parent[1]", () -> { }, () -> { }));
        assertTrue(refused.getMessage().contains("Child[1]"), refused.getMessage());

        // an Error and a verb failure are handled alike
        assertThrows(AssertionError.class, () -> child.close(childOwner, () -> { throw new AssertionError("x"); }, () -> { }));
        assertFalse(child.isClosed());
        assertThrows(VerbsException.class, () -> child.close(childOwner,
                () -> { throw VerbsException.of("ibv_destroy_qp", 16); }, () -> { }));
        assertFalse(child.isClosed());

        assertTrue(child.close(childOwner, () -> { }, () -> {
            unregistered.incrementAndGet();
            parent.removeDependent(childOwner);
        }));
        assertTrue(child.isClosed());
        assertEquals(1, unregistered.get());
        assertFalse(child.close(childOwner, () -> { throw new AssertionError("destroyed twice"); }, () -> { }),
                "close is idempotent");
        assertTrue(parent.close("Parent[1]", () -> { }, () -> { }), "the parent closes once its child is gone");
    }

    @Test
    void theWatcherSeesTheOwnerClosingBeforeTheDestroyAndOpenAgainWhenItFails() {
        Lifecycle life = new Lifecycle();
        java.util.List<String> seen = new java.util.ArrayList<>();
        life.watch(() -> seen.add(life.isOpen() ? "open" : life.isClosed() ? "closed" : "closing"));
        assertThrows(IllegalStateException.class, () -> life.close(OWNER, () -> {
            seen.add("destroy");
            throw new IllegalStateException("provider refused");
        }, () -> { }));
        assertEquals(java.util.List.of("closing", "destroy", "open"), seen);
        assertTrue(life.isOpen());
        seen.clear();
        assertTrue(life.close(OWNER, () -> seen.add("destroy"), () -> seen.add("unregistered")));
        assertEquals(java.util.List.of("closing", "destroy", "closed", "unregistered"), seen);
        assertFalse(life.isOpen());
        seen.clear();
        assertFalse(life.close(OWNER, () -> { }, () -> { }));
        assertEquals(java.util.List.of(), seen, "a close of a closed owner changes nothing");
    }

    @Test
    void aCheckedThrowableFromTheDestroyStepIsWrappedAndTheOwnerStaysOpen() {
        Lifecycle life = new Lifecycle();
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> life.close(OWNER, () -> { throw new java.io.IOException("io"); }, () -> { }));
        assertTrue(e.getCause() instanceof java.io.IOException);
        assertFalse(life.isClosed());
    }

    @Test
    void whileClosingTheOwnerRefusesUseAndNewDependentsButIsNotClosedYet() throws Exception {
        Lifecycle life = new Lifecycle();
        CountDownLatch inDestroy = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        Thread closer = Thread.ofPlatform().start(() -> life.close(OWNER, () -> {
            inDestroy.countDown();
            release.await();
        }, () -> { }));
        assertTrue(inDestroy.await(10, java.util.concurrent.TimeUnit.SECONDS));
        assertFalse(life.isClosed(), "isClosed means the close completed");
        assertEquals(OWNER + " is being closed", assertThrows(IllegalStateException.class, () -> life.ensureOpen(OWNER)).getMessage());
        assertThrows(IllegalStateException.class, () -> life.addDependent(OWNER, "late"));
        assertFalse(life.close(OWNER, () -> { throw new AssertionError("second destroy"); }, () -> { }),
                "a second close while the first runs returns at once");
        release.countDown();
        closer.join(10_000);
        assertTrue(life.isClosed());
        assertEquals(OWNER + " is closed", assertThrows(IllegalStateException.class, () -> life.ensureOpen(OWNER)).getMessage());
    }

    @Test
    void aNewDependentOfAClosedParentIsDestroyedNotLeftHalfMade() {
        Lifecycle parent = new Lifecycle();
        parent.close("Parent[2]", () -> { }, () -> { });
        AtomicInteger destroyed = new AtomicInteger();
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> parent.addNewDependent("Parent[2]", "Child[2]", destroyed::incrementAndGet));
        assertEquals("Parent[2] is closed", e.getMessage());
        assertEquals(1, destroyed.get(), "the native object made for the refused dependent is destroyed");
    }
}
