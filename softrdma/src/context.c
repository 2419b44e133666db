/*
 * Device contexts: ibv_open_device wires the data-path verbs into
 * context->ops and the verbs_context's extended verbs, and starts the agent;
 * ibv_import_device (another context on the ucontext behind a context's command fd);
 * ibv_close_device.
 * Owns: struct srd_context's and struct srd_ucontext's life. Calls: qpx, qp, device, events, cq, rq, requester, agent, xrc.
 */
#include "device.h"
#include "events.h"
#include "cq.h"
#include "rq.h"
#include "requester.h"
#include "agent.h"
#include "qp.h"
#include "qpx.h"
#include "pd.h"
#include "xrc.h"
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>

/*
 * ibv_bind_mw (type 1 windows): as rxe's provider does, a BIND_MW work request on qp's send
 * queue with the next key byte (ibv_inc_rkey); on a successful post the window's rkey is the
 * new one at once (a failed bind's completion is the caller's to undo). The stock inline
 * wrapper has checked the type, an address without a region, and the region's PD (EPERM).
 */
static int srd_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mb)
{
	const struct ibv_mw_bind_info *bi = &mb->bind_info;
	if (mw->type != IBV_MW_TYPE_1 || (bi->mw_access_flags & IBV_ACCESS_ZERO_BASED) ||
	    (!bi->mr && (bi->addr || bi->length)))
		return EINVAL;
	if (bi->mr && srd_pd_canon(bi->mr->pd) != srd_pd_canon(mw->pd))
		return EPERM;
	struct ibv_send_wr wr = { .wr_id = mb->wr_id, .opcode = IBV_WR_BIND_MW,
				  .send_flags = mb->send_flags }, *bad;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = *bi;
	int rc = srd_post_send(qp, &wr, &bad);
	if (!rc)
		mw->rkey = wr.bind_mw.rkey;
	return rc;
}

/*
 * The ucontexts of this process (srd.h): a context's command fd is a memfd of its own, so
 * ibv_import_device can find the ucontext a (dup of a) command fd belongs to by its inode.
 */
static pthread_mutex_t g_uctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct srd_ucontext *g_uctxs;

/* a new ucontext on dev, registered under fd's identity (refs 1); NULL with errno */
static struct srd_ucontext *ucontext_new(struct srd_device *dev, int fd)
{
	struct stat st;
	if (fstat(fd, &st))
		return NULL;
	struct srd_ucontext *u = calloc(1, sizeof(*u));
	if (!u) {
		errno = ENOMEM;
		return NULL;
	}
	u->refs = 1;
	u->st_dev = st.st_dev;
	u->st_ino = st.st_ino;
	u->dev = dev;
	pthread_mutex_init(&u->lock, NULL);
	pthread_mutex_lock(&g_uctx_lock);
	u->next = g_uctxs;
	g_uctxs = u;
	pthread_mutex_unlock(&g_uctx_lock);
	return u;
}

static void ucontext_put(struct srd_ucontext *u)
{
	pthread_mutex_lock(&g_uctx_lock);
	bool last = --u->refs == 0;
	if (last)
		for (struct srd_ucontext **pp = &g_uctxs; *pp; pp = &(*pp)->next)
			if (*pp == u) {
				*pp = u->next;
				break;
			}
	pthread_mutex_unlock(&g_uctx_lock);
	if (last) {
		pthread_mutex_destroy(&u->lock);
		free(u);
	}
}

/* a context on dev over ucontext u, owning cmd_fd; NULL with errno (cmd_fd then not closed) */
static struct ibv_context *context_new(struct srd_device *dev, struct srd_ucontext *u, int cmd_fd)
{
	struct srd_context *ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	ctx->dev = dev;
	ctx->uctx = u;
	struct ibv_context *c = &ctx->vctx.context;
	c->device = &dev->ibdev;
	c->cmd_fd = cmd_fd;
	c->async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (c->async_fd < 0) {
		int e = errno;
		free(ctx);
		errno = e;
		return NULL;
	}
	c->num_comp_vectors = 1;
	pthread_mutex_init(&c->mutex, NULL);
	pthread_mutex_init(&ctx->async_lock, NULL);
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->vctx.sz = sizeof(struct verbs_context);
	ctx->vctx.query_port = srd_query_port;
	ctx->vctx.query_device_ex = srd_query_device_ex;
	ctx->vctx.create_qp_ex = srd_create_qp_ex;
	ctx->vctx.create_cq_ex = srd_create_cq_ex;
	ctx->vctx.open_xrcd = srd_open_xrcd;
	ctx->vctx.close_xrcd = srd_close_xrcd;
	ctx->vctx.create_srq_ex = srd_create_srq_ex;
	ctx->vctx.get_srq_num = srd_get_srq_num;
	ctx->vctx.open_qp = srd_open_qp;
	ctx->vctx.advise_mr = srd_advise_mr;
	c->ops.post_send = srd_post_send;
	c->ops.post_recv = srd_post_recv;
	c->ops.poll_cq = srd_poll_cq;
	c->ops.req_notify_cq = srd_req_notify_cq;
	c->ops.post_srq_recv = srd_post_srq_recv;
	c->ops.alloc_mw = srd_alloc_mw;
	c->ops.dealloc_mw = srd_dealloc_mw;
	c->ops.bind_mw = srd_bind_mw;
	srd_agent_start();
	return c;
}

SRD_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	int n;
	struct srd_device *devs = srd_devices(&n);
	struct srd_device *dev = container_of(device, struct srd_device, ibdev);
	if (!device || dev < devs || dev >= devs + n) {
		errno = ENODEV;
		return NULL;
	}
	int fd = memfd_create("softrdma-ucontext", MFD_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct srd_ucontext *u = ucontext_new(dev, fd);
	struct ibv_context *c = u ? context_new(dev, u, fd) : NULL;
	if (!c) {
		int e = errno;
		if (u)
			ucontext_put(u);
		close(fd);
		errno = e;
	}
	return c;
}

/*
 * ibv_import_device: another context on the ucontext whose command fd cmd_fd is (a dup of);
 * the new context owns cmd_fd and closes it. EBADF for a descriptor that is not open, EINVAL
 * for one that is no softrdma context's (the kernel's uverbs answers such an fd's command
 * with an error too).
 */
SRD_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	struct stat st;
	if (fstat(cmd_fd, &st))
		return NULL;
	struct srd_ucontext *u = NULL;
	pthread_mutex_lock(&g_uctx_lock);
	for (struct srd_ucontext *x = g_uctxs; x; x = x->next)
		if (x->st_dev == st.st_dev && x->st_ino == st.st_ino) {
			u = x;
			u->refs++;
			break;
		}
	pthread_mutex_unlock(&g_uctx_lock);
	if (!u) {
		errno = EINVAL;
		return NULL;
	}
	struct ibv_context *c = context_new(u->dev, u, cmd_fd);
	if (!c) {
		int e = errno;
		ucontext_put(u);
		errno = e;
	}
	return c;
}

SRD_EXPORT int ibv_close_device(struct ibv_context *context)
{
	struct srd_context *ctx = srd_ctx_of(context);
	srd_async_drain(ctx);
	close(context->async_fd);
	close(context->cmd_fd);
	ucontext_put(ctx->uctx);
	free(ctx);
	return 0;
}

