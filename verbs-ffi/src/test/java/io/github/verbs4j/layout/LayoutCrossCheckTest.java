package io.github.verbs4j.layout;

import io.github.verbs4j.ffi.ibv_wc;
import org.junit.jupiter.api.Test;

import java.lang.foreign.GroupLayout;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The generated bindings of {@code io.github.verbs4j.ffi} agree with the headers they were
 * generated from ({@code <infiniband/verbs.h>}, {@code <rdma/rdma_cma.h>}, {@code <poll.h>}) as
 * gcc compiles them on this machine: every generated struct and union, every member, by offset
 * and size; every type by size and alignment. verbs4j has no hand-written struct offsets left:
 * what it reads by hand (verbs_context, pollfd, sockaddr_in*) comes from these layouts.
 */
class LayoutCrossCheckTest {

    /** The types the library touches; the cross-check must cover each of them. */
    static final List<String> REQUIRED = List.of(
            "struct ibv_context", "struct ibv_context_ops", "struct verbs_context", "struct ibv_device_attr",
            "struct ibv_port_attr", "struct ibv_qp_attr", "struct ibv_qp_init_attr", "struct ibv_qp_cap",
            "struct ibv_send_wr", "struct ibv_recv_wr", "struct ibv_sge", "struct ibv_wc", "struct ibv_ah_attr",
            "struct ibv_global_route", "union ibv_gid", "struct ibv_srq_init_attr", "struct ibv_srq_attr",
            "struct ibv_mr", "struct ibv_pd", "struct ibv_cq", "struct ibv_qp", "struct ibv_srq",
            "struct ibv_comp_channel", "struct ibv_async_event", "struct ibv_device", "struct ibv_gid_entry",
            // librdmacm
            "struct rdma_cm_id", "struct rdma_cm_event", "struct rdma_conn_param", "struct rdma_ud_param",
            "struct rdma_route", "struct rdma_addr", "struct rdma_event_channel", "struct rdma_ib_addr",
            "struct sockaddr", "struct sockaddr_in", "struct sockaddr_in6", "struct sockaddr_storage",
            // poll(2)
            "struct pollfd");

    /** Members the library reads or writes on the hot path, named so a regression is obvious. */
    static final List<String> REQUIRED_MEMBERS = List.of(
            "struct ibv_send_wr.wr.rdma.remote_addr", "struct ibv_send_wr.wr.rdma.rkey",
            "struct ibv_send_wr.wr.atomic.compare_add", "struct ibv_send_wr.wr.atomic.swap",
            "struct ibv_send_wr.wr.ud.ah", "struct ibv_send_wr.wr.ud.remote_qpn", "struct ibv_send_wr.wr.ud.remote_qkey",
            "struct ibv_send_wr.imm_data", "struct ibv_send_wr.qp_type.xrc.remote_srqn",
            "struct ibv_send_wr.bind_mw.bind_info", "struct ibv_send_wr.tso.mss",
            "struct ibv_context_ops.post_send", "struct ibv_context_ops.post_recv", "struct ibv_context_ops.poll_cq",
            "struct ibv_context_ops.req_notify_cq", "struct ibv_context_ops.post_srq_recv",
            "struct ibv_context.ops", "struct ibv_context.abi_compat", "struct verbs_context.sz",
            "struct verbs_context.query_port", "struct verbs_context.context",
            "struct ibv_qp_attr.ah_attr.grh.dgid", "struct ibv_qp_init_attr.cap.max_inline_data",
            "struct ibv_qp_init_attr.send_cq", "struct ibv_qp_init_attr.recv_cq", "struct ibv_qp_init_attr.srq",
            "struct ibv_qp_init_attr.qp_type", "struct ibv_qp_init_attr.sq_sig_all",
            "struct rdma_cm_id.verbs", "struct rdma_cm_id.channel", "struct rdma_cm_id.context", "struct rdma_cm_id.qp",
            "struct rdma_cm_id.route.addr.dst_addr", "struct rdma_cm_id.route.addr.src_sin6",
            "struct rdma_cm_id.port_num", "struct rdma_cm_id.pd", "struct rdma_cm_id.send_cq", "struct rdma_cm_id.recv_cq",
            "struct rdma_cm_event.id", "struct rdma_cm_event.listen_id", "struct rdma_cm_event.event",
            "struct rdma_cm_event.status", "struct rdma_cm_event.param.conn.private_data",
            "struct rdma_cm_event.param.ud.qp_num", "struct rdma_conn_param.responder_resources",
            "struct rdma_conn_param.rnr_retry_count", "struct rdma_ud_param.ah_attr.grh.dgid",
            "struct sockaddr_in.sin_port", "struct sockaddr_in.sin_addr", "struct sockaddr_in6.sin6_port",
            "struct sockaddr_in6.sin6_addr", "struct sockaddr_in6.sin6_scope_id",
            "struct pollfd.fd", "struct pollfd.events", "struct pollfd.revents");

    @Test
    void everyGeneratedLayoutMatchesTheHeaders() {
        CLayouts c = CLayouts.bindings();
        Map<String, GroupLayout> generated = GeneratedLayouts.inPackageOf(ibv_wc.class);

        TreeSet<String> missing = new TreeSet<>(REQUIRED);
        missing.removeAll(generated.keySet());
        assertTrue(missing.isEmpty(), "the generated bindings lack types the library touches: " + missing
                + " (verbs-ffi/jextract/rdma.args filters them out?)");

        LayoutComparison.Report report = LayoutComparison.compare(c, generated);
        System.out.println("layout cross-check <" + String.join(">, <", c.headers()) + "> with " + c.compilerVersion()
                + ": " + report.summary() + " compared (" + REQUIRED.size() + " required types all present)");
        report.assertNoMismatch();
        assertEquals(generated.size(), report.types().size());
    }

    @Test
    void theRequiredMembersAreAmongThoseCompared() {
        // every required member path must be produced by the generic walk, so renaming or
        // filtering one away in the bindings cannot shrink the check unnoticed
        Map<String, GroupLayout> generated = GeneratedLayouts.inPackageOf(ibv_wc.class);
        TreeSet<String> walked = new TreeSet<>();
        for (String type : REQUIRED) {
            LayoutComparison.queries(type, generated.get(type)).forEach(q -> walked.add(q.toString()));
        }
        TreeSet<String> missing = new TreeSet<>(REQUIRED_MEMBERS);
        missing.removeAll(walked);
        assertTrue(missing.isEmpty(), "members not covered by the cross-check: " + missing);
    }

    @Test
    void theProbeReproducesTheMeasuredAbi() {
        // rdma-core 44 on LP64 Linux as measured by hand with offsetof; if these
        // fail, the probe itself is wrong, not the bindings
        assertEquals(16, CLayouts.sizeOf("ibv_sge"));
        assertEquals(12, CLayouts.offsetOf("ibv_sge", "lkey"));
        assertEquals(128, CLayouts.sizeOf("ibv_send_wr"));
        assertEquals(40, CLayouts.offsetOf("ibv_send_wr", "wr.rdma.remote_addr"));
        assertEquals(48, CLayouts.offsetOf("ibv_send_wr", "wr.rdma.rkey"));
        assertEquals(64, CLayouts.offsetOf("ibv_send_wr", "wr.atomic.rkey"));
        assertEquals(52, CLayouts.offsetOf("ibv_send_wr", "wr.ud.remote_qkey"));
        assertEquals(36, CLayouts.offsetOf("ibv_send_wr", "invalidate_rkey"));
        assertEquals(48, CLayouts.sizeOf("ibv_wc"));
        assertEquals(45, CLayouts.offsetOf("ibv_wc", "dlid_path_bits"));
        assertEquals(1, CLayouts.sizeOf("ibv_wc", "dlid_path_bits"));
        assertEquals(200, CLayouts.offsetOf("ibv_context_ops", "post_send"));
        assertEquals(88, CLayouts.offsetOf("ibv_context_ops", "poll_cq"));
        assertEquals(328, CLayouts.sizeOf("ibv_context"));
        assertEquals(320, CLayouts.offsetOf("ibv_context", "abi_compat"));
        assertEquals(648, CLayouts.sizeOf("verbs_context"));
        assertEquals(320, CLayouts.offsetOf("verbs_context", "context"));
        assertEquals(16, CLayouts.sizeOf("ibv_gid"));
        assertEquals("union ibv_gid", CLayouts.resolveType("ibv_gid"));
        assertEquals(52, CLayouts.offsetOf("ibv_qp", "qp_num"));
        CLayouts c = CLayouts.bindings();
        assertEquals(16, c.typeSize("struct sockaddr_in"));
        assertEquals(28, c.typeSize("struct sockaddr_in6"));
        assertEquals(128, c.typeSize("struct sockaddr_storage"));
        assertEquals(0, c.memberOffset("struct rdma_cm_id", "verbs"));
        assertEquals(8, c.typeSize("struct pollfd"));
        assertEquals(6, c.memberOffset("struct pollfd", "revents"));
    }

    @Test
    void aWrongLayoutIsReportedMemberByMember() {
        // ibv_sge with length and lkey swapped: same size, wrong offsets
        GroupLayout swapped = MemoryLayout.structLayout(
                ValueLayout.JAVA_LONG.withName("addr"),
                ValueLayout.JAVA_INT.withName("lkey"),
                ValueLayout.JAVA_INT.withName("length"));
        LayoutComparison.Report report = LayoutComparison.compare(CLayouts.verbs(), Map.of("struct ibv_sge", swapped));
        assertEquals(List.of(
                new LayoutComparison.Mismatch("struct ibv_sge", "lkey", "offset", 8, 12),
                new LayoutComparison.Mismatch("struct ibv_sge", "length", "offset", 12, 8)), report.mismatches());
        AssertionError e = assertThrows(AssertionError.class, report::assertNoMismatch);
        assertTrue(e.getMessage().contains("struct ibv_sge .lkey: offset is 8 in Java, 12 in C"), e.getMessage());

        // one member too few: the size of the struct gives it away
        GroupLayout shortWc = MemoryLayout.structLayout(ValueLayout.JAVA_LONG.withName("wr_id"));
        assertEquals(List.of(new LayoutComparison.Mismatch("struct ibv_wc", null, "sizeof", 8, 48)),
                LayoutComparison.compare(CLayouts.verbs(), Map.of("ibv_wc", shortWc)).mismatches());

        Map<String, Long> handWritten = Map.of("wr.rdma.rkey", 48L, "wr.ud.remote_qpn", 44L);
        assertEquals(List.of(new LayoutComparison.Mismatch("struct ibv_send_wr", "wr.ud.remote_qpn", "offset", 44, 48)),
                LayoutComparison.compareOffsets(CLayouts.verbs(), "ibv_send_wr", handWritten).mismatches());
    }

    @Test
    void anUnknownMemberFailsWithTheCompilersDiagnostic() {
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> CLayouts.offsetOf("ibv_wc", "no_such_member"));
        assertTrue(e.getMessage().contains("no_such_member") && e.getMessage().contains("does not compile"), e.getMessage());
    }

    @Test
    void aMissingCompilerFailsNamingWhatToInstall() {
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> CLayouts.verbs().withCompiler("verbs4j-no-such-cc").typeSize("ibv_wc"));
        assertTrue(e.getMessage().contains("verbs4j-no-such-cc") && e.getMessage().contains("apt-get install gcc"),
                e.getMessage());
    }

    @Test
    void aMissingHeaderFailsNamingThePackages() {
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> CLayouts.of("infiniband/verbs4j_no_such_header.h").typeSize("int"));
        assertTrue(e.getMessage().contains("verbs4j_no_such_header.h") && e.getMessage().contains("libibverbs-dev"),
                e.getMessage());
    }
}
