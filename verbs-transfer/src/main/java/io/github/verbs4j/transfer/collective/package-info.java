/**
 * Collectives over a ring of processes on RDMA: {@link io.github.verbs4j.transfer.collective.Ring}
 * (allreduce, reduce-scatter, all-gather and broadcast over pipelined RDMA WRITE with immediate),
 * with a rendezvous over rdma_cm.
 */
package io.github.verbs4j.transfer.collective;
