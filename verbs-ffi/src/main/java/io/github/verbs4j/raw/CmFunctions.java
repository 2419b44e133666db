package io.github.verbs4j.raw;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * The librdmacm calls verbs-cm makes, each with {@code errno} captured (the captured-state
 * segment is the first argument; the generated {@code RdmaCore} handles cannot capture it).
 * None is critical: {@code rdma_get_cm_event} and friends may block or take locks.
 *
 * <p>Loading this class loads librdmacm ({@link NativeLibraries#rdmacm()}): a library that cannot
 * be loaded fails its initialisation with the {@link UnsatisfiedLinkError} that names the cause.
 */
public final class CmFunctions {

    private CmFunctions() {
    }

    private static final SymbolLookup LIB = NativeLibraries.rdmacm();

    private static MethodHandle h(String name, FunctionDescriptor d) {
        return Downcalls.errnoCapturing(LIB, name, d);
    }

    public static final MethodHandle CREATE_EVENT_CHANNEL = h("rdma_create_event_channel", FunctionDescriptor.of(ADDRESS));
    public static final MethodHandle DESTROY_EVENT_CHANNEL = h("rdma_destroy_event_channel", FunctionDescriptor.ofVoid(ADDRESS));
    public static final MethodHandle CREATE_ID = h("rdma_create_id",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_INT));
    public static final MethodHandle DESTROY_ID = h("rdma_destroy_id", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    public static final MethodHandle BIND_ADDR = h("rdma_bind_addr", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    public static final MethodHandle RESOLVE_ADDR = h("rdma_resolve_addr",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_INT));
    public static final MethodHandle RESOLVE_ROUTE = h("rdma_resolve_route", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    public static final MethodHandle LISTEN = h("rdma_listen", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    public static final MethodHandle CONNECT = h("rdma_connect", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    public static final MethodHandle ACCEPT = h("rdma_accept", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    public static final MethodHandle REJECT = h("rdma_reject", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_BYTE));
    public static final MethodHandle DISCONNECT = h("rdma_disconnect", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    public static final MethodHandle CREATE_QP = h("rdma_create_qp", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
    public static final MethodHandle DESTROY_QP = h("rdma_destroy_qp", FunctionDescriptor.ofVoid(ADDRESS));
    public static final MethodHandle GET_CM_EVENT = h("rdma_get_cm_event", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    public static final MethodHandle ACK_CM_EVENT = h("rdma_ack_cm_event", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    public static final MethodHandle INIT_QP_ATTR = h("rdma_init_qp_attr", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
    public static final MethodHandle ESTABLISH = h("rdma_establish", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    public static final MethodHandle MIGRATE_ID = h("rdma_migrate_id", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
}
