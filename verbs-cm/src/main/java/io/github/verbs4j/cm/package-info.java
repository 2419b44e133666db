/**
 * librdmacm for Java: connection setup the way most RDMA applications do it.
 *
 * <h2>Two levels</h2>
 * <ul>
 *   <li><b>Endpoints</b>: {@link io.github.verbs4j.cm.RdmaServer} (bind, listen, accept) and
 *       {@link io.github.verbs4j.cm.RdmaClient} (resolve, connect) yield an
 *       {@link io.github.verbs4j.cm.RdmaConnection}: a connected RC queue pair, its completion
 *       queue and registered buffers, with send/receive and RDMA READ/WRITE helpers. Every step
 *       has a timeout; a peer that is not there fails the call with an exception, never a hang.</li>
 *   <li><b>rdma_cm itself</b>: {@link io.github.verbs4j.cm.EventChannel}
 *       ({@code rdma_create_event_channel}, {@code rdma_get_cm_event}) and
 *       {@link io.github.verbs4j.cm.CmId} ({@code rdma_create_id}, {@code rdma_resolve_addr},
 *       {@code rdma_resolve_route}, {@code rdma_bind_addr}, {@code rdma_listen},
 *       {@code rdma_connect}, {@code rdma_accept}, {@code rdma_reject}, {@code rdma_disconnect},
 *       {@code rdma_create_qp}, {@code rdma_migrate_id}, {@code rdma_destroy_id}).</li>
 * </ul>
 *
 * <h2>Events are acknowledged by the library</h2>
 * Every {@code struct rdma_cm_event} is copied into a {@link io.github.verbs4j.cm.CmEvent}
 * (type, status, private data, peer parameters) and acknowledged with {@code rdma_ack_cm_event}
 * before any method returns it, so an application cannot leak an event or block
 * {@code rdma_destroy_id} on one. The id of a CONNECT_REQUEST is handed over to the caller.
 *
 * <h2>verbs-core objects</h2>
 * librdmacm opens the device itself ({@code cm_id->verbs}): {@link io.github.verbs4j.cm.CmId#context()}
 * wraps it in a verbs-core {@link io.github.verbs4j.Context} (one per device, closing it releases
 * nothing), from which the usual protection domains, completion queues and memory regions are
 * made; {@link io.github.verbs4j.cm.CmId#createQueuePair} returns a verbs-core
 * {@link io.github.verbs4j.QueuePair} that posts like any other.
 *
 * <p>Which librdmacm.so.1 is used is chosen by {@code -Dverbs4j.librdmacm} (a path, or
 * {@code system}); unset, the one beside a libibverbs chosen by path (softrdma's) is preferred.
 */
package io.github.verbs4j.cm;

