package io.github.verbs4j;

/**
 * One entry of a port's GID table ({@code struct ibv_gid_entry}).
 *
 * @param index       the GID index (the {@code sgid_index} to use in a GRH)
 * @param gid         the GID
 * @param type        its type; {@code null} when the library can tell none (old rdma-core, iWARP)
 * @param port        the port the entry belongs to (from 1)
 * @param ndevIfindex the index of the network interface the entry belongs to (RoCE), 0 when
 *                    none or not reported ({@code ibv_query_gid} without the extended query)
 */
public record GidEntry(int index, Gid gid, GidType type, int port, int ndevIfindex) {
}
