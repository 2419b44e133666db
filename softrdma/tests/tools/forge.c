/*
 * forge: sends forged softrdma packets at a live RC pair, as a hostile or confused local
 * process could: an ACK, a NAK (sequence, invalid request, remote access, RNR) or a READ
 * response, naming the right QPNs, from the peer's port on another loopback address (so it
 * passes the source check) or written straight into the receiver's same-host ring.
 *
 *   forge [-r] [-k ack|nak|nak-inv|nak-acc|rnr|read] [-p PSN] [-n COUNT] [-i MS] DQPN SQPN
 *
 * DQPN: the QP that receives the packet; SQPN: its connected peer, whose port the packet
 * claims to come from. -r: through the ring instead of a datagram (the ring files' directory:
 * SOFTRDMA_SHM_DIR, default /dev/shm, as softrdma's). -p: the PSN (default 0);
 * -p sweep: every PSN of the 24-bit space near the default in turn (one per packet, COUNT
 * packets). -n: packets (default 1), -i: milliseconds between them (default 0).
 * Exits 0 when every packet left.
 */
#include "../../src/wire.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* the ring's layout (shm.c, RING_VERSION 1): the tool checks the file's size against it */
#define NSLOTS 512u
struct slot {
	uint64_t seq;
	uint32_t len;
	uint16_t sport, pad;
	uint8_t data[MAX_PKT];
} __attribute__((aligned(64)));
struct ring {
	uint32_t magic, version, nslots, slot_size;
	int32_t owner;
	uint32_t closed;
	uint64_t tail __attribute__((aligned(64)));
	uint32_t sleeping __attribute__((aligned(64)));
	struct slot slots[NSLOTS] __attribute__((aligned(64)));
};

static int ring_send(uint16_t dport, uint16_t sport, const void *pkt, size_t n)
{
	const char *dir = getenv("SOFTRDMA_SHM_DIR");
	char path[4096];
	snprintf(path, sizeof(path), "%s/softrdma-%u-%u", dir ? dir : "/dev/shm", (unsigned)geteuid(),
		 (unsigned)dport);
	int fd = open(path, O_RDWR);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) || st.st_size != (off_t)sizeof(struct ring)) {
		fprintf(stderr, "forge: no ring of the expected layout at %s\n", path);
		return -1;
	}
	struct ring *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (r == MAP_FAILED)
		return -1;
	int rc = -1;
	for (int tries = 0; tries < 100000; tries++) {
		uint64_t pos = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
		struct slot *s = &r->slots[pos % NSLOTS];
		if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != pos)
			continue;
		if (!__atomic_compare_exchange_n(&r->tail, &pos, pos + 1, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			continue;
		memcpy(s->data, pkt, n);
		s->len = (uint32_t)n;
		s->sport = sport;
		__atomic_store_n(&s->seq, pos + 1, __ATOMIC_RELEASE);
		rc = 0;
		break;
	}
	munmap(r, sizeof(*r));
	return rc;
}

int main(int argc, char **argv)
{
	const char *kind = "nak";
	uint32_t psn = 0;
	bool sweep = false, ring = false;
	long count = 1, interval_ms = 0;
	int o;
	while ((o = getopt(argc, argv, "rk:p:n:i:")) != -1) {
		switch (o) {
		case 'r': ring = true; break;
		case 'k': kind = optarg; break;
		case 'p':
			if (!strcmp(optarg, "sweep"))
				sweep = true;
			else
				psn = (uint32_t)strtoul(optarg, NULL, 0) & SRD_HDR_PSN_MASK;
			break;
		case 'n': count = strtol(optarg, NULL, 0); break;
		case 'i': interval_ms = strtol(optarg, NULL, 0); break;
		default: goto usage;
		}
	}
	if (argc - optind != 2)
		goto usage;
	uint32_t dqpn = (uint32_t)strtoul(argv[optind], NULL, 0), sqpn = (uint32_t)strtoul(argv[optind + 1], NULL, 0);
	struct pkt_hdr h = { .magic = PKT_MAGIC, .dqpn = dqpn, .sqpn = sqpn };
	uint8_t payload[64] = { 0 };
	size_t plen = 0;
	if (!strcmp(kind, "ack")) {
		h.op = OP_ACK; h.syndrome = SYN_ACK;
	} else if (!strcmp(kind, "nak")) {
		h.op = OP_ACK; h.syndrome = SYN_NAK_SEQ;
	} else if (!strcmp(kind, "nak-inv")) {
		h.op = OP_ACK; h.syndrome = SYN_NAK_INV;
	} else if (!strcmp(kind, "nak-acc")) {
		h.op = OP_ACK; h.syndrome = SYN_NAK_ACCESS;
	} else if (!strcmp(kind, "rnr")) {
		h.op = OP_ACK; h.syndrome = SYN_RNR; h.imm = 31;
	} else if (!strcmp(kind, "read")) {
		/* a READ response with 64 bytes of 0xee: wrong bytes if it were ever accepted */
		h.op = OP_READ_RESP; h.flags = F_FIRST | F_LAST;
		plen = sizeof(payload);
		memset(payload, 0xee, plen);
	} else {
		goto usage;
	}
	h.len = h.total = (uint32_t)plen;
	uint16_t dport = (uint16_t)(dqpn >> 8), sport = (uint16_t)(sqpn >> 8);
	int fd = -1;
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(dport) };
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (!ring) {
		/* the peer holds its port on 127.0.0.1 and ::1 only: another loopback address is free */
		fd = socket(AF_INET, SOCK_DGRAM, 0);
		struct sockaddr_in me = { .sin_family = AF_INET, .sin_port = htons(sport) };
		int bound = -1;
		for (int a = 2; a < 250 && bound; a++) {
			me.sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)a);
			bound = bind(fd, (struct sockaddr *)&me, sizeof(me));
		}
		if (bound) {
			perror("forge: bind to the peer's port on a loopback address");
			return 1;
		}
	}
	uint8_t pkt[sizeof(h) + sizeof(payload)];
	int fails = 0;
	for (long i = 0; i < count; i++) {
		h.psn = sweep ? (psn + (uint32_t)i) & SRD_HDR_PSN_MASK : psn;
		memcpy(pkt, &h, sizeof(h));
		memcpy(pkt + sizeof(h), payload, plen);
		size_t n = sizeof(h) + plen;
		if (ring ? ring_send(dport, sport, pkt, n) :
			   (sendto(fd, pkt, n, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)n ? 0 : -1))
			fails++;
		if (interval_ms)
			nanosleep(&(struct timespec){ interval_ms / 1000, (interval_ms % 1000) * 1000000L }, NULL);
	}
	return fails ? 1 : 0;
usage:
	fprintf(stderr, "usage: forge [-r] [-k ack|nak|nak-inv|nak-acc|rnr|read] [-p PSN|sweep] [-n COUNT] [-i MS] DQPN SQPN\n");
	return 2;
}
