/* cq.c: completion queues and completion channels. */
#ifndef SRD_CQ_H
#define SRD_CQ_H
#include "srd.h"

void srd_cq_push(struct srd_cq *cq, const struct ibv_wc *wc, bool solicited);
int srd_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc);
/* Set by the agent: an empty poll first lets the polling thread take the packets that wait
 * in this process's same-host rings (returns whether it took any), so a busy poller needs
 * no other thread to progress. */
extern bool (*srd_cq_idle_hook)(void);
int srd_req_notify_cq(struct ibv_cq *ibcq, int solicited_only);
struct ibv_cq_ex *srd_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr);

#endif
