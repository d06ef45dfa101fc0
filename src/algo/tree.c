/* Tree schedules: latency-optimal collectives for small messages, in log2(n) steps where the
 * ring takes n-1 (Broadcast, Reduce) or 2(n-1) (AllReduce). Each step moves the whole message
 * over a connection to one partner; the connections are Tree's own (struct tt_tree_link), made
 * on first use.
 *
 * AllReduce: recursive doubling. With p the largest power of two <= n and rem = n - p, the
 * first 2*rem ranks pair up: each even one hands its input to the odd one above it and waits
 * for the result. The p ranks that remain (virtual ranks 0..p-1) exchange their partial
 * results with the partner whose virtual rank differs in bit k, for k = 0, 1, ...: after round
 * k each holds the fold of a group of 2^(k+1) ranks. Both partners of a round fold the lower
 * group's value first (TT_PRIM_SWAP on the upper one), so they compute the same expression and
 * every rank ends with the same bits.
 *
 * Broadcast and Reduce: a binomial tree rooted at the root, over ranks relative to it. Relative
 * rank v's parent is v with its lowest set bit cleared; its children are v + 2^j for every 2^j
 * below that bit (below n's next power of two at the root). Broadcast sends to the largest
 * subtree first; Reduce folds its children's partial results in increasing order of subtree
 * size into its own (a staging buffer on non-roots, whose receive buffer NCCL leaves unused).
 *
 * Deadlock freedom: the core runs Tree only for messages of at most half a connection FIFO, so
 * a send never waits for its receiver; the trees have no cycles, and recursive doubling's
 * partners send before they receive. */
#include <math.h>

#include "algo/algo.h"
#include "algo/coll.h"

/* A plan is walked from its start on every call, stopping at the step wanted: plans have
 * about 2*log2(n) steps, so this costs less than keeping them anywhere. */
struct walker {
    const struct tt_op *op;
    int want;  /* the step to return (-1: none, just collect the peers) */
    int at;    /* steps seen so far */
    bool got;
    struct tt_prim prim;
    int peer;
    int *peers; /* when non-NULL, every peer a step talks to, once each */
    int npeers;
};

/* Visits one step; false once the wanted step was found (the plan stops there). */
static bool emit(struct walker *w, enum tt_prim_kind kind, const void *src, void *dst,
                 unsigned flags, int peer)
{
    if (w->peers != NULL && peer >= 0) {
        bool seen = false;
        for (int i = 0; i < w->npeers && !seen; i++) seen = w->peers[i] == peer;
        if (!seen && w->npeers < TT_TREE_MAX_PEERS) w->peers[w->npeers++] = peer;
    }
    if (w->at++ != w->want) return true;
    w->prim = (struct tt_prim){.kind = kind, .src = src, .dst = dst, .count = w->op->count,
                               .flags = flags};
    w->peer = peer;
    w->got = true;
    return false;
}

#define EMIT(...)                                                                                  \
    do {                                                                                           \
        if (!emit(w, __VA_ARGS__)) return;                                                         \
    } while (0)

static int pow2_floor(int n)
{
    int p = 1;
    while (p <= n / 2) p *= 2;
    return p;
}

static void plan_allreduce(struct walker *w)
{
    const struct tt_op *op = w->op;
    int r = op->rank, n = op->nranks, p = pow2_floor(n), rem = n - p, v;
    char *buf = op->recvbuff;
    /* A rank that starts in the rounds (no pairing step) and has no pre-operation to apply
     * sends its first round straight from its input and folds it from there into the output,
     * which then holds the running partial result: no copy of the whole message before the
     * first byte leaves (a 1 MiB copy, about a tenth of a 2-host AllReduce of 1 MiB). Otherwise
     * the own input, pre-operation applied, becomes the running partial result first. */
    bool from_input = r >= 2 * rem && op->redop.kind != TT_RED_PREMULSUM;
    if (!from_input) EMIT(TT_PRIM_COPY, op->sendbuff, buf, TT_REDUCE_PRE, -1);
    if (r < 2 * rem) {
        if (r % 2 == 0) {
            EMIT(TT_PRIM_SEND, buf, NULL, 0, r + 1);
            EMIT(TT_PRIM_RECV, NULL, buf, 0, r + 1);
            return;
        }
        EMIT(TT_PRIM_RECV_REDUCE_COPY, buf, buf, TT_PRIM_SWAP, r - 1);
        v = r / 2;
    } else {
        v = r - rem;
    }
    for (int mask = 1; mask < p; mask <<= 1) {
        int vp = v ^ mask, peer = vp < rem ? 2 * vp + 1 : vp + rem;
        unsigned flags = (vp < v ? TT_PRIM_SWAP : 0u) | (mask * 2 >= p ? TT_REDUCE_POST : 0u);
        const char *mine = from_input && mask == 1 ? op->sendbuff : buf;
        EMIT(TT_PRIM_SEND, mine, NULL, 0, peer);
        EMIT(TT_PRIM_RECV_REDUCE_COPY, mine, buf, flags, peer);
    }
    if (r < 2 * rem) EMIT(TT_PRIM_SEND, buf, NULL, 0, r - 1);
}

/* Rank of relative rank v in a tree rooted at `root`. */
static int real_rank(const struct tt_op *op, int v) { return (v + op->root) % op->nranks; }

/* The bound below which relative rank v's children sit: v's lowest set bit, or at the root
 * the power of two at or above n. */
static int child_bound(int v, int n)
{
    if (v != 0) return v & -v;
    int b = 1;
    while (b < n) b *= 2;
    return b;
}

static void plan_broadcast(struct walker *w)
{
    const struct tt_op *op = w->op;
    int n = op->nranks, v = (op->rank - op->root + n) % n, below = child_bound(v, n);
    const void *from = v == 0 ? op->sendbuff : op->recvbuff;
    if (v != 0) EMIT(TT_PRIM_RECV, NULL, op->recvbuff, 0, real_rank(op, v - below));
    for (int m = below / 2; m >= 1; m /= 2)
        if (v + m < n) EMIT(TT_PRIM_SEND, from, NULL, 0, real_rank(op, v + m));
    /* The root's own copy last: its children need the data first. */
    if (v == 0 && op->sendbuff != op->recvbuff)
        EMIT(TT_PRIM_COPY, op->sendbuff, op->recvbuff, 0, -1);
}

static void plan_reduce(struct walker *w)
{
    const struct tt_op *op = w->op;
    int n = op->nranks, v = (op->rank - op->root + n) % n, below = child_bound(v, n);
    int parent = v == 0 ? -1 : real_rank(op, v - (v & -v));
    int last = 0;
    for (int m = 1; m < below && v + m < n; m *= 2) last = m;
    if (last == 0) {
        EMIT(TT_PRIM_SEND, op->sendbuff, NULL, TT_REDUCE_PRE, parent);
        return;
    }
    char *acc = v == 0 ? op->recvbuff : op->env->tree_tmp;
    EMIT(TT_PRIM_COPY, op->sendbuff, acc, TT_REDUCE_PRE, -1);
    for (int m = 1; m <= last; m *= 2)
        EMIT(TT_PRIM_RECV_REDUCE_COPY, acc, acc, v == 0 && m == last ? TT_REDUCE_POST : 0u,
             real_rank(op, v + m));
    if (v != 0) EMIT(TT_PRIM_SEND, acc, NULL, 0, parent);
}

static void plan_of(struct walker *w)
{
    switch (w->op->coll) {
    case TT_COLL_ALLREDUCE: plan_allreduce(w); break;
    case TT_COLL_BROADCAST: plan_broadcast(w); break;
    case TT_COLL_REDUCE: plan_reduce(w); break;
    default: break;
    }
}

bool tt_tree_next(struct tt_op *op, struct tt_prim *prim)
{
    struct walker w = {.op = op, .want = op->step};
    plan_of(&w);
    if (!w.got) return false;
    op->step++;
    *prim = w.prim;
    if (w.peer < 0) return true;
    struct tt_tree_link *link = &op->links[w.peer];
    if (prim->kind == TT_PRIM_SEND)
        op->send = &link->send;
    else
        op->recv = &link->recv;
    return true;
}

int tt_tree_peers(const struct tt_op *op, int *peers)
{
    struct walker w = {.op = op, .want = -1, .peers = peers};
    plan_of(&w);
    return w.npeers;
}

/* Recursive doubling's partners, and rank +- 2^j for every 2^j < n: in a binomial tree rooted
 * anywhere, a rank's parent is rank - 2^j and its children rank + 2^j (mod n), j below the
 * lowest set bit of its number relative to the root. */
int tt_tree_all_peers(int rank, int nranks, int *peers)
{
    struct tt_op op = {.coll = TT_COLL_ALLREDUCE, .rank = rank, .nranks = nranks};
    int count = nranks > 1 ? tt_tree_peers(&op, peers) : 0;
    for (int step = 1; step < nranks; step *= 2) {
        int both[2] = {(rank + step) % nranks, (rank - step + nranks) % nranks};
        for (int k = 0; k < 2; k++) {
            bool seen = both[k] == rank;
            for (int i = 0; i < count && !seen; i++) seen = peers[i] == both[k];
            if (!seen) peers[count++] = both[k];
        }
    }
    return count;
}

/* ---- The cost model ------------------------------------------------------------------------ */

/* Tree's steps go over connections like the ring's, a whole message each. Across hosts a step
 * costs what a ring step does; within a host a step costs about 3x a ring step, since it also
 * copies the input and ends with a reduction pass, so OneShot and the ring keep the small
 * messages there (docs/tuning.md, "The constants"). */
static const struct tt_cost tree_cost[TT_LINK_COUNT] = {
    [TT_LINK_SHM] = {.alpha_us = 2.0, .gbytes_per_s = 6.0},
    [TT_LINK_TCP] = {.alpha_us = 15.0, .gbytes_per_s = 2.0},
};

/* AllReduce is recursive doubling: log2(p) rounds among p ranks, p the largest power of two
 * <= n, each exchanging the whole message with one partner; the n - p ranks left over first
 * hand their input to a partner and get the result back at the end (two more steps).
 * Broadcast and Reduce walk a binomial tree: ceil(log2 n) levels, and the root, which has the
 * most children, sends (or receives) the whole message once per level. */
static double tree_estimate_us(const struct tt_tune_input *in)
{
    const struct tt_cost *c = &tree_cost[in->link];
    int n = in->nranks, levels = 0, p = 1;
    while (p * 2 <= n) {
        p *= 2;
        levels++;
    }
    double steps = in->coll == TT_COLL_ALLREDUCE ? levels + (p < n ? 2 : 0)
                                                 : levels + (p < n ? 1 : 0);
    double alpha = in->link == TT_LINK_TCP ? tt_tune_net_alpha_us(in) : c->alpha_us;
    double gbps = in->link == TT_LINK_TCP ? tt_tune_net_gbps(in) : c->gbytes_per_s;
    return alpha * steps + tt_transfer_us(steps * (double)in->bytes, gbps);
}

/* ---- The algorithm ------------------------------------------------------------------------- */

static bool tree_implements(enum tt_coll coll)
{
    return coll == TT_COLL_ALLREDUCE || coll == TT_COLL_BROADCAST || coll == TT_COLL_REDUCE;
}

/* Whole messages of at most half a connection FIFO, so no send waits for its receiver. */
static bool tree_can_run(const struct tt_tune_input *in)
{
    return in->nranks > 1 && in->tree_max_bytes > 0 && in->bytes <= in->tree_max_bytes;
}

static void tree_bind(struct tt_op *op, const struct tt_algo_env *env)
{
    /* A whole message fits half a FIFO whatever the slices: at most TT_CONN_SLOTS/2 of them. */
    if (env->net) tt_algo_net_slicing(op, op->count * op->elt_bytes);
    op->links = env->tree;
    op->send = op->recv = NULL; /* each primitive names its peer's link */
    op->next = tt_tree_next;
}

const struct tt_algo tt_algo_tree = {
    .name = "Tree",
    .proto = TT_PROTO_SIMPLE,
    .implements = tree_implements,
    .can_run = tree_can_run,
    .estimate_us = tree_estimate_us,
    .bind = tree_bind,
    .peers = tt_tree_peers,
    .step = tt_prims_step,
};
