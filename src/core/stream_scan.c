/* Questions asked of every host stream's queue (core/stream.h): which communicator or buffer
 * queued work still uses, and the failing of a stopped communicator's queued batches. Each is a
 * visit of the queued batches through tt_stream_scan, which holds the locks stream.c keeps. */
#include <stdint.h>
#include <time.h>

#include "core/stream.h"

#include "util/log.h"
#include "util/param.h"
#include "util/time.h"

/* Whether a batch holds a task of `comm`. */
static bool batch_has(const struct tt_batch *b, const struct ncclComm *comm)
{
    for (const struct tt_task *t = b->head; t; t = t->next)
        if (t->comm == comm) return true;
    return false;
}

struct comm_query {
    const struct ncclComm *comm;
    bool background_only; /* only batches a nonblocking call queued on a background stream */
    cudaStream_t last;    /* background_last: the stream of the newest such batch */
    uint64_t latest;
    bool any;
};

static bool comm_found(cudaStream_t s, struct tt_batch *b, bool head, void *arg)
{
    struct comm_query *q = arg;
    return (b->background || !q->background_only) && batch_has(b, q->comm);
}

static bool comm_queued(const struct ncclComm *comm, bool background_only)
{
    struct comm_query q = {.comm = comm, .background_only = background_only};
    return tt_stream_scan(false, comm_found, &q);
}

static bool newest_background(cudaStream_t s, struct tt_batch *b, bool head, void *arg)
{
    struct comm_query *q = arg;
    if (b->background && (!q->any || b->enqueued >= q->latest) && batch_has(b, q->comm)) {
        q->last = s;
        q->latest = b->enqueued;
        q->any = true;
    }
    return false;
}

cudaStream_t tt_stream_comm_background_last(const struct ncclComm *comm, cudaStream_t own)
{
    struct comm_query q = {.comm = comm, .last = own};
    tt_stream_scan(false, newest_background, &q);
    return q.last;
}

bool tt_stream_comm_in_background(const struct ncclComm *comm)
{
    return comm_queued(comm, true);
}

bool tt_stream_comm_queued(const struct ncclComm *comm)
{
    return comm_queued(comm, false);
}

/* Whether a task's buffers may reach into [lo, hi): each from its pointer over count elements
 * for every rank (more than most collectives touch, which only makes a wait longer). */
static bool task_touches(const struct tt_task *t, uintptr_t lo, uintptr_t hi)
{
    size_t span = t->op.count * t->op.elt_bytes * (size_t)(t->op.nranks > 1 ? t->op.nranks : 1);
    const uintptr_t bufs[2] = {(uintptr_t)t->op.sendbuff, (uintptr_t)t->op.recvbuff};
    for (int i = 0; i < 2; i++)
        if (bufs[i] != 0 && bufs[i] < hi && bufs[i] + span > lo) return true;
    return false;
}

struct range_wait {
    uintptr_t lo, hi;
    bool locked;          /* drive_until asks once before taking the engine lock: not then */
    uint64_t deadline_ns; /* a batch held by a device stream (gated) may never end... */
    bool expired;         /* ...and the wait gives up here */
};

static bool touches_range(cudaStream_t s, struct tt_batch *b, bool head, void *arg)
{
    const struct range_wait *r = arg;
    for (const struct tt_task *t = b->head; t; t = t->next)
        if (!t->done && task_touches(t, r->lo, r->hi)) return true;
    return false;
}

/* Whether no queued batch has a task touching the range (engine lock held once `locked`), or
 * the wait is over. */
static bool range_idle(void *arg)
{
    struct range_wait *r = arg;
    if (!r->locked) {
        r->locked = true;
        return false;
    }
    if (tt_deadline_passed(r->deadline_ns)) {
        r->expired = true;
        return true;
    }
    return !tt_stream_scan(true, touches_range, r);
}

bool tt_stream_wait_range_idle(const void *ptr, size_t bytes)
{
    struct range_wait r = {.lo = (uintptr_t)ptr, .hi = (uintptr_t)ptr + bytes, .locked = true,
                           .deadline_ns = tt_deadline_after_ms(tt_param_timeout_ms())};
    if (!tt_stream_scan(false, touches_range, &r)) return true;
    TT_INFO(TT_SUB_REG, "%zu bytes at %p: waiting for the queued operations that use them "
                        "before their pages move", bytes, ptr);
    r.locked = false;
    tt_stream_drive_until(range_idle, &r);
    return !r.expired;
}

struct cancel {
    const struct ncclComm *comm;
    int cancelled;
};

/* A batch behind its stream's head holding tasks of the communicator alone fails now. */
static bool cancel_behind(cudaStream_t s, struct tt_batch *b, bool head, void *arg)
{
    struct cancel *c = arg;
    bool only = !head && b->gate == NULL && b->head != NULL;
    for (const struct tt_task *t = b->head; t && only; t = t->next) only = t->comm == c->comm;
    if (only) {
        /* The error the engine gives an operation of a stopped communicator. */
        tt_engine_cancel(b, ncclRemoteError);
        c->cancelled++;
    }
    return false;
}

void tt_stream_cancel_comm(const struct ncclComm *comm, const struct tt_comm_state *st)
{
    struct cancel c = {.comm = comm};
    tt_stream_scan(false, cancel_behind, &c); /* under the engine lock: no pass runs meanwhile */
    if (c.cancelled > 0)
        TT_INFO(TT_SUB_INIT, "rank %d: %d operation(s) of the stopped communicator, queued behind "
                             "other work on their streams, failed without starting",
                st->rank, c.cancelled);
}

void tt_stream_wait_comm_idle(const struct ncclComm *comm)
{
    while (comm_queued(comm, false)) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 500000};
        nanosleep(&ts, NULL);
    }
    /* The last batch gone, a thread that drove it may still sleep on a word of the
     * communicator's memory, which the caller is about to free. */
    tt_stream_wait_pauses();
}
