package io.github.verbs4j;

import java.lang.reflect.Field;
import java.lang.reflect.Method;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every hot verb is refused by the close guard itself ({@code NativeHandle.enter}), not only by
 * the owner's "closed" check in front of it: the handle is retired as {@code close()} retires it
 * just before the destroy verb, while the owner still reads as open (as for a call that passed
 * its owner's check just before another thread's close began). Restoring the handle (what a
 * failed destroy does) makes the same calls work again, so the refusal came from the guard. A
 * QP's posts read, after their mark, the QP's {@code postable} field instead of the retired flag
 * (close clears it before it retires the handle: {@code InFlight}'s javadoc), so for them the
 * test clears it first, as close does.
 */
class HotPathGuardTest {

    private static void assertRefusedByGuard(Object owner, String verb, Executable call) {
        IllegalStateException e = assertThrows(IllegalStateException.class, call);
        assertEquals(owner + " is closed (" + verb + " refused: closed by another thread)", e.getMessage());
    }

    private static void setPostable(QueuePair qp, int bits) throws ReflectiveOperationException {
        Field f = QueuePair.class.getDeclaredField("postable");
        f.setAccessible(true);
        f.setInt(qp, bits);
    }

    private static int postable(QueuePair qp) throws ReflectiveOperationException {
        Field f = QueuePair.class.getDeclaredField("postable");
        f.setAccessible(true);
        return f.getInt(qp);
    }

    private static void refreshPostable(QueuePair qp) throws ReflectiveOperationException {
        Method m = QueuePair.class.getDeclaredMethod("refreshPostable");
        m.setAccessible(true);
        m.invoke(qp);
    }

    @Test
    void everyHotVerbIsRefusedOnceItsOwnersHandleIsRetired() throws Exception {
        try (Rig rig = Rig.rc(); SharedReceiveQueue srq = rig.pd.createSrq(8, 1)) {
            SendRequest write = SendRequest.rdmaWrite().local(rig.mrA, 0, 64).remote(rig.mrB.remote(), 0).signaled(true);
            ReceiveRequest recv = ReceiveRequest.create().local(rig.mrB, 0, 64);
            Completions wcs = new Completions(4);

            // what close() does to a QP before the destroy: its watcher clears postable (the posts'
            // one load after their mark, which stands in for the retired flag), then the handle retires
            setPostable(rig.a, 0);
            rig.a.handle.retire(rig.a);
            assertRefusedByGuard(rig.a, "ibv_post_send", () -> rig.a.postSend(write));
            assertRefusedByGuard(rig.a, "ibv_post_recv", () -> rig.a.postRecv(recv));
            assertRefusedByGuard(rig.a, "ibv_post_send", () -> rig.a.tryPostSend(write));
            rig.cqA.handle.retire(rig.cqA);
            assertRefusedByGuard(rig.cqA, "ibv_poll_cq", () -> rig.cqA.poll(wcs));
            assertRefusedByGuard(rig.cqA, "ibv_req_notify_cq", () -> rig.cqA.requestNotify(false));
            srq.handle.retire(srq);
            assertRefusedByGuard(srq, "ibv_post_srq_recv", () -> srq.postRecv(recv));
            assertRefusedByGuard(srq, "ibv_post_srq_recv", () -> srq.tryPostRecv(recv));

            // what a failed destroy does: the objects live on, and so do their calls
            rig.a.handle.restore();
            refreshPostable(rig.a); // as the close's watcher does once the owner reads open again
            assertEquals(3, postable(rig.a), "sends and receives take the fast path again");
            rig.cqA.handle.restore();
            srq.handle.restore();
            rig.b.postRecv(ReceiveRequest.create().local(rig.mrB, 128, 64));
            rig.a.postSend(write);
            Completion wc = rig.next(rig.cqA);
            assertTrue(wc.ok(), () -> "after restore: " + wc.status());
            rig.cqA.requestNotify(false);
            srq.postRecv(recv);
            assertEquals(0, rig.cqA.poll(wcs));
        }
    }

    /**
     * requestNotify keeps the arming thread's record in the queue (as posts and polls keep it
     * in their request objects): armed by another thread and then by this one, each arm works,
     * and once the handle is retired the arm with the cached record is refused by the guard.
     * (A queue alone, no connected pair: this one runs on iWARP too.)
     */
    @Test
    void aQueueArmedBeforeIsRefusedWithTheRecordItCached() throws Exception {
        try (Context ctx = Rig.open(); CompletionQueue cq = ctx.createCq(64)) {
            Thread other = Thread.ofPlatform().start(() -> cq.requestNotify(false));
            other.join();
            cq.requestNotify(false); // another thread's record is not taken: this thread's is cached
            cq.requestNotify(true);
            cq.handle.retire(cq);
            assertRefusedByGuard(cq, "ibv_req_notify_cq", () -> cq.requestNotify(false));
            cq.handle.restore();
            cq.requestNotify(false);
        }
    }
}
