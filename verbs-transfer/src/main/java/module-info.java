/**
 * verbs4j transfer: bulk data on verbs4j. {@link io.github.verbs4j.transfer.TransferEngine} moves
 * batches of RDMA READ and WRITE between registered segments of several peers over several queue
 * pairs each; {@link io.github.verbs4j.transfer.collective.Ring} runs allreduce, reduce-scatter, all-gather and broadcast
 * over a ring of processes.
 */
module io.github.verbs4j.transfer {
    requires transitive io.github.verbs4j.cm;
    requires transitive io.github.verbs4j.core;
    exports io.github.verbs4j.transfer;
    exports io.github.verbs4j.transfer.collective;
}
