/* OneShot: the latency-optimal algorithm for small messages on one host (NCCL's LL idea: the
 * data and its flag travel together). Each rank copies its contribution (with the op's
 * pre-operation applied) into its mailbox slot and posts an event; every rank then reads the
 * slots it needs straight from its peers' mailboxes and finishes locally. One hand-off instead
 * of 2(n-1) ring steps.
 *
 * Every rank reduces the contributions in rank order, so all ranks compute bit-identical
 * results. AllReduce, AllGather, ReduceScatter and AlltoAll (which publishes its whole input and
 * reads its block of every slot), where every rank reads every slot, publish
 * through the slot's flag word (tt_team_publish): the flag shares the first cache line with the
 * payload, and seeing every peer's flag is all the synchronization an operation needs. Broadcast
 * and Reduce, where some ranks read nothing, use two events instead: "my slot is published" and
 * "I am done reading", the second being what lets a peer refill the slot two operations
 * later. */
#include <math.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/coll.h"
#include "algo/ring.h"
#include "util/err.h"

/* The schedule, one phase after the other (the op's state): */
enum {
    RESERVE, /* take the next slot and events (or sequence number), in lane order everywhere */
    PUBLISH, /* once the slot is free: copy my contribution in, post or flag it */
    GATHER,  /* once every peer I read has published: finish locally, post "done" */
    FINISH,
};

/* OneShot's own state of an op. */
struct oneshot_state {
    int phase; /* first: zeroed when the op starts */
    int slot;
    uint64_t event_base; /* the events before this op's first (flagged ops: its sequence) */
};

static struct oneshot_state *st(const struct tt_op *op)
{
    return TT_ALGO_STATE(op, struct oneshot_state);
}

static const char *at(const void *base, size_t elements, size_t elt_bytes)
{
    return (const char *)base + elements * elt_bytes;
}

/* Elements each rank publishes: nranks blocks for ReduceScatter and AlltoAll, one otherwise. */
static size_t payload_count(const struct tt_op *op)
{
    return op->coll == TT_COLL_REDUCESCATTER || op->coll == TT_COLL_ALLTOALL
               ? op->count * (size_t)op->nranks : op->count;
}

size_t tt_oneshot_payload_bytes(const struct tt_op *op)
{
    return payload_count(op) * op->elt_bytes;
}

/* Whether every rank reads every peer's slot (then the operation is flagged). */
static bool all_read(const struct tt_op *op)
{
    return op->coll == TT_COLL_ALLREDUCE || op->coll == TT_COLL_ALLGATHER ||
           op->coll == TT_COLL_REDUCESCATTER || op->coll == TT_COLL_ALLTOALL;
}

/* Does this rank publish data (every rank posts both events regardless)? */
static bool publishes(const struct tt_op *op)
{
    return op->coll != TT_COLL_BROADCAST || op->rank == op->root;
}

/* Whose slots this rank reads. */
static bool reads_from(const struct tt_op *op, int peer)
{
    switch (op->coll) {
    case TT_COLL_BROADCAST: return op->rank != op->root && peer == op->root;
    case TT_COLL_REDUCE: return op->rank == op->root;
    default: return true;
    }
}

/* Reduces element block [first, first+count) of every rank's slot into dst, in rank order. */
static void reduce_slots(const struct tt_op *op, void *dst, size_t first, size_t count)
{
    int n = op->nranks;
    const void *d0 = at(tt_team_peer_slot(op->env->team, 0, st(op)->slot), first, op->elt_bytes);
    const void *d1 = at(tt_team_peer_slot(op->env->team, 1, st(op)->slot), first, op->elt_bytes);
    tt_reduce_combine(&op->redop, dst, d0, d1, count, n == 2 ? TT_REDUCE_POST : 0);
    for (int p = 2; p < n; p++)
        tt_reduce_combine(&op->redop, dst, dst,
                          at(tt_team_peer_slot(op->env->team, p, st(op)->slot), first,
                             op->elt_bytes),
                          count, p == n - 1 ? TT_REDUCE_POST : 0);
}

/* The local work once every needed slot is published. */
static void finish(struct tt_op *op)
{
    size_t count = op->count, elt = op->elt_bytes;
    const void *mine = tt_team_peer_slot(op->env->team, op->rank, st(op)->slot);
    switch (op->coll) {
    case TT_COLL_ALLREDUCE:
        reduce_slots(op, op->recvbuff, 0, count);
        break;
    case TT_COLL_REDUCE:
        if (op->rank == op->root) reduce_slots(op, op->recvbuff, 0, count);
        break;
    case TT_COLL_REDUCESCATTER:
        reduce_slots(op, op->recvbuff, (size_t)op->rank * count, count);
        break;
    case TT_COLL_BROADCAST:
        if (op->rank != op->root)
            memcpy(op->recvbuff, tt_team_peer_slot(op->env->team, op->root, st(op)->slot),
                   count * elt);
        else if (op->recvbuff != op->sendbuff)
            memcpy(op->recvbuff, mine, count * elt);
        break;
    case TT_COLL_ALLGATHER:
        for (int p = 0; p < op->nranks; p++) {
            void *dst = (char *)op->recvbuff + (size_t)p * count * elt;
            const void *src = tt_team_peer_slot(op->env->team, p, st(op)->slot);
            if (dst != op->sendbuff || p != op->rank) memcpy(dst, src, count * elt);
        }
        break;
    case TT_COLL_ALLTOALL:
        /* Block r of every rank's slot is block p of the output: the slots hold the inputs, so
         * an in-place AlltoAll may overwrite its buffer freely. */
        for (int p = 0; p < op->nranks; p++)
            memcpy((char *)op->recvbuff + (size_t)p * count * elt,
                   at(tt_team_peer_slot(op->env->team, p, st(op)->slot),
                      (size_t)op->rank * count, elt),
                   count * elt);
        break;
    default:
        break;
    }
}

static ncclResult_t oneshot_step(struct tt_op *op, bool *done, bool *progressed,
                                 struct tt_wait_hint *hint)
{
    if (op->count == 0) {
        *done = true;
        return ncclSuccess;
    }
    bool flagged = all_read(op);
    if (st(op)->phase == RESERVE) {
        /* The op's slot (and events, or sequence number when flagged), reserved when it
         * starts: in lane order on every rank. */
        if (flagged)
            tt_team_op_begin_flagged(op->env->team, &st(op)->event_base, &st(op)->slot);
        else
            tt_team_op_begin(op->env->team, 2, &st(op)->event_base, &st(op)->slot);
        st(op)->phase = PUBLISH;
    }
    if (st(op)->phase == PUBLISH) {
        if (!tt_team_slot_free(op->env->team, st(op)->slot, hint)) {
            op->waiting = TT_OP_WAIT_CREDIT;
            return ncclSuccess;
        }
        *tt_team_slot_desc(tt_team_my_slot(op->env->team, st(op)->slot)) = op->desc;
        if (publishes(op)) {
            /* Contributions carry the pre-operation (avg's 1/n) once, applied by their owner. */
            unsigned flags = op->coll == TT_COLL_ALLGATHER || op->coll == TT_COLL_BROADCAST ||
                                     op->coll == TT_COLL_ALLTOALL
                                 ? 0 : TT_REDUCE_PRE;
            tt_reduce_copy(&op->redop, tt_team_my_slot(op->env->team, st(op)->slot), op->sendbuff,
                           payload_count(op), flags);
        }
        if (flagged)
            tt_team_publish(op->env->team, st(op)->slot, st(op)->event_base);
        else
            tt_team_post(op->env->team, st(op)->event_base + 1);
        st(op)->phase = GATHER;
        tt_algo_trace_step(op, "publish", -1, -1,
                           publishes(op) ? payload_count(op) * op->elt_bytes : 0);
        *progressed = true;
    }
    if (st(op)->phase == GATHER) {
        for (int p = 0; p < op->nranks; p++) {
            if (p == op->rank || !reads_from(op, p)) continue;
            struct tt_team *team = op->env->team;
            if (flagged ? !tt_team_published(team, p, st(op)->slot, st(op)->event_base, hint)
                        : !tt_team_reached(op->env->team, p, st(op)->event_base + 1, hint)) {
                op->waiting = TT_OP_WAIT_DATA;
                op->waiting_peer = p;
                return ncclSuccess;
            }
        }
        /* Every slot this rank reads was filled for the same operation, or the ranks
         * disagree (count, datatype, operator, root, collective or order of calls). */
        for (int p = 0; p < op->nranks; p++) {
            if (p == op->rank || !reads_from(op, p)) continue;
            struct tt_op_desc got; /* the peer's memory: copied once, then compared */
            memcpy(&got, tt_team_peer_slot_desc(tt_team_peer_slot(op->env->team, p, st(op)->slot)),
                   sizeof got);
            TT_TRY(tt_algo_check_desc(op, &got, p));
        }
        finish(op);
        if (flagged) {
            tt_team_op_seen_all(op->env->team, st(op)->event_base);
        } else {
            tt_team_post(op->env->team, st(op)->event_base + 2);
            tt_team_op_end(op->env->team, st(op)->slot, st(op)->event_base + 2);
        }
        st(op)->phase = FINISH;
        tt_algo_trace_step(op, "gather", -1, -1, op->count * op->elt_bytes);
        *progressed = true;
    }
    *done = true;
    return ncclSuccess;
}

/* ---- The cost model ------------------------------------------------------------------------ */

/* OneShot exists within one host only (docs/tuning.md, "The constants"). */
static const struct tt_cost oneshot_cost = {.alpha_us = 0.4, .gbytes_per_s = 16.0};

/* One step. A rank copies its payload into its mailbox slot (ReduceScatter publishes its whole
 * input, n blocks), then reads what it needs from the slots: all n of them for AllReduce,
 * AllGather, ReduceScatter (its own block of each) and Reduce (at the root, the critical path),
 * the root's alone for Broadcast. Broadcast and Reduce's root may refill its slot only after
 * every reader's "done" event, so it cannot run ahead as down a pipelined chain: a hand-off per
 * reader, both ways. With 2 ranks Broadcast is charged a half more than the ring, which beat it
 * at every size measured there; with more ranks the ring's rows overstate a chain of small
 * copies, so OneShot keeps its own estimate (docs/tuning.md). */
static double oneshot_estimate_us(const struct tt_tune_input *in)
{
    if (in->nhosts > 1) return INFINITY;
    if (in->coll == TT_COLL_BROADCAST && in->nranks == 2)
        return 1.5 * tt_ring_estimate_us(in, TT_LINK_SHM);
    const struct tt_cost *c = &oneshot_cost;
    double n = in->nranks, bytes = (double)in->bytes;
    double moved;
    double alpha = c->alpha_us;
    switch (in->coll) {
    case TT_COLL_BROADCAST:
    case TT_COLL_REDUCE:
        alpha *= 2 * (n - 1);
        moved = in->coll == TT_COLL_BROADCAST ? 2 * bytes : bytes + n * bytes;
        break;
    case TT_COLL_REDUCESCATTER:
        moved = n * bytes + n * bytes;
        break;
    default:
        moved = bytes + n * bytes;
        break;
    }
    return alpha + tt_transfer_us(moved, c->gbytes_per_s);
}

/* ---- The algorithm ------------------------------------------------------------------------- */

static bool oneshot_implements(enum tt_coll coll)
{
    return coll <= TT_COLL_REDUCESCATTER;
}

static bool oneshot_can_run(const struct tt_tune_input *in)
{
    return in->oneshot_ok && in->bytes <= in->oneshot_max_bytes;
}

static void oneshot_bind(struct tt_op *op, const struct tt_algo_env *env)
{
}

const struct tt_algo tt_algo_oneshot = {
    .name = "OneShot",
    .proto = TT_PROTO_LL,
    .implements = oneshot_implements,
    .can_run = oneshot_can_run,
    .estimate_us = oneshot_estimate_us,
    .bind = oneshot_bind,
    .step = oneshot_step,
};
