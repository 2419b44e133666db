package io.github.verbs4j.layout;

import java.lang.foreign.GroupLayout;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.PaddingLayout;
import java.lang.foreign.SequenceLayout;
import java.lang.foreign.UnionLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * Compares Java {@link GroupLayout}s with what the C compiler says, member by member, by walking
 * the layouts generically: every named member (nested structs and unions, their members,
 * array members and the first element of arrays of structs) becomes a probe query, and its
 * Java offset and size are compared with gcc's {@code offsetof} and {@code sizeof}; every type
 * is also compared by size and alignment.
 *
 * <p>Member names are the C names: jextract names layout elements after the C members, and a
 * hand-written layout that wants to be checked must do the same ({@code withName("lkey")}).
 * Anonymous unions and structs (jextract's {@code $anon$...} elements, or an unnamed element)
 * are transparent, as in C: their members are addressed from the enclosing type.
 *
 * <pre>{@code
 * LayoutComparison.Report r = LayoutComparison.compare(CLayouts.verbs(),
 *         Map.of("struct ibv_wc", MyCompletion.LAYOUT));
 * r.assertNoMismatch();
 * }</pre>
 */
public final class LayoutComparison {

    private LayoutComparison() {
    }

    /** One disagreement between Java and C. */
    public record Mismatch(String type, String member, String property, long java, long c) {
        @Override
        public String toString() {
            return type + (member == null ? "" : " ." + member) + ": " + property + " is " + java + " in Java, " + c + " in C";
        }
    }

    /** What was compared and what disagreed. */
    public record Report(List<String> types, int members, List<Mismatch> mismatches) {

        /** Throws an {@link AssertionError} listing every mismatch, if there is any. */
        public void assertNoMismatch() {
            if (!mismatches.isEmpty()) {
                throw new AssertionError(mismatches.size() + " layout mismatch(es) between the Java layouts and the C headers:\n  "
                        + mismatches.stream().map(Mismatch::toString).collect(Collectors.joining("\n  ")));
            }
        }

        /** "26 types, 412 members". */
        public String summary() {
            return types.size() + " types, " + members + " members";
        }
    }

    /** What the Java side says about one query. */
    private record Expectation(CLayouts.Query query, long offset, long size, long alignment) {
    }

    /**
     * Compares each layout with the C type named by its key ({@code "struct ibv_wc"},
     * {@code "union ibv_gid"}, a typedef name, or a bare tag resolved as {@link CLayouts} does)
     * in one compilation of the probe.
     */
    public static Report compare(CLayouts c, Map<String, ? extends GroupLayout> layoutsByType) {
        List<Expectation> expected = new ArrayList<>();
        for (Map.Entry<String, ? extends GroupLayout> e : layoutsByType.entrySet()) {
            String type = CLayouts.resolveType(e.getKey());
            GroupLayout layout = e.getValue();
            expected.add(new Expectation(CLayouts.Query.type(type), -1, layout.byteSize(), layout.byteAlignment()));
            walk(type, layout, "", 0, expected);
        }
        Map<CLayouts.Query, CLayouts.Answer> answers = c.measure(expected.stream().map(Expectation::query).toList());
        List<Mismatch> mismatches = new ArrayList<>();
        int members = 0;
        for (Expectation x : expected) {
            CLayouts.Answer a = answers.get(x.query());
            String type = x.query().type();
            String member = x.query().member();
            if (x.query().kind() == CLayouts.Query.Kind.TYPE) {
                check(mismatches, type, null, "sizeof", x.size(), a.size());
                check(mismatches, type, null, "alignment", x.alignment(), a.alignment());
            } else {
                members++;
                check(mismatches, type, member, "offset", x.offset(), a.offset());
                if (x.query().kind() == CLayouts.Query.Kind.MEMBER) {
                    check(mismatches, type, member, "size", x.size(), a.size());
                }
            }
        }
        return new Report(List.copyOf(layoutsByType.keySet()), members, List.copyOf(mismatches));
    }

    /**
     * Compares hand-written member offsets ({@code "wr.rdma.remote_addr" -> 40L}) of one C type
     * with the compiler's.
     */
    public static Report compareOffsets(CLayouts c, String type, Map<String, Long> offsetsByMember) {
        String cType = CLayouts.resolveType(type);
        Map<CLayouts.Query, CLayouts.Answer> answers = c.measure(offsetsByMember.keySet().stream()
                .map(m -> CLayouts.Query.member(cType, m)).toList());
        List<Mismatch> mismatches = new ArrayList<>();
        offsetsByMember.forEach((member, offset) ->
                check(mismatches, cType, member, "offset", offset, answers.get(CLayouts.Query.member(cType, member)).offset()));
        return new Report(List.of(cType), offsetsByMember.size(), List.copyOf(mismatches));
    }

    /**
     * The probe queries the comparison asks for one layout: the type itself, then every member
     * path in layout order.
     */
    public static List<CLayouts.Query> queries(String type, GroupLayout layout) {
        String cType = CLayouts.resolveType(type);
        List<Expectation> expected = new ArrayList<>();
        expected.add(new Expectation(CLayouts.Query.type(cType), -1, layout.byteSize(), layout.byteAlignment()));
        walk(cType, layout, "", 0, expected);
        return expected.stream().map(Expectation::query).toList();
    }

    private static void check(List<Mismatch> mismatches, String type, String member, String property, long java, long c) {
        if (java != c) {
            mismatches.add(new Mismatch(type, member, property, java, c));
        }
    }

    private static void walk(String type, GroupLayout group, String prefix, long base, List<Expectation> out) {
        long offset = base;
        boolean union = group instanceof UnionLayout;
        for (MemoryLayout element : group.memberLayouts()) {
            long at = union ? base : offset;
            if (!union) {
                offset += element.byteSize();
            }
            if (element instanceof PaddingLayout) {
                continue;
            }
            String name = element.name().orElse(null);
            if (name == null || name.startsWith("$anon$")) {
                if (element instanceof GroupLayout anonymous) {
                    walk(type, anonymous, prefix, at, out);
                    continue;
                }
                throw new IllegalArgumentException(type + ": the Java layout has an unnamed member at offset " + at
                        + " (" + element + "); name it after the C member");
            }
            String path = prefix.isEmpty() ? name : prefix + "." + name;
            if (element instanceof SequenceLayout seq && seq.elementCount() == 0) {
                out.add(new Expectation(CLayouts.Query.flexibleMember(type, path), at, -1, -1));
                continue;
            }
            out.add(new Expectation(CLayouts.Query.member(type, path), at, element.byteSize(), -1));
            if (element instanceof GroupLayout nested) {
                walk(type, nested, path, at, out);
            } else if (element instanceof SequenceLayout seq && seq.elementLayout() instanceof GroupLayout nested) {
                walk(type, nested, path + "[0]", at, out);
            }
        }
    }
}
