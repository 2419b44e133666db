package io.github.verbs4j;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.Objects;

import static io.github.verbs4j.raw.WorkRequestLayout.SGE_ADDR;
import static io.github.verbs4j.raw.WorkRequestLayout.SGE_LENGTH;
import static io.github.verbs4j.raw.WorkRequestLayout.SGE_LKEY;
import static io.github.verbs4j.raw.WorkRequestLayout.SGE_SIZE;

/**
 * The native side of one work request that {@link SendRequest} and {@link ReceiveRequest}
 * share: the {@code ibv_send_wr}/{@code ibv_recv_wr} itself, its array of {@code struct ibv_sge}
 * and the {@code bad_wr} slot, in one segment the garbage collector frees; plus the memory
 * region behind each entry and its offset there, so a post can check the regions are still open
 * and in the right protection domain, and so an entry follows its region when the region is
 * re-registered ({@link MemoryRegion#reregister()}: the full check after it writes the entry's
 * address and lkey again from the region). Not thread-safe (as its requests).
 */
final class ScatterGatherList {

    /** The work request ({@code wrSize} bytes), its {@code sg_list} already pointing at {@link #entries}. */
    final MemorySegment wr;
    /** The {@code struct ibv_sge} array. */
    final MemorySegment entries;
    /** Where the provider writes {@code bad_wr}. */
    final MemorySegment badWr;
    private final MemoryRegion[] regions;
    /** The offset of each entry in its region. */
    private final long[] offsets;

    ScatterGatherList(long wrSize, long sgListOffset, int maxSge) {
        if (maxSge < 1 || maxSge > 1024) {
            throw new IllegalArgumentException("maxSge must be 1..1024, got " + maxSge);
        }
        this.regions = new MemoryRegion[maxSge];
        this.offsets = new long[maxSge];
        MemorySegment all = Arena.ofAuto().allocate(wrSize + SGE_SIZE * maxSge + 8, 8);
        this.wr = all.asSlice(0, wrSize);
        this.entries = all.asSlice(wrSize, SGE_SIZE * maxSge);
        this.badWr = all.asSlice(wrSize + SGE_SIZE * maxSge, 8);
        wr.set(ValueLayout.ADDRESS, sgListOffset, entries);
    }

    int capacity() {
        return regions.length;
    }

    /**
     * Sets entry {@code index} to {@code length} bytes at {@code offset} of {@code region}.
     *
     * @throws IndexOutOfBoundsException when the range is outside the region or the index beyond the capacity
     */
    void set(int index, MemoryRegion region, long offset, int length) {
        Objects.checkIndex(index, regions.length);
        Objects.requireNonNull(region, "region");
        region.checkRange(offset, Integer.toUnsignedLong(length));
        long base = index * SGE_SIZE;
        entries.set(ValueLayout.JAVA_LONG, base + SGE_ADDR, region.address + offset);
        entries.set(ValueLayout.JAVA_INT, base + SGE_LENGTH, length);
        entries.set(ValueLayout.JAVA_INT, base + SGE_LKEY, region.lkey);
        regions[index] = region;
        offsets[index] = offset;
    }

    /** Makes entry 0 point at unregistered memory (inline data: no region, lkey 0), forgetting all regions. */
    void setUnregistered(MemorySegment data) {
        entries.set(ValueLayout.JAVA_LONG, SGE_ADDR, data.address());
        entries.set(ValueLayout.JAVA_INT, SGE_LENGTH, (int) data.byteSize());
        entries.set(ValueLayout.JAVA_INT, SGE_LKEY, 0);
        Arrays.fill(regions, null);
    }

    /**
     * Checks that the first {@code count} entries are set.
     *
     * @throws IndexOutOfBoundsException when {@code count} exceeds the capacity
     * @throws IllegalStateException naming the first entry not set
     */
    void requireSet(int count, boolean firstUnregistered) {
        if (count < 0 || count > regions.length) {
            throw new IndexOutOfBoundsException("sge count " + count + " outside 0.." + regions.length);
        }
        for (int i = 0; i < count; i++) {
            if (regions[i] == null && !(i == 0 && firstUnregistered)) {
                throw new IllegalStateException("scatter/gather entry " + i + " is not set");
            }
        }
    }

    /** Whether one of the first {@code count} entries names a region over a caller's segment (whose arena may close). */
    boolean namesCallerMemory(int count) {
        for (int i = 0; i < count; i++) {
            MemoryRegion mr = regions[i];
            if (mr != null && mr.callerMemory()) {
                return true;
            }
        }
        return false;
    }

    /** Checks the regions of the first {@code count} entries usable again (open, memory alive): the per-post check of a request checked before. */
    void ensureLive(int count) {
        for (int i = 0; i < count; i++) {
            MemoryRegion mr = regions[i];
            if (mr != null) {
                mr.ensureUsable();
            }
        }
    }

    /** The length of entry {@code index}. */
    long length(int index) {
        return Integer.toUnsignedLong(entries.get(ValueLayout.JAVA_INT, index * SGE_SIZE + SGE_LENGTH));
    }

    /**
     * Checks the first {@code count} entries for a post to {@code target}: each region open and
     * registered in {@code pd}, each entry inside its region's current range (which a
     * re-registration may have changed: the entry's address and lkey are written again from the
     * region); entry 0 may be unregistered only when {@code firstUnregistered}.
     *
     * @return the bytes the entries cover
     */
    long validate(int count, boolean firstUnregistered, ProtectionDomain pd, Object target, long requestId) {
        long total = 0;
        for (int i = 0; i < count; i++) {
            MemoryRegion mr = regions[i];
            if (mr == null) {
                if (i != 0 || !firstUnregistered) {
                    throw new IllegalStateException("scatter/gather entry " + i + " of request " + requestId + " is not set");
                }
            } else {
                mr.ensureUsable();
                if (mr.pd != pd) {
                    throw new IllegalArgumentException(mr + " (entry " + i + " of request " + requestId
                            + ") is registered in another protection domain than " + target);
                }
                long len = length(i);
                long offset = offsets[i];
                if (offset > mr.length || len > mr.length - offset) {
                    throw new IndexOutOfBoundsException("scatter/gather entry " + i + " of request " + requestId + " ([" + offset
                            + ", " + (offset + len) + ")) is outside " + mr + " since its re-registration");
                }
                long base = i * SGE_SIZE;
                entries.set(ValueLayout.JAVA_LONG, base + SGE_ADDR, mr.address + offset);
                entries.set(ValueLayout.JAVA_INT, base + SGE_LKEY, mr.lkey);
            }
            total += length(i);
        }
        return total;
    }
}
