package io.github.verbs4j.layout;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.GroupLayout;
import java.lang.foreign.UnionLayout;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.net.URISyntaxException;
import java.nio.file.FileSystem;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * Finds the struct and union classes jextract generated in a package and the C type each one
 * maps, so that the cross-check covers every generated layout, not a hand-picked list.
 */
public final class GeneratedLayouts {

    private GeneratedLayouts() {
    }

    /**
     * Every top-level class in the package of {@code anchor} that has a
     * {@code public static GroupLayout layout()}, keyed by its C type ({@code "struct ibv_wc"},
     * {@code "union ibv_gid"}, {@code "pthread_mutex_t"}), sorted.
     */
    public static Map<String, GroupLayout> inPackageOf(Class<?> anchor) {
        String pkg = anchor.getPackageName();
        Map<String, GroupLayout> result = new TreeMap<>();
        for (String simpleName : topLevelClassNames(anchor)) {
            GroupLayout layout = layoutOf(pkg + "." + simpleName);
            if (layout != null) {
                GroupLayout previous = result.put(cTypeOf(simpleName, layout), layout);
                if (previous != null) {
                    throw new IllegalStateException("two generated classes map the C type " + cTypeOf(simpleName, layout));
                }
            }
        }
        if (result.isEmpty()) {
            throw new IllegalStateException("no generated layouts found in package " + pkg);
        }
        return result;
    }

    /**
     * The C spelling of the type a generated class maps: {@code struct}/{@code union} plus the
     * layout's name; for a typedef of an anonymous struct or union (jextract names its layout
     * {@code $anon$...}) the class name, which is the typedef name.
     */
    public static String cTypeOf(String simpleClassName, GroupLayout layout) {
        String name = layout.name().orElse("");
        if (name.isEmpty() || name.startsWith("$anon$")) {
            return simpleClassName;
        }
        return (layout instanceof UnionLayout ? "union " : "struct ") + name;
    }

    /** {@code className.layout()}, or {@code null} when there is no such class or method. */
    static GroupLayout layoutOf(String className) {
        Class<?> c;
        try {
            c = Class.forName(className, true, GeneratedLayouts.class.getClassLoader());
        } catch (ClassNotFoundException e) {
            return null;
        }
        try {
            Method m = c.getMethod("layout");
            if (Modifier.isStatic(m.getModifiers()) && GroupLayout.class.isAssignableFrom(m.getReturnType())) {
                return (GroupLayout) m.invoke(null);
            }
            return null;
        } catch (NoSuchMethodException e) {
            return null;
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot read " + className + ".layout()", e);
        }
    }

    private static Iterable<String> topLevelClassNames(Class<?> anchor) {
        String folder = anchor.getPackageName().replace('.', '/');
        Path location;
        try {
            location = Path.of(anchor.getProtectionDomain().getCodeSource().getLocation().toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
        try {
            if (Files.isDirectory(location)) {
                return list(location.resolve(folder));
            }
            try (FileSystem jar = FileSystems.newFileSystem(location)) {
                return list(jar.getPath(folder));
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list the classes of " + anchor.getPackageName() + " in " + location, e);
        }
    }

    private static java.util.List<String> list(Path dir) throws IOException {
        try (Stream<Path> files = Files.list(dir)) {
            return files.map(p -> p.getFileName().toString())
                    .filter(n -> n.endsWith(".class") && !n.contains("$") && !n.equals("package-info.class"))
                    .map(n -> n.substring(0, n.length() - ".class".length()))
                    .sorted()
                    .toList();
        }
    }
}
