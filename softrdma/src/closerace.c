/* The close-race check (closerace.h): test-only detection of a destroy racing a hot verb. */
#include "closerace.h"
#include "srd.h"
#include <stdio.h>
#include <time.h>

int srd_close_race_on;
static unsigned srd_close_race_spin_ns;
static unsigned long srd_close_races;

static void report(const char *what, const char *verb)
{
	__atomic_add_fetch(&srd_close_races, 1, __ATOMIC_RELAXED);
	fprintf(stderr, "softrdma: close race: %s (%s)\n", what, verb);
}

bool srd_close_race_enter(struct srd_inside *in, const char *verb)
{
	/* seq_cst both sides (here and in destroy): one of the two sees the other's store */
	__atomic_add_fetch(&in->calls, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&in->destroyed, __ATOMIC_SEQ_CST)) {
		__atomic_sub_fetch(&in->calls, 1, __ATOMIC_SEQ_CST);
		report("a call on an object already destroyed", verb);
		return false;
	}
	unsigned spin = __atomic_load_n(&srd_close_race_spin_ns, __ATOMIC_RELAXED);
	if (spin) {
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < (long)spin);
	}
	return true;
}

void srd_close_race_exit(struct srd_inside *in)
{
	__atomic_sub_fetch(&in->calls, 1, __ATOMIC_SEQ_CST);
}

bool srd_close_race_destroy(struct srd_inside *in, const char *verb)
{
	__atomic_store_n(&in->destroyed, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&in->calls, __ATOMIC_SEQ_CST)) {
		__atomic_store_n(&in->destroyed, 0, __ATOMIC_SEQ_CST);
		report("a destroy while a post, poll, notify or session on that object is inside the provider", verb);
		return false;
	}
	return true;
}

/*
 * For tests: on != 0 turns the check on (each checked call lingers spin_ns inside the provider),
 * 0 turns it off. Objects destroyed while it was on keep their structs for the process's life.
 */
SRD_EXPORT void softrdma_close_race_check(int on, unsigned spin_ns)
{
	__atomic_store_n(&srd_close_race_spin_ns, spin_ns, __ATOMIC_RELAXED);
	__atomic_store_n(&srd_close_race_on, on != 0, __ATOMIC_SEQ_CST);
}

/* For tests: the races counted since the process began. */
SRD_EXPORT unsigned long softrdma_close_races(void)
{
	return __atomic_load_n(&srd_close_races, __ATOMIC_RELAXED);
}
