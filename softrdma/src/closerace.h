#ifndef SRD_CLOSERACE_H
#define SRD_CLOSERACE_H
/*
 * The close-race check: shows a binding's close guard at work. A test turns it on
 * (softrdma_close_race_check, exported for tests only); from then on every post, poll and
 * notify on a QP, SRQ or CQ, and every extended session (wr_start..wr_complete/wr_abort on a
 * QP, start_poll..end_poll on a CQ), counts itself inside its object for its length (and lingers there
 * for the given spin, so that a race has a window wide enough to hit), and a destroy of an
 * object that a call is inside, or a call on an object already destroyed, is counted
 * (softrdma_close_races), reported on stderr and refused: the destroy returns EBUSY and leaves
 * the object alive, the late call returns EINVAL without touching it. While the check is on,
 * a destroyed QP, SRQ or CQ keeps its struct (the rest is freed), so a late call reads the
 * mark instead of freed memory.
 *
 * Off (always, unless a test turned it on), a hot verb pays one load of a global and a
 * not-taken branch: no atomic update.
 */
#include <stdbool.h>

/* Whether the check is on (srd_close_race_on) and how long each checked call lingers inside. */
extern int srd_close_race_on;

/* One object's side: calls inside it now, and whether it was destroyed. */
struct srd_inside {
	int calls;
	int destroyed;
};

static inline bool srd_close_race_checking(void)
{
	return __builtin_expect(__atomic_load_n(&srd_close_race_on, __ATOMIC_RELAXED), 0);
}

/* A call on the object begins; false (counted, reported) when the object was destroyed. */
bool srd_close_race_enter(struct srd_inside *in, const char *verb);
/* The call returned. */
void srd_close_race_exit(struct srd_inside *in);
/* The destroy verb `verb` is about to free the object; false (counted, reported) when a call is inside. */
bool srd_close_race_destroy(struct srd_inside *in, const char *verb);

#endif
