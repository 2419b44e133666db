package io.github.verbs4j.raw;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * The one place where verbs4j decides which {@code libibverbs.so.1} and {@code librdmacm.so.1}
 * it binds, and loads them.
 *
 * <h2>Selection</h2>
 * <ul>
 *   <li>System property {@value #SUBSTRATE_PROPERTY}: {@code system} (the default) or
 *       {@code softrdma}, which extracts the prebuilt softrdma libraries from the
 *       {@code io.github.verbs4j:verbs4j-softrdma} jar on the class path into a private folder
 *       (see {@code SoftRdmaBundle}) and loads them; {@link #useSoftRdma()} does the same from
 *       code. A path given in one of the two properties below takes precedence.</li>
 *   <li>System property {@value #LIBIBVERBS_PROPERTY}: unset or {@code system} loads the system's
 *       {@code libibverbs.so.1} through the dynamic loader's search (so {@code LD_LIBRARY_PATH}
 *       set before the JVM starts is honoured); any other value is the path of the file to load,
 *       for example softrdma's {@code softrdma/target/lib/libibverbs.so.1}.</li>
 *   <li>System property {@value #LIBRDMACM_PROPERTY}: the same for {@code librdmacm.so.1}. When
 *       unset and libibverbs was chosen by path, a {@code librdmacm.so.1} in the same folder is
 *       preferred, because a librdmacm must be built for the libibverbs it runs with.</li>
 * </ul>
 *
 * <h2>Why {@code System.load}</h2>
 * The generated bindings resolve symbols through {@link SymbolLookup#loaderLookup()}, which sees
 * exactly the libraries loaded with {@link System#load} by this class loader. So the chosen file
 * is loaded once here, by absolute path, and every binding (generated or hand-written) then
 * resolves against it. For the system library the absolute path is found by letting the dynamic
 * loader resolve the name first and asking {@code dladdr} where the symbol came from.
 *
 * <p>Thread-safe: loading happens once, under the class's lock.
 */
public final class NativeLibraries {

    /** System property selecting libibverbs: {@code system} (default) or a file path. */
    public static final String LIBIBVERBS_PROPERTY = "verbs4j.libibverbs";
    /** System property selecting librdmacm: {@code system} (default) or a file path. */
    public static final String LIBRDMACM_PROPERTY = "verbs4j.librdmacm";
    /** System property selecting where the libraries come from: {@code system} (default) or {@code softrdma}. */
    public static final String SUBSTRATE_PROPERTY = "verbs4j.substrate";

    private static final System.Logger LOG = System.getLogger("io.github.verbs4j");

    static final String LIBIBVERBS_SONAME = "libibverbs.so.1";
    static final String LIBRDMACM_SONAME = "librdmacm.so.1";

    private static Loaded verbs;
    private static Loaded rdmacm;
    /** Set by {@link #useSoftRdma()}: softrdma from the jar, whatever {@value #SUBSTRATE_PROPERTY} says. */
    private static boolean softRdmaRequested;
    /** The folder softrdma was extracted into, once it was. */
    private static Path softRdmaDir;

    private NativeLibraries() {
    }

    /** A library that was loaded, or why it could not be. */
    private record Loaded(Path path, UnsatisfiedLinkError failure) {
    }

    /**
     * Loads libibverbs if needed and returns the lookup that resolves its symbols.
     *
     * @throws UnsatisfiedLinkError naming the file, the property and the cause when it cannot be
     *         loaded (missing file, missing rdma-core, native access denied)
     */
    public static SymbolLookup verbs() {
        synchronized (NativeLibraries.class) {
            if (verbs == null) {
                verbs = load(LIBIBVERBS_PROPERTY, LIBIBVERBS_SONAME, "ibv_get_device_list", null);
            }
            return lookupOf(verbs);
        }
    }

    /**
     * Loads librdmacm (after libibverbs, which it links against) and returns the lookup.
     *
     * @throws UnsatisfiedLinkError as {@link #verbs()}
     */
    public static SymbolLookup rdmacm() {
        verbs();
        synchronized (NativeLibraries.class) {
            if (rdmacm == null) {
                Path besideVerbs = verbs.path() == null || isSystem(System.getProperty(LIBIBVERBS_PROPERTY))
                        ? null : verbs.path().resolveSibling(LIBRDMACM_SONAME);
                rdmacm = load(LIBRDMACM_PROPERTY, LIBRDMACM_SONAME, "rdma_create_event_channel", besideVerbs);
            }
            return lookupOf(rdmacm);
        }
    }

    /**
     * Selects softrdma from the {@code verbs4j-softrdma} jar, as {@code -Dverbs4j.substrate=softrdma}
     * does; call it before anything else in verbs4j. Idempotent.
     *
     * @throws IllegalStateException when libibverbs was already loaded from elsewhere
     */
    public static void useSoftRdma() {
        synchronized (NativeLibraries.class) {
            if (verbs != null && (softRdmaDir == null || verbs.path() == null
                    || !verbs.path().startsWith(softRdmaDir))) {
                throw new IllegalStateException("verbs4j: useSoftRdma() comes too late: libibverbs was already "
                        + (verbs.path() != null ? "loaded from " + verbs.path() : "looked for and not loaded")
                        + "; call it before the first use of verbs4j, or run with -D" + SUBSTRATE_PROPERTY
                        + "=softrdma");
            }
            softRdmaRequested = true;
        }
    }

    /**
     * Whether the libraries come from the softrdma jar: {@link #useSoftRdma()} or the property,
     * and neither library given by path (a pair is built together; never mix).
     */
    private static boolean softRdmaSelected() {
        for (String property : new String[] {LIBIBVERBS_PROPERTY, LIBRDMACM_PROPERTY}) {
            String path = System.getProperty(property);
            if (path != null && !path.isBlank()) {
                return false;
            }
        }
        if (softRdmaRequested) {
            return true;
        }
        String substrate = System.getProperty(SUBSTRATE_PROPERTY);
        if (substrate == null || substrate.isBlank() || substrate.equals("system")) {
            return false;
        }
        if (substrate.equals("softrdma")) {
            return true;
        }
        throw new UnsatisfiedLinkError("verbs4j: -D" + SUBSTRATE_PROPERTY + "=" + substrate
                + " is not a substrate: use system (the default) or softrdma");
    }

    /** The folder the softrdma jar's libraries were extracted into, when they were. */
    public static Optional<Path> softRdmaDirectory() {
        synchronized (NativeLibraries.class) {
            return Optional.ofNullable(softRdmaDir);
        }
    }

    /** The file libibverbs was loaded from, if it was loaded. */
    public static Optional<Path> verbsPath() {
        synchronized (NativeLibraries.class) {
            return verbs == null ? Optional.empty() : Optional.ofNullable(verbs.path());
        }
    }

    private static SymbolLookup lookupOf(Loaded loaded) {
        if (loaded.failure() != null) {
            throw loaded.failure();
        }
        return SymbolLookup.loaderLookup();
    }

    private static boolean isSystem(String value) {
        return value == null || value.isBlank() || value.equals("system");
    }

    private static Loaded load(String property, String soname, String probeSymbol, Path defaultPath) {
        String chosen = System.getProperty(property);
        try {
            NativeAccess.check();
            Path path;
            if (softRdmaSelected()) {
                if (softRdmaDir == null) {
                    softRdmaDir = SoftRdmaBundle.extract(classLoader(), SoftRdmaBundle.platform(),
                            SoftRdmaBundle.defaultBase());
                }
                path = softRdmaDir.resolve(soname);
            } else if (!isSystem(chosen)) {
                path = Path.of(chosen).toAbsolutePath();
                if (!Files.isRegularFile(path)) {
                    throw new UnsatisfiedLinkError("verbs4j: " + property + "=" + chosen + " names no file");
                }
            } else if (chosen == null && defaultPath != null && Files.isRegularFile(defaultPath)) {
                path = defaultPath;
            } else {
                path = resolveBySoname(soname, probeSymbol);
            }
            System.load(path.toString());
            LOG.log(System.Logger.Level.DEBUG, "loaded {0} from {1}", soname, path);
            return new Loaded(path, null);
        } catch (UnsatisfiedLinkError e) {
            LOG.log(System.Logger.Level.DEBUG, "cannot load " + soname, e);
            return new Loaded(null, e);
        } catch (IllegalCallerException e) {
            UnsatisfiedLinkError error = new UnsatisfiedLinkError(NativeAccess.hint());
            error.initCause(e);
            return new Loaded(null, error);
        }
    }

    private static ClassLoader classLoader() {
        ClassLoader own = NativeLibraries.class.getClassLoader();
        return own != null ? own : ClassLoader.getSystemClassLoader();
    }

    /**
     * Asks the dynamic loader for {@code soname} the way a C program linked against it would get
     * it, and returns the file it chose.
     */
    private static Path resolveBySoname(String soname, String probeSymbol) {
        SymbolLookup byName;
        try {
            byName = SymbolLookup.libraryLookup(soname, Arena.global());
        } catch (IllegalArgumentException e) {
            UnsatisfiedLinkError error = new UnsatisfiedLinkError("verbs4j: cannot load " + soname
                    + ": rdma-core is not installed (Debian/Ubuntu: apt-get install " + packageOf(soname)
                    + "), or select a library with -D"
                    + (soname.equals(LIBIBVERBS_SONAME) ? LIBIBVERBS_PROPERTY : LIBRDMACM_PROPERTY) + "=<path>");
            error.initCause(e);
            throw error;
        }
        MemorySegment symbol = byName.find(probeSymbol).orElseThrow(() -> new UnsatisfiedLinkError(
                "verbs4j: " + soname + " has no symbol " + probeSymbol + ": not an rdma-core library"));
        return Dladdr.fileOf(symbol).orElseThrow(() -> new UnsatisfiedLinkError(
                "verbs4j: dladdr could not tell which file " + soname + " was loaded from"));
    }

    private static String packageOf(String soname) {
        return soname.equals(LIBIBVERBS_SONAME) ? "libibverbs1 ibverbs-providers" : "librdmacm1";
    }

    /** {@code dladdr(3)}: which shared object holds an address. */
    private static final class Dladdr {
        // typedef struct { const char *dli_fname; void *dli_fbase; const char *dli_sname; void *dli_saddr; } Dl_info;
        private static final StructLayout DL_INFO = MemoryLayout.structLayout(
                ValueLayout.ADDRESS.withName("dli_fname"), ValueLayout.ADDRESS.withName("dli_fbase"),
                ValueLayout.ADDRESS.withName("dli_sname"), ValueLayout.ADDRESS.withName("dli_saddr"));

        static Optional<Path> fileOf(MemorySegment address) {
            Linker linker = Linker.nativeLinker();
            MemorySegment dladdr = linker.defaultLookup().find("dladdr").orElse(null);
            if (dladdr == null) {
                return Optional.empty();
            }
            MethodHandle handle = linker.downcallHandle(dladdr,
                    FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS));
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment info = arena.allocate(DL_INFO);
                int found = (int) handle.invokeExact(address, info);
                MemorySegment name = info.get(ValueLayout.ADDRESS, 0);
                if (found == 0 || name.equals(MemorySegment.NULL)) {
                    return Optional.empty();
                }
                return Optional.of(Path.of(name.reinterpret(4096).getString(0)).toAbsolutePath());
            } catch (Throwable t) {
                throw Downcalls.unexpected("dladdr", t);
            }
        }
    }
}
