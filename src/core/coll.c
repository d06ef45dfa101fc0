/* Running a collective: resolve the reduction, build the op on the stack, start the ring
 * schedule and drive it to completion on the calling thread (stream NULL: complete on return).
 * The driving loop is the engine's blocking mode: progress, and when nothing moves, back off
 * (spin, yield, sleep) while checking the deadline (TUTTI_TIMEOUT_MS) and the abort flag. A
 * failure is latched on the communicator as its asynchronous error. */
#include <string.h>

#include "algo/algo.h"
#include "core/comm.h"
#include "core/core.h"
#include "util/err.h"
#include "util/log.h"
#include "util/time.h"

static const char *wait_text(enum tt_op_wait waiting)
{
    switch (waiting) {
    case TT_OP_WAIT_DATA: return "data from";
    case TT_OP_WAIT_CREDIT: return "free buffer space at";
    case TT_OP_WAIT_FLUSH: return "the socket to accept data for";
    default: return "progress with";
    }
}

static ncclResult_t latch(struct ncclComm *comm, ncclResult_t res)
{
    if (comm->async_error == ncclSuccess) comm->async_error = res;
    return res;
}

/* Drives `op` until done, the deadline, or an abort. */
static ncclResult_t run_blocking(struct ncclComm *comm, struct tt_op *op, uint64_t seq)
{
    uint64_t deadline = tt_deadline_after_ms(comm->timeout_ms);
    struct tt_backoff backoff;
    struct tt_wait_hint hint;
    tt_backoff_init_spin(&backoff, comm->spin_limit);
    for (;;) {
        bool done, progressed;
        ncclResult_t res = tt_algo_op_progress(op, &done, &progressed, &hint);
        if (res != ncclSuccess)
            return latch(comm, TT_ERROR(res, "%s #%llu (%zu elements of %s) failed on rank %d",
                                        tt_coll_name(op->coll), (unsigned long long)seq,
                                        op->count, tt_dtype_name(op->redop.dtype), comm->rank));
        if (done) return ncclSuccess;
        if (progressed) {
            tt_backoff_reset(&backoff);
            continue;
        }
        if (atomic_load_explicit(&comm->abort, memory_order_relaxed))
            return latch(comm, TT_ERROR(ncclInvalidUsage, "%s #%llu: communicator aborted",
                                        tt_coll_name(op->coll), (unsigned long long)seq));
        if (tt_deadline_passed(deadline))
            return latch(comm, TT_ERROR(ncclSystemError,
                                        "%s #%llu (%zu elements of %s) timed out after %lld ms "
                                        "on rank %d waiting for %s rank %d (TUTTI_TIMEOUT_MS)",
                                        tt_coll_name(op->coll), (unsigned long long)seq,
                                        op->count, tt_dtype_name(op->redop.dtype),
                                        (long long)comm->timeout_ms, comm->rank,
                                        wait_text(op->waiting), op->waiting_peer));
        tt_backoff_pause(&backoff, &hint);
    }
}

ncclResult_t tt_coll_run(ncclComm_t comm, const struct tt_coll_args *args)
{
    if (comm->async_error != ncclSuccess)
        return TT_ERROR(comm->async_error,
                        "%s: the communicator has failed before (error %d); destroy or abort it",
                        tt_coll_name(args->coll), (int)comm->async_error);
    struct tt_op op;
    memset(&op, 0, sizeof op);
    op.coll = args->coll;
    op.sendbuff = args->sendbuff;
    op.recvbuff = args->recvbuff;
    op.count = args->count;
    op.root = args->root;
    op.rank = comm->rank;
    op.nranks = comm->nranks;
    op.elt_bytes = tt_dtype_bytes(args->dtype);
    /* Ops without a reduction still carry the dtype (copies use it for element sizes). */
    ncclRedOp_t red = (args->coll == TT_COLL_ALLREDUCE || args->coll == TT_COLL_REDUCE ||
                       args->coll == TT_COLL_REDUCESCATTER) ? args->op : ncclSum;
    TT_TRY(tt_redop_init(&op.redop, red, args->dtype, comm->nranks));
    if (comm->nranks > 1) {
        op.send = &comm->ring.send;
        op.recv = &comm->ring.recv;
    }
    op.slice_count = comm->slot_bytes / op.elt_bytes;
    op.chunk_count = op.slice_count * (TT_CONN_SLOTS / 2);
    uint64_t seq = ++comm->op_seq;
    TT_INFO(TT_SUB_COLL, "%s #%llu: count %zu %s root %d sendbuff %p recvbuff %p algo Ring",
            tt_coll_name(op.coll), (unsigned long long)seq, op.count,
            tt_dtype_name(args->dtype), op.root, op.sendbuff, op.recvbuff);
    tt_algo_op_start(&op);
    return run_blocking(comm, &op, seq);
}
