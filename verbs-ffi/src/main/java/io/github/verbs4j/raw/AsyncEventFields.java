package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_async_event;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;

/**
 * {@code struct ibv_async_event} as Java values, as {@code ibv_get_async_event} fills it. The
 * element is a union: which member is meaningful depends on the event type, so the reader
 * picks {@code qp}, {@code cq}, {@code srq} or {@code portNum} by it (all are read here; the
 * others hold the same bytes seen through another type).
 *
 * @param eventType {@code event_type} ({@code IBV_EVENT_*})
 * @param qp        {@code element.qp}
 * @param cq        {@code element.cq}
 * @param srq       {@code element.srq}
 * @param portNum   {@code element.port_num}
 */
public record AsyncEventFields(int eventType, MemorySegment qp, MemorySegment cq, MemorySegment srq, int portNum) {

    /** A zeroed {@code struct ibv_async_event} for {@code ibv_get_async_event} to fill (and {@code ibv_ack_async_event} to take). */
    public static MemorySegment allocate(SegmentAllocator allocator) {
        MemorySegment event = allocator.allocate(ibv_async_event.layout());
        event.fill((byte) 0);
        return event;
    }

    /** Reads the {@code struct ibv_async_event} at {@code event}. */
    public static AsyncEventFields read(MemorySegment event) {
        MemorySegment element = ibv_async_event.element(event);
        return new AsyncEventFields(ibv_async_event.event_type(event), ibv_async_event.element.qp(element),
                ibv_async_event.element.cq(element), ibv_async_event.element.srq(element),
                ibv_async_event.element.port_num(element));
    }
}
