/* The transport table: which transports exist, in order of preference. A connection to a peer
 * uses the first one that says it can reach it: self for a rank's own connections, shared
 * memory within a host, TCP between any two ranks. */
#include "transport/transport.h"

const struct tt_transport *const tt_transports[] = {
    &tt_transport_self,
    &tt_transport_shm,
    &tt_transport_tcp,
    NULL,
};

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
