package io.github.verbs4j.internal;

import io.github.verbs4j.VerbsException;
import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.VerbsFunctions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The open/closing/closed state of one native owner and the owners that depend on it: the one
 * close protocol of every owner in verbs-core and verbs-cm.
 *
 * <p><b>Parents refuse.</b> Closing an owner while others still depend on it (a protection
 * domain with live memory regions, a completion queue still used by a queue pair...) throws
 * {@link IllegalStateException} naming them, and leaves the owner open; close the dependents first
 * (try-with-resources does this naturally). rdma-core itself refuses such destroys with EBUSY;
 * verbs4j says so in Java with the names, before the call.
 *
 * <p><b>Close is all or nothing.</b> {@link #close} marks the owner closing (new uses and new
 * dependents are refused from then on), runs the destroy step, and then either marks it closed
 * and runs the unregister step, or — when the destroy step failed in any way, a thrown
 * {@link RuntimeException} or {@link Error} included — puts it back to open, still registered
 * with its parents, so that the caller can retry and the parents can never be stranded.
 *
 * <p><b>Confined owners.</b> An owner {@linkplain #confine confined} to a thread (a queue pair or
 * completion queue whose hot path then runs without the close guard's mark) can be closed only
 * by that thread while it lives: {@link #close} on another thread, and the close of an owner it
 * depends on, throw {@link WrongThreadException} before anything is closed.
 *
 * <p>Thread-safe. Two threads closing one owner: one runs the destroy step, the other returns at
 * once.
 */
public final class Lifecycle {

    private static final int OPEN = 0;
    private static final int CLOSING = 1;
    private static final int CLOSED = 2;

    /** The dependents, each with its own lifecycle when it has one that can be confined, else {@link #NONE}. */
    private final Map<Object, Lifecycle> dependents = new ConcurrentHashMap<>();
    private static final Lifecycle NONE = new Lifecycle();
    private volatile int state = OPEN;
    /**
     * The thread the owner is confined to ({@link #confine}), or null: a shared owner. Set once,
     * under this object's lock, only while open; never cleared.
     */
    private volatile Thread confinedTo;
    /** Told of every change of {@link #state} made by {@link #close} (see {@link #watch}); null when none. */
    private volatile Runnable watcher;

    /** The destroy step of a close: returns normally only when the native object is gone. */
    @FunctionalInterface
    public interface Destroy {
        void destroy() throws Throwable;
    }

    /**
     * Records the owner as an open root ({@link OpenOwners}): one that no other owner tracks as a
     * dependent (a context the program opened, an event channel, a connection). Call once, at
     * the end of its constructor; the close that completes takes it off.
     */
    public void opened(Object owner) {
        OpenOwners.opened(this, owner, this);
    }

    /**
     * Has {@code watcher} run after each change of state that {@link #close} makes: once the
     * owner is closing (before the destroy step), and once it is closed or open again. For an owner
     * that keeps what its hot path may do in one field of its own, derived from this state and its
     * own (a queue pair: its QP state), so that a post reads one field instead of both; the
     * watcher recomputes it with {@link #isOpen}. Runs on the closing thread, outside this
     * object's lock; must not throw. One watcher per owner, set at its creation.
     */
    public void watch(Runnable watcher) {
        this.watcher = watcher;
    }

    /** Whether the owner is open: no close has begun (or the one that began failed). */
    public boolean isOpen() {
        return state == OPEN;
    }

    /** Whether the owner's close completed (a close in progress is not closed yet). */
    public boolean isClosed() {
        return state == CLOSED;
    }

    /** Throws {@link IllegalStateException} unless the owner is open; {@code owner}'s {@code toString()} names it. */
    public void ensureOpen(Object owner) {
        int s = state;
        if (s != OPEN) {
            throw s == CLOSED ? closedException(owner) : new IllegalStateException(owner + " is being closed");
        }
    }

    /** The exception for using a closed owner. */
    public static IllegalStateException closedException(Object owner) {
        return new IllegalStateException(owner + " is closed");
    }

    /** Registers {@code dependent}; throws {@link IllegalStateException} unless this owner is open. */
    public void addDependent(Object owner, Object dependent) {
        addDependent(owner, dependent, NONE);
    }

    /**
     * Registers {@code dependent}, whose own lifecycle is {@code dependentLife}: a close of this
     * owner refuses with {@link WrongThreadException} naming the dependent while that is
     * {@linkplain #confine confined} to another live thread. Throws {@link IllegalStateException}
     * unless this owner is open.
     */
    public synchronized void addDependent(Object owner, Object dependent, Lifecycle dependentLife) {
        ensureOpen(owner);
        dependents.put(dependent, dependentLife);
    }

    /**
     * Confines the owner to the calling thread: from now on {@link #close} on any other live
     * thread throws {@link WrongThreadException} and leaves the owner open, and so does the close
     * of an owner this one depends on ({@link #addDependent(Object, Object, Lifecycle)}). The
     * owner's hot path may then call the provider without the close guard's mark: only its own
     * thread can destroy the object, and not while it is inside a call (see {@link InFlight},
     * "Confined owners"). Under this object's lock, so a close that began first makes this throw,
     * and a close that begins later sees the confinement.
     *
     * @return true when this call confined the owner, false when it was confined to this thread already
     * @throws WrongThreadException when the owner is confined to another thread
     * @throws IllegalStateException when the owner is closed or being closed
     */
    public synchronized boolean confine(Object owner) {
        Thread current = Thread.currentThread();
        Thread o = confinedTo;
        if (o == current) {
            return false;
        }
        if (o != null) {
            throw new WrongThreadException(owner + " is confined to " + o + ": it cannot be confined to " + current);
        }
        ensureOpen(owner);
        confinedTo = current;
        return true;
    }

    /**
     * What a confined owner's hot-path owner field holds while the owner does not take the call
     * (a queue pair's {@code sendOwner} outside RTS, or once a close began; a completion queue's
     * {@code pollOwner} once a close began), in place of the owner thread: a thread that never
     * runs, so that no thread finds itself there and every call takes the confined slow path,
     * which tells a thread other than the owner that it is the wrong thread first and the owner
     * what the state refuses. (Null there means a shared owner.)
     */
    public static final Thread NOT_TAKING_CALLS = Thread.ofPlatform().name("verbs4j: a confined object not taking calls")
            .inheritInheritableThreadLocals(false).unstarted(() -> { });

    /** The thread the owner is confined to, or null when it is shared. */
    public Thread confinedTo() {
        return confinedTo;
    }

    /**
     * The refusal of a call of {@code what} on {@code owner} from a thread other than the one it
     * is confined to ({@code confinedTo}), named as FFM names a confined segment's.
     */
    public static WrongThreadException wrongThread(Object owner, Thread confinedTo, String what) {
        return new WrongThreadException(what + " on " + owner + " refused: it is confined to " + confinedTo
                + ", and this is " + Thread.currentThread());
    }

    /**
     * Throws {@link WrongThreadException} when the owner, or one of its dependents, is confined to
     * a thread other than the calling one that is still alive (a thread that ended is inside no
     * call, so its objects may be closed by any thread). Under this object's lock, before a close
     * changes anything.
     */
    private void refuseForeignClose(Object owner) {
        Thread o = confinedTo;
        if (o != null && o != Thread.currentThread() && o.isAlive()) {
            throw wrongThread(owner, o, "close");
        }
        for (Map.Entry<Object, Lifecycle> d : dependents.entrySet()) {
            Thread t = d.getValue().confinedTo;
            if (t != null && t != Thread.currentThread() && t.isAlive() && !d.getValue().isClosed()) {
                throw new WrongThreadException("cannot close " + owner + ": " + d.getKey() + " depends on it and is"
                        + " confined to " + t + " (this is " + Thread.currentThread() + "); its owner thread must"
                        + " close it first. Nothing was closed");
            }
        }
    }

    /**
     * Registers a dependent whose native object was just created: when this owner is no longer
     * open (a close raced the creation), {@code undo} destroys the new native object before the
     * {@link IllegalStateException} is thrown, so nothing is left half-made.
     */
    public void addNewDependent(Object owner, Object dependent, Destroy undo) {
        try {
            addDependent(owner, dependent);
        } catch (IllegalStateException e) {
            try {
                undo.destroy();
            } catch (Throwable t) {
                e.addSuppressed(t);
            }
            throw e;
        }
    }

    /** The dependents registered now (a snapshot): what a leak check reports. */
    public List<Object> dependents() {
        return List.copyOf(dependents.keySet());
    }

    /** Unregisters {@code dependent} (after its own close completed). */
    public void removeDependent(Object dependent) {
        dependents.remove(dependent);
    }

    /**
     * Closes the owner: see the class description.
     *
     * @param owner     the owner, named in exceptions
     * @param destroy   destroys the native object; returns normally only on success
     * @param onClosed  runs after a successful destroy (unregister from parents, free memory);
     *                  must not throw
     * @return {@code true} when this call closed the owner, {@code false} when it was already
     *         closed or another thread is closing it
     * @throws IllegalStateException naming the dependents that are still open (the owner stays open)
     * @throws VerbsException (or whatever {@code destroy} threw) when the destroy step failed;
     *         the owner stays open and registered
     */
    public boolean close(Object owner, Destroy destroy, Runnable onClosed) {
        synchronized (this) {
            if (state != OPEN) {
                return false;
            }
            refuseForeignClose(owner);
            if (!dependents.isEmpty()) {
                List<String> names = new ArrayList<>();
                for (Object d : dependents.keySet()) {
                    names.add(String.valueOf(d));
                }
                names.sort(null);
                throw new IllegalStateException("cannot close " + owner + ": still in use by " + names.size()
                        + (names.size() == 1 ? " object: " : " objects: ") + String.join(", ", names)
                        + "; close them first");
            }
            state = CLOSING;
        }
        changed();
        boolean destroyed = false;
        try {
            destroy.destroy();
            destroyed = true;
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("verbs4j: unexpected failure closing " + owner, t);
        } finally {
            state = destroyed ? CLOSED : OPEN;
            changed();
        }
        OpenOwners.closed(this);
        onClosed.run();
        return true;
    }

    private void changed() {
        Runnable w = watcher;
        if (w != null) {
            w.run();
        }
    }

    /**
     * {@link #close(Object, Destroy, Runnable)} for an owner whose calls go through
     * {@code handle}: the handle is retired (waiting for calls in progress on other threads)
     * before {@code destroy} runs, and restored if it fails.
     */
    public boolean close(Object owner, NativeHandle handle, Destroy destroy, Runnable onClosed) {
        return close(owner, () -> {
            handle.retire(owner);
            try {
                destroy.destroy();
            } catch (Throwable t) {
                handle.restore();
                throw t;
            }
        }, onClosed);
    }

    /**
     * Calls a destroy verb of the form {@code int verb(handle)} (bound with errno captured, see
     * {@link VerbsFunctions}) and throws {@link VerbsException} naming it and its errno when it
     * returns non-zero.
     *
     * @throws UnsupportedOperationException when the loaded library lacks the verb ({@code handle} null)
     */
    public static void destroyVerb(String verb, MethodHandle handle, MemorySegment object) throws Throwable {
        MethodHandle h = VerbsFunctions.need(handle, verb);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            int rc = (int) h.invokeExact(errno, object);
            if (rc != 0) {
                throw VerbsException.of(verb, Downcalls.errnoOf(rc, errno));
            }
        }
    }
}
