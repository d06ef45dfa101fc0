/* OneShot: the latency-optimal algorithm for small messages on one host (NCCL's LL idea: the
 * data and its flag travel together). Each rank copies its contribution (with the op's
 * pre-operation applied) into its mailbox slot and posts an event; every rank then reads the
 * slots it needs straight from its peers' mailboxes and finishes locally. One hand-off instead
 * of 2(n-1) ring steps.
 *
 * Every rank reduces the contributions in rank order, so all ranks compute bit-identical
 * results. AllReduce, AllGather, ReduceScatter and AlltoAll (which publishes its whole input and
 * reads its block of every slot), where every rank reads every slot, publish
 * through the slot's flag word (tt_host_publish): the flag shares the first cache line with the
 * payload, and seeing every peer's flag is all the synchronization an operation needs. Broadcast
 * and Reduce, where some ranks read nothing, use two events instead: "my slot is published" and
 * "I am done reading", the second being what lets a peer refill the slot two operations
 * later. */
#include <string.h>

#include "algo/algo.h"
#include "algo/coll.h"

enum { RESERVE, PUBLISH, GATHER, FINISH };

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

size_t tt_oneshot_payload_bytes(const struct tt_op *op) { return payload_count(op) * op->elt_bytes; }

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
    const void *d0 = at(tt_host_peer_slot(op->host, 0, op->slot), first, op->elt_bytes);
    const void *d1 = at(tt_host_peer_slot(op->host, 1, op->slot), first, op->elt_bytes);
    tt_reduce_combine(&op->redop, dst, d0, d1, count, n == 2 ? TT_REDUCE_POST : 0);
    for (int p = 2; p < n; p++)
        tt_reduce_combine(&op->redop, dst, dst,
                          at(tt_host_peer_slot(op->host, p, op->slot), first, op->elt_bytes),
                          count, p == n - 1 ? TT_REDUCE_POST : 0);
}

/* The local work once every needed slot is published. */
static void finish(struct tt_op *op)
{
    size_t count = op->count, elt = op->elt_bytes;
    const void *mine = tt_host_peer_slot(op->host, op->rank, op->slot);
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
            memcpy(op->recvbuff, tt_host_peer_slot(op->host, op->root, op->slot), count * elt);
        else if (op->recvbuff != op->sendbuff)
            memcpy(op->recvbuff, mine, count * elt);
        break;
    case TT_COLL_ALLGATHER:
        for (int p = 0; p < op->nranks; p++) {
            void *dst = (char *)op->recvbuff + (size_t)p * count * elt;
            const void *src = tt_host_peer_slot(op->host, p, op->slot);
            if (dst != op->sendbuff || p != op->rank) memcpy(dst, src, count * elt);
        }
        break;
    case TT_COLL_ALLTOALL:
        /* Block r of every rank's slot is block p of the output: the slots hold the inputs, so
         * an in-place AlltoAll may overwrite its buffer freely. */
        for (int p = 0; p < op->nranks; p++)
            memcpy((char *)op->recvbuff + (size_t)p * count * elt,
                   at(tt_host_peer_slot(op->host, p, op->slot), (size_t)op->rank * count, elt),
                   count * elt);
        break;
    default:
        break;
    }
}

ncclResult_t tt_oneshot_step(struct tt_op *op, bool *done, bool *progressed,
                             struct tt_wait_hint *hint)
{
    if (op->count == 0) {
        *done = true;
        return ncclSuccess;
    }
    bool flagged = all_read(op);
    if (op->state == RESERVE) {
        /* The op's slot (and events, or sequence number when flagged), reserved when it
         * starts: in lane order on every rank. */
        if (flagged)
            tt_host_op_begin_flagged(op->host, &op->event_base, &op->slot);
        else
            tt_host_op_begin(op->host, 2, &op->event_base, &op->slot);
        op->state = PUBLISH;
    }
    if (op->state == PUBLISH) {
        if (!tt_host_slot_free(op->host, op->slot, hint)) {
            op->waiting = TT_OP_WAIT_CREDIT;
            return ncclSuccess;
        }
        if (publishes(op)) {
            /* Contributions carry the pre-operation (avg's 1/n) once, applied by their owner. */
            unsigned flags = op->coll == TT_COLL_ALLGATHER || op->coll == TT_COLL_BROADCAST ||
                                     op->coll == TT_COLL_ALLTOALL
                                 ? 0 : TT_REDUCE_PRE;
            tt_reduce_copy(&op->redop, tt_host_my_slot(op->host, op->slot), op->sendbuff,
                           payload_count(op), flags);
        }
        if (flagged)
            tt_host_publish(op->host, op->slot, op->event_base);
        else
            tt_host_post(op->host, op->event_base + 1);
        op->state = GATHER;
        *progressed = true;
    }
    if (op->state == GATHER) {
        for (int p = 0; p < op->nranks; p++) {
            if (p == op->rank || !reads_from(op, p)) continue;
            if (flagged ? !tt_host_published(op->host, p, op->slot, op->event_base, hint)
                        : !tt_host_reached(op->host, p, op->event_base + 1, hint)) {
                op->waiting = TT_OP_WAIT_DATA;
                op->waiting_peer = p;
                return ncclSuccess;
            }
        }
        finish(op);
        if (flagged) {
            tt_host_op_seen_all(op->host, op->event_base);
        } else {
            tt_host_post(op->host, op->event_base + 2);
            tt_host_op_end(op->host, op->slot, op->event_base + 2);
        }
        op->state = FINISH;
        *progressed = true;
    }
    *done = true;
    return ncclSuccess;
}
