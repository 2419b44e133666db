/* xrc.c: XRC domains (ibv_open_xrcd over a file, known node-wide), the numbers of this
 * process's XRC SRQs, and its XRC_RECV (TGT) QPs. */
#ifndef SRD_XRC_H
#define SRD_XRC_H
#include "srd.h"

/* verbs_context->open_xrcd, ->close_xrcd */
struct ibv_xrcd *srd_open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *attr);
int srd_close_xrcd(struct ibv_xrcd *ibxrcd);
/* An XRC SRQ joins its domain (numbered srqn, findable by requests; the number's port is
 * listed in the domain's registry) / leaves it: after srd_xrc_srq_remove no responder, and no
 * shadow, holds it. */
void srd_xrc_srq_add(struct srd_srq *srq, struct srd_xrcd *xrcd, uint32_t srqn);
void srd_xrc_srq_remove(struct srd_srq *srq);
/* TGT QPs: add at creation; remove at destruction, EBUSY while ibv_open_qp handles of it
 * are open. find: the TGT QP qpn of this process in xrcd's domain, its open count raised. */
void srd_xrc_tgt_add(struct srd_qp *qp);
int srd_xrc_tgt_remove(struct srd_qp *qp);
struct srd_qp *srd_xrc_tgt_open(struct srd_xrcd *xrcd, uint32_t qpn);
void srd_xrc_tgt_close(struct srd_qp *real);
/* ibv_open_qp from another process: the TGT QP qpn of this process in the domain of key, its
 * open count raised (srd_xrc_tgt_close); the other process's handles (port, id, pid), which
 * make the QP's destroy EBUSY while their process lives; list: up to max of qp's. */
struct srd_qp *srd_xrc_tgt_open_key(uint32_t qpn, const uint8_t key[16]);
int srd_xrc_ropen_add(struct srd_qp *real, uint16_t port, uint32_t id, int32_t pid);
void srd_xrc_ropen_del(struct srd_qp *real, uint16_t port, uint32_t id);
int srd_xrc_ropen_list(const struct srd_qp *qp, uint16_t *ports, uint32_t *ids, int max);
/* A handle's requests come again when an answer is lost: a modify already run (request req)
 * is answered from this record, not run twice. */
bool srd_xrc_ropen_answered(const struct srd_qp *real, uint16_t port, uint32_t id, uint32_t req, int *rc);
void srd_xrc_ropen_record(const struct srd_qp *real, uint16_t port, uint32_t id, uint32_t req, int rc);
/* Whether another live process of xrcd's domain created TGT QP qpn. */
bool srd_xrc_tgt_elsewhere(struct srd_xrcd *xrcd, uint32_t qpn);
/* The responder's selection of the XRC SRQ a request to qp names (resp_lock held): SYN_ACK
 * with qp->srq and qp->rpd set, or the NAK syndrome with the async event to raise: a
 * request that is not XRC to a TGT QP or XRC to another QP, or an SRQ number that names
 * no XRC SRQ: invalid request; an SRQ of another domain: remote access error. */
int srd_xrc_select(struct srd_qp *qp, bool xrc, uint32_t srqn, enum ibv_event_type *ev);


/* XRC across processes. The key of xrcd's domain as relays carry it (device and inode of its
 * file; zero for a private domain). */
void srd_xrc_dom_key(const struct srd_xrcd *xrcd, uint8_t key[16]);
/* Whether a live process of xrcd's (file) domain listed port for its XRC SRQ numbers. */
bool srd_xrc_port_held(struct srd_xrcd *xrcd, uint16_t port);
/* A shadow: the responder state, in the SRQ's process, of a TGT QP of another process (its
 * QPN qpn, its process's port, its incarnation inc), on which relayed requests execute. The
 * shadows and every relay's execution are under the shadow lock. */
struct srd_shadow {
	struct srd_qp qp;          /* qp.shadow set: the responder records its errors */
	struct srd_shadow *next;
	uint16_t port;
	uint32_t qpn, inc;
	uint64_t used;
	/* the last request answered (not RNR), answered again when the relay comes again */
	bool last_valid;
	uint32_t last_psn;
	int last_syn, last_ev;
	uint64_t last_orig;
};
void srd_xrc_shadow_lock(void);
void srd_xrc_shadow_unlock(void);
/* The shadow of (port, qpn), made or reset when new or of another incarnation; NULL when
 * memory fails. Shadow lock held. */
struct srd_shadow *srd_xrc_shadow_get(uint16_t port, uint32_t qpn, uint32_t inc);
/* srd_xrc_select for a shadow: the SRQ srqn of this process in the domain of key. */
int srd_xrc_shadow_select(struct srd_shadow *h, uint32_t srqn, const uint8_t key[16],
			  enum ibv_event_type *ev);

#endif
