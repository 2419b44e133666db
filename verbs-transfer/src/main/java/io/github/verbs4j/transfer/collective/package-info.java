/**
 * Collectives over a ring of processes on RDMA: {@link io.github.verbs4j.transfer.collective.Ring}
 * (allreduce by reduce-scatter then allgather over RDMA WRITE with immediate, and broadcast),
 * with a rendezvous over rdma_cm.
 */
package io.github.verbs4j.transfer.collective;
