package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.RdmaCore;
import io.github.verbs4j.ffi.rdma_addr;
import io.github.verbs4j.ffi.rdma_cm_id;
import io.github.verbs4j.ffi.rdma_event_channel;
import io.github.verbs4j.ffi.rdma_route;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The fields of librdmacm's own objects that verbs-cm reads ({@code struct rdma_cm_id},
 * {@code struct rdma_event_channel}) and the {@code rdma_cma.h} enum values it maps to Java
 * enums. The objects are librdmacm's: only read here, never written.
 */
public final class CmStructs {

    private CmStructs() {
    }

    /** {@code enum rdma_port_space}. */
    public static final int PS_TCP = RdmaCore.RDMA_PS_TCP();
    public static final int PS_UDP = RdmaCore.RDMA_PS_UDP();

    /** {@code enum rdma_cm_event_type}. */
    public static final int EVENT_ADDR_RESOLVED = RdmaCore.RDMA_CM_EVENT_ADDR_RESOLVED();
    public static final int EVENT_ADDR_ERROR = RdmaCore.RDMA_CM_EVENT_ADDR_ERROR();
    public static final int EVENT_ROUTE_RESOLVED = RdmaCore.RDMA_CM_EVENT_ROUTE_RESOLVED();
    public static final int EVENT_ROUTE_ERROR = RdmaCore.RDMA_CM_EVENT_ROUTE_ERROR();
    public static final int EVENT_CONNECT_REQUEST = RdmaCore.RDMA_CM_EVENT_CONNECT_REQUEST();
    public static final int EVENT_CONNECT_RESPONSE = RdmaCore.RDMA_CM_EVENT_CONNECT_RESPONSE();
    public static final int EVENT_CONNECT_ERROR = RdmaCore.RDMA_CM_EVENT_CONNECT_ERROR();
    public static final int EVENT_UNREACHABLE = RdmaCore.RDMA_CM_EVENT_UNREACHABLE();
    public static final int EVENT_REJECTED = RdmaCore.RDMA_CM_EVENT_REJECTED();
    public static final int EVENT_ESTABLISHED = RdmaCore.RDMA_CM_EVENT_ESTABLISHED();
    public static final int EVENT_DISCONNECTED = RdmaCore.RDMA_CM_EVENT_DISCONNECTED();
    public static final int EVENT_DEVICE_REMOVAL = RdmaCore.RDMA_CM_EVENT_DEVICE_REMOVAL();
    public static final int EVENT_MULTICAST_JOIN = RdmaCore.RDMA_CM_EVENT_MULTICAST_JOIN();
    public static final int EVENT_MULTICAST_ERROR = RdmaCore.RDMA_CM_EVENT_MULTICAST_ERROR();
    public static final int EVENT_ADDR_CHANGE = RdmaCore.RDMA_CM_EVENT_ADDR_CHANGE();
    public static final int EVENT_TIMEWAIT_EXIT = RdmaCore.RDMA_CM_EVENT_TIMEWAIT_EXIT();

    /** {@code sizeof(struct rdma_cm_id)}: how far an id's pointer is readable. */
    public static final long ID_SIZE = rdma_cm_id.layout().byteSize();
    /** Where {@code route.addr.src_addr} (a {@code sockaddr_storage}) lies in an id. */
    public static final long ID_SRC_ADDR = rdma_cm_id.route$offset() + rdma_route.addr$offset()
            + rdma_addr.src_addr$offset();
    /** Where {@code route.addr.dst_addr} lies in an id. */
    public static final long ID_DST_ADDR = rdma_cm_id.route$offset() + rdma_route.addr$offset()
            + rdma_addr.dst_addr$offset();

    /** {@code id->verbs}: the {@code ibv_context} the id is bound to (NULL before it is). */
    public static MemorySegment idVerbs(MemorySegment id) {
        return rdma_cm_id.verbs(id);
    }

    /** {@code id->port_num}, unsigned. */
    public static int idPortNum(MemorySegment id) {
        return Byte.toUnsignedInt(rdma_cm_id.port_num(id));
    }

    /** {@code id->qp}: the QP {@code rdma_create_qp} made. */
    public static MemorySegment idQp(MemorySegment id) {
        return rdma_cm_id.qp(id);
    }

    /** {@code sizeof(struct rdma_event_channel)}. */
    public static final long EVENT_CHANNEL_SIZE = rdma_event_channel.layout().byteSize();

    /** {@code channel->fd}, of a channel pointer made readable for {@link #EVENT_CHANNEL_SIZE} bytes. */
    public static int eventChannelFd(MemorySegment channel) {
        return rdma_event_channel.fd(channel);
    }

    /** A copy of {@code length} bytes at {@code data}; empty for NULL or 0. */
    static byte[] copyBytes(MemorySegment data, int length) {
        if (data.address() == 0 || length == 0) {
            return new byte[0];
        }
        return data.reinterpret(length).toArray(ValueLayout.JAVA_BYTE);
    }
}
