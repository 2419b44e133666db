package io.github.verbs4j.test;

import io.github.verbs4j.Closer;
import io.github.verbs4j.Context;
import io.github.verbs4j.Verbs;
import io.github.verbs4j.internal.CoreAccess;
import io.github.verbs4j.internal.OpenOwners;
import io.github.verbs4j.raw.NativeLibraries;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionConfigurationException;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolutionException;
import org.junit.jupiter.api.extension.ParameterResolver;
import org.junit.platform.commons.support.AnnotationSupport;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The extension behind {@link SoftRdmaTest}: selects softrdma, applies {@link Faults}, injects
 * {@link Context} parameters and checks for leaked verbs objects. Use it through the annotation;
 * {@code @ExtendWith(SoftRdmaExtension.class)} alone works too (with the leak check on).
 */
public final class SoftRdmaExtension implements BeforeAllCallback, AfterAllCallback, BeforeEachCallback,
        AfterEachCallback, ParameterResolver {

    private static final ExtensionContext.Namespace NAMESPACE = ExtensionContext.Namespace.create(SoftRdmaExtension.class);
    private static final String CONTEXTS = "contexts";
    /** The roots' sequence number before the test ({@link OpenOwners#mark()}). */
    private static final String MARK = "mark";
    /**
     * How long the check waits, when a test left something open, for closes that other threads
     * are finishing before it calls the rest leaked.
     */
    static final Duration CLOSE_GRACE = Duration.ofSeconds(2);
    /** The threads running a test now, with how many nest there (guarded by itself). */
    private static final Map<Thread, Integer> RUNNING = new HashMap<>();

    /** Creates the extension (JUnit does, from {@link SoftRdmaTest}). */
    public SoftRdmaExtension() {
    }

    @Override
    public void beforeAll(ExtensionContext extension) {
        Class<?> testClass = extension.getRequiredTestClass();
        String faults = AnnotationSupport.findAnnotation(testClass, Faults.class).map(FaultsEnvironment::spec)
                .orElse(FaultsEnvironment.STARTUP);
        selectSoftRdma();
        FaultsEnvironment.apply(faults, testClass);
        OpenOwners.track();
        if (!Verbs.isAvailable()) {
            throw new ExtensionConfigurationException("@SoftRdmaTest: RDMA is not available: "
                    + Verbs.unavailabilityCause().getMessage(), Verbs.unavailabilityCause());
        }
    }

    /** softrdma from the jar, unless -Dverbs4j.libibverbs names a library (a softrdma build folder). */
    private static void selectSoftRdma() {
        String path = System.getProperty(NativeLibraries.LIBIBVERBS_PROPERTY);
        if (path != null && !path.isBlank()) {
            return;
        }
        try {
            Verbs.useSoftRdma();
        } catch (IllegalStateException e) {
            throw new ExtensionConfigurationException("@SoftRdmaTest: " + e.getMessage(), e);
        }
    }

    /**
     * Whether the libibverbs this JVM loaded is softrdma, however it was chosen (from the jar,
     * or a softrdma build named by {@code -Dverbs4j.libibverbs}): it exports softrdma's own
     * symbols. {@code false} on the system's rdma-core ({@code -Dverbs4j.substrate=system}: rxe,
     * siw, a NIC). For a test that needs something only softrdma has, such as
     * {@link Faults} or {@code SOFTRDMA_FAULTS} in a child process:
     * {@code assumeTrue(SoftRdmaExtension.onSoftRdma(), "...")}. Loads libibverbs if it was not.
     *
     * @throws UnsatisfiedLinkError when no libibverbs can be loaded
     */
    public static boolean onSoftRdma() {
        return NativeLibraries.verbs().find(SOFTRDMA_SYMBOL).isPresent();
    }

    /** A symbol of softrdma's libibverbs.so.1 that rdma-core's has not (softrdma/src/libibverbs.map). */
    private static final String SOFTRDMA_SYMBOL = "softrdma_close_race_check";

    @Override
    public boolean supportsParameter(ParameterContext parameter, ExtensionContext extension) {
        return parameter.getParameter().getType() == Context.class;
    }

    @Override
    public Object resolveParameter(ParameterContext parameter, ExtensionContext extension) {
        boolean peer = parameter.isAnnotated(Peer.class);
        @SuppressWarnings("unchecked")
        Map<Boolean, Context> opened = extension.getStore(NAMESPACE)
                .getOrComputeIfAbsent(CONTEXTS, k -> new LinkedHashMap<Boolean, Context>(), Map.class);
        Context ctx = opened.get(peer);
        if (ctx == null) {
            try {
                ctx = Verbs.openFirst();
            } catch (RuntimeException e) {
                throw new ParameterResolutionException("@SoftRdmaTest: cannot open a device for "
                        + parameter.getParameter() + ": " + e.getMessage(), e);
            }
            opened.put(peer, ctx);
        }
        return ctx;
    }

    @Override
    public void beforeEach(ExtensionContext extension) {
        enter(extension);
        extension.getStore(NAMESPACE).put(MARK, OpenOwners.mark());
    }

    @Override
    public void afterEach(ExtensionContext extension) {
        Long mark = extension.getStore(NAMESPACE).remove(MARK, Long.class);
        try {
            closeLeaked(extension, mark);
        } finally {
            if (mark != null) {
                leave();
            }
        }
    }

    @Override
    public void afterAll(ExtensionContext extension) {
        closeLeaked(extension, null); // the contexts injected into @BeforeAll/@AfterAll methods
    }

    /**
     * Refuses a test that starts while a test runs on another thread: the leak check compares
     * the JVM's open roots, so a concurrent test's objects would be blamed on this one and closed
     * under it. A test that runs a class through the engine on its own thread (EngineTestKit)
     * nests, which is fine: the inner test's mark is later, and it closes what it left open.
     */
    private static void enter(ExtensionContext extension) {
        Thread me = Thread.currentThread();
        synchronized (RUNNING) {
            List<String> others = RUNNING.keySet().stream().filter(t -> t != me).map(Thread::getName).toList();
            if (!others.isEmpty()) {
                throw new ExtensionConfigurationException("@SoftRdmaTest: " + extension.getDisplayName()
                        + " started on thread " + me.getName() + " while a test runs on " + String.join(", ", others)
                        + ": the leak check compares the verbs objects open in the JVM before and after each test,"
                        + " so the tests of a JVM must run one at a time (JUnit's default; under"
                        + " junit.jupiter.execution.parallel.enabled, annotate these classes @Isolated)");
            }
            RUNNING.merge(me, 1, Integer::sum);
        }
    }

    private static void leave() {
        synchronized (RUNNING) {
            RUNNING.computeIfPresent(Thread.currentThread(), (t, depth) -> depth == 1 ? null : depth - 1);
        }
    }

    /**
     * After a test ({@code mark}: the roots' sequence number before it) or a class ({@code null}):
     * finds what it left open, waits up to {@link #CLOSE_GRACE} for closes other threads are
     * finishing, closes the rest (the last opened first, children before parents) and the
     * injected contexts, and fails the test naming what it left open when the check is on.
     */
    private static void closeLeaked(ExtensionContext extension, Long mark) {
        @SuppressWarnings("unchecked")
        Map<Boolean, Context> opened = extension.getStore(NAMESPACE).remove(CONTEXTS, Map.class);
        List<Context> injected = opened == null ? List.of() : List.copyOf(opened.values());
        if (mark == null && injected.isEmpty()) {
            return;
        }
        boolean check = extension.getTestClass()
                .flatMap(c -> AnnotationSupport.findAnnotation(c, SoftRdmaTest.class))
                .map(SoftRdmaTest::leakCheck).orElse(true);
        List<Object> leaked = awaitClosesInProgress(mark, injected);
        String leakedNames = names(leaked); // before closing: a closed owner may name itself differently
        List<Throwable> failures = new ArrayList<>();
        if (!leaked.isEmpty()) {
            for (OpenOwners.Root root : newRoots(mark, injected)) {
                if (root.isOpen()) {
                    List<Object> tree = new ArrayList<>();
                    tree.add(root);
                    tree.addAll(openDependents(root.dependents()));
                    closeChildrenFirst(tree, failures);
                }
            }
            for (Context ctx : injected) {
                closeChildrenFirst(openDependents(CoreAccess.get().dependents(ctx)), failures);
            }
        }
        List<Object> left = leakedNow(mark, injected);
        RuntimeException closeFailure = null;
        try {
            Closer.closeAll(injected); // every context, even when one fails
        } catch (RuntimeException e) {
            closeFailure = e;
        }
        if (check && !leaked.isEmpty()) {
            AssertionError error = new AssertionError(extension.getDisplayName() + " leaked " + count(leaked)
                    + " (still open after it; close them, e.g. with try-with-resources): " + leakedNames
                    + (left.isEmpty() ? "" : "; the harness could not close " + count(left) + ": " + names(left)));
            failures.forEach(error::addSuppressed);
            if (closeFailure != null) {
                error.addSuppressed(closeFailure);
            }
            throw error;
        }
        if (closeFailure != null) {
            throw closeFailure;
        }
    }

    /**
     * What the test left open, once closes that other threads are finishing (a connection closed
     * by its peer's disconnect, a close protocol completing on a polling thread) had up to
     * {@link #CLOSE_GRACE} to complete: nothing is waited for when nothing is open.
     */
    private static List<Object> awaitClosesInProgress(Long mark, List<Context> injected) {
        long deadline = System.nanoTime() + CLOSE_GRACE.toNanos();
        List<Object> leaked = leakedNow(mark, injected);
        while (!leaked.isEmpty() && System.nanoTime() - deadline < 0) {
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
            leaked = leakedNow(mark, injected);
        }
        return leaked;
    }

    /**
     * Everything open now that the test opened: each root opened after {@code mark} (the last
     * opened first) followed by its open dependents, then the open dependents of the injected
     * contexts; parents before children.
     */
    private static List<Object> leakedNow(Long mark, List<Context> injected) {
        List<Object> found = new ArrayList<>();
        for (OpenOwners.Root root : newRoots(mark, injected)) {
            found.add(root.owner());
            found.addAll(openDependents(root.dependents()));
        }
        for (Context ctx : injected) {
            found.addAll(openDependents(CoreAccess.get().dependents(ctx)));
        }
        return found;
    }

    /** The roots opened after {@code mark} and still open, the last opened first, but the injected contexts. */
    private static List<OpenOwners.Root> newRoots(Long mark, List<Context> injected) {
        if (mark == null) {
            return List.of();
        }
        Set<Object> skip = Collections.newSetFromMap(new IdentityHashMap<>());
        skip.addAll(injected);
        return OpenOwners.openSince(mark).stream().filter(r -> !skip.contains(r.owner())).toList();
    }

    private static String count(List<Object> objects) {
        return objects.size() + " verbs " + (objects.size() == 1 ? "object" : "objects");
    }

    private static String names(List<Object> objects) {
        List<String> names = new ArrayList<>();
        for (Object o : objects) {
            try {
                names.add(String.valueOf(o));
            } catch (RuntimeException e) {
                names.add(o.getClass().getSimpleName() + " (toString failed: " + e + ")");
            }
        }
        return String.join(", ", names);
    }

    /** {@code direct} and every open object made from them, directly or not, parents before children. */
    static List<Object> openDependents(List<Object> direct) {
        Set<Object> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        List<Object> found = new ArrayList<>();
        ArrayDeque<Object> queue = new ArrayDeque<>(direct);
        while (!queue.isEmpty()) {
            Object o = queue.poll();
            if (seen.add(o)) {
                found.add(o);
                queue.addAll(CoreAccess.get().dependents(o));
            }
        }
        return found;
    }

    /**
     * Closes {@code objects} (a root, or a root's owner, then what was made from it, parents
     * first), children first: rounds of closing whatever no longer has open dependents, until
     * all are closed or a round makes no progress. Failures are kept for the report.
     */
    private static void closeChildrenFirst(List<Object> objects, List<Throwable> failures) {
        List<Object> left = new ArrayList<>(objects);
        Map<Object, Exception> lastFailure = new IdentityHashMap<>();
        boolean progress = true;
        while (!left.isEmpty() && progress) {
            progress = false;
            for (int i = left.size() - 1; i >= 0; i--) {
                Object o = left.get(i);
                List<Object> dependents = o instanceof OpenOwners.Root r ? r.dependents() : CoreAccess.get().dependents(o);
                if (!dependents.isEmpty()) {
                    continue;
                }
                Object owner = o instanceof OpenOwners.Root r ? r.owner() : o;
                try {
                    ((AutoCloseable) owner).close();
                    left.remove(i);
                    lastFailure.remove(o);
                    progress = true;
                } catch (Exception e) {
                    lastFailure.put(o, e); // may succeed in a later round
                }
            }
        }
        failures.addAll(lastFailure.values());
    }
}
