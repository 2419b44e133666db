/*
 * softrdma librdmacm: exported functions that softrdma does not emulate.
 * Every symbol of rdma-core's librdmacm.so.1 exists so unmodified binaries
 * load; these fail cleanly with ENOSYS instead of aborting.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <rdma/rsocket.h>

#include "cm_internal.h"

#define NOSYS(ret) do { errno = ENOSYS; return (ret); } while (0)

/* multicast needs a multicast-capable UD data path softrdma does not have */
CM_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{ (void)id; (void)addr; (void)context; NOSYS(-1); }
CM_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *mc_join_attr,
				     void *context)
{ (void)id; (void)mc_join_attr; (void)context; NOSYS(-1); }
CM_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{ (void)id; (void)addr; NOSYS(-1); }

/* enhanced connection establishment is a vendor extension */
CM_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{ (void)id; (void)ece; NOSYS(-1); }
CM_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{ (void)id; (void)ece; NOSYS(-1); }

/* rsockets */
CM_EXPORT int rsocket(int domain, int type, int protocol)
{ (void)domain; (void)type; (void)protocol; NOSYS(-1); }
CM_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{ (void)socket; (void)addr; (void)addrlen; NOSYS(-1); }
CM_EXPORT int rlisten(int socket, int backlog)
{ (void)socket; (void)backlog; NOSYS(-1); }
CM_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{ (void)socket; (void)addr; (void)addrlen; NOSYS(-1); }
CM_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{ (void)socket; (void)addr; (void)addrlen; NOSYS(-1); }
CM_EXPORT int rshutdown(int socket, int how)
{ (void)socket; (void)how; NOSYS(-1); }
CM_EXPORT int rclose(int socket)
{ (void)socket; NOSYS(-1); }
CM_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{ (void)socket; (void)buf; (void)len; (void)flags; NOSYS(-1); }
CM_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
			    struct sockaddr *src_addr, socklen_t *addrlen)
{ (void)socket; (void)buf; (void)len; (void)flags; (void)src_addr; (void)addrlen; NOSYS(-1); }
CM_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{ (void)socket; (void)msg; (void)flags; NOSYS(-1); }
CM_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{ (void)socket; (void)buf; (void)len; (void)flags; NOSYS(-1); }
CM_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
			  const struct sockaddr *dest_addr, socklen_t addrlen)
{ (void)socket; (void)buf; (void)len; (void)flags; (void)dest_addr; (void)addrlen; NOSYS(-1); }
CM_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{ (void)socket; (void)msg; (void)flags; NOSYS(-1); }
CM_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{ (void)socket; (void)buf; (void)count; NOSYS(-1); }
CM_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{ (void)socket; (void)iov; (void)iovcnt; NOSYS(-1); }
CM_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{ (void)socket; (void)buf; (void)count; NOSYS(-1); }
CM_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{ (void)socket; (void)iov; (void)iovcnt; NOSYS(-1); }
CM_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{ (void)fds; (void)nfds; (void)timeout; NOSYS(-1); }
CM_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{ (void)nfds; (void)readfds; (void)writefds; (void)exceptfds; (void)timeout; NOSYS(-1); }
CM_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{ (void)socket; (void)addr; (void)addrlen; NOSYS(-1); }
CM_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{ (void)socket; (void)addr; (void)addrlen; NOSYS(-1); }
CM_EXPORT int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{ (void)socket; (void)level; (void)optname; (void)optval; (void)optlen; NOSYS(-1); }
CM_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{ (void)socket; (void)level; (void)optname; (void)optval; (void)optlen; NOSYS(-1); }
CM_EXPORT int rfcntl(int socket, int cmd, ...)
{ (void)socket; (void)cmd; NOSYS(-1); }
CM_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{ (void)socket; (void)buf; (void)len; (void)prot; (void)flags; (void)offset; NOSYS((off_t)-1); }
CM_EXPORT int riounmap(int socket, void *buf, size_t len)
{ (void)socket; (void)buf; (void)len; NOSYS(-1); }
CM_EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{ (void)socket; (void)buf; (void)count; (void)offset; (void)flags; errno = ENOSYS; return 0; }
