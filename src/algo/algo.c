/* The algorithm table and binding: which algorithm an op runs and what it runs on. The table is
 * generated from TT_ALGO_TABLE (algo/tune.h), so the enum, the NCCL_ALGO names and this array
 * cannot disagree. Sends, receives and local copies are not selected: they are one primitive
 * over one connection, run by the primitive executor. */
#include <string.h>

#include "algo/algo.h"
#include "algo/coll.h"
#include "reduce/reduce.h"
#include "transport/wire.h"
#include "util/err.h"
#include "util/trace.h"

const struct tt_algo *const tt_algo_table[TT_ALGO_COUNT] = {
#define TT_ALGO_ENTRY_(id, name, text) [TT_ALGO_##id] = &tt_algo_##name,
    TT_ALGO_TABLE(TT_ALGO_ENTRY_)
#undef TT_ALGO_ENTRY_
};

void tt_algo_bind(struct tt_op *op, enum tt_algo_id id, const struct tt_algo_env *env)
{
    op->algo = tt_algo_table[id];
    op->env = env;
    op->algo->bind(op, env);
}

void tt_algo_net_slicing(struct tt_op *op, size_t step_bytes)
{
    size_t slot = op->slice_count * op->elt_bytes;
    /* Rounded up: a step is never cut into more than TT_CONN_SLOTS/2 slices (Tree sends a
     * whole message at once, and counts on it fitting half a FIFO). */
    size_t want = (step_bytes + TT_CONN_SLOTS / 2 - 1) / (TT_CONN_SLOTS / 2);
    size_t slice = TT_NET_SLICE_MIN;
    while (slice < want && slice < slot) slice *= 2;
    if (slice > slot) slice = slot;
    size_t count = slice / op->elt_bytes;
    if (count == 0) count = 1;
    op->slice_count = count;
    op->chunk_count = count * (TT_CONN_SLOTS / 2);
}

/* Point-to-point: one primitive over the whole buffer; the executor slices it. */
static bool send_next(struct tt_op *op, struct tt_prim *prim)
{
    if (op->loop_off != 0 || op->count == 0) return false;
    op->loop_off = op->count;
    *prim = (struct tt_prim){.kind = TT_PRIM_SEND, .src = op->sendbuff, .count = op->count};
    return true;
}

static bool recv_next(struct tt_op *op, struct tt_prim *prim)
{
    if (op->loop_off != 0 || op->count == 0) return false;
    op->loop_off = op->count;
    *prim = (struct tt_prim){.kind = TT_PRIM_RECV, .dst = op->recvbuff, .count = op->count};
    return true;
}

static bool copy_next(struct tt_op *op, struct tt_prim *prim)
{
    if (op->loop_off != 0 || op->count == 0) return false;
    op->loop_off = op->count;
    *prim = (struct tt_prim){.kind = TT_PRIM_COPY, .src = op->sendbuff, .dst = op->recvbuff,
                             .count = op->count};
    return true;
}

/* What runs sends, receives and copies: the executor over the connection bound. */
static const struct tt_algo p2p = {
    .name = "P2P",
    .proto = TT_PROTO_SIMPLE,
    .step = tt_prims_step,
};

void tt_algo_bind_p2p(struct tt_op *op, struct tt_conn *conn)
{
    op->algo = &p2p;
    op->env = NULL;
    switch (op->coll) {
    case TT_COLL_SEND:
        op->send = conn;
        op->next = send_next;
        break;
    case TT_COLL_RECV:
        op->recv = conn;
        op->next = recv_next;
        break;
    default:
        op->next = copy_next;
        break;
    }
}

void tt_algo_op_start(struct tt_op *op)
{
    op->loop_off = 0;
    op->step = 0;
    op->have_prim = false;
    op->prim_done = 0;
    op->slices_sent = 0;
    op->finished = false;
    op->waiting = TT_OP_WAIT_NONE;
    op->waiting_peer = -1;
    /* Only the head: an algorithm keeps its phase there and sets the rest in its first phase,
     * so the smallest operations do not pay for clearing all of it. */
    memset(op->state, 0, TT_ALGO_STATE_HEAD_BYTES);
}

/* The first field in which `got` differs from `want` (p2p: only ticket, count, datatype). */
static ncclResult_t desc_mismatch(const struct tt_op *op, const struct tt_op_desc *got, int peer)
{
    const struct tt_op_desc *want = &op->desc;
    const char *what = tt_coll_name((enum tt_coll)want->coll);
    if (got->ticket != want->ticket)
        return TT_ERROR(ncclInvalidUsage,
                        "%s: rank %d is at its operation %llu on this connection where this rank "
                        "is at %llu: the ranks issued their operations in different orders or "
                        "numbers", what, peer, (unsigned long long)got->ticket,
                        (unsigned long long)want->ticket);
    bool recv = want->coll == TT_COLL_RECV;
    if (!recv && got->coll != want->coll)
        return TT_ERROR(ncclInvalidUsage, "%s: rank %d issued %s where this rank issued %s",
                        what, peer, tt_coll_name((enum tt_coll)got->coll), what);
    if (recv && got->coll != TT_COLL_SEND)
        return TT_ERROR(ncclInvalidUsage, "Recv: rank %d issued %s where this rank's ncclRecv "
                        "waits for an ncclSend", peer, tt_coll_name((enum tt_coll)got->coll));
    if (got->count != want->count)
        return TT_ERROR(ncclInvalidUsage, "%s: count mismatch: rank %d passed %llu, this rank "
                        "%llu", what, peer, (unsigned long long)got->count,
                        (unsigned long long)want->count);
    if (got->dtype != want->dtype)
        return TT_ERROR(ncclInvalidUsage, "%s: datatype mismatch: rank %d passed %s, this rank "
                        "%s", what, peer, tt_dtype_name((ncclDataType_t)got->dtype),
                        tt_dtype_name((ncclDataType_t)want->dtype));
    if (!recv && got->op != want->op)
        return TT_ERROR(ncclInvalidUsage, "%s: reduction operator mismatch: rank %d passed op "
                        "%d, this rank op %d", what, peer, (int)got->op, (int)want->op);
    if (!recv && got->root != want->root)
        return TT_ERROR(ncclInvalidUsage, "%s: root mismatch: rank %d passed root %d, this rank "
                        "root %d", what, peer, (int)got->root, (int)want->root);
    return ncclSuccess;
}

ncclResult_t tt_algo_desc_mismatch(const struct tt_op *op, const struct tt_op_desc *got,
                                   int peer)
{
    /* A receive matches a send of another collective code: only the fields it compares. */
    return desc_mismatch(op, got, peer);
}

/* ---- The rooted collectives' agreement, and the stalled op's look at unread frames ---- */

#define AGREE_BYTES (TT_WIRE_DESC_BYTES + 4)

struct agree_state {
    int step;              /* steps done, of nranks - 1 */
    int sent;              /* parts of this step's message committed */
    int got;               /* parts of this step's incoming message read */
    int32_t origin;        /* whose descriptor goes out next */
    struct tt_op_desc fwd; /* ... and the descriptor */
    uint8_t out[AGREE_BYTES];
    uint8_t in[AGREE_BYTES];
};

void tt_algo_agree_start(struct tt_op *op)
{
    struct agree_state *a = TT_ALGO_STATE(op, struct agree_state);
    *a = (struct agree_state){.origin = op->rank, .fwd = op->desc};
}

/* A message of AGREE_BYTES goes in as many frames as a connection's slots need (a chunk size
 * can make them smaller than the message): part k holds bytes [k * slot, ...). */
static size_t agree_part(const struct tt_conn *c)
{
    return c->slot_bytes < AGREE_BYTES ? c->slot_bytes : AGREE_BYTES;
}

ncclResult_t tt_algo_agree_step(struct tt_op *op, bool *done, bool *progressed,
                                struct tt_wait_hint *hint)
{
    struct agree_state *a = TT_ALGO_STATE(op, struct agree_state);
    struct tt_conn *send = op->env->ring_send, *recv = op->env->ring_recv;
    const size_t out_part = agree_part(send), in_part = agree_part(recv);
    const int out_parts = (int)((AGREE_BYTES + out_part - 1) / out_part);
    const int in_parts = (int)((AGREE_BYTES + in_part - 1) / in_part);
    *done = false;
    op->waiting = TT_OP_WAIT_NONE;
    while (a->step < op->nranks - 1) {
        if (a->sent == 0) {
            tt_wire_put_desc(a->out, &a->fwd);
            tt_wire_put_u32(a->out + TT_WIRE_DESC_BYTES, (uint32_t)a->origin);
        }
        while (a->sent < out_parts) {
            void *out = NULL;
            TT_TRY(send->transport->send_acquire(send, &out, hint));
            if (out == NULL) {
                op->waiting = TT_OP_WAIT_CREDIT;
                op->waiting_peer = send->peer;
                return ncclSuccess;
            }
            size_t off = (size_t)a->sent * out_part;
            size_t len = AGREE_BYTES - off < out_part ? AGREE_BYTES - off : out_part;
            memcpy(out, a->out + off, len);
            TT_TRY(send->transport->send_commit(send, len, &op->desc));
            a->sent++;
            *progressed = true;
        }
        while (a->got < in_parts) {
            const void *in = NULL;
            size_t bytes = 0;
            struct tt_op_desc got;
            TT_TRY(recv->transport->recv_peek(recv, &in, &bytes, &got, hint));
            if (in == NULL) {
                op->waiting = TT_OP_WAIT_DATA;
                op->waiting_peer = recv->peer;
                return ncclSuccess;
            }
            TT_TRY(tt_algo_check_desc(op, &got, recv->peer));
            size_t off = (size_t)a->got * in_part;
            size_t len = AGREE_BYTES - off < in_part ? AGREE_BYTES - off : in_part;
            if (bytes != len)
                return TT_ERROR(ncclInvalidUsage,
                                "%s: rank %d sent a slice of %zu bytes where this rank, done "
                                "with its part, expected the ranks' descriptors: the ranks "
                                "disagree on the operation",
                                tt_coll_name((enum tt_coll)op->coll), recv->peer, bytes);
            memcpy(a->in + off, in, len);
            TT_TRY(recv->transport->recv_release(recv));
            a->got++;
            *progressed = true;
        }
        tt_wire_get_desc(a->in, &a->fwd);
        a->origin = (int32_t)tt_wire_get_u32(a->in + TT_WIRE_DESC_BYTES);
        if (a->origin < 0 || a->origin >= op->nranks) a->origin = recv->peer;
        TT_TRY(tt_algo_check_desc(op, &a->fwd, a->origin));
        a->sent = 0;
        a->got = 0;
        a->step++;
    }
    if (!send->transport->send_idle(send)) {
        if (send->transport->progress) TT_TRY(send->transport->progress(send));
        if (!send->transport->send_idle(send)) {
            op->waiting = TT_OP_WAIT_FLUSH;
            op->waiting_peer = send->peer;
            return ncclSuccess;
        }
    }
    *done = true;
    return ncclSuccess;
}

static ncclResult_t peek_one(struct tt_op *op, struct tt_conn *c)
{
    const void *in = NULL;
    size_t bytes = 0;
    struct tt_op_desc got;
    struct tt_wait_hint hint;
    tt_wait_hint_clear(&hint);
    ncclResult_t res = c->transport->recv_peek(c, &in, &bytes, &got, &hint);
    /* A peer that closed the connection may simply be done: this operation need not use the
     * connection at all (a Hier or Tree schedule at a small count), and one it waits on
     * reports the closing itself. Only a peer's error frame (its own code) is news here. */
    if (res == ncclRemoteError) return ncclSuccess;
    TT_TRY(res);
    if (in == NULL || got.ticket != op->desc.ticket) return ncclSuccess;
    return tt_algo_check_desc(op, &got, c->peer);
}

ncclResult_t tt_algo_peek_mismatch(struct tt_op *op)
{
    const struct tt_algo_env *env = op->env;
    if (env == NULL) return ncclSuccess;
    if (env->ring_recv != NULL && env->ring_recv->transport != NULL)
        TT_TRY(peek_one(op, env->ring_recv));
    for (int r = 0; env->tree != NULL && r < op->nranks; r++) {
        struct tt_tree_link *l = &env->tree[r];
        if (l->recv_ready && l->recv.transport != NULL) TT_TRY(peek_one(op, &l->recv));
    }
    return ncclSuccess;
}

static ncclResult_t peer_error_of(struct tt_conn *send)
{
    if (send == NULL || send->transport == NULL || send->transport->peer_error == NULL)
        return ncclSuccess;
    return send->transport->peer_error(send);
}

ncclResult_t tt_algo_peer_errors(struct tt_op *op)
{
    if (op->coll == TT_COLL_SEND) return peer_error_of(op->send);
    const struct tt_algo_env *env = op->env;
    if (op->coll > TT_COLL_SEND || env == NULL) return ncclSuccess;
    TT_TRY(peer_error_of(env->ring_send));
    for (int r = 0; env->tree != NULL && r < op->nranks; r++)
        if (env->tree[r].send_ready) TT_TRY(peer_error_of(&env->tree[r].send));
    return ncclSuccess;
}

void tt_algo_trace_record(struct tt_op *op, const char *name, int send_to, int recv_from,
                          size_t bytes)
{
    uint64_t now = tt_trace_now(op->trace);
    struct tt_trace_event *e = tt_trace_claim(op->trace);
    /* Field by field: the slot was zeroed at create, and clearing it again costs more than
     * the rest of the record. */
    if (e != NULL) {
        e->start = op->trace_mark;
        e->end = now;
        e->name = name;
        e->seq = op->trace_seq;
        e->bytes = bytes;
        e->lane = op->trace_lane;
        e->send_to = send_to;
        e->recv_from = recv_from;
        e->root = -1;
        e->step = op->trace_steps;
        e->kind = TT_TRACE_STEP;
    }
    op->trace_steps++;
    op->trace_mark = now;
}
