/* Ring schedules for AllReduce, ReduceScatter, AllGather, Broadcast and Reduce. Each `next`
 * function walks its collective's loops (pieces of the buffer that fit the pipeline) and steps,
 * using the pure arithmetic of ring.h, and yields one primitive per call. */
#include "algo/ring.h"

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

const char *tt_coll_name(enum tt_coll coll)
{
    static const char *names[TT_COLL_SCATTER + 1] = {
        [TT_COLL_ALLREDUCE] = "AllReduce",   [TT_COLL_BROADCAST] = "Broadcast",
        [TT_COLL_REDUCE] = "Reduce",         [TT_COLL_ALLGATHER] = "AllGather",
        [TT_COLL_REDUCESCATTER] = "ReduceScatter", [TT_COLL_SEND] = "Send",
        [TT_COLL_RECV] = "Recv",           [TT_COLL_COPY] = "Copy",
        [TT_COLL_ALLTOALL] = "AlltoAll",   [TT_COLL_GATHER] = "Gather",
        [TT_COLL_SCATTER] = "Scatter",
    };
    return (unsigned)coll <= TT_COLL_SCATTER ? names[coll] : "Unknown";
}

/* Point-to-point: one primitive over the whole buffer; the executor slices it. */
bool tt_p2p_send_next(struct tt_op *op, struct tt_prim *prim)
{
    if (op->loop_off != 0 || op->count == 0) return false;
    op->loop_off = op->count;
    *prim = (struct tt_prim){.kind = TT_PRIM_SEND, .src = op->sendbuff, .count = op->count};
    return true;
}

bool tt_p2p_recv_next(struct tt_op *op, struct tt_prim *prim)
{
    if (op->loop_off != 0 || op->count == 0) return false;
    op->loop_off = op->count;
    *prim = (struct tt_prim){.kind = TT_PRIM_RECV, .dst = op->recvbuff, .count = op->count};
    return true;
}

bool tt_local_copy_next(struct tt_op *op, struct tt_prim *prim)
{
    if (op->loop_off != 0 || op->count == 0) return false;
    op->loop_off = op->count;
    *prim = (struct tt_prim){.kind = TT_PRIM_COPY, .src = op->sendbuff, .dst = op->recvbuff,
                             .count = op->count};
    return true;
}

void tt_algo_op_start(struct tt_op *op)
{
    static const tt_algo_next_fn ring[TT_COLL_COUNT_] = {
        [TT_COLL_ALLREDUCE] = tt_ring_allreduce_next,
        [TT_COLL_BROADCAST] = tt_ring_broadcast_next,
        [TT_COLL_REDUCE] = tt_ring_reduce_next,
        [TT_COLL_ALLGATHER] = tt_ring_allgather_next,
        [TT_COLL_REDUCESCATTER] = tt_ring_reducescatter_next,
        [TT_COLL_SEND] = tt_p2p_send_next,
        [TT_COLL_RECV] = tt_p2p_recv_next,
        [TT_COLL_COPY] = tt_local_copy_next,
    };
    op->next = op->step_fn != NULL ? NULL : op->links != NULL ? tt_tree_next : ring[op->coll];
    op->state = 0;
    op->loop_off = 0;
    op->step = 0;
    op->have_prim = false;
    op->prim_done = 0;
    op->finished = false;
    op->waiting = TT_OP_WAIT_NONE;
    op->waiting_peer = -1;
}
