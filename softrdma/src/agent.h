/* agent.c: the per-process thread that plays the NIC. */
#ifndef SRD_AGENT_H
#define SRD_AGENT_H
#include "srd.h"

void srd_agent_start(void); /* idempotent; after fork() the child starts its own */

#endif
