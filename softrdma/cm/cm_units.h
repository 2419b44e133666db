/*
 * softrdma librdmacm: the functions and state the library's units share (cm_internal.h has
 * the types and the wire format, which the tests include too).
 */
#ifndef SOFTRDMA_CM_UNITS_H
#define SOFTRDMA_CM_UNITS_H

#include "cm_internal.h"

/* cm_util.c: time, errno, PSNs, socket addresses and GIDs; the one lock of the CM state. */
extern pthread_mutex_t g_lock;
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

#endif
