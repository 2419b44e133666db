package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.rdma_cm_event;

import java.lang.foreign.MemorySegment;

/**
 * {@code struct rdma_cm_event} as Java values, read from the event {@code rdma_get_cm_event}
 * returned (before {@code rdma_ack_cm_event} frees it). {@code param} is the union
 * {@code param.conn} / {@code param.ud}: read it with {@link ConnParam#read} or
 * {@link UdParam#read} by the id's port space, before the ack.
 *
 * @param event    the {@code RDMA_CM_EVENT_*} value ({@link CmStructs})
 * @param status   the event's status (a negative errno, or the reject reason)
 * @param id       the {@code rdma_cm_id} the event is for
 * @param listenId the listening id of a CONNECT_REQUEST, else NULL
 * @param param    the parameter union
 */
public record CmEventFields(int event, int status, MemorySegment id, MemorySegment listenId, MemorySegment param) {

    /** Reads the event at {@code event}, an address {@code rdma_get_cm_event} stored. */
    public static CmEventFields read(MemorySegment event) {
        MemorySegment ev = event.reinterpret(rdma_cm_event.layout().byteSize());
        return new CmEventFields(rdma_cm_event.event(ev), rdma_cm_event.status(ev), rdma_cm_event.id(ev),
                rdma_cm_event.listen_id(ev), rdma_cm_event.param(ev));
    }
}
