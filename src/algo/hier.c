/* Hier: hierarchical AllReduce for communicators that span several hosts with the same number
 * of ranks on each. Within a host the ranks talk over shared memory, across hosts over the
 * network; a flat ring would send 2(n-1)/n of the buffer over each host's network link, this
 * sends 2(H-1)/H of it (H hosts), striped over every local rank so that all of them drive the
 * network at once.
 *
 * The buffer is walked in loops of nlocal chunks (each at most half a FIFO). For each loop:
 *   1. reduce-scatter over the local ring: local rank i ends with chunk i of the loop reduced
 *      over its host (the first nlocal steps of a ring AllReduce, the last one storing instead
 *      of forwarding), in its receive buffer;
 *   2. AllReduce of that chunk over its rail (the ranks of local index i of every host, a ring
 *      across the hosts), in place;
 *   3. all-gather over the local ring: every local rank receives every other chunk.
 * The pre-operation (avg's 1/n) is applied once per contribution, in phase 1, and the
 * post-operation once, at the end of phase 2; every rank of a rail folds in ring order, and
 * phase 3 only copies, so every rank ends with the same bits.
 *
 * Deadlock freedom: each phase is a ring schedule whose opening send moves at most half a FIFO
 * and whose later steps consume one incoming slice per slice sent. A rank in phase 2 or 3 waits
 * only for ranks that are in the same loop's phase 2 or 3, or that will get there once they
 * received what was already sent to them. The connections are Tree's per-peer links (made at
 * init, core/connect.c, with tt_hier_all_peers among the partners), never used by two
 * operations at once since collectives run one at a time in ticket order. */
#include <math.h>

#include "algo/algo.h"
#include "algo/coll.h"
#include "algo/ring.h"

enum hier_phase { HIER_LOCAL_RS, HIER_RAIL_AR, HIER_LOCAL_AG, HIER_DONE };

struct hier_state {
    int phase;           /* enum hier_phase; 0 when the op starts (the zeroed head) */
    int pad;
    size_t loop_count;   /* elements of the current loop; 0: not computed yet */
    size_t own_off;      /* this rank's chunk of the loop, relative to the loop */
    size_t own_count;
};

static char *byte_at(const void *base, size_t elements, size_t elt_bytes)
{
    return (char *)base + elements * elt_bytes;
}

/* Phase 1: the local ring's reduce-scatter of the loop. */
static void local_rs(struct tt_op *op, const struct hier_state *st, int step,
                     struct tt_prim *prim)
{
    const struct tt_hier_shape *h = &op->env->hier;
    int L = h->nlocal;
    size_t off, count;
    tt_ring_loop_chunk(st->loop_count, L, tt_ring_reducescatter_chunk(h->local_rank, L, step),
                       &off, &count);
    size_t at = op->loop_off + off;
    if (step == 0) {
        prim->kind = TT_PRIM_SEND;
    } else if (step < L - 1) {
        prim->kind = TT_PRIM_RECV_REDUCE_SEND;
    } else {
        prim->kind = TT_PRIM_RECV_REDUCE_COPY;
    }
    prim->flags = TT_REDUCE_PRE;
    prim->src = byte_at(op->sendbuff, at, op->elt_bytes);
    prim->dst = byte_at(op->recvbuff, at, op->elt_bytes);
    prim->count = count;
    op->send = &op->links[h->local_next].send;
    op->recv = &op->links[h->local_prev].recv;
}

/* Phase 2: the rail's ring AllReduce of this rank's chunk, in the receive buffer. */
static void rail_ar(struct tt_op *op, const struct hier_state *st, int step,
                    struct tt_prim *prim)
{
    const struct tt_hier_shape *h = &op->env->hier;
    int H = h->nhosts;
    size_t off, count;
    tt_ring_loop_chunk(st->own_count, H, tt_ring_allreduce_chunk(h->host_rank, H, step), &off,
                       &count);
    unsigned flags;
    prim->kind = tt_ring_allreduce_prim(H, step, &flags);
    prim->flags = flags & TT_REDUCE_POST; /* the pre-operation was applied in phase 1 */
    prim->src = prim->dst = byte_at(op->recvbuff, op->loop_off + st->own_off + off,
                                    op->elt_bytes);
    prim->count = count;
    op->send = &op->links[h->rail_next].send;
    op->recv = &op->links[h->rail_prev].recv;
}

/* Phase 3: the local ring's all-gather of the loop's reduced chunks, in the receive buffer. */
static void local_ag(struct tt_op *op, const struct hier_state *st, int step,
                     struct tt_prim *prim)
{
    const struct tt_hier_shape *h = &op->env->hier;
    int L = h->nlocal;
    size_t off, count;
    tt_ring_loop_chunk(st->loop_count, L, tt_ring_allgather_chunk(h->local_rank, L, step), &off,
                       &count);
    prim->kind = step == 0 ? TT_PRIM_SEND : step < L - 1 ? TT_PRIM_RECV_COPY_SEND : TT_PRIM_RECV;
    prim->flags = 0;
    prim->src = prim->dst = byte_at(op->recvbuff, op->loop_off + off, op->elt_bytes);
    prim->count = count;
    op->send = &op->links[h->local_next].send;
    op->recv = &op->links[h->local_prev].recv;
}

static bool hier_next(struct tt_op *op, struct tt_prim *prim)
{
    struct hier_state *st = TT_ALGO_STATE(op, struct hier_state);
    const struct tt_hier_shape *h = &op->env->hier;
    int L = h->nlocal, H = h->nhosts;
    for (;;) {
        if (op->loop_off >= op->count) return false;
        if (st->loop_count == 0) {
            size_t left = op->count - op->loop_off, loop = (size_t)L * op->chunk_count;
            st->loop_count = left < loop ? left : loop;
            tt_ring_loop_chunk(st->loop_count, L, h->local_rank, &st->own_off, &st->own_count);
            st->phase = HIER_LOCAL_RS;
            op->step = 0;
        }
        switch (st->phase) {
        case HIER_LOCAL_RS:
            local_rs(op, st, op->step, prim);
            if (++op->step == L) {
                op->step = 0;
                st->phase = HIER_RAIL_AR;
            }
            return true;
        case HIER_RAIL_AR:
            rail_ar(op, st, op->step, prim);
            if (++op->step == tt_ring_allreduce_steps(H)) {
                op->step = 0;
                st->phase = HIER_LOCAL_AG;
            }
            return true;
        case HIER_LOCAL_AG:
            local_ag(op, st, op->step, prim);
            if (++op->step == L) {
                op->step = 0;
                st->phase = HIER_DONE;
            }
            return true;
        default:
            op->loop_off += st->loop_count;
            st->loop_count = 0;
            break;
        }
    }
}

int tt_hier_all_peers(const struct tt_hier_shape *shape, int *peers)
{
    if (!shape->valid) return 0;
    int all[4] = {shape->local_next, shape->local_prev, shape->rail_next, shape->rail_prev};
    int n = 0;
    for (int i = 0; i < 4; i++) {
        bool seen = false;
        for (int k = 0; k < n && !seen; k++) seen = peers[k] == all[i];
        if (!seen) peers[n++] = all[i];
    }
    return n;
}

static int hier_peers(const struct tt_op *op, int *peers)
{
    return tt_hier_all_peers(&op->env->hier, peers);
}

/* ---- The cost model ------------------------------------------------------------------------ */

/* Phases 1 and 3 are a ring over shared memory among the nlocal ranks of a host; phase 2 is a
 * ring AllReduce among the hosts, of 1/nlocal of the buffer on each of nlocal rails, which
 * share the host's link: the host sends 2(H-1)/H of the buffer in all, against 2(n-1)/n for a
 * flat ring. The network's constants come with the input (tt_tune_input.net_*). The local
 * phases are priced like the ring over shared memory, with the host's CPUs shared by its
 * ranks' network work. */
#define HIER_SHM_ALPHA_US 0.6
#define HIER_SHM_GBPS 6.0

static double hier_estimate_us(const struct tt_tune_input *in)
{
    if (in->hier_nlocal < 2 || in->nhosts < 2) return INFINITY;
    double L = in->hier_nlocal, H = in->nhosts, bytes = (double)in->bytes;
    double local = 2 * ((L - 1) * HIER_SHM_ALPHA_US +
                        tt_transfer_us((L - 1) / L * bytes, HIER_SHM_GBPS));
    double rail = 2 * (H - 1) * tt_tune_net_alpha_us(in) +
                  tt_transfer_us(2 * (H - 1) / H * bytes, tt_tune_net_gbps(in));
    return local + rail;
}

/* ---- The algorithm ------------------------------------------------------------------------- */

static bool hier_implements(enum tt_coll coll)
{
    return coll == TT_COLL_ALLREDUCE;
}

static bool hier_can_run(const struct tt_tune_input *in)
{
    return in->hier_nlocal >= 2 && in->nhosts >= 2 && in->tree_max_bytes > 0;
}

static void hier_bind(struct tt_op *op, const struct tt_algo_env *env)
{
    op->links = env->tree;
    op->send = op->recv = NULL; /* each primitive names its link */
    op->next = hier_next;
    /* The rail's steps carry a share of one loop chunk: nlocal x nhosts shares of the buffer. */
    size_t shares = (size_t)env->hier.nlocal * (size_t)env->hier.nhosts;
    tt_algo_net_slicing(op, op->count * op->elt_bytes / (shares ? shares : 1));
}

const struct tt_algo tt_algo_hier = {
    .name = "Hier",
    .proto = TT_PROTO_SIMPLE,
    .implements = hier_implements,
    .can_run = hier_can_run,
    .estimate_us = hier_estimate_us,
    .bind = hier_bind,
    .peers = hier_peers,
    .step = tt_prims_step,
};
