/*
 * softrdma librdmacm, util unit: time, errno, PSNs, socket addresses and the GIDs made from
 * them, and the one lock that guards the CM state with its condition (the units above take
 * and wait on them).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/random.h>

#include "cm_units.h"

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;

/* ------------------------------------------------------------------ utils */

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int fail(int err)
{
	errno = err;
	return -1;
}

uint32_t random_psn(void)
{
	uint32_t v = 0;

	if (getrandom(&v, sizeof(v), 0) != sizeof(v))
		v = (uint32_t)now_ms() * 2654435761u;
	return v & 0xffffff;
}

socklen_t sa_len(const struct sockaddr *sa)
{
	switch (sa->sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	default:
		return 0;
	}
}

uint16_t sa_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_port;
	if (sa->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)sa)->sin6_port;
	return 0;
}

void sa_set_port(struct sockaddr *sa, uint16_t port_be)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = port_be;
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = port_be;
}

int sa_is_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return 0;
}

/* The GID of an IP address, RoCE v2 style: IPv4-mapped for IPv4. */
void sa_to_gid(const struct sockaddr *sa, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (sa->sa_family == AF_INET) {
		gid->raw[10] = 0xff;
		gid->raw[11] = 0xff;
		memcpy(&gid->raw[12], &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(gid->raw, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
}

int gid_is_loopback(const union ibv_gid *gid)
{
	static const uint8_t v6lo[16] = { [15] = 1 };
	static const uint8_t v4map[12] = { [10] = 0xff, [11] = 0xff };

	if (!memcmp(gid->raw, v6lo, 16))
		return 1;
	return !memcmp(gid->raw, v4map, 12) && gid->raw[12] == 127;
}

int gid_is_v4mapped(const union ibv_gid *gid)
{
	static const uint8_t v4map[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(gid->raw, v4map, 12);
}

int gid_is_zero(const union ibv_gid *gid)
{
	static const uint8_t zero[16];

	return !memcmp(gid->raw, zero, 16);
}
