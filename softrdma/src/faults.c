/*
 * Fault injection on the packet path (SOFTRDMA_FAULTS): the configuration,
 * the per-packet decision (drop, duplicate, reorder, delay) and the queue of
 * held packets, sent once due.
 * Owns: the fault configuration, its random stream and held packets.
 * Calls: no other unit (a leaf; the caller wakes the agent for a held packet).
 */
#include "faults.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static struct {
	bool on;
	double drop, dup, reorder, delay;
	uint64_t delay_ns;
	uint64_t rng;
	pthread_mutex_t lock;
} g_f = { .lock = PTHREAD_MUTEX_INITIALIZER };
static pthread_once_t g_f_once = PTHREAD_ONCE_INIT;
static int g_f_ready; /* faults_init has run: every post asks, so it skips pthread_once */

static void faults_init(void)
{
	const char *env = getenv("SOFTRDMA_FAULTS");
	if (!env || !*env)
		return;
	g_f.rng = 0x9e3779b97f4a7c15ull;
	g_f.delay_ns = 2000000;
	char *copy = strdup(env), *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq) {
			fprintf(stderr, "softrdma: SOFTRDMA_FAULTS: ignoring '%s'\n", tok);
			continue;
		}
		*eq++ = 0;
		if (!strcmp(tok, "seed"))
			g_f.rng = strtoull(eq, NULL, 0) * 0x9e3779b97f4a7c15ull + 1;
		else if (!strcmp(tok, "drop"))
			g_f.drop = atof(eq);
		else if (!strcmp(tok, "dup"))
			g_f.dup = atof(eq);
		else if (!strcmp(tok, "reorder"))
			g_f.reorder = atof(eq);
		else if (!strcmp(tok, "delay")) {
			g_f.delay = atof(eq);
			char *c = strchr(eq, ':');
			if (c) {
				double v = atof(c + 1);
				if (strstr(c, "us"))
					g_f.delay_ns = (uint64_t)(v * 1e3);
				else if (strstr(c, "ms"))
					g_f.delay_ns = (uint64_t)(v * 1e6);
				else
					g_f.delay_ns = (uint64_t)(v * 1e9);
			}
		} else
			fprintf(stderr, "softrdma: SOFTRDMA_FAULTS: unknown knob '%s'\n", tok);
	}
	free(copy);
	g_f.on = true;
}

bool srd_faults_enabled(void)
{
	if (__builtin_expect(!__atomic_load_n(&g_f_ready, __ATOMIC_ACQUIRE), 0)) {
		pthread_once(&g_f_once, faults_init);
		__atomic_store_n(&g_f_ready, 1, __ATOMIC_RELEASE);
	}
	return g_f.on;
}

static double frand(void)
{
	/* xorshift64*, called with g_f.lock held */
	g_f.rng ^= g_f.rng >> 12;
	g_f.rng ^= g_f.rng << 25;
	g_f.rng ^= g_f.rng >> 27;
	return (double)((g_f.rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

struct delayed {
	struct delayed *next;
	uint64_t due;
	int fd;
	struct sockaddr_in6 to;
	size_t len;
	uint8_t data[];
};
static struct delayed *g_delayed;

bool srd_faults_pending(void)
{
	return __atomic_load_n(&g_delayed, __ATOMIC_RELAXED) != NULL;
}

void srd_faults_atfork_child(void)
{
	g_delayed = NULL;
	pthread_mutex_init(&g_f.lock, NULL);
}

int srd_faults_apply(int fd, const struct sockaddr_in6 *to, const void *hdr, size_t hlen,
		     const void *payload, size_t len, bool *held)
{
	pthread_mutex_lock(&g_f.lock);
	double r = frand();
	int copies = 1;
	uint64_t hold = 0;
	if (r < g_f.drop)
		copies = 0;
	else if ((r -= g_f.drop) < g_f.dup)
		copies = 2;
	else if ((r -= g_f.dup) < g_f.reorder)
		hold = 300000; /* let the next packets overtake this one */
	else if ((r -= g_f.reorder) < g_f.delay)
		hold = g_f.delay_ns;
	if (hold && copies) {
		struct delayed *d = malloc(sizeof(*d) + hlen + len);
		if (d) {
			d->due = srd_now_ns() + hold;
			d->fd = fd;
			d->to = *to;
			d->len = hlen + len;
			memcpy(d->data, hdr, hlen);
			if (len)
				memcpy(d->data + hlen, payload, len);
			d->next = g_delayed;
			g_delayed = d;
			copies = 0;
		}
	}
	pthread_mutex_unlock(&g_f.lock);
	*held = hold != 0;
	return copies;
}


void srd_faults_flush(uint64_t now)
{
	pthread_mutex_lock(&g_f.lock);
	struct delayed **pp = &g_delayed, *due = NULL;
	while (*pp) {
		struct delayed *d = *pp;
		if (d->due <= now) {
			*pp = d->next;
			d->next = due;
			due = d;
		} else {
			pp = &d->next;
		}
	}
	pthread_mutex_unlock(&g_f.lock);
	while (due) {
		struct delayed *d = due;
		due = d->next;
		if (sendto(d->fd, d->data, d->len, MSG_DONTWAIT, (struct sockaddr *)&d->to, sizeof(d->to)) < 0) {
			/* lost */
		}
		free(d);
	}
}

