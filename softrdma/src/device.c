/*
 * Devices: the device table (from SOFTRDMA_DEVICES or the first usable
 * interface), GIDs and this host's addresses (when a destination is "us",
 * GID to UDP address), device and port attributes, GID/P_Key queries and the
 * sysfs emulation that ibv_devinfo reads.
 * Owns: struct srd_device and the device table. Calls: no other unit (a leaf).
 */
#include "device.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <stdarg.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <linux/if_packet.h>

static struct srd_device g_devs[SRD_MAX_DEVICES];
static int g_ndevs;
static pthread_once_t g_devs_once = PTHREAD_ONCE_INIT;

/* Every address of this host, to decide when a destination is "us". */
static struct in6_addr g_local_addrs[128];
static int g_nlocal;

static void v4_mapped(struct in6_addr *a, uint32_t v4_be)
{
	memset(a, 0, sizeof(*a));
	a->s6_addr[10] = 0xff;
	a->s6_addr[11] = 0xff;
	memcpy(&a->s6_addr[12], &v4_be, 4);
}

static bool if_has_v4(struct ifaddrs *ifs, const char *name)
{
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !strcmp(i->ifa_name, name))
			return true;
	return false;
}

static void get_mac(const char *ifname, uint8_t mac[6], struct ifaddrs *ifs)
{
	memset(mac, 0, 6);
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_PACKET && !strcmp(i->ifa_name, ifname)) {
			struct sockaddr_ll *ll = (struct sockaddr_ll *)i->ifa_addr;
			if (ll->sll_halen == 6)
				memcpy(mac, ll->sll_addr, 6);
		}
	}
}

static void build_gids(struct srd_device *d, struct ifaddrs *ifs)
{
	bool have_ll = false;
	d->ngids = 1; /* slot 0 reserved for the link-local address */
	/* slot 1: the IPv4 address, mapped */
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || strcmp(i->ifa_name, d->ifname))
			continue;
		if (i->ifa_addr->sa_family == AF_INET && d->ngids == 1) {
			struct sockaddr_in *sin = (struct sockaddr_in *)i->ifa_addr;
			v4_mapped((struct in6_addr *)d->gids[1].raw, sin->sin_addr.s_addr);
			d->ngids = 2;
		}
	}
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || strcmp(i->ifa_name, d->ifname) || i->ifa_addr->sa_family != AF_INET6)
			continue;
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)i->ifa_addr;
		if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr) && !have_ll) {
			memcpy(d->gids[0].raw, &s6->sin6_addr, 16);
			have_ll = true;
		} else if (d->ngids < SRD_GID_TBL_LEN) {
			memcpy(d->gids[d->ngids++].raw, &s6->sin6_addr, 16);
		}
	}
	if (!have_ll) {
		/* fe80::/64 with the modified EUI-64 interface id from the MAC */
		uint8_t *g = d->gids[0].raw;
		memset(g, 0, 16);
		g[0] = 0xfe; g[1] = 0x80;
		g[8] = d->mac[0] ^ 2; g[9] = d->mac[1]; g[10] = d->mac[2];
		g[11] = 0xff; g[12] = 0xfe;
		g[13] = d->mac[3]; g[14] = d->mac[4]; g[15] = d->mac[5];
	}
	uint8_t guid[8] = { d->mac[0] ^ 2, d->mac[1], d->mac[2], 0xff, 0xfe,
			    d->mac[3], d->mac[4], d->mac[5] };
	if (!memcmp(d->mac, "\0\0\0\0\0\0", 6))
		guid[7] = (uint8_t)(d->index + 1);
	memcpy(&d->guid, guid, 8);
}

static void add_device(const char *name, const char *ifname, struct ifaddrs *ifs)
{
	if (g_ndevs >= SRD_MAX_DEVICES)
		return;
	struct srd_device *d = &g_devs[g_ndevs];
	memset(d, 0, sizeof(*d));
	d->index = g_ndevs;
	d->ibdev.node_type = IBV_NODE_CA;
	d->ibdev.transport_type = IBV_TRANSPORT_IB;
	snprintf(d->ibdev.name, sizeof(d->ibdev.name), "%s", name);
	snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "uverbs%d", g_ndevs);
	snprintf(d->ibdev.dev_path, sizeof(d->ibdev.dev_path),
		 "/sys/class/infiniband_verbs/uverbs%d", g_ndevs);
	snprintf(d->ibdev.ibdev_path, sizeof(d->ibdev.ibdev_path),
		 "/sys/class/infiniband/%s", name);
	snprintf(d->ifname, sizeof(d->ifname), "%s", ifname);
	d->ifindex = (int)if_nametoindex(ifname);
	get_mac(ifname, d->mac, ifs);
	build_gids(d, ifs);
	g_ndevs++;
}

static void init_devices(void)
{
	struct ifaddrs *ifs = NULL;
	if (getifaddrs(&ifs))
		ifs = NULL;
	for (struct ifaddrs *i = ifs; i && g_nlocal < 128; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET)
			v4_mapped(&g_local_addrs[g_nlocal++],
				  ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr);
		else if (i->ifa_addr->sa_family == AF_INET6)
			g_local_addrs[g_nlocal++] = ((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
	}
	const char *env = getenv("SOFTRDMA_DEVICES");
	if (env && *env) {
		char *copy = strdup(env), *save = NULL;
		for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
			char *eq = strchr(tok, '=');
			if (!eq || eq == tok || !eq[1]) {
				fprintf(stderr, "softrdma: ignoring malformed SOFTRDMA_DEVICES entry '%s' (want name=ifname)\n", tok);
				continue;
			}
			*eq = 0;
			add_device(tok, eq + 1, ifs);
		}
		free(copy);
	} else {
		const char *pick = NULL;
		for (struct ifaddrs *i = ifs; i && !pick; i = i->ifa_next) {
			if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
				continue;
			if ((i->ifa_flags & IFF_UP) && !(i->ifa_flags & IFF_LOOPBACK))
				pick = i->ifa_name;
		}
		if (!pick || !if_has_v4(ifs, pick))
			pick = "lo";
		add_device("softrdma0", pick, ifs);
	}
	if (ifs)
		freeifaddrs(ifs);
}

struct srd_device *srd_devices(int *n)
{
	pthread_once(&g_devs_once, init_devices);
	*n = g_ndevs;
	return g_devs;
}

bool srd_gid_is_local(const union ibv_gid *gid)
{
	int n;
	srd_devices(&n);
	const struct in6_addr *a = (const struct in6_addr *)gid->raw;
	if (IN6_IS_ADDR_LOOPBACK(a))
		return true;
	if (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127)
		return true;
	for (int i = 0; i < g_nlocal; i++)
		if (!memcmp(&g_local_addrs[i], a, 16))
			return true;
	for (int d = 0; d < n; d++)
		for (int i = 0; i < g_devs[d].ngids; i++)
			if (!memcmp(g_devs[d].gids[i].raw, gid->raw, 16))
				return true;
	return false;
}

/*
 * SOFTRDMA_REMOTE=1: other hosts may reach this process's QPs (their sockets are bound
 * to the device's addresses too and take datagrams from any source). Unset (or "0"):
 * loopback only. Read once per process.
 */
static int g_remote = -1;

bool srd_remote_enabled(void)
{
	int r = __atomic_load_n(&g_remote, __ATOMIC_RELAXED);
	if (r < 0) {
		const char *e = getenv("SOFTRDMA_REMOTE");
		r = e && *e && strcmp(e, "0") != 0;
		__atomic_store_n(&g_remote, r, __ATOMIC_RELAXED);
	}
	return r != 0;
}

void srd_gid_to_sockaddr(const union ibv_gid *gid, uint16_t port, int ifindex,
			 struct sockaddr_in6 *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin6_family = AF_INET6;
	sa->sin6_port = htons(port);
	const struct in6_addr *a = (const struct in6_addr *)gid->raw;
	if (srd_gid_is_local(gid)) {
		/* our own address: stay on loopback */
		if (IN6_IS_ADDR_V4MAPPED(a)) {
			uint32_t lo = htonl(INADDR_LOOPBACK);
			v4_mapped(&sa->sin6_addr, lo);
		} else {
			sa->sin6_addr = in6addr_loopback;
		}
		return;
	}
	static int warned;
	if (!srd_remote_enabled() && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) {
		char txt[INET6_ADDRSTRLEN];
		inet_ntop(AF_INET6, a, txt, sizeof(txt));
		fprintf(stderr, "softrdma: GID %s is not an address of this host; other hosts are reached "
			"only with SOFTRDMA_REMOTE=1 (docs/softrdma.md)\n", txt);
	}
	sa->sin6_addr = *a;
	if (IN6_IS_ADDR_LINKLOCAL(a))
		sa->sin6_scope_id = (uint32_t)ifindex;
}

/* ---------------------------------------------------------------- list */

SRD_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	int n;
	struct srd_device *d = srd_devices(&n);
	struct ibv_device **list = calloc((size_t)n + 1, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < n; i++)
		list[i] = &d[i].ibdev;
	if (num)
		*num = n;
	return list;
}

SRD_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

SRD_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

SRD_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return container_of(device, struct srd_device, ibdev)->index;
}

SRD_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	return container_of(device, struct srd_device, ibdev)->guid;
}

/* ---------------------------------------------------------------- queries */

static void fill_device_attr(struct srd_device *dev, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "0.1.0");
	a->node_guid = dev->guid;
	a->sys_image_guid = dev->guid;
	a->max_mr_size = ~0ull;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = 0xffffff;
	a->vendor_part_id = 0;
	a->hw_ver = 0;
	a->max_qp = SRD_MAX_QP;
	a->max_qp_wr = SRD_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR |
			      IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID |
			      IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE |
			      IBV_DEVICE_N_NOTIFY_CQ | IBV_DEVICE_MEM_WINDOW |
			      IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_XRC;
	a->max_mw = 1 << 20;
	a->max_sge = SRD_MAX_SGE;
	a->max_sge_rd = SRD_MAX_SGE;
	a->max_cq = SRD_MAX_QP;
	a->max_cqe = SRD_MAX_CQE;
	a->max_mr = 1 << 20;
	a->max_pd = SRD_MAX_QP;
	a->max_qp_rd_atom = SRD_MAX_RD_ATOM;
	a->max_ee_rd_atom = 0;
	a->max_res_rd_atom = SRD_MAX_QP * SRD_MAX_RD_ATOM;
	a->max_qp_init_rd_atom = SRD_MAX_RD_ATOM;
	a->max_ee_init_rd_atom = 0;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_ah = SRD_MAX_QP;
	a->max_srq = SRD_MAX_QP;
	a->max_srq_wr = SRD_MAX_QP_WR;
	a->max_srq_sge = SRD_MAX_SGE;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
}

SRD_EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
	if (!context || !attr)
		return EINVAL;
	fill_device_attr(srd_ctx_of(context)->dev, attr);
	return 0;
}

int srd_query_device_ex(struct ibv_context *context,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr, size_t attr_size)
{
	if (input && input->comp_mask)
		return EINVAL;
	if (attr_size < sizeof(attr->orig_attr))
		return EINVAL;
	struct ibv_device_attr_ex full;
	memset(&full, 0, sizeof(full));
	fill_device_attr(srd_ctx_of(context)->dev, &full.orig_attr);
	full.max_dm_size = 0;
	full.phys_port_cnt_ex = 1;
	/* on-demand paging (pd.c, odp.c): explicit and implicit regions, and exactly the RC and UD
	 * operations the C tests run into ODP memory that is not faulted in or unmapped */
	full.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
	full.odp_caps.per_transport_caps.rc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
		IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
	full.odp_caps.per_transport_caps.ud_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;
	memcpy(attr, &full, attr_size < sizeof(full) ? attr_size : sizeof(full));
	return 0;
}

/* The port's active MTU: 4096 (a softrdma packet is one UDP datagram or one ring slot,
 * so the interface's Ethernet MTU does not bound it), or SOFTRDMA_MTU (256 ... 4096). */
enum ibv_mtu srd_active_mtu(void)
{
	static int cached;
	int m = __atomic_load_n(&cached, __ATOMIC_RELAXED);
	if (!m) {
		const char *v = getenv("SOFTRDMA_MTU");
		long b = v ? strtol(v, NULL, 10) : 4096;
		m = b == 256 ? IBV_MTU_256 : b == 512 ? IBV_MTU_512 : b == 1024 ? IBV_MTU_1024 :
		    b == 2048 ? IBV_MTU_2048 : IBV_MTU_4096;
		if (v && b != 256 && b != 512 && b != 1024 && b != 2048 && b != 4096)
			fprintf(stderr, "softrdma: SOFTRDMA_MTU=%s is not 256, 512, 1024, 2048 or 4096; using 4096\n", v);
		__atomic_store_n(&cached, m, __ATOMIC_RELAXED);
	}
	return (enum ibv_mtu)m;
}

static void fill_port(struct srd_device *dev, struct ibv_port_attr *p)
{
	memset(p, 0, sizeof(*p));
	p->state = IBV_PORT_ACTIVE;
	p->max_mtu = IBV_MTU_4096;
	p->active_mtu = srd_active_mtu();
	p->gid_tbl_len = SRD_GID_TBL_LEN;
	p->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
	p->max_msg_sz = 0x80000000u;
	p->pkey_tbl_len = 1;
	p->lid = 0;
	p->max_vl_num = 1;
	p->active_width = 2;  /* 4X */
	p->active_speed = 32; /* EDR */
	p->phys_state = 5;    /* LinkUp */
	p->link_layer = IBV_LINK_LAYER_ETHERNET;
	(void)dev;
}

int srd_query_port(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr,
			  size_t len)
{
	if (port != 1)
		return EINVAL;
	struct ibv_port_attr full;
	fill_port(srd_ctx_of(context)->dev, &full);
	memset(attr, 0, len);
	memcpy(attr, &full, len < sizeof(full) ? len : sizeof(full));
	return 0;
}

#undef ibv_query_port
SRD_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num,
			      struct _compat_ibv_port_attr *port_attr)
{
	/* the compat layout is the current one minus the trailing fields */
	return srd_query_port(context, port_num, (struct ibv_port_attr *)port_attr,
			      offsetof(struct ibv_port_attr, flags));
}

SRD_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index,
			     union ibv_gid *gid)
{
	struct srd_device *d = srd_ctx_of(context)->dev;
	if (port_num != 1 || index < 0 || index >= SRD_GID_TBL_LEN)
		return -1;
	/* unused entries read as zero, like an empty kernel table slot */
	if (index < d->ngids)
		*gid = d->gids[index];
	else
		memset(gid, 0, sizeof(*gid));
	return 0;
}

SRD_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
				 uint32_t gid_index, struct ibv_gid_entry *entry,
				 uint32_t flags, size_t entry_size)
{
	struct srd_device *d = srd_ctx_of(context)->dev;
	if (flags || entry_size < sizeof(*entry))
		return EINVAL;
	if (port_num != 1)
		return EINVAL;
	if (gid_index >= SRD_GID_TBL_LEN)
		return EINVAL;
	if ((int)gid_index >= d->ngids)
		return ENODATA;
	memset(entry, 0, entry_size);
	entry->gid = d->gids[gid_index];
	entry->gid_index = gid_index;
	entry->port_num = 1;
	entry->gid_type = IBV_GID_TYPE_ROCE_V2;
	entry->ndev_ifindex = (uint32_t)d->ifindex;
	return 0;
}

SRD_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
					size_t max_entries, uint32_t flags, size_t entry_size)
{
	struct srd_device *d = srd_ctx_of(context)->dev;
	if (flags || entry_size < sizeof(*entries))
		return -EINVAL;
	if (max_entries < (size_t)d->ngids)
		return -EINVAL;
	for (int i = 0; i < d->ngids; i++) {
		struct ibv_gid_entry *e = (struct ibv_gid_entry *)((char *)entries + (size_t)i * entry_size);
		_ibv_query_gid_ex(context, 1, (uint32_t)i, e, 0, entry_size);
	}
	return d->ngids;
}

/* private ABI: enum ibv_gid_type_sysfs { IB_ROCE_V1 = 0, ROCE_V2 = 1 } */
SRD_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
				  unsigned int index, int *type)
{
	struct srd_device *d = srd_ctx_of(context)->dev;
	if (port_num != 1 || index >= SRD_GID_TBL_LEN || (int)index >= d->ngids) {
		errno = EINVAL;
		return -1;
	}
	*type = 1;
	return 0;
}

SRD_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index,
			      __be16 *pkey)
{
	(void)context;
	if (port_num != 1 || index != 0)
		return -1;
	*pkey = htons(0xffff);
	return 0;
}

SRD_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	(void)context;
	if (port_num != 1)
		return -EINVAL;
	if ((ntohs(pkey) & 0x7fff) == 0x7fff)
		return 0;
	return -ENOENT;
}

/* ---------------------------------------------------------------- sysfs */

SRD_EXPORT const char *ibv_get_sysfs_path(void)
{
	const char *env = getenv("SYSFS_PATH");
	return env && *env ? env : "/sys";
}

static int put(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	return (size_t)n >= size ? (int)size - 1 : n;
}

static void guid_str(uint64_t be, char *out, size_t len)
{
	const uint8_t *g = (const uint8_t *)&be;
	snprintf(out, len, "%02x%02x:%02x%02x:%02x%02x:%02x%02x",
		 g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]);
}

/* Answer the files of /sys/class/infiniband/<ours>/... that tools read. */
static int fake_sysfs(struct srd_device *d, const char *file, char *buf, size_t size)
{
	char g[64];
	unsigned idx;
	if (!strcmp(file, "node_guid") || !strcmp(file, "sys_image_guid")) {
		guid_str(d->guid, g, sizeof(g));
		return put(buf, size, "%s", g);
	}
	if (!strcmp(file, "fw_ver"))
		return put(buf, size, "0.1.0");
	if (!strcmp(file, "board_id"))
		return put(buf, size, "SOFTRDMA");
	if (!strcmp(file, "hw_rev"))
		return put(buf, size, "0");
	if (!strcmp(file, "hca_type"))
		return put(buf, size, "softrdma");
	if (!strcmp(file, "node_type"))
		return put(buf, size, "1: CA");
	if (!strcmp(file, "node_desc"))
		return put(buf, size, "softrdma %s", d->ifname);
	if (!strcmp(file, "ports/1/link_layer"))
		return put(buf, size, "Ethernet");
	if (!strcmp(file, "ports/1/state"))
		return put(buf, size, "4: ACTIVE");
	if (!strcmp(file, "ports/1/phys_state"))
		return put(buf, size, "5: LinkUp");
	if (!strcmp(file, "ports/1/rate"))
		return put(buf, size, "100 Gb/sec (4X EDR)");
	if (sscanf(file, "ports/1/gid_attrs/types/%u", &idx) == 1) {
		if (idx >= (unsigned)d->ngids)
			return -1;
		return put(buf, size, "RoCE v2");
	}
	if (sscanf(file, "ports/1/gid_attrs/ndevs/%u", &idx) == 1) {
		if (idx >= (unsigned)d->ngids)
			return -1;
		return put(buf, size, "%s", d->ifname);
	}
	if (sscanf(file, "ports/1/gids/%u", &idx) == 1) {
		if (idx >= SRD_GID_TBL_LEN)
			return -1;
		const uint8_t *r = idx < (unsigned)d->ngids ? d->gids[idx].raw : (const uint8_t *)"\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
		return put(buf, size, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
			   r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11],
			   r[12], r[13], r[14], r[15]);
	}
	if (!strcmp(file, "ports/1/pkeys/0"))
		return put(buf, size, "0xffff");
	if (!strcmp(file, "ports/1/lid") || !strcmp(file, "ports/1/sm_lid"))
		return put(buf, size, "0x0");
	errno = ENOENT;
	return -1;
}

SRD_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	int n;
	struct srd_device *d = srd_devices(&n);
	for (int i = 0; i < n; i++) {
		size_t l = strlen(d[i].ibdev.ibdev_path);
		if (!strncmp(dir, d[i].ibdev.ibdev_path, l) && (dir[l] == 0 || dir[l] == '/')) {
			char rel[512];
			snprintf(rel, sizeof(rel), "%s%s%s", dir[l] ? dir + l + 1 : "",
				 dir[l] && dir[l + 1] ? "/" : "", file);
			return fake_sysfs(&d[i], rel, buf, size);
		}
	}
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t len = read(fd, buf, size);
	close(fd);
	if (len < 0)
		return -1;
	if ((size_t)len == size)
		len--;
	buf[len] = 0;
	if (len > 0 && buf[len - 1] == '\n')
		buf[--len] = 0;
	return (int)len;
}

SRD_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size, const char *sysfs_name,
					 const char *fnfmt, ...)
{
	char file[512];
	va_list ap;
	va_start(ap, fnfmt);
	vsnprintf(file, sizeof(file), fnfmt, ap);
	va_end(ap);
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/class/infiniband/%s", ibv_get_sysfs_path(), sysfs_name);
	int n;
	struct srd_device *d = srd_devices(&n);
	for (int i = 0; i < n; i++)
		if (!strcmp(d[i].ibdev.name, sysfs_name))
			return fake_sysfs(&d[i], file, buf, size);
	return ibv_read_sysfs_file(dir, file, buf, size);
}
