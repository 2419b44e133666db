/* events.c: the asynchronous event queue of a device context. */
#ifndef SRD_EVENTS_H
#define SRD_EVENTS_H
#include "srd.h"

void srd_async_post(struct srd_context *ctx, struct ibv_async_event *ev);
void srd_async_drain(struct srd_context *ctx); /* drops undelivered events (close) */

#endif
