package io.github.verbs4j.layout;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.GroupLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

/**
 * What the C compiler says about sizes, alignments and member offsets of C types, measured by
 * compiling the layout probe ({@code verbs-ffi/src/test/c/layout_probe.c}) with {@code gcc}
 * against the system headers. The yardstick for every hand-written or generated layout:
 *
 * <pre>{@code
 * assertEquals(CLayouts.offsetOf("ibv_send_wr", "wr.rdma.remote_addr"), MY_REMOTE_ADDR_OFFSET);
 * assertEquals(CLayouts.sizeOf("ibv_wc"), Completion.BYTES);
 *
 * // many questions, one compilation:
 * Map<CLayouts.Query, CLayouts.Answer> answers = CLayouts.of("rdma/rdma_cma.h").measure(List.of(
 *         CLayouts.Query.member("struct rdma_cm_id", "route.addr.dst_addr"),
 *         CLayouts.Query.type("struct rdma_cm_event")));
 * }</pre>
 *
 * <p>Type names: a bare name such as {@code ibv_gid} is resolved to {@code union ibv_gid} or
 * {@code struct ibv_wc} through the jextract class of that name when there is one, otherwise
 * to {@code struct name} ({@code name} as is when it ends in {@code _t}); a name with a space
 * ({@code "union ibv_gid"}) is used verbatim.
 *
 * <p>Failures are loud: no {@code gcc} on PATH, missing headers, an unknown member, all throw
 * {@link IllegalStateException} naming the cause and the package to install. Nothing is
 * skipped.
 *
 * <p>The compiler is {@code $CC} when set, else {@code gcc}. Probes are built under the
 * module's {@code target/layout-probe/}.
 */
public final class CLayouts {

    /** The header of libibverbs, as {@code #include <infiniband/verbs.h>} names it. */
    public static final String VERBS_HEADER = "infiniband/verbs.h";
    /** The header of librdmacm. */
    public static final String RDMA_CM_HEADER = "rdma/rdma_cma.h";

    private static final String PROBE_SOURCE = "layout_probe.c";
    private static final String QUERIES_FILE = "layout_probe_queries.h";
    private static final Pattern IDENTIFIER = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");
    private static final Pattern DESIGNATOR = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*(\\[[0-9]+]|\\.[A-Za-z_][A-Za-z0-9_]*)*");
    private static final List<String> GENERATED_PACKAGES = List.of("io.github.verbs4j.ffi");
    private static final Map<List<String>, CLayouts> SHARED = new ConcurrentHashMap<>();

    private final List<String> headers;
    private final String compiler;
    private final Map<Query, Answer> cache = new ConcurrentHashMap<>();

    private CLayouts(List<String> headers, String compiler) {
        this.headers = List.copyOf(headers);
        this.compiler = compiler;
    }

    /** Measurements against the given headers ({@code "infiniband/verbs.h"}), in that order. */
    public static CLayouts of(String... headers) {
        if (headers.length == 0) {
            throw new IllegalArgumentException("name at least one header, e.g. " + VERBS_HEADER);
        }
        return SHARED.computeIfAbsent(List.of(headers), h -> new CLayouts(h, defaultCompiler()));
    }

    /** Measurements against {@code <infiniband/verbs.h>}. */
    public static CLayouts verbs() {
        return of(VERBS_HEADER);
    }

    /** Measurements against {@code <rdma/rdma_cma.h>} (which includes verbs.h). */
    public static CLayouts rdmaCm() {
        return of(RDMA_CM_HEADER);
    }

    /**
     * Measurements against the headers jextract reads for the bindings
     * ({@code verbs-ffi/jextract/rdma.h}): verbs.h, rdma_cma.h and poll.h, in that order.
     */
    public static CLayouts bindings() {
        return of(VERBS_HEADER, RDMA_CM_HEADER, "poll.h");
    }

    /** The same headers, another compiler command (for testing the failure messages). */
    CLayouts withCompiler(String otherCompiler) {
        return new CLayouts(headers, otherCompiler);
    }

    /** {@code offsetof(type, member)} in {@code <infiniband/verbs.h>}. */
    public static long offsetOf(String type, String member) {
        return verbs().memberOffset(type, member);
    }

    /** {@code sizeof(type)} in {@code <infiniband/verbs.h>}. */
    public static long sizeOf(String type) {
        return verbs().typeSize(type);
    }

    /** {@code sizeof(((type *) 0)->member)} in {@code <infiniband/verbs.h>}. */
    public static long sizeOf(String type, String member) {
        return verbs().memberSize(type, member);
    }

    /** {@code offsetof(type, member)} against this instance's headers. */
    public long memberOffset(String type, String member) {
        return measureOne(Query.member(type, member)).offset();
    }

    /** {@code sizeof(member)} against this instance's headers. */
    public long memberSize(String type, String member) {
        return measureOne(Query.member(type, member)).size();
    }

    /** {@code sizeof(type)} against this instance's headers. */
    public long typeSize(String type) {
        return measureOne(Query.type(type)).size();
    }

    /** {@code _Alignof(type)} against this instance's headers. */
    public long typeAlignment(String type) {
        return measureOne(Query.type(type)).alignment();
    }

    /** The headers measured against. */
    public List<String> headers() {
        return headers;
    }

    /** The compiler's first {@code --version} line, for reports. */
    public String compilerVersion() {
        ProcessResult r = run(List.of(compiler, "--version"), null);
        return r.stdout().lines().findFirst().orElse(compiler);
    }

    private Answer measureOne(Query query) {
        Answer cached = cache.get(query);
        return cached != null ? cached : measure(List.of(query)).get(query);
    }

    /**
     * Answers every query with one compilation of the probe.
     *
     * @throws IllegalStateException when the compiler or the headers are missing, a type or
     *         member does not exist (the compiler's diagnostics are in the message), or the
     *         probe misbehaves
     */
    public Map<Query, Answer> measure(Collection<Query> queries) {
        List<Query> list = List.copyOf(new LinkedHashSet<>(queries));
        if (list.isEmpty()) {
            return Map.of();
        }
        StringBuilder calls = new StringBuilder("/* generated by io.github.verbs4j.layout.CLayouts */\n");
        for (int id = 0; id < list.size(); id++) {
            Query q = list.get(id);
            String type = resolveType(q.type());
            switch (q.kind()) {
                case TYPE -> calls.append("PROBE_TYPE(").append(id).append(", ").append(type).append(")\n");
                case MEMBER -> calls.append("PROBE_MEMBER(").append(id).append(", ").append(type).append(", ")
                        .append(q.member()).append(")\n");
                case FLEXIBLE_MEMBER -> calls.append("PROBE_FLEXIBLE_MEMBER(").append(id).append(", ").append(type)
                        .append(", ").append(q.member()).append(")\n");
            }
        }
        Path dir = probeDirectory();
        try {
            Files.writeString(dir.resolve(QUERIES_FILE), calls);
            try (InputStream source = CLayouts.class.getResourceAsStream(PROBE_SOURCE)) {
                if (source == null) {
                    throw new IllegalStateException("the probe source " + PROBE_SOURCE
                            + " is not on the test class path (verbs-ffi/src/test/c is a test resource folder)");
                }
                Files.write(dir.resolve(PROBE_SOURCE), source.readAllBytes());
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the layout probe under " + dir, e);
        }
        Path binary = dir.resolve("layout_probe");
        List<String> compile = new ArrayList<>(List.of(compiler, "-std=gnu11", "-O0", "-w", "-I", dir.toString()));
        for (String header : headers) {
            compile.add("-include");
            compile.add(header);
        }
        compile.addAll(List.of("-o", binary.toString(), dir.resolve(PROBE_SOURCE).toString()));
        ProcessResult built = run(compile, dir);
        if (built.exitCode() != 0) {
            throw new IllegalStateException("the layout probe does not compile against <" + String.join(">, <", headers)
                    + "> (" + headersHint() + "):\n" + String.join(" ", compile) + "\n" + built.stderr()
                    + "\nqueries: " + dir.resolve(QUERIES_FILE));
        }
        ProcessResult ran = run(List.of(binary.toString()), dir);
        if (ran.exitCode() != 0) {
            throw new IllegalStateException("the layout probe " + binary + " exited with " + ran.exitCode() + ": " + ran.stderr());
        }
        Map<Query, Answer> answers = new LinkedHashMap<>();
        for (String line : ran.stdout().lines().toList()) {
            String[] f = line.split("\t");
            if (f.length != 4) {
                throw new IllegalStateException("unexpected probe output line: " + line);
            }
            Query q = list.get(Integer.parseInt(f[0]));
            Answer a = f[1].equals("type")
                    ? new Answer(q, -1, Long.parseLong(f[2]), Long.parseLong(f[3]))
                    : new Answer(q, Long.parseLong(f[2]), f[3].equals("-") ? -1 : Long.parseLong(f[3]), -1);
            answers.put(q, a);
        }
        if (answers.size() != list.size()) {
            throw new IllegalStateException("the layout probe answered " + answers.size() + " of " + list.size() + " queries");
        }
        cache.putAll(answers);
        return answers;
    }

    /**
     * The C spelling of a type name: {@code "struct x"}/{@code "union x"} verbatim, a typedef
     * name verbatim, a bare tag resolved through the generated class of that name.
     */
    public static String resolveType(String name) {
        String trimmed = name.strip();
        if (trimmed.contains(" ")) {
            return trimmed;
        }
        if (!IDENTIFIER.matcher(trimmed).matches()) {
            throw new IllegalArgumentException("not a C type name: " + name);
        }
        for (String pkg : GENERATED_PACKAGES) {
            GroupLayout layout = GeneratedLayouts.layoutOf(pkg + "." + trimmed);
            if (layout != null) {
                return GeneratedLayouts.cTypeOf(trimmed, layout);
            }
        }
        return trimmed.endsWith("_t") ? trimmed : "struct " + trimmed;
    }

    private String headersHint() {
        return "are gcc and the rdma-core development headers installed? Debian/Ubuntu: apt-get install gcc libibverbs-dev librdmacm-dev";
    }

    private static String defaultCompiler() {
        String cc = System.getenv("CC");
        return cc == null || cc.isBlank() ? "gcc" : cc.strip();
    }

    private static Path probeDirectory() {
        String base = System.getProperty("basedir", System.getProperty("user.dir"));
        Path target = Path.of(base, "target", "layout-probe");
        try {
            Files.createDirectories(target);
            return Files.createTempDirectory(target, "probe-");
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create a folder for the layout probe under " + target, e);
        }
    }

    private record ProcessResult(int exitCode, String stdout, String stderr) {
    }

    private ProcessResult run(List<String> command, Path dir) {
        ProcessBuilder pb = new ProcessBuilder(command);
        if (dir != null) {
            pb.directory(dir.toFile());
        }
        // the tests run with softrdma on LD_LIBRARY_PATH; the compiler and the probe need none of it
        pb.environment().remove("LD_LIBRARY_PATH");
        Process p;
        try {
            p = pb.start();
        } catch (IOException e) {
            throw new IllegalStateException("cannot run the C compiler '" + command.getFirst()
                    + "': the layout cross-check compiles a C probe against the rdma-core headers; install gcc"
                    + " (Debian/Ubuntu: apt-get install gcc libibverbs-dev librdmacm-dev) or set CC", e);
        }
        try {
            p.getOutputStream().close();
            var err = new CompletableFuture<String>();
            Thread drain = Thread.ofVirtual().start(() -> {
                try {
                    err.complete(new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8));
                } catch (IOException e) {
                    err.complete("(stderr unreadable: " + e + ")");
                }
            });
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(120, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IllegalStateException(String.join(" ", command) + " did not finish within 120 s");
            }
            drain.join();
            return new ProcessResult(p.exitValue(), out, err.join());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            p.destroyForcibly();
            throw new IllegalStateException("interrupted while running " + command.getFirst(), e);
        }
    }

    /** One question for the probe. */
    public record Query(Kind kind, String type, String member) {

        /** What to measure. */
        public enum Kind {
            /** sizeof and _Alignof of a type. */
            TYPE,
            /** offsetof and sizeof of a member. */
            MEMBER,
            /** offsetof of a flexible array member (it has no sizeof). */
            FLEXIBLE_MEMBER
        }

        public Query {
            Objects.requireNonNull(kind);
            Objects.requireNonNull(type);
            if (kind != Kind.TYPE && (member == null || !DESIGNATOR.matcher(member).matches())) {
                throw new IllegalArgumentException("not a member designator (like wr.rdma.rkey or raw[0]): " + member);
            }
        }

        public static Query type(String type) {
            return new Query(Kind.TYPE, type, null);
        }

        public static Query member(String type, String member) {
            return new Query(Kind.MEMBER, type, member);
        }

        public static Query flexibleMember(String type, String member) {
            return new Query(Kind.FLEXIBLE_MEMBER, type, member);
        }

        @Override
        public String toString() {
            return member == null ? type : type + "." + member;
        }
    }

    /**
     * The compiler's answer. {@code offset} is -1 for a type; {@code size} is -1 for a flexible
     * array member; {@code alignment} is -1 for a member.
     */
    public record Answer(Query query, long offset, long size, long alignment) {
    }
}
