/*
 * softrdma librdmacm, id unit: the list of ids (g_ids), an id's creation and lookup, its TCP
 * socket and its route record. Calls only cm_util.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <arpa/inet.h>

#include "cm_units.h"

struct cm_id *g_ids;

#define DEFAULT_ACK_TIMEOUT 14

struct cm_id *id_new(struct cm_channel *ch, void *context,
		     enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	struct cm_id *idp = calloc(1, sizeof(*idp));

	if (!idp)
		return NULL;
	idp->id.context = context;
	idp->id.ps = ps;
	idp->id.qp_type = qp_type;
	idp->chan = ch;
	idp->id.channel = ch ? &ch->ch : NULL;
	idp->sock = -1;
	idp->gid_index = -1;
	idp->ack_timeout = DEFAULT_ACK_TIMEOUT;
	idp->qkey = RDMA_UDP_QKEY;
	idp->retry_count = 7;
	idp->rnr_retry_count = 7;
	idp->psn = random_psn();
	idp->next = g_ids;
	g_ids = idp;
	return idp;
}

void id_unlink(struct cm_id *idp)
{
	for (struct cm_id **pp = &g_ids; *pp; pp = &(*pp)->next)
		if (*pp == idp) {
			*pp = idp->next;
			return;
		}
}

int id_valid(struct cm_id *idp)
{
	for (struct cm_id *i = g_ids; i; i = i->next)
		if (i == idp)
			return 1;
	return 0;
}

void close_sock(struct cm_id *idp)
{
	if (idp->sock >= 0) {
		close(idp->sock);
		idp->sock = -1;
	}
	idp->connect_pending = 0;
	idp->req_unanswered = 0;
	idp->out_pending = 0;
	idp->rlen = 0;
	idp->deadline_ms = 0;
	idp->retry_at = 0;
}

int is_ud(struct cm_id *idp)
{
	return idp->id.qp_type == IBV_QPT_UD;
}

/* ---------------------------------------------------------- route filling */

void fill_route(struct cm_id *idp)
{
	struct rdma_route *r = &idp->id.route;
	struct ibv_sa_path_rec *p = &idp->path;

	r->addr.addr.ibaddr.sgid = idp->sgid;
	if (gid_is_loopback(&r->addr.addr.ibaddr.dgid) || gid_is_zero(&r->addr.addr.ibaddr.dgid))
		r->addr.addr.ibaddr.dgid = idp->sgid;
	r->addr.addr.ibaddr.pkey = htons(0xffff);
	memset(p, 0, sizeof(*p));
	p->dgid = r->addr.addr.ibaddr.dgid;
	p->sgid = idp->sgid;
	p->hop_limit = DEFAULT_HOP_LIMIT;
	p->traffic_class = idp->tos;
	p->reversible = 1;
	p->numb_path = 1;
	p->pkey = htons(0xffff);
	p->mtu_selector = 2;
	p->mtu = idp->mtu;
	p->rate_selector = 2;
	p->rate = 3;
	p->packet_life_time_selector = 2;
	p->packet_life_time = 16;
	r->path_rec = p;
	r->num_paths = 1;
}

/* ---------------------------------------------------------------- sockets */

int new_socket(struct cm_id *idp, int family)
{
	int one = 1;
	int s = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (s < 0)
		return -1;
	/* the listener must be restartable while old connections sit in TIME_WAIT */
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (family == AF_INET6)
		setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &idp->afonly, sizeof(idp->afonly));
	return s;
}
