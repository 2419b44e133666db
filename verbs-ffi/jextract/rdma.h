/*
 * The one header jextract reads for verbs4j: libibverbs and librdmacm together, so that the
 * types both declare (ibv_gid, ibv_ah_attr, ibv_global_route, the socket addresses) are
 * generated once, into one package. Regenerate with scripts/regenerate-bindings.
 */
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <poll.h>   /* struct pollfd, for poll(2) on the channels' file descriptors */
