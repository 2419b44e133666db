/*
 * softrdma librdmacm, message unit: the CM's wire records (cm_internal.h): building one for an
 * id, its private data, sending it on the id's socket, and checking a received one is a record
 * this library could have sent. Calls nothing of the other units.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "cm_units.h"

void msg_init(struct cm_id *idp, struct wire_msg *m, enum wire_type type)
{
	memset(m, 0, sizeof(*m));
	m->magic = htonl(WIRE_MAGIC);
	m->type = type;
	m->version = WIRE_VERSION;
	m->qp_type = idp->id.qp_type;
	m->psn = htonl(idp->psn);
	m->qkey = htonl(idp->qkey);
	memcpy(m->gid, idp->sgid.raw, 16);
	m->mtu = idp->mtu;
}

int msg_pdata(struct wire_msg *m, const void *pd, unsigned len, unsigned max)
{
	if (len > max || (len && !pd))
		return -1;
	if (len)
		memcpy(m->pdata, pd, len);
	m->pdata_len = len;
	return 0;
}

/* Messages are small and the socket buffer nearly empty: one send suffices. */
int msg_send(struct cm_id *idp, const struct wire_msg *m)
{
	size_t off = 0;

	if (idp->sock < 0)
		return -1;
	while (off < sizeof(*m)) {
		ssize_t n = send(idp->sock, (const char *)m + off, sizeof(*m) - off, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd p = { .fd = idp->sock, .events = POLLOUT };

				if (poll(&p, 1, 1000) > 0)
					continue;
			}
			return -1;
		}
		off += n;
	}
	return 0;
}

void send_simple(struct cm_id *idp, enum wire_type type, uint8_t status)
{
	struct wire_msg m;

	msg_init(idp, &m, type);
	m.status = status;
	msg_send(idp, &m);
}

/* A record this library could have sent: right magic and version, a known
 * type, a QP type, MTU and private data length within their ranges. */
int msg_well_formed(const struct wire_msg *m)
{
	if (ntohl(m->magic) != WIRE_MAGIC || m->version != WIRE_VERSION)
		return 0;
	if (m->type < MSG_REQ || m->type > MSG_SIDR_REP || m->pdata_len > PDATA_MAX)
		return 0;
	switch (m->type) {
	case MSG_REQ:
	case MSG_REP:
		return (m->qp_type == IBV_QPT_RC || m->qp_type == IBV_QPT_UC) &&
		       m->mtu >= IBV_MTU_256 && m->mtu <= IBV_MTU_4096;
	case MSG_SIDR_REQ:
	case MSG_SIDR_REP:
		return m->qp_type == IBV_QPT_UD;
	default:
		return 1;
	}
}
