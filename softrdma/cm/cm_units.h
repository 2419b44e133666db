/*
 * softrdma librdmacm: the functions and state the library's units share (cm_internal.h has
 * the types and the wire format, which the tests include too).
 *
 * The library is the rdma_cm connection manager in user space. It sits on the public verbs
 * API only (like rdma-core's librdmacm sits on libibverbs), so it works over any libibverbs
 * that has devices. The CM messages (REQ, REP, RTU, REJ, DREQ, DREP, SIDR REQ/REP) travel
 * over one TCP connection per rdma_cm connection, between the peers' real IP addresses. A
 * listener on rdma_cm port P listens on TCP port P of its bound address. One background
 * thread per process drives the sockets, the timeouts and the state machine, and queues
 * events on the event channels.
 *
 * The units call one way, downwards (tests/layering.sh checks it from the objects):
 *
 *   cm_ep.c                         endpoint helpers (rdma_get_request, rdma_create_ep)
 *   cm_api.c                        the rdma_* calls on channels and ids
 *   cm_thread.c                     the CM thread: polling, accepting, deadlines, fork
 *   cm_conn.c                       the connection state machine
 *   cm_qp.c                         QP attributes and moves, the ids' QPs, CQs and SRQs
 *   cm_id.c  cm_event.c  cm_msg.c   ids | event channels and events | wire records
 *   cm_device.c  addrinfo.c         verbs devices, default PDs | rdma_getaddrinfo
 *   cm_util.c  stubs.c              time, errno, addresses, GIDs, the lock | ENOSYS stubs
 *
 * Each section below is one unit's; a unit may use the sections of the units under it.
 */
#ifndef SOFTRDMA_CM_UNITS_H
#define SOFTRDMA_CM_UNITS_H

#include "cm_internal.h"

/* The hop limit of the GRH in every path record, address vector and UD address handle. */
#define DEFAULT_HOP_LIMIT 64

/* cm_util.c: time, errno, PSNs, socket addresses and GIDs; the one lock of the CM state and
 * its condition (broadcast on every new event, acknowledgement and CM thread pass). */
extern pthread_mutex_t g_lock;
extern pthread_cond_t g_cond;
uint64_t now_ms(void);
int fail(int err);
uint32_t random_psn(void);
socklen_t sa_len(const struct sockaddr *sa);
uint16_t sa_port(const struct sockaddr *sa);
void sa_set_port(struct sockaddr *sa, uint16_t port_be);
int sa_is_any(const struct sockaddr *sa);
void sa_to_gid(const struct sockaddr *sa, union ibv_gid *gid);
int gid_is_loopback(const union ibv_gid *gid);
int gid_is_v4mapped(const union ibv_gid *gid);
int gid_is_zero(const union ibv_gid *gid);

/* cm_device.c: the verbs devices, opened once (g_lock held for each call). */
int devices_init(void);
struct cm_dev *dev_of(struct ibv_context *verbs);
int find_dev(const struct sockaddr *sa, struct cm_id *idp);
void devices_forget(void);
struct ibv_pd *default_pd(struct cm_id *idp);

/* cm_id.c: the ids (g_lock held). */
extern struct cm_id *g_ids;
struct cm_id *id_new(struct cm_channel *ch, void *context, enum rdma_port_space ps,
		     enum ibv_qp_type qp_type);
void id_unlink(struct cm_id *idp);
int id_valid(struct cm_id *idp);
void close_sock(struct cm_id *idp);
int is_ud(struct cm_id *idp);
void fill_route(struct cm_id *idp);
int new_socket(struct cm_id *idp, int family);

/* cm_event.c: event channels and their events (g_lock held), and the synchronous id's wait
 * (g_lock not held). */
struct cm_channel *channel_new(void);
void channel_free(struct cm_channel *ch);
void channel_push(struct cm_channel *ch, struct cm_event *e);
void channel_unlink(struct cm_channel *ch, struct cm_event *e, struct cm_event *prev);
struct cm_event *event_new(struct cm_id *idp, enum rdma_cm_event_type type, int status);
void post_event(struct cm_id *idp, enum rdma_cm_event_type type, int status);
void event_conn(struct cm_event *e, const struct wire_msg *m, int size);
void event_pdata_only(struct cm_event *e, const struct wire_msg *m, int size);
int sync_complete(struct rdma_cm_id *id);
void sync_ack_old(struct rdma_cm_id *id);

/* cm_msg.c: the wire records. */
void msg_init(struct cm_id *idp, struct wire_msg *m, enum wire_type type);
int msg_pdata(struct wire_msg *m, const void *pd, unsigned len, unsigned max);
int msg_send(struct cm_id *idp, const struct wire_msg *m);
void send_simple(struct cm_id *idp, enum wire_type type, uint8_t status);
int msg_well_formed(const struct wire_msg *m);

/* cm_qp.c: an id's QP through the connection's states (g_lock held). */
uint8_t clamp_u8(unsigned v, unsigned max);
int qp_connect(struct cm_id *idp);
void qp_to_err(struct cm_id *idp);

/* cm_conn.c: the connection state machine (g_lock held). */
void fail_connection(struct cm_id *idp, enum rdma_cm_event_type type, int status,
		     const struct wire_msg *m, int pdata_size);
void peer_closed(struct cm_id *idp);
void handle_msg(struct cm_id *idp, const struct wire_msg *m);
void start_connect(struct cm_id *idp);
void connect_done(struct cm_id *idp, int err);
void handle_timeout(struct cm_id *idp);
int peer_allowed(const struct sockaddr *sa);

/* cm_thread.c: the CM thread (g_lock held); the CM timeouts it reads from the environment
 * when it starts (SOFTRDMA_CM_TIMEOUT_MS, SOFTRDMA_CM_REFUSED_RETRY_MS). */
extern int g_timeout_ms;
extern int g_refused_retry_ms;
void wake_thread(void);
void wait_thread_pass(void);
int start_thread(void);

#endif
