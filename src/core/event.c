/* Per-operation events (core/event.h). A record is attached to the last batch queued on its
 * stream and completed by the stream when that batch ends (core/stream.c, under the stream's
 * lock); in-order streams make that "everything before it completed" as well. */
#include "core/event.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/comm.h"
#include "core/group.h"
#include "core/stream.h"
#include "util/err.h"

#define EVENT_MAGIC 0x74746576656e7431ull /* "ttevent1" */

/* The handle users hold. The magic catches a handle that was never an event or was destroyed
 * (it is cleared then), as far as reading it can. */
struct tuttiEvent_st {
    uint64_t magic;
    struct tt_event_rec rec;
};

ncclResult_t tt_event_create(struct tuttiEvent_st **out)
{
    struct tuttiEvent_st *event = NULL;
    TT_TRY(TT_CALLOC(&event, 1));
    event->magic = EVENT_MAGIC;
    atomic_init(&event->rec.state, TT_EVENT_IDLE);
    pthread_mutex_init(&event->rec.lock, NULL);
    event->rec.result = ncclSuccess;
    *out = event;
    return ncclSuccess;
}

ncclResult_t tt_event_check(const struct tuttiEvent_st *ev, const char *caller)
{
    if (ev == NULL) return TT_ERROR(ncclInvalidArgument, "%s: event is NULL", caller);
    if (ev->magic != EVENT_MAGIC)
        return TT_ERROR(ncclInvalidArgument,
                        "%s: %p is not a live event (tuttiEventCreate; destroyed already?)",
                        caller, (const void *)ev);
    return ncclSuccess;
}

/* Takes a pending record off its batch. */
static void unrecord(struct tt_event_rec *ev)
{
    if (atomic_load_explicit(&ev->state, memory_order_acquire) == TT_EVENT_PENDING)
        tt_stream_unrecord(ev->stream, ev);
}

ncclResult_t tt_event_destroy(struct tuttiEvent_st *event)
{
    unrecord(&event->rec);
    pthread_mutex_destroy(&event->rec.lock);
    event->magic = 0;
    free(event);
    return ncclSuccess;
}

ncclResult_t tt_event_record(struct tuttiEvent_st *event, struct ncclComm *comm,
                             cudaStream_t stream)
{
    if (tt_group_depth() > 0)
        return TT_ERROR(ncclInvalidUsage,
                        "tuttiEventRecord: inside a group nothing has been issued yet; record "
                        "the event after the outermost ncclGroupEnd");
    struct tt_event_rec *ev = &event->rec;
    unrecord(ev);
    if (stream == NULL && !comm->blocking)
        stream = tt_stream_comm_background_last(comm, comm->background);
    if (stream == NULL) {
        /* A blocking call has completed when it returned, with the result it returned. */
        tt_event_rec_finish(ev, ncclSuccess, NULL);
        return ncclSuccess;
    }
    tt_stream_record(stream, ev);
    return ncclSuccess;
}

ncclResult_t tt_event_query(struct tuttiEvent_st *event)
{
    struct tt_event_rec *ev = &event->rec;
    if (atomic_load_explicit(&ev->state, memory_order_acquire) == TT_EVENT_PENDING)
        return ncclInProgress;
    /* A snapshot of one record's outcome: another thread may record the event anew. An idle
     * event (never recorded, or taken off a batch to be recorded anew) has nothing to report. */
    char reason[TT_REASON_BYTES];
    pthread_mutex_lock(&ev->lock);
    int state = atomic_load_explicit(&ev->state, memory_order_acquire);
    ncclResult_t res = state == TT_EVENT_PENDING ? ncclInProgress
                       : state == TT_EVENT_DONE  ? ev->result
                                                 : ncclSuccess;
    if (res != ncclSuccess && res != ncclInProgress)
        snprintf(reason, sizeof reason, "%s", ev->reason);
    pthread_mutex_unlock(&ev->lock);
    if (res != ncclSuccess && res != ncclInProgress)
        tt_error_note("an operation before event %p failed: %s", (void *)event,
                      reason[0] ? reason : "(no reason recorded; see the WARN lines on stderr)");
    return res;
}

ncclResult_t tt_event_wait(struct tuttiEvent_st *event, int64_t timeout_us)
{
    struct tt_event_rec *ev = &event->rec;
    /* Without a limit, again when another thread recorded the event anew meanwhile (the sleep
     * on the stream it was taken from then returns). */
    do {
        if (atomic_load_explicit(&ev->state, memory_order_acquire) != TT_EVENT_PENDING) break;
        tt_stream_sleep_event(ev->stream, ev, timeout_us);
    } while (timeout_us < 0);
    return tt_event_query(event);
}

ncclResult_t tt_event_synchronize(struct tuttiEvent_st *event)
{
    struct tt_event_rec *ev = &event->rec;
    if (atomic_load_explicit(&ev->state, memory_order_acquire) == TT_EVENT_PENDING)
        tt_stream_wait_event(ev->stream, ev);
    return tt_event_query(event);
}
