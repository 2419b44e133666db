/* device.c: the device table, addresses and device/port queries. */
#ifndef SRD_DEVICE_H
#define SRD_DEVICE_H
#include "srd.h"

struct srd_device *srd_devices(int *n);
bool srd_gid_is_local(const union ibv_gid *gid);
bool srd_remote_enabled(void);
void srd_gid_to_sockaddr(const union ibv_gid *gid, uint16_t port, int ifindex,
			 struct sockaddr_in6 *sa);
int srd_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
			struct ibv_device_attr_ex *attr, size_t attr_size);
/* The port's active MTU: the largest UD message (IBA C10-93.1.1; see requester.c). */
enum ibv_mtu srd_active_mtu(void);
int srd_query_port(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr, size_t len);

#endif
