package io.github.verbs4j;

/**
 * One entry of a port's GID table.
 *
 * @param index the GID index (the {@code sgid_index} to use in a GRH)
 * @param gid   the GID
 * @param type  its type; {@code null} when the library can tell none (old rdma-core)
 */
public record GidEntry(int index, Gid gid, GidType type) {
}
