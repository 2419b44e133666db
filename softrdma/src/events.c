/*
 * Async events: the per-context queue behind context->async_fd
 * (ibv_get_async_event, ibv_ack_async_event).
 * Owns: srd_context.async_*. Calls: no other unit (a leaf).
 */
#include "events.h"
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

void srd_async_post(struct srd_context *ctx, struct ibv_async_event *ev)
{
	struct srd_async_node *n = malloc(sizeof(*n));
	if (!n)
		return;
	n->next = NULL;
	n->ev = *ev;
	pthread_mutex_lock(&ctx->async_lock);
	if (ctx->async_tail)
		ctx->async_tail->next = n;
	else
		ctx->async_head = n;
	ctx->async_tail = n;
	pthread_mutex_unlock(&ctx->async_lock);
	uint64_t one = 1;
	if (write(ctx->vctx.context.async_fd, &one, 8) != 8)
		return;
}

void srd_async_drain(struct srd_context *ctx)
{
	pthread_mutex_lock(&ctx->async_lock);
	while (ctx->async_head) {
		struct srd_async_node *n = ctx->async_head;
		ctx->async_head = n->next;
		free(n);
	}
	ctx->async_tail = NULL;
	pthread_mutex_unlock(&ctx->async_lock);
}

SRD_EXPORT int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	struct srd_context *ctx = srd_ctx_of(context);
	uint64_t v;
	if (read(context->async_fd, &v, 8) != 8)
		return -1;
	pthread_mutex_lock(&ctx->async_lock);
	struct srd_async_node *n = ctx->async_head;
	if (n) {
		ctx->async_head = n->next;
		if (!ctx->async_head)
			ctx->async_tail = NULL;
	}
	pthread_mutex_unlock(&ctx->async_lock);
	if (!n) {
		errno = EAGAIN;
		return -1;
	}
	*event = n->ev;
	free(n);
	return 0;
}

SRD_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	(void)event;
}
