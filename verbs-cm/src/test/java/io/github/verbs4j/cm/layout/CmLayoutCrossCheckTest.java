package io.github.verbs4j.cm.layout;

import io.github.verbs4j.cm.ffi.rdma_cm_id;
import io.github.verbs4j.layout.CLayouts;
import io.github.verbs4j.layout.GeneratedLayouts;
import io.github.verbs4j.layout.LayoutComparison;
import org.junit.jupiter.api.Test;

import java.lang.foreign.GroupLayout;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The generated bindings of {@code io.github.verbs4j.cm.ffi} agree with {@code <rdma/rdma_cma.h>}
 * as gcc compiles it here: every generated struct and union (including the verbs and socket
 * types the CM structs embed), every member by offset and size. Same probe as verbs-core's
 * {@code LayoutCrossCheckTest}.
 */
class CmLayoutCrossCheckTest {

    static final List<String> REQUIRED = List.of(
            "struct rdma_cm_id", "struct rdma_cm_event", "struct rdma_conn_param", "struct rdma_ud_param",
            "struct rdma_route", "struct rdma_addr", "struct rdma_event_channel", "struct rdma_ib_addr",
            "struct ibv_ah_attr", "union ibv_gid", "struct sockaddr_in", "struct sockaddr_in6", "struct sockaddr_storage");

    static final List<String> REQUIRED_MEMBERS = List.of(
            "struct rdma_cm_id.verbs", "struct rdma_cm_id.channel", "struct rdma_cm_id.context", "struct rdma_cm_id.qp",
            "struct rdma_cm_id.route.addr.dst_addr", "struct rdma_cm_id.route.addr.src_sin6",
            "struct rdma_cm_id.port_num", "struct rdma_cm_id.pd", "struct rdma_cm_id.send_cq", "struct rdma_cm_id.recv_cq",
            "struct rdma_cm_event.id", "struct rdma_cm_event.listen_id", "struct rdma_cm_event.event",
            "struct rdma_cm_event.status", "struct rdma_cm_event.param.conn.private_data",
            "struct rdma_cm_event.param.ud.qp_num", "struct rdma_conn_param.responder_resources",
            "struct rdma_conn_param.rnr_retry_count", "struct rdma_ud_param.ah_attr.grh.dgid");

    @Test
    void everyGeneratedLayoutMatchesTheHeaders() {
        CLayouts c = CLayouts.rdmaCm();
        Map<String, GroupLayout> generated = GeneratedLayouts.inPackageOf(rdma_cm_id.class);

        TreeSet<String> missing = new TreeSet<>(REQUIRED);
        missing.removeAll(generated.keySet());
        assertTrue(missing.isEmpty(), "the generated CM bindings lack types the library touches: " + missing
                + " (verbs-cm/jextract/rdma_cma.args filters them out?)");

        TreeSet<String> walked = new TreeSet<>();
        generated.forEach((type, layout) -> LayoutComparison.queries(type, layout).forEach(q -> walked.add(q.toString())));
        TreeSet<String> missingMembers = new TreeSet<>(REQUIRED_MEMBERS);
        missingMembers.removeAll(walked);
        assertTrue(missingMembers.isEmpty(), "members not covered by the cross-check: " + missingMembers);

        LayoutComparison.Report report = LayoutComparison.compare(c, generated);
        System.out.println("layout cross-check <" + String.join(">, <", c.headers()) + "> with " + c.compilerVersion()
                + ": " + report.summary() + " compared (" + REQUIRED.size() + " required types all present)");
        report.assertNoMismatch();
        assertEquals(generated.size(), report.types().size());
    }

    @Test
    void theProbeReproducesTheMeasuredAbi() {
        // rdma-core 44 on LP64 Linux; a failure here means the probe, not the bindings, is off
        CLayouts c = CLayouts.rdmaCm();
        assertEquals(16, c.typeSize("sockaddr_in"));
        assertEquals(28, c.typeSize("sockaddr_in6"));
        assertEquals(128, c.typeSize("sockaddr_storage"));
        assertEquals(0, c.memberOffset("rdma_cm_id", "verbs"));
        assertEquals(c.memberOffset("rdma_cm_id", "route") + c.memberOffset("rdma_route", "addr"),
                c.memberOffset("rdma_cm_id", "route.addr"));
    }
}
