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

ncclResult_t tt_dispatch_streams(struct tt_batch *b)
{
    /* Every part made before any ticket is taken: a failure after would leave the peers
     * waiting for operations this rank took tickets for. */
    int nparts = 0;
    cudaStream_t *streams = calloc((size_t)b->count, sizeof *streams);
    struct tt_batch **parts = calloc((size_t)b->count, sizeof *parts);
    ncclResult_t res = streams && parts ? ncclSuccess
                                        : TT_ERROR(ncclSystemError, "out of memory ending a "
                                                                    "group");
    for (struct tt_task *t = b->head; t && res == ncclSuccess; t = t->next) {
        int k = 0;
        while (k < nparts && streams[k] != t->stream) k++;
        if (k < nparts) continue;
        streams[nparts] = t->stream;
        parts[nparts] = malloc(sizeof **parts);
        if (parts[nparts] == NULL) res = TT_ERROR(ncclSystemError, "out of memory ending a group");
        else tt_engine_batch_init(parts[nparts++]);
    }
    if (res == ncclSuccess) res = tt_connect_batch(b);
    if (res != ncclSuccess) {
        for (int k = 0; k < nparts; k++) free(parts[k]);
        free(streams);
        free(parts);
        batch_free(b);
        return res;
    }
    tt_engine_submit(b);
    for (struct tt_task *t = b->head, *next; t; t = next) {
        next = t->next;
        int k = 0;
        while (streams[k] != t->stream) k++;
        tt_engine_batch_add(parts[k], t);
    }
    b->head = b->tail = NULL; /* its tasks belong to the parts now */
    batch_free(b);
    for (int k = 0; k < nparts; k++) tt_stream_enqueue(streams[k], parts[k]);
    free(streams);
    free(parts);
    return ncclSuccess;
}

ncclResult_t tt_dispatch_p2p_task(struct tt_task *t)
{
    struct tt_batch b;
    tt_engine_batch_init(&b);
    tt_engine_batch_add(&b, t);
    TT_TRY(tt_connect_batch(&b));
    return tt_engine_run_task(t);
}
