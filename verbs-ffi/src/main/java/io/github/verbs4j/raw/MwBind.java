package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_mw_bind;
import io.github.verbs4j.ffi.ibv_mw_bind_info;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.util.Objects;

/**
 * A bind of a type 1 memory window ({@code ibv_bind_mw}), and its one encoding into
 * {@code struct ibv_mw_bind} with its {@code struct ibv_mw_bind_info}.
 *
 * @param wrId        {@code wr_id} of the bind's completion
 * @param sendFlags   {@code send_flags} ({@code IBV_SEND_SIGNALED} or 0)
 * @param mr          {@code bind_info.mr}: the region the window opens onto
 * @param address     {@code bind_info.addr}
 * @param length      {@code bind_info.length}
 * @param accessFlags {@code bind_info.mw_access_flags} ({@code IBV_ACCESS_REMOTE_*})
 */
public record MwBind(long wrId, int sendFlags, MemorySegment mr, long address, long length, int accessFlags) {

    public MwBind {
        Objects.requireNonNull(mr, "mr");
    }

    /** A zeroed {@code struct ibv_mw_bind} from {@code allocator} holding this bind. */
    public MemorySegment write(SegmentAllocator allocator) {
        MemorySegment bind = allocator.allocate(ibv_mw_bind.layout());
        bind.fill((byte) 0);
        ibv_mw_bind.wr_id(bind, wrId);
        ibv_mw_bind.send_flags(bind, sendFlags);
        MemorySegment info = ibv_mw_bind.bind_info(bind);
        ibv_mw_bind_info.mr(info, mr);
        ibv_mw_bind_info.addr(info, address);
        ibv_mw_bind_info.length(info, length);
        ibv_mw_bind_info.mw_access_flags(info, accessFlags);
        return bind;
    }
}
