package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_context;

import java.lang.foreign.MemorySegment;

/**
 * The fields of {@code struct ibv_context} that verbs-core reads: its device, the
 * {@code async_fd}, the {@code cmd_fd} and the number of completion vectors. The struct is the provider's; these
 * read it in place.
 */
public final class ContextFields {

    private ContextFields() {
    }

    /** {@code sizeof(struct ibv_context)}. */
    private static final long SIZE = ibv_context.layout().byteSize();

    /** {@code context}, an address {@code ibv_open_device} returned, sized to the struct. */
    public static MemorySegment of(MemorySegment context) {
        return context.reinterpret(SIZE);
    }

    /** {@code context->device}, sized to {@code struct ibv_device} ({@link DeviceFields}). */
    public static MemorySegment device(MemorySegment context) {
        return DeviceFields.of(ibv_context.device(context));
    }

    /** {@code context->async_fd}: readable when an async event is pending. */
    public static int asyncFd(MemorySegment context) {
        return ibv_context.async_fd(context);
    }

    /** {@code context->cmd_fd}: the command fd, what {@code ibv_import_device} takes a dup of. */
    public static int cmdFd(MemorySegment context) {
        return ibv_context.cmd_fd(context);
    }

    /** {@code context->num_comp_vectors}. */
    public static int compVectorCount(MemorySegment context) {
        return ibv_context.num_comp_vectors(context);
    }
}
