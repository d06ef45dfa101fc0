/* One batch dispatch (core/dispatch.h). */
#include "core/dispatch.h"

#include <stdlib.h>

#include "core/comm.h"
#include "core/connect.h"
#include "core/stream.h"
#include "util/err.h"

static void batch_free(struct tt_batch *b)
{
    tt_engine_batch_clear(b);
    free(b);
}

ncclResult_t tt_dispatch(struct tt_batch *b, cudaStream_t stream, bool nonblocking)
{
    ncclResult_t res = tt_connect_batch(b);
    if (res != ncclSuccess) {
        batch_free(b);
        return res;
    }
    /* Device buffers or a device stream: ordered on the device stream, whatever else. */
    if (b->device) return tt_stream_enqueue_device(stream, b);
    tt_engine_submit(b);
    if (stream != NULL || nonblocking) {
        b->background = stream == NULL;
        TT_TRY(tt_stream_enqueue(stream != NULL ? stream : b->head->comm->background, b));
        return stream != NULL ? ncclSuccess : ncclInProgress;
    }
    res = tt_engine_run(b);
    batch_free(b);
    return res;
}

ncclResult_t tt_dispatch_p2p_task(struct tt_task *t)
{
    struct tt_batch b;
    tt_engine_batch_init(&b);
    tt_engine_batch_add(&b, t);
    TT_TRY(tt_connect_batch(&b));
    return tt_engine_run_task(t);
}
