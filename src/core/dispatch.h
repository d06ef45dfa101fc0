/* One batch dispatch (core/dispatch.c): the single place where a batch of tasks, however it was
 * issued (one blocking call, a group, an operation on a host stream or on a nonblocking
 * communicator), gets its connections, is submitted to the engine and then either runs on the
 * calling thread or is handed to a stream. */
#ifndef TT_CORE_DISPATCH_H
#define TT_CORE_DISPATCH_H

#include <stdbool.h>

#include "core/engine.h"
#include "nccl.h"

/* Takes ownership of the heap batch `b` (non-empty, in program order). A device batch
 * (b->device) is ordered on the device `stream` (NULL: the legacy default stream) and
 * ncclSuccess returned once queued. With a host `stream` the batch is queued there and
 * ncclSuccess returned; with `nonblocking` (stream NULL) it is
 * queued on its communicator's background queue and ncclInProgress returned; otherwise it runs
 * to its end here and its result is returned. */
ncclResult_t tt_dispatch(struct tt_batch *b, cudaStream_t stream, bool nonblocking);

/* The same for a group's batch whose tasks name several host streams (tt_task.stream): it is
 * submitted whole, so the tickets follow the order of issue, then split into one batch per
 * stream, each queued on its stream. Returns ncclSuccess once queued. */
ncclResult_t tt_dispatch_streams(struct tt_batch *b);

/* The same for one blocking task on the caller's stack: no allocation on this path, and for a
 * collective (whose connections init made) no call before the engine's. */
ncclResult_t tt_dispatch_p2p_task(struct tt_task *t);
static inline ncclResult_t tt_dispatch_task(struct tt_task *t)
{
    if (t->op.coll == TT_COLL_SEND || t->op.coll == TT_COLL_RECV) return tt_dispatch_p2p_task(t);
    return tt_engine_run_task(t);
}

#endif
