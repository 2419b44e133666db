/* xctl.c: ibv_open_qp across processes, the XRC control protocol (OP_XRC_CTRL). */
#ifndef SRD_XCTL_H
#define SRD_XCTL_H
#include "srd.h"
#include "wire.h"

/* A verb's wait for its answer (on the caller's stack): the QP's errno and state, and the
 * attributes of a query. */
struct xwait {
	struct xwait *next;
	uint32_t id;
	bool done;
	int rc, state;
	bool has_attr;
	struct ibv_qp_attr attr;
};

/* A verb on a handle of another process's QP (kind XCTL_*, imm its argument, in a MODIFY's
 * attributes): the QP's errno, EIO when its process is gone; the answer in *w. */
int srd_xctl_verb(struct srd_qp *hq, int kind, uint32_t imm, const struct ibv_qp_attr *in, struct xwait *w);
/* The agent's (or a polling thread's) OP_XRC_CTRL and OP_XRC_CTRL_RESP (srd_xrc_ctrl_hook). */
void srd_xctl_rx(const struct pkt_hdr *h, const uint8_t *payload, const struct sockaddr_in6 *from);
/* ibv_open_qp of TGT QP qpn, which another live process of x's domain created: handle h
 * (NULL and errno when that process does not open it). */
struct ibv_qp *srd_xctl_open_remote(struct srd_qp *h, struct srd_xrcd *x, uint32_t qpn);
/* Closes a handle of another process's QP (ibv_destroy_qp on it). */
void srd_xctl_close_remote(struct srd_qp *h);

#endif
