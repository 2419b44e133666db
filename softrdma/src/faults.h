/* faults.c: fault injection on the packet path (SOFTRDMA_FAULTS). */
#ifndef SRD_FAULTS_H
#define SRD_FAULTS_H
#include "srd.h"

bool srd_faults_enabled(void);
/* Decides the fate of one outgoing datagram (header + payload) for fd/to: returns how
 * many copies to send now (0, 1 or 2); *held says it was queued for later instead
 * (the caller wakes the agent, which sends it with srd_faults_flush once due). */
int srd_faults_apply(int fd, const struct sockaddr_in6 *to, const void *hdr, size_t hlen,
		     const void *payload, size_t len, bool *held);
bool srd_faults_pending(void);
void srd_faults_flush(uint64_t now);
void srd_faults_atfork_child(void);

#endif
