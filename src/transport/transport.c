/* The transport table: which transports exist, in order of preference. A connection to a peer
 * uses the first one that says it can reach it: self for a rank's own connections, shared
 * memory within a host, UCX between any two ranks when NCCL_NET=UCX selects it (builds with
 * UCX only), TCP between any two ranks. */
#include "transport/transport.h"

#include <strings.h>

#include "util/err.h"
#include "util/param.h"
#include "util/time.h"

const struct tt_transport *const tt_transports[] = {
    &tt_transport_self,
    &tt_transport_shm,
#ifdef TUTTI_HAVE_UCX
    &tt_transport_ucx,
#endif
    &tt_transport_tcp,
    NULL,
};

/* The network the user asked for: NCCL_NET, else TUTTI_NET, else "" (Socket). */
static const char *net_choice(const char **variable)
{
    const char *nccl = tt_param_net();
    *variable = nccl[0] != '\0' ? "NCCL_NET" : "TUTTI_NET";
    return nccl[0] != '\0' ? nccl : tt_param_tutti_net();
}

bool tt_transport_net_is_ucx(void)
{
    const char *variable;
    return strcasecmp(net_choice(&variable), "ucx") == 0;
}

ncclResult_t tt_transport_check_net(void)
{
    const char *variable, *net = net_choice(&variable);
    if (net[0] == '\0' || strcasecmp(net, "socket") == 0) return ncclSuccess;
    if (strcasecmp(net, "ucx") == 0) {
#ifdef TUTTI_HAVE_UCX
        return ncclSuccess;
#else
        return TT_ERROR(ncclInvalidUsage,
                        "%s=%s, but this Tutti was built without UCX (install libucx-dev and "
                        "rebuild; tutti-info shows the build's transports)",
                        variable, net);
#endif
    }
    return TT_ERROR(ncclInvalidArgument, "%s=%s: the networks are Socket (Tutti's TCP) and UCX",
                    variable, net);
}

bool tt_transport_send_after_recv(const struct tt_transport_ctx *ctx, const struct tt_conn *conn,
                                  const struct tt_conn_info *remote)
{
    return conn->dir == TT_CONN_SEND && conn->pair != NULL && conn->transport != NULL &&
           conn->transport->send_after_recv != NULL &&
           conn->transport->send_after_recv(ctx, conn, remote);
}

const struct tt_transport *tt_transport_pick(const struct tt_reach *r)
{
    for (int i = 0; tt_transports[i] != NULL; i++)
        if (tt_transports[i]->can_reach(r)) return tt_transports[i];
    return &tt_transport_tcp;
}

void **tt_transport_ctx_state(struct tt_transport_ctx *ctx, const struct tt_transport *t)
{
    for (int i = 0; i < TT_TRANSPORT_STATES; i++) {
        if (ctx->states[i].owner == t) return &ctx->states[i].state;
        if (ctx->states[i].owner == NULL) {
            ctx->states[i].owner = t;
            return &ctx->states[i].state;
        }
    }
    return NULL;
}

void tt_transport_ctx_fini(struct tt_transport_ctx *ctx)
{
    for (int i = 0; tt_transports[i] != NULL; i++)
        if (tt_transports[i]->ctx_fini) tt_transports[i]->ctx_fini(ctx);
}

/* How often a connect's wait asks the core about its peer (a pidfd poll and a mailbox read). */
#define CONNECT_CHECK_NS 2000000ull

ncclResult_t tt_transport_connect_check(struct tt_transport_ctx *ctx, int peer,
                                        uint64_t *last_ns)
{
    if (ctx->abort != NULL && atomic_load(ctx->abort))
        return TT_ERROR(ncclInvalidUsage, "connect to peer rank %d aborted", peer);
    if (ctx->connect_check == NULL) return ncclSuccess;
    uint64_t now = tt_time_ns();
    if (now - *last_ns < CONNECT_CHECK_NS) return ncclSuccess;
    *last_ns = now;
    return ctx->connect_check(ctx->connect_check_arg, peer);
}
