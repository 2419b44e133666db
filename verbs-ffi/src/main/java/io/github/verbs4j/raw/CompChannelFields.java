package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_comp_channel;

import java.lang.foreign.MemorySegment;

/** The field of {@code struct ibv_comp_channel} that verbs-core reads: the file descriptor to wait on. */
public final class CompChannelFields {

    private CompChannelFields() {
    }

    /** {@code sizeof(struct ibv_comp_channel)}. */
    public static final long SIZE = ibv_comp_channel.layout().byteSize();

    /** {@code channel->fd}: readable when a completion event is pending. */
    public static int fd(MemorySegment channel) {
        return ibv_comp_channel.fd(channel);
    }
}
