package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.ibv_gid_entry;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;

/**
 * {@code struct ibv_gid_entry} as Java values, as {@code ibv_query_gid_ex} and
 * {@code ibv_query_gid_table} fill it: the 16 bytes of the GID, its index, its type
 * ({@code IBV_GID_TYPE_*}), the port and the network interface's index.
 */
public record GidEntryFields(byte[] gid, int gidIndex, int portNum, int gidType, int ndevIfindex) {

    /** {@code sizeof(struct ibv_gid_entry)}: the {@code entry_size} both queries take. */
    public static final long SIZE = ibv_gid_entry.layout().byteSize();

    /** Room for {@code count} entries, zeroed, for {@code ibv_query_gid_ex} (1) or {@code ibv_query_gid_table}. */
    public static MemorySegment allocate(SegmentAllocator allocator, long count) {
        MemorySegment entries = allocator.allocate(ibv_gid_entry.layout(), count);
        entries.fill((byte) 0);
        return entries;
    }

    /** Reads entry {@code index} of the array at {@code entries}. */
    public static GidEntryFields read(MemorySegment entries, long index) {
        MemorySegment e = entries.asSlice(index * SIZE, SIZE);
        return new GidEntryFields(ibv_gid_entry.gid(e).toArray(ValueLayout.JAVA_BYTE), ibv_gid_entry.gid_index(e),
                ibv_gid_entry.port_num(e), ibv_gid_entry.gid_type(e), ibv_gid_entry.ndev_ifindex(e));
    }
}
