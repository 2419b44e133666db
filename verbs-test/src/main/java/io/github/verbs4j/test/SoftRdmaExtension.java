package io.github.verbs4j.test;

import io.github.verbs4j.Closer;
import io.github.verbs4j.Context;
import io.github.verbs4j.Verbs;
import io.github.verbs4j.internal.CoreAccess;
import io.github.verbs4j.raw.NativeLibraries;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionConfigurationException;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolutionException;
import org.junit.jupiter.api.extension.ParameterResolver;
import org.junit.platform.commons.support.AnnotationSupport;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
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
public final class SoftRdmaExtension implements BeforeAllCallback, AfterAllCallback, AfterEachCallback,
        ParameterResolver {

    private static final ExtensionContext.Namespace NAMESPACE = ExtensionContext.Namespace.create(SoftRdmaExtension.class);
    private static final String CONTEXTS = "contexts";

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
    public void afterEach(ExtensionContext extension) {
        closeInjected(extension);
    }

    @Override
    public void afterAll(ExtensionContext extension) {
        closeInjected(extension);
    }

    private static void closeInjected(ExtensionContext extension) {
        @SuppressWarnings("unchecked")
        Map<Boolean, Context> opened = extension.getStore(NAMESPACE).remove(CONTEXTS, Map.class);
        if (opened == null) {
            return;
        }
        boolean check = extension.getTestClass()
                .flatMap(c -> AnnotationSupport.findAnnotation(c, SoftRdmaTest.class))
                .map(SoftRdmaTest::leakCheck).orElse(true);
        List<Object> leaked = new ArrayList<>();
        for (Context ctx : opened.values()) {
            List<Object> open = openObjects(ctx);
            leaked.addAll(open);
            closeAll(open);
        }
        RuntimeException closeFailure = null;
        try {
            Closer.closeAll(opened.values()); // every context, even when one fails
        } catch (RuntimeException e) {
            closeFailure = e;
        }
        if (check && !leaked.isEmpty()) {
            List<String> names = leaked.stream().map(String::valueOf).toList();
            AssertionError error = new AssertionError(extension.getDisplayName() + " leaked " + leaked.size()
                    + " verbs " + (leaked.size() == 1 ? "object" : "objects") + " (still open after it; "
                    + "close them, e.g. with try-with-resources): " + String.join(", ", names));
            if (closeFailure != null) {
                error.addSuppressed(closeFailure);
            }
            throw error;
        }
        if (closeFailure != null) {
            throw closeFailure;
        }
    }

    /** Every open object made from {@code root}, directly or not, parents before children. */
    static List<Object> openObjects(Object root) {
        Set<Object> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        List<Object> found = new ArrayList<>();
        ArrayDeque<Object> queue = new ArrayDeque<>(CoreAccess.get().dependents(root));
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
     * Closes the leaked objects, children first: rounds of closing whatever no longer has open
     * dependents, until all are closed or a round makes no progress.
     */
    private static void closeAll(List<Object> objects) {
        List<Object> left = new ArrayList<>(objects);
        boolean progress = true;
        while (!left.isEmpty() && progress) {
            progress = false;
            for (int i = left.size() - 1; i >= 0; i--) {
                Object o = left.get(i);
                if (!CoreAccess.get().dependents(o).isEmpty()) {
                    continue;
                }
                try {
                    ((AutoCloseable) o).close();
                    left.remove(i);
                    progress = true;
                } catch (Exception e) {
                    // left open; the context's close then names it
                }
            }
        }
    }
}
