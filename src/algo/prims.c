/* The primitive executor: runs an op's primitives in order, each cut into slices of at most
 * one FIFO slot, through the op's send and receive connections. It is re-entrant: when a slice
 * cannot move (no incoming data, no credit) it returns, remembering the primitive and how much
 * of it is done, and the next call resumes there. A slice is all-or-nothing: it is computed only
 * once both its input slot and its output slot are in hand. */
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "algo/algo.h"
#include "algo/fault.h"
#include "device/device.h"
#include "util/err.h"

/* Step names in the timeline trace, by enum tt_prim_kind. */
static const char *const prim_names[] = {
    [TT_PRIM_COPY] = "Copy",
    [TT_PRIM_SEND] = "Send",
    [TT_PRIM_COPY_SEND] = "CopySend",
    [TT_PRIM_RECV] = "Recv",
    [TT_PRIM_RECV_COPY_SEND] = "RecvCopySend",
    [TT_PRIM_RECV_REDUCE_SEND] = "RecvReduceSend",
    [TT_PRIM_RECV_REDUCE_COPY] = "RecvReduceCopy",
    [TT_PRIM_RECV_REDUCE_COPY_SEND] = "RecvReduceCopySend",
};

static bool prim_receives(enum tt_prim_kind kind)
{
    return kind == TT_PRIM_RECV || kind == TT_PRIM_RECV_COPY_SEND ||
           kind == TT_PRIM_RECV_REDUCE_SEND || kind == TT_PRIM_RECV_REDUCE_COPY ||
           kind == TT_PRIM_RECV_REDUCE_COPY_SEND;
}

static bool prim_sends(enum tt_prim_kind kind)
{
    return kind == TT_PRIM_SEND || kind == TT_PRIM_COPY_SEND || kind == TT_PRIM_RECV_COPY_SEND ||
           kind == TT_PRIM_RECV_REDUCE_SEND || kind == TT_PRIM_RECV_REDUCE_COPY_SEND;
}

/* The arithmetic of one slice of `count` elements. `in` is the received slot (or NULL),
 * `out` the slot to send (or NULL); src and dst are already offset to the slice. */
static void slice_compute(const struct tt_op *op, const struct tt_prim *p, const void *src,
                          void *dst, const void *in, void *out, size_t count)
{
    size_t bytes = count * op->elt_bytes;
    switch (p->kind) {
    case TT_PRIM_COPY:
        if (src != dst || p->flags != 0) tt_reduce_copy(&op->redop, dst, src, count, p->flags);
        break;
    case TT_PRIM_SEND:
        tt_reduce_copy(&op->redop, out, src, count, p->flags);
        break;
    case TT_PRIM_COPY_SEND:
        tt_device_copy(op->mem, out, src, bytes);
        if (dst != src) tt_device_copy(op->mem, dst, src, bytes);
        break;
    case TT_PRIM_RECV:
        tt_reduce_copy(&op->redop, dst, in, count, p->flags & TT_REDUCE_POST);
        break;
    case TT_PRIM_RECV_COPY_SEND:
        tt_device_copy(op->mem, out, in, bytes);
        tt_device_copy(op->mem, dst, in, bytes);
        break;
    case TT_PRIM_RECV_REDUCE_SEND:
        tt_reduce_combine(&op->redop, out, src, in, count, p->flags);
        break;
    case TT_PRIM_RECV_REDUCE_COPY:
        if (p->flags & TT_PRIM_SWAP)
            tt_reduce_combine(&op->redop, dst, in, src, count, p->flags & TT_REDUCE_POST);
        else
            tt_reduce_combine(&op->redop, dst, src, in, count, p->flags);
        break;
    case TT_PRIM_RECV_REDUCE_COPY_SEND:
        /* One pass writes the result both to the output and to the next slot. */
        tt_reduce_combine2(&op->redop, dst, out, src, in, count, p->flags);
        break;
    }
}

/* TUTTI_FAULT (algo/fault.h): the fault due before this op sends its next slice, if any. */
static ncclResult_t inject(struct tt_op *op, struct tt_op_desc *spoiled,
                           const struct tt_op_desc **desc)
{
    switch (tt_fault_due(op, op->slices_sent)) {
    case TT_FAULT_EXIT:
        _exit(71);
    case TT_FAULT_STALL:
        raise(SIGSTOP);
        return ncclSuccess;
    case TT_FAULT_CLOSE:
        op->send->transport->close(op->send);
        op->send->transport = NULL; /* closed: teardown skips it */
        return TT_ERROR(ncclRemoteError, "TUTTI_FAULT: rank %d closed its connection to rank "
                        "%d on purpose", op->rank, op->send->peer);
    case TT_FAULT_CORRUPT:
        *spoiled = op->desc;
        spoiled->ticket ^= 0x5a5a5a5aull;
        spoiled->count ^= 0x33;
        *desc = spoiled;
        return ncclSuccess;
    default:
        return ncclSuccess;
    }
}

/* Moves as many slices of the current primitive as possible. Sets *blocked when a slice had to
 * wait, with the reason in op->waiting and `hint`. */
static ncclResult_t prim_advance(struct tt_op *op, bool *progressed, bool *blocked,
                                 struct tt_wait_hint *hint)
{
    const struct tt_prim *p = &op->prim;
    bool receives = prim_receives(p->kind), sends = prim_sends(p->kind);
    while (op->prim_done < p->count) {
        size_t count = p->count - op->prim_done;
        if (count > op->slice_count) count = op->slice_count;
        size_t bytes = count * op->elt_bytes;
        const void *in = NULL;
        void *out = NULL;
        if (receives) {
            size_t in_bytes = 0;
            struct tt_op_desc got;
            TT_TRY(op->recv->transport->recv_peek(op->recv, &in, &in_bytes, &got, hint));
            if (in == NULL) {
                op->waiting = TT_OP_WAIT_DATA;
                op->waiting_peer = op->recv->peer;
                *blocked = true;
                return ncclSuccess;
            }
            TT_TRY(tt_algo_check_desc(op, &got, op->recv->peer));
            if (in_bytes != bytes)
                return TT_ERROR(ncclRemoteError,
                                "rank %d sent a slice of %zu bytes where %zu were due: the ranks "
                                "disagree on the operation (count, datatype or order of calls)",
                                op->recv->peer, in_bytes, bytes);
        }
        if (sends) {
            TT_TRY(op->send->transport->send_acquire(op->send, &out, hint));
            if (out == NULL) {
                op->waiting = TT_OP_WAIT_CREDIT;
                op->waiting_peer = op->send->peer;
                *blocked = true;
                return ncclSuccess;
            }
        }
        size_t at = op->prim_done * op->elt_bytes;
        const char *src = p->src ? (const char *)p->src + at : NULL;
        char *dst = p->dst ? (char *)p->dst + at : NULL;
        slice_compute(op, p, src, dst, in, out, count);
        if (sends) {
            const struct tt_op_desc *desc = &op->desc;
            struct tt_op_desc spoiled;
            if (__builtin_expect(tt_fault_armed, 0)) TT_TRY(inject(op, &spoiled, &desc));
            op->slices_sent++;
            TT_TRY(op->send->transport->send_commit(op->send, bytes, desc));
        }
        if (receives) TT_TRY(op->recv->transport->recv_release(op->recv));
        op->prim_done += count;
        *progressed = true;
    }
    return ncclSuccess;
}

/* The op's outgoing connections: the ring's one, or Tree's to every peer of its plan (all
 * made at init; those it has not sent on yet are idle). Fills sends[TT_TREE_MAX_PEERS]. */
static int op_sends(const struct tt_op *op, struct tt_conn **sends)
{
    if (op->links == NULL) {
        sends[0] = op->send;
        return op->send != NULL;
    }
    int peers[TT_TREE_MAX_PEERS], n = op->algo->peers(op, peers);
    for (int i = 0; i < n; i++) sends[i] = &op->links[peers[i]].send;
    return n;
}

/* Pushes the op's outgoing connections. A socket wait on `hint` then also ends when one of
 * them, left with bytes its socket would not take, can take more: sleeping on the receive
 * alone would leave those bytes, which the peer may be waiting for, until the sleep's end. */
static ncclResult_t progress_sends(const struct tt_op *op, struct tt_wait_hint *hint)
{
    struct tt_conn *sends[TT_TREE_MAX_PEERS];
    int n = op_sends(op, sends);
    for (int i = 0; i < n; i++) {
        const struct tt_transport *t = sends[i]->transport;
        if (t->progress) TT_TRY(t->progress(sends[i]));
        if (t->send_wait_fd == NULL || hint->fd2 >= 0 || hint->word != NULL) continue;
        int fd = t->send_wait_fd(sends[i]);
        if (fd < 0) continue;
        if (hint->fd < 0) {
            hint->fd = fd;
            hint->events = POLLOUT;
        } else if (fd != hint->fd) {
            hint->fd2 = fd;
            hint->events2 = POLLOUT;
        }
    }
    return ncclSuccess;
}

/* The primitive just completed, as a step of the trace. */
__attribute__((cold, noinline)) static void trace_prim(struct tt_op *op)
{
    const struct tt_prim *p = &op->prim;
    if (p->count == 0) return; /* moved nothing: its time goes to the next step */
    tt_algo_trace_record(op, prim_names[p->kind],
                         prim_sends(p->kind) && op->send ? op->send->peer : -1,
                         prim_receives(p->kind) && op->recv ? op->recv->peer : -1,
                         p->count * op->elt_bytes);
}

ncclResult_t tt_prims_step(struct tt_op *op, bool *done, bool *progressed,
                           struct tt_wait_hint *hint)
{
    while (!op->finished) {
        if (!op->have_prim) {
            if (!op->next(op, &op->prim)) {
                op->finished = true;
                break;
            }
            op->have_prim = true;
            op->prim_done = 0;
        }
        bool blocked = false;
        TT_TRY(prim_advance(op, progressed, &blocked, hint));
        if (blocked) {
            /* Socket transports need a push in both directions while we wait on one (Tree: on
             * every connection it sent on, since a partner of an earlier step may still wait
             * for those bytes). */
            TT_TRY(progress_sends(op, hint));
            if (op->recv && op->recv->transport->progress)
                TT_TRY(op->recv->transport->progress(op->recv));
            return ncclSuccess;
        }
        if (__builtin_expect(op->trace != NULL, 0)) trace_prim(op);
        op->have_prim = false;
    }
    /* The output is complete; what we sent must also have left this process, because no other
     * thread will push it out once we return to the user. */
    struct tt_conn *sends[TT_TREE_MAX_PEERS];
    int nsends = op_sends(op, sends);
    for (int i = 0; i < nsends; i++) {
        struct tt_conn *c = sends[i];
        if (c->transport->send_idle(c)) continue;
        if (c->transport->progress) TT_TRY(c->transport->progress(c));
        if (!c->transport->send_idle(c)) {
            op->waiting = TT_OP_WAIT_FLUSH;
            op->waiting_peer = c->peer;
            if (c->transport->send_wait_fd != NULL) {
                tt_wait_hint_clear(hint);
                hint->fd = c->transport->send_wait_fd(c);
                hint->events = POLLOUT;
            }
            return ncclSuccess;
        }
    }
    *done = true;
    return ncclSuccess;
}
