/* agent.c: the per-process thread that plays the NIC. */
#ifndef SRD_AGENT_H
#define SRD_AGENT_H
#include "srd.h"
#include "wire.h"

void srd_agent_start(void); /* idempotent; after fork() the child starts its own */
/* Where the agent hands OP_XRC_CTRL / OP_XRC_CTRL_RESP packets (set to xctl.c's srd_xctl_rx
 * by qp.c and xctl.c: ibv_open_qp across processes); called without locks, from the agent or a polling thread.
 * A call up at run time, listed in tests/layering.sh's hooks. */
extern void (*srd_xrc_ctrl_hook)(const struct pkt_hdr *h, const uint8_t *payload,
				 const struct sockaddr_in6 *from);

#endif
