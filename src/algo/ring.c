/* Ring schedules for AllReduce, ReduceScatter, AllGather, Broadcast and Reduce. Each `next`
 * function walks its collective's loops (pieces of the buffer that fit the pipeline) and steps,
 * using the pure arithmetic of ring.h, and yields one primitive per call. */
#include "algo/ring.h"

#include <math.h>

#include "algo/coll.h"

static char *byte_at(const void *base, size_t elements, size_t elt_bytes)
{
    return (char *)base + elements * elt_bytes;
}

/* A rank alone only copies (applying the op's pre- and post-operation, e.g. avg). */
static bool single_rank_copy(struct tt_op *op, struct tt_prim *prim, size_t count, unsigned flags)
{
    if (op->loop_off != 0 || count == 0) return false;
    op->loop_off = count;
    *prim = (struct tt_prim){.kind = TT_PRIM_COPY, .src = op->sendbuff, .dst = op->recvbuff,
                             .count = count, .flags = flags};
    return true;
}

enum tt_prim_kind tt_ring_allreduce_prim(int nranks, int step, unsigned *flags)
{
    *flags = 0;
    if (step == 0) {
        *flags = TT_REDUCE_PRE;
        return TT_PRIM_SEND;
    }
    if (step < nranks - 1) {
        *flags = TT_REDUCE_PRE;
        return TT_PRIM_RECV_REDUCE_SEND;
    }
    if (step == nranks - 1) {
        *flags = TT_REDUCE_PRE | TT_REDUCE_POST;
        return TT_PRIM_RECV_REDUCE_COPY_SEND;
    }
    if (step < 2 * nranks - 2) return TT_PRIM_RECV_COPY_SEND;
    return TT_PRIM_RECV;
}

enum tt_prim_kind tt_ring_reducescatter_prim(int nranks, int step, unsigned *flags)
{
    if (step == nranks - 1) {
        *flags = TT_REDUCE_PRE | TT_REDUCE_POST;
        return TT_PRIM_RECV_REDUCE_COPY;
    }
    *flags = TT_REDUCE_PRE;
    return step == 0 ? TT_PRIM_SEND : TT_PRIM_RECV_REDUCE_SEND;
}

enum tt_prim_kind tt_ring_allgather_prim(int nranks, int step)
{
    if (step == 0) return TT_PRIM_COPY_SEND;
    return step < nranks - 1 ? TT_PRIM_RECV_COPY_SEND : TT_PRIM_RECV;
}

/* All-reduce: loops of nranks * chunk_count elements, each split into nranks chunks that travel
 * the ring for 2n-1 steps (reduce-scatter, then all-gather of the reduced chunks). */
bool tt_ring_allreduce_next(struct tt_op *op, struct tt_prim *prim)
{
    int n = op->nranks;
    if (n == 1) return single_rank_copy(op, prim, op->count, TT_REDUCE_PRE | TT_REDUCE_POST);
    if (op->loop_off >= op->count) return false;
    size_t loop_count = op->count - op->loop_off;
    if (loop_count > (size_t)n * op->chunk_count) loop_count = (size_t)n * op->chunk_count;
    size_t off, count;
    tt_ring_loop_chunk(loop_count, n, tt_ring_allreduce_chunk(op->rank, n, op->step), &off, &count);
    size_t at = op->loop_off + off;
    prim->kind = tt_ring_allreduce_prim(n, op->step, &prim->flags);
    prim->src = byte_at(op->sendbuff, at, op->elt_bytes);
    prim->dst = byte_at(op->recvbuff, at, op->elt_bytes);
    prim->count = count;
    if (++op->step == tt_ring_allreduce_steps(n)) {
        op->step = 0;
        op->loop_off += loop_count;
    }
    return true;
}

/* Reduce-scatter: rank r's result is block r of the input (count elements each). Loops walk the
 * blocks in pieces of chunk_count; at each step the piece of block c moves one hop. */
bool tt_ring_reducescatter_next(struct tt_op *op, struct tt_prim *prim)
{
    int n = op->nranks;
    if (n == 1) return single_rank_copy(op, prim, op->count, TT_REDUCE_PRE | TT_REDUCE_POST);
    if (op->loop_off >= op->count) return false;
    size_t piece = op->count - op->loop_off;
    if (piece > op->chunk_count) piece = op->chunk_count;
    int c = tt_ring_reducescatter_chunk(op->rank, n, op->step);
    prim->kind = tt_ring_reducescatter_prim(n, op->step, &prim->flags);
    prim->src = byte_at(op->sendbuff, (size_t)c * op->count + op->loop_off, op->elt_bytes);
    prim->dst = byte_at(op->recvbuff, op->loop_off, op->elt_bytes);
    prim->count = piece;
    if (++op->step == n) {
        op->step = 0;
        op->loop_off += piece;
    }
    return true;
}

/* All-gather: block c of the output is rank c's input; each piece of every block makes
 * n-1 hops around the ring. */
bool tt_ring_allgather_next(struct tt_op *op, struct tt_prim *prim)
{
    int n = op->nranks;
    if (op->loop_off >= op->count) return false;
    size_t piece = op->count - op->loop_off;
    if (piece > op->chunk_count) piece = op->chunk_count;
    int c = tt_ring_allgather_chunk(op->rank, n, op->step);
    prim->kind = n == 1 ? TT_PRIM_COPY : tt_ring_allgather_prim(n, op->step);
    prim->flags = 0;
    prim->src = byte_at(op->sendbuff, op->loop_off, op->elt_bytes);
    prim->dst = byte_at(op->recvbuff, (size_t)c * op->count + op->loop_off, op->elt_bytes);
    prim->count = piece;
    if (++op->step == n || n == 1) {
        op->step = 0;
        op->loop_off += piece;
    }
    return true;
}

/* Broadcast: a chain from the root around the ring; each piece is one primitive per rank. */
bool tt_ring_broadcast_next(struct tt_op *op, struct tt_prim *prim)
{
    int n = op->nranks;
    if (op->loop_off >= op->count) return false;
    size_t piece = op->count - op->loop_off;
    if (piece > op->chunk_count) piece = op->chunk_count;
    int pos = tt_ring_chain_pos(op->rank, n, op->root);
    if (n == 1)
        prim->kind = TT_PRIM_COPY;
    else if (pos == 0)
        prim->kind = TT_PRIM_COPY_SEND;
    else
        prim->kind = pos == n - 1 ? TT_PRIM_RECV : TT_PRIM_RECV_COPY_SEND;
    prim->flags = 0;
    prim->src = byte_at(op->sendbuff, op->loop_off, op->elt_bytes);
    prim->dst = byte_at(op->recvbuff, op->loop_off, op->elt_bytes);
    prim->count = piece;
    op->loop_off += piece;
    return true;
}

/* Reduce: a chain that starts at the root's successor and ends at the root, which alone
 * writes its output (non-root outputs are left untouched, as NCCL specifies). */
bool tt_ring_reduce_next(struct tt_op *op, struct tt_prim *prim)
{
    int n = op->nranks;
    if (n == 1) return single_rank_copy(op, prim, op->count, TT_REDUCE_PRE | TT_REDUCE_POST);
    if (op->loop_off >= op->count) return false;
    size_t piece = op->count - op->loop_off;
    if (piece > op->chunk_count) piece = op->chunk_count;
    int pos = tt_ring_chain_pos(op->rank, n, op->root + 1);
    if (pos == 0) {
        prim->kind = TT_PRIM_SEND;
        prim->flags = TT_REDUCE_PRE;
    } else if (pos < n - 1) {
        prim->kind = TT_PRIM_RECV_REDUCE_SEND;
        prim->flags = TT_REDUCE_PRE;
    } else {
        prim->kind = TT_PRIM_RECV_REDUCE_COPY;
        prim->flags = TT_REDUCE_PRE | TT_REDUCE_POST;
    }
    prim->src = byte_at(op->sendbuff, op->loop_off, op->elt_bytes);
    prim->dst = byte_at(op->recvbuff, op->loop_off, op->elt_bytes);
    prim->count = piece;
    op->loop_off += piece;
    return true;
}

/* ---- The cost model ------------------------------------------------------------------------ */

/* Ring's constants per link (measured: docs/tuning.md, "The constants"). A ring
 * step across hosts waits for a TCP hop, so TCP's row governs a ring with any TCP link. */
static const struct tt_cost ring_cost[TT_LINK_COUNT] = {
    [TT_LINK_SHM] = {.alpha_us = 0.6, .gbytes_per_s = 6.0, .chunk_bytes = 524288},
    [TT_LINK_TCP] = {.alpha_us = 15.0, .gbytes_per_s = 2.0, .chunk_bytes = 524288},
};

/* A chain of n-1 hops (Broadcast, Reduce over the ring) on a host with more ranks than CPUs, as
 * a loop of calls runs it: the root does not wait for the end of the chain, so consecutive calls
 * overlap down the chain and a call costs one hop's hand-off plus its share of the copying,
 * two copies of the buffer per hop (in from the previous rank, out to the next) spread over the
 * host's CPUs at ROOTED_CHAIN_GBPS (measured with 3 and 4 ranks on 2 CPUs: docs/tuning.md,
 * "The cost model"). */
#define ROOTED_CHAIN_GBPS 25.0

static double rooted_chain_us(const struct tt_tune_input *in, const struct tt_cost *c,
                              double alone_us)
{
    double n = in->nranks, cpus = in->cpus > 0 && in->cpus < in->nranks ? in->cpus : n;
    double loop_us = c->alpha_us +
                     tt_transfer_us(2 * (n - 1) / cpus * (double)in->bytes, ROOTED_CHAIN_GBPS);
    return fmin(loop_us, alone_us); /* a call in a loop costs no more than a call alone */
}

/* AllReduce is a reduce-scatter then an allgather around the ring: 2(n-1) steps, each moving
 * one n-th of the buffer over every link at once. AllGather and ReduceScatter are one of the
 * two halves: n-1 steps, each moving one rank's block (`bytes`, NCCL's per-rank count).
 * Broadcast and Reduce are a chain of n-1 hops, pipelined in chunks: the whole buffer crosses
 * the first link, and the last chunk then needs n-2 more hops to reach the end of the chain.
 * Anything else (a send, a receive) is one step over one connection. */
double tt_ring_estimate_us(const struct tt_tune_input *in, enum tt_link link)
{
    const struct tt_cost *c = &ring_cost[link];
    /* Network steps cost what the communicator was told (TUTTI_NET_*), else the defaults. */
    double alpha = link == TT_LINK_TCP ? tt_tune_net_alpha_us(in) : c->alpha_us;
    double gbps = link == TT_LINK_TCP ? tt_tune_net_gbps(in) : c->gbytes_per_s;
    double n = in->nranks, bytes = (double)in->bytes;
    double steps, moved;
    switch (in->coll) {
    case TT_COLL_ALLREDUCE:
        steps = 2 * (n - 1);
        moved = 2 * (n - 1) / n * bytes;
        break;
    case TT_COLL_ALLGATHER:
    case TT_COLL_REDUCESCATTER:
        steps = n - 1;
        moved = (n - 1) * bytes;
        break;
    case TT_COLL_BROADCAST:
    case TT_COLL_REDUCE:
        steps = n - 1;
        moved = bytes + (n > 2 ? n - 2 : 0) * fmin(bytes, (double)c->chunk_bytes);
        if (in->oversubscribed && in->nhosts <= 1)
            return rooted_chain_us(in, c, alpha * steps + tt_transfer_us(moved, gbps));
        break;
    default:
        steps = 1;
        moved = bytes;
        break;
    }
    return alpha * steps + tt_transfer_us(moved, gbps);
}

/* ---- The algorithm ------------------------------------------------------------------------- */

static bool ring_implements(enum tt_coll coll)
{
    return coll <= TT_COLL_REDUCESCATTER;
}

static bool ring_can_run(const struct tt_tune_input *in)
{
    return true;
}

static double ring_estimate_us(const struct tt_tune_input *in)
{
    return tt_ring_estimate_us(in, in->link);
}

static void ring_bind(struct tt_op *op, const struct tt_algo_env *env)
{
    static const tt_algo_next_fn schedules[TT_COLL_REDUCESCATTER + 1] = {
        [TT_COLL_ALLREDUCE] = tt_ring_allreduce_next,
        [TT_COLL_BROADCAST] = tt_ring_broadcast_next,
        [TT_COLL_REDUCE] = tt_ring_reduce_next,
        [TT_COLL_ALLGATHER] = tt_ring_allgather_next,
        [TT_COLL_REDUCESCATTER] = tt_ring_reducescatter_next,
    };
    op->send = env->ring_send;
    op->recv = env->ring_recv;
    op->next = schedules[op->coll];
    /* Each step moves one rank's share of a loop (AllReduce, ReduceScatter, AllGather) or a
     * pipeline chunk (the chains). */
    if (env->net && op->nranks > 1) {
        size_t bytes = op->count * op->elt_bytes;
        if (op->coll == TT_COLL_ALLREDUCE) bytes /= (size_t)op->nranks;
        tt_algo_net_slicing(op, bytes);
    }
}

const struct tt_algo tt_algo_ring = {
    .name = "Ring",
    .proto = TT_PROTO_SIMPLE,
    .implements = ring_implements,
    .can_run = ring_can_run,
    .estimate_us = ring_estimate_us,
    .bind = ring_bind,
    .step = tt_prims_step,
};
