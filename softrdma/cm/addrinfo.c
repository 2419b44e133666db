/*
 * softrdma librdmacm: rdma_getaddrinfo on top of getaddrinfo(3).
 * Numeric hosts and names both resolve through the system resolver; the
 * result is the first address, as rdma-core's librdmacm returns it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "cm_internal.h"

static struct sockaddr *dup_addr(const struct sockaddr *sa, socklen_t len)
{
	struct sockaddr *c = malloc(len);

	if (c)
		memcpy(c, sa, len);
	return c;
}

CM_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;

		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}

CM_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
			       const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct addrinfo ah, *ai = NULL;
	struct rdma_addrinfo *r;
	int rc, passive = hints && (hints->ai_flags & RAI_PASSIVE);

	if (!res)
		return EAI_FAIL;
	if (!node && !service && !(hints && hints->ai_src_addr))
		return EAI_NONAME;
	if (hints && hints->ai_family && hints->ai_family != AF_INET &&
	    hints->ai_family != AF_INET6 && hints->ai_family != AF_UNSPEC)
		return EAI_FAMILY;
	r = calloc(1, sizeof(*r));
	if (!r)
		return EAI_MEMORY;
	r->ai_flags = hints ? hints->ai_flags : 0;
	r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
	r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space :
		(r->ai_qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP);

	if (node || service) {
		memset(&ah, 0, sizeof(ah));
		ah.ai_socktype = SOCK_STREAM;
		if (hints) {
			if (hints->ai_flags & RAI_PASSIVE)
				ah.ai_flags |= AI_PASSIVE;
			if (hints->ai_flags & RAI_NUMERICHOST)
				ah.ai_flags |= AI_NUMERICHOST;
			ah.ai_family = hints->ai_family;
		}
		rc = getaddrinfo(node, service, &ah, &ai);
		if (rc) {
			free(r);
			return rc;
		}
		r->ai_family = ai->ai_family;
		if (passive) {
			r->ai_src_addr = dup_addr(ai->ai_addr, ai->ai_addrlen);
			r->ai_src_len = ai->ai_addrlen;
		} else {
			r->ai_dst_addr = dup_addr(ai->ai_addr, ai->ai_addrlen);
			r->ai_dst_len = ai->ai_addrlen;
		}
		if (ai->ai_canonname) {
			if (passive)
				r->ai_src_canonname = strdup(ai->ai_canonname);
			else
				r->ai_dst_canonname = strdup(ai->ai_canonname);
		}
		freeaddrinfo(ai);
		if (!r->ai_src_addr && !r->ai_dst_addr) {
			rdma_freeaddrinfo(r);
			return EAI_MEMORY;
		}
	}
	if (hints && hints->ai_src_addr && !r->ai_src_addr && hints->ai_src_len) {
		r->ai_src_addr = dup_addr(hints->ai_src_addr, hints->ai_src_len);
		r->ai_src_len = hints->ai_src_len;
		if (!r->ai_family)
			r->ai_family = hints->ai_src_addr->sa_family;
	}
	if (hints && hints->ai_connect_len && hints->ai_connect) {
		r->ai_connect = malloc(hints->ai_connect_len);
		if (r->ai_connect) {
			memcpy(r->ai_connect, hints->ai_connect, hints->ai_connect_len);
			r->ai_connect_len = hints->ai_connect_len;
		}
	}
	*res = r;
	return 0;
}
