/*
 * softrdma librdmacm, device unit: the verbs devices, opened once for the life of the
 * process, the device, port and GID index a local address binds to, and each device's
 * default PD. Calls only cm_util.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cm_units.h"

static struct cm_dev *g_devs;
static int g_ndev = -1;

/* ---------------------------------------------------------------- devices */

/* Called with g_lock held. Devices stay open for the life of the process. */
int devices_init(void)
{
	struct ibv_device **list;
	int n = 0, i, k = 0;

	if (g_ndev >= 0)
		return g_ndev;
	list = ibv_get_device_list(&n);
	if (!list)
		n = 0;
	g_devs = calloc(n ? n : 1, sizeof(*g_devs));
	if (!g_devs) {
		if (list)
			ibv_free_device_list(list);
		return 0;
	}
	for (i = 0; i < n; i++) {
		struct ibv_context *ctx = ibv_open_device(list[i]);

		if (!ctx)
			continue;
		if (ibv_query_device(ctx, &g_devs[k].attr)) {
			ibv_close_device(ctx);
			continue;
		}
		g_devs[k].verbs = ctx;
		k++;
	}
	if (list)
		ibv_free_device_list(list);
	g_ndev = k;
	return g_ndev;
}

struct cm_dev *dev_of(struct ibv_context *verbs)
{
	for (int i = 0; i < g_ndev; i++)
		if (g_devs[i].verbs == verbs)
			return &g_devs[i];
	return NULL;
}

/* In a child after fork: the parent's device list is not the child's to use (the next
 * devices_init opens the devices again). */
void devices_forget(void)
{
	g_ndev = -1;
	g_devs = NULL;
}

/*
 * Find the device, port and GID index whose GID table holds the GID of the
 * given local address. Loopback addresses bind to the first device, like
 * rxe created on lo: its loopback GID if the table has one, else its first
 * GID of the same kind (IPv4-mapped for IPv4).
 */
int find_dev(const struct sockaddr *sa, struct cm_id *idp)
{
	union ibv_gid want, g, found;
	int loop;

	if (devices_init() <= 0)
		return -ENODEV;
	sa_to_gid(sa, &want);
	loop = gid_is_loopback(&want);
	/* loopback addresses only look at the first device */
	for (int d = 0; d < (loop ? 1 : g_ndev); d++) {
		for (int p = 1; p <= g_devs[d].attr.phys_port_cnt; p++) {
			struct ibv_port_attr pa;
			int match = -1, fallback = -1;

			memset(&pa, 0, sizeof(pa));
			if (ibv_query_port(g_devs[d].verbs, p, &pa))
				continue;
			for (int i = 0; i < pa.gid_tbl_len; i++) {
				if (ibv_query_gid(g_devs[d].verbs, p, i, &g) || gid_is_zero(&g))
					continue;
				if (!memcmp(g.raw, want.raw, 16)) {
					match = i;
					found = g;
					break;
				}
				if (loop && fallback < 0 &&
				    gid_is_v4mapped(&g) == gid_is_v4mapped(&want)) {
					fallback = i;
					found = g;
				}
			}
			if (match < 0 && loop && fallback < 0 &&
			    !ibv_query_gid(g_devs[d].verbs, p, 0, &g)) {
				fallback = 0;
				found = g;
			}
			if (match < 0)
				match = loop ? fallback : -1;
			if (match < 0)
				continue;
			idp->dev = &g_devs[d];
			idp->id.verbs = g_devs[d].verbs;
			idp->id.port_num = p;
			idp->gid_index = match;
			idp->sgid = found;
			idp->mtu = pa.active_mtu ? pa.active_mtu : IBV_MTU_1024;
			return 0;
		}
	}
	return -ENODEV;
}

/* ------------------------------------------------------------- default PD */

/* The PD of an id's QPs and SRQs when the application gives none: one per device, made
 * on first use and kept with the device. */
struct ibv_pd *default_pd(struct cm_id *idp)
{
	struct cm_dev *d = idp->dev ? idp->dev : dev_of(idp->id.verbs);

	if (!d)
		return NULL;
	if (!d->default_pd)
		d->default_pd = ibv_alloc_pd(d->verbs);
	return d->default_pd;
}

/* --------------------------------------------------------------- the API's device list */

CM_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list;
	int n;

	pthread_mutex_lock(&g_lock);
	n = devices_init();
	list = calloc(n + 1, sizeof(*list));
	if (list)
		for (int i = 0; i < n; i++)
			list[i] = g_devs[i].verbs;
	pthread_mutex_unlock(&g_lock);
	if (num_devices)
		*num_devices = list ? n : 0;
	if (!list)
		errno = ENOMEM;
	return list;
}

CM_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}
