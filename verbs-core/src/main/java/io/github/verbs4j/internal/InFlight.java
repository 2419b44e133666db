package io.github.verbs4j.internal;

import io.github.verbs4j.raw.Membarrier;

import java.lang.invoke.MethodHandles;
import java.lang.ref.WeakReference;
import java.lang.invoke.VarHandle;
import java.util.Arrays;

/**
 * One thread's mark "a hot-path call of mine may be inside the provider with this object's
 * pointer": the caller's side of {@link NativeHandle}'s close guard, which costs no atomic
 * read-modify-write on shared memory.
 *
 * <p><b>The protocol</b> (an asymmetric Dekker handshake, as userspace RCU's membarrier flavour):
 * <pre>
 *   caller (every post, poll, notify)        close ({@link NativeHandle#retire})
 *   mark.inside = handle.id   (opaque)       handle.retired = true     (volatile)
 *   compiler barrier                         membarrier(PRIVATE_EXPEDITED)
 *   if (handle.retired) refuse (volatile)    wait until no mark names handle.id
 *   call the provider with the address       destroy verb
 *   mark.inside = 0           (release)
 * </pre>
 * Either the caller sees {@code retired} and never calls, or the close sees the mark and waits
 * for it to clear: both sides missing each other would need the caller's store to pass its own
 * later load, which the barrier on the close's side excludes ({@code membarrier} makes every
 * running thread of the process execute a full fence; one not running passed one when it was
 * switched out). The caller pays a plain store, a plain load and a plain store to a line only
 * its own thread writes: on x86 the same instructions as without a guard, give or take three.
 *
 * <p><b>Folding the retired check into an owner's field.</b> The caller's load need not be of
 * {@code retired} itself: the argument holds for any volatile field the close stores to before
 * its barrier, and refuses the call when it reads "closing". The QP's posts use this
 * ({@link NativeHandle#enterUnchecked}): they publish the mark and then read
 * {@code QueuePair.postable}, which the close clears (under the QP's lock, from its state
 * watcher: {@code Lifecycle.close} sets the owner's state to closing and runs the watcher before
 * it calls {@link NativeHandle#retire}) before {@code retired = true} and the barrier, and which no
 * later refresh sets again while the owner is not open. So one load both checks the QP's states
 * and takes the retired load's place: a caller that reads the bit set had its mark published
 * before the close's barrier and is waited for; one that reads it clear leaves its mark and takes
 * the slow path, which checks the owner's state and then enters with the retired check. After a
 * failed destroy {@link NativeHandle#restore} clears {@code retired} before the owner reads open
 * again and the watcher sets the bits back.
 *
 * <p><b>Confined owners: no mark.</b> A queue pair or completion queue confined to a thread
 * ({@code QueuePair.confine()}, {@code CompletionQueue.confine()}, kept in {@link Lifecycle#confine})
 * takes its owner thread's posts, polls and notify requests past this protocol: they publish no
 * mark. Sound because the destroy is the only thing the mark protects against, and only the
 * owner thread can run it while it lives: {@link Lifecycle#close} on another thread (the owner's
 * own, or a parent's with the owner still open as its dependent) throws
 * {@link WrongThreadException} under the lifecycle's lock before the state changes, and the
 * owner thread is not inside one of its calls when it closes. A call of the owner after its
 * close is refused by the owner's own state check, in program order. {@link Lifecycle#confine}
 * takes the same lock, so a close either began first (the confinement is refused) or sees it.
 * Another thread that read the owner field as null just before the confinement takes the
 * marked path; the owner's close still runs {@link NativeHandle#retire}, which waits for that
 * mark. A thread that ended is inside no call, so then any thread may close.
 *
 * <p><b>Compiler ordering.</b> The Java memory model lets a compiler move a store after a later
 * load; the barrier between the two is {@link VarHandle#acquireFence()}, which in HotSpot's
 * compilers is a memory barrier node that no memory access crosses (C2's {@code MemBarAcquire}
 * takes and yields all of memory), and which emits no instruction on x86 (TSO: the one hardware
 * reordering, a store passing a later load, is exactly what the {@code membarrier} call
 * removes). On AArch64 it is a {@code dmb ishld}, which with the {@code membarrier} gives the
 * same guarantee. The clearing store is a release, so the provider's own accesses are complete
 * before the mark reads clear.
 *
 * <p><b>Without membarrier</b> (another OS or architecture, a kernel before 4.14, a seccomp
 * filter refusing the syscall, or {@code -Dverbs4j.closeGuard=fence}) the caller's store is
 * volatile (a full fence: on x86 one locked instruction on a line no other thread writes, still
 * cheaper than a shared arena's acquire and release, which are two locked updates of a line all
 * callers share), and the close side needs no barrier: volatile accesses are sequentially
 * consistent.
 *
 * <p><b>Which record.</b> One per thread ({@link ThreadLocal}: virtual threads have their own; a
 * virtual thread cannot unmount inside a downcall, and between its mark and the call it runs no
 * code that parks). The lookup ({@code ThreadLocal.get}: a hash probe and a weak reference read)
 * was most of the guard's cost, so the reusable objects of the hot path ({@code SendRequest},
 * {@code ReceiveRequest}, {@code Completions}) keep the record of the thread that used them
 * last, and {@link #of} takes it when its {@link #ownerId} is the calling thread's (the id read from
 * {@link Thread#currentThread()}, an intrinsic, and compared: the record names its thread by id,
 * so a cached record keeps no ended thread alive): the record is still the calling thread's own
 * whichever thread uses the object, because the cache is one reference to a record whose owner
 * is final, read once (a torn pair of fields could hand one thread another's record). The caches
 * start as the creating thread's record ({@code of(null)}), so that a thread using its own objects
 * never runs the lookup and C2 compiles it as an uncommon trap, not a call that makes it spill
 * the values live across it. Records are kept in one list for {@link #awaitClear} to scan; records of
 * threads that ended are dropped when the list has doubled since it was last pruned. A handle's
 * sessions (the extended QP's and CQ's, several calls under one mark) use a record of the handle's
 * own instead ({@link NativeHandle#enterSession}), listed until the handle is retired.
 */
public final class InFlight {

    /**
     * {@code -Dverbs4j.closeGuard=off}, <b>for tests only</b>: callers publish no mark and a close
     * waits for no call in flight (the owners' own check and the retired check stay), so a
     * destroy can run under a post or poll. It exists to show that {@code CloseRaceTest} fails
     * without the guard (docs/architecture.md, "Showing that the guard holds"); never use it
     * otherwise. A constant to the compilers, so the guard's code is unchanged when on. The
     * property's other modes are {@code membarrier} (the default) and {@code fence}; it is read
     * once, through {@link Tuning} (an unknown mode: one warning, and the default).
     */
    static final boolean OFF;

    /** Whether the close side uses {@code membarrier(2)} and the callers only a compiler barrier. */
    static final boolean ASYMMETRIC;

    static {
        String mode = Tuning.choiceProperty("verbs4j.closeGuard", "membarrier", "membarrier", "fence", "off");
        OFF = mode.equals("off");
        ASYMMETRIC = mode.equals("membarrier") && Membarrier.register();
    }

    private static final VarHandle INSIDE;

    static {
        try {
            INSIDE = MethodHandles.lookup().findVarHandle(InFlight.class, "inside", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private static final Object LOCK = new Object();
    private static final ThreadLocal<InFlight> CURRENT = ThreadLocal.withInitial(InFlight::register);
    /** Every record of a live thread (and some of ended ones); replaced, never changed, under {@link #LOCK}. */
    private static volatile InFlight[] all = new InFlight[0];
    private static int pruneAt = 64;

    /**
     * {@link Thread#threadId()} of the thread whose record this is; 0 for a handle's session
     * record (thread ids start at 1). {@link #of} compares it with the calling thread's: an id is
     * never reused while the JVM runs, and a record cached by a long-lived object (a request kept
     * in a pool, say) must not keep the ended thread that used it last reachable.
     */
    private final long ownerId;
    /** The owning thread, for the prune's {@link Thread#isAlive()} only; null for a session record. */
    private final WeakReference<Thread> owner;
    /**
     * The {@link NativeHandle#id} of the handle a call of this thread is inside, or 0; through
     * {@link #INSIDE}. A {@code long}, not the handle: no GC write barrier on the hot path.
     */
    @SuppressWarnings("unused")
    private volatile long inside;

    private InFlight(Thread thread) {
        this.ownerId = thread == null ? 0 : thread.threadId();
        this.owner = thread == null ? null : new WeakReference<>(thread);
    }

    /** How the close guard orders its two sides here: "membarrier", "fence", or "off" (tests only). */
    public static String mode() {
        return OFF ? "off" : ASYMMETRIC ? "membarrier" : "fence";
    }

    /** The calling thread's record. */
    static InFlight current() {
        return CURRENT.get();
    }

    /**
     * The calling thread's record: {@code cached} when it is that (an object of the hot path keeps
     * the record of the thread that used it last), else the one found through the thread-local.
     * The caller stores the result back into its cache when it differs from {@code cached}.
     */
    public static InFlight of(InFlight cached) {
        return cached != null && cached.ownerId == Thread.currentThread().threadId() ? cached : CURRENT.get();
    }

    private static InFlight register() {
        InFlight record = new InFlight(Thread.currentThread());
        add(record);
        return record;
    }

    /** A record tied to no thread (a handle's sessions'): scanned until {@link #unregister}. */
    static InFlight registerUnowned() {
        InFlight record = new InFlight(null);
        add(record);
        return record;
    }

    /** Adds {@code record} again after {@link #unregister} (a close that did not happen). */
    static void reregister(InFlight record) {
        add(record);
    }

    /** Stops scanning {@code record}, which no call may use any more. */
    static void unregister(InFlight record) {
        synchronized (LOCK) {
            InFlight[] old = all;
            for (int i = 0; i < old.length; i++) {
                if (old[i] == record) {
                    InFlight[] next = new InFlight[old.length - 1];
                    System.arraycopy(old, 0, next, 0, i);
                    System.arraycopy(old, i + 1, next, i, old.length - i - 1);
                    all = next;
                    return;
                }
            }
        }
    }

    private static void add(InFlight record) {
        synchronized (LOCK) {
            InFlight[] old = all;
            int n = 0;
            InFlight[] next;
            if (old.length >= pruneAt) {
                next = new InFlight[old.length + 1];
                for (InFlight r : old) {
                    if (r.owner == null || isAlive(r.owner.get()) || (long) INSIDE.getVolatile(r) != 0) {
                        next[n++] = r;
                    }
                }
                pruneAt = Math.max(64, 2 * (n + 1));
            } else {
                next = new InFlight[old.length + 1];
                System.arraycopy(old, 0, next, 0, old.length);
                n = old.length;
            }
            next[n++] = record;
            all = n == next.length ? next : Arrays.copyOf(next, n);
        }
    }

    private static boolean isAlive(Thread thread) {
        return thread != null && thread.isAlive();
    }

    /** Publishes "inside {@code handle}"; the caller then reads the handle's retired state. */
    void publish(long handle) {
        if (ASYMMETRIC) {
            INSIDE.setOpaque(this, handle);
            VarHandle.acquireFence(); // a compiler barrier between the store and the caller's next load
        } else if (!OFF) {
            INSIDE.setVolatile(this, handle);
        }
    }

    /** Clears the mark: the call returned (or never started). */
    public void exit() {
        INSIDE.setRelease(this, 0L);
    }

    /** The close side's barrier, between its volatile store of the retired state and {@link #awaitClear}. */
    static void barrier() {
        if (ASYMMETRIC) {
            Membarrier.barrier();
        }
    }

    /**
     * Waits until no thread's mark names {@code handle}.
     *
     * @return false when a mark still named it at {@code deadline} ({@link System#nanoTime()})
     */
    static boolean awaitClear(long handle, long deadline) {
        if (OFF) {
            return true; // the guard disabled for a test: the destroy does not wait
        }
        for (InFlight r : all) {
            for (int spins = 0; (long) INSIDE.getVolatile(r) == handle; spins++) {
                if (System.nanoTime() - deadline > 0) {
                    return false;
                }
                if (spins < 100) {
                    Thread.onSpinWait();
                } else {
                    Thread.yield();
                }
            }
        }
        return true;
    }
}
