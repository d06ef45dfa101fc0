/* Group calls, with NCCL's rules: thread-local nesting; operations deferred to the outermost
 * end; an error inside a group is returned by the call that caused it and again by the end,
 * which then discards the whole group; blocking and nonblocking communicators may not be mixed
 * in one group. A group's operations may use several host streams (one per communicator, as
 * NCCL's one-thread-many-devices loop does): its batch is split over them at the end. Device
 * streams and stream NULL still take one stream per group. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/group.h"

#include "core/coll.h"
#include "core/comm.h"
#include "core/dispatch.h"
#include "core/stream.h"
#include "util/err.h"
#include "util/log.h"
#include "util/time.h"

struct group_state {
    int depth;
    struct tt_batch batch;
    ncclResult_t error;
    /* The first error's message, said again by the end; on the heap: the library's whole TLS
     * block must fit the static TLS a dlopen'ed library may use (util/log.c). */
    char *error_msg;
    cudaStream_t stream;
    bool multi_stream; /* its operations use several host streams */
    bool any_blocking;
    bool any_nonblocking;
    struct deferred_wait *waits;
    int wait_count;
    int wait_cap;
    struct tt_coll_deferred *dev; /* device-direct operations, in issue order */
    int dev_count;
    int dev_cap;
};

/* Something the outermost end must wait for before it runs the group: a background init. */
struct deferred_wait {
    tt_group_wait_fn fn;
    void *arg;
    uint64_t tag;
};

static _Thread_local struct group_state group;
/* Mirrors group.depth for the check every operation makes, without __tls_get_addr. */
static _Thread_local int group_depth_fast __attribute__((tls_model("initial-exec")));

int tt_group_depth(void) { return group_depth_fast; }

ncclResult_t tt_group_start(void)
{
    if (group.depth == 0) {
        tt_engine_batch_init(&group.batch);
        group.error = ncclSuccess;
        group.stream = NULL;
        group.multi_stream = false;
        group.any_blocking = group.any_nonblocking = false;
        group.wait_count = 0;
        group.dev_count = 0;
    }
    group_depth_fast = ++group.depth;
    return ncclSuccess;
}

static ncclResult_t remember(ncclResult_t res)
{
    if (res != ncclSuccess && group.error == ncclSuccess) {
        group.error = res;
        free(group.error_msg);
        group.error_msg = strdup(tt_error_last()); /* NULL when out of memory: said without */
    }
    return res;
}

void tt_group_note_error(ncclResult_t res)
{
    if (group.depth > 0) remember(res);
}

/* The rules for every operation added: several streams only where all are host streams and no
 * device work is in the group, and blocking and nonblocking communicators not mixed (NCCL's). */
static ncclResult_t admit(struct ncclComm *comm, const struct tt_coll_args *args, bool device)
{
    bool first = group.batch.count == 0 && group.dev_count == 0;
    if (!first && args->stream != group.stream) {
        bool host = tt_stream_is_host(args->stream) && tt_stream_is_host(group.stream) &&
                    !device && !group.batch.device && group.dev_count == 0;
        if (!host)
            return remember(TT_ERROR(ncclInvalidUsage,
                                     "%s: a group's operations may use several streams only "
                                     "when all are Tutti host streams and no device buffer is "
                                     "involved (stream %p after %p)",
                                     tt_coll_name(args->coll), (void *)args->stream,
                                     (void *)group.stream));
        group.multi_stream = true;
    }
    if ((comm->blocking && group.any_nonblocking) || (!comm->blocking && group.any_blocking))
        return remember(TT_ERROR(ncclInvalidUsage,
                                 "%s: a group may not mix blocking and nonblocking "
                                 "communicators",
                                 tt_coll_name(args->coll)));
    if (first) group.stream = args->stream;
    if (comm->blocking) group.any_blocking = true; else group.any_nonblocking = true;
    return ncclSuccess;
}

ncclResult_t tt_group_add(struct ncclComm *comm, const struct tt_coll_args *args,
                          tt_group_expand_fn expand, struct tt_device_stage *stages,
                          bool device)
{
    /* The group's batch owns the stages from here, also when this operation fails (the group
     * is then discarded with them). */
    tt_device_stage_join(&group.batch.stages, stages);
    TT_TRY(admit(comm, args, device));
    if (device) group.batch.device = true;
    struct tt_task *last = group.batch.tail;
    ncclResult_t res = remember(expand(&group.batch, comm, args));
    for (struct tt_task *t = last ? last->next : group.batch.head; t; t = t->next)
        t->stream = args->stream;
    return res;
}

ncclResult_t tt_group_add_device(struct ncclComm *comm, const struct tt_coll_args *args)
{
    TT_TRY(admit(comm, args, true));
    if (group.dev_count == group.dev_cap) {
        int cap = group.dev_cap ? 2 * group.dev_cap : 16;
        struct tt_coll_deferred *grown = realloc(group.dev, (size_t)cap * sizeof *grown);
        if (grown == NULL) return remember(TT_ERROR(ncclSystemError, "out of memory in a group"));
        group.dev = grown;
        group.dev_cap = cap;
    }
    group.dev[group.dev_count++] =
        (struct tt_coll_deferred){.comm = comm, .comm_id = comm->id, .args = *args};
    return ncclSuccess;
}

static bool is_collective(const struct tt_coll_deferred *d)
{
    return d->comm != NULL && d->args.coll != TT_COLL_SEND && d->args.coll != TT_COLL_RECV;
}

/* When the group's device-direct collectives span several communicators, they are staged
 * instead (tt_group_add_device): added to the batch here. */
static ncclResult_t stage_device_colls_if_mixed(void)
{
    struct ncclComm *first = NULL;
    bool mixed = false;
    for (int i = 0; i < group.dev_count; i++) {
        if (!is_collective(&group.dev[i])) continue;
        if (first == NULL) first = group.dev[i].comm;
        mixed = mixed || group.dev[i].comm != first;
    }
    for (int i = 0; mixed && i < group.dev_count; i++) {
        if (!is_collective(&group.dev[i])) continue;
        TT_TRY(remember(tt_coll_group_staged(group.dev[i].comm, &group.dev[i].args)));
        group.dev[i].comm = NULL;
    }
    return ncclSuccess;
}

ncclResult_t tt_group_add_wait(tt_group_wait_fn fn, void *arg, uint64_t tag)
{
    if (group.wait_count == group.wait_cap) {
        int cap = group.wait_cap ? 2 * group.wait_cap : 8;
        struct deferred_wait *grown = realloc(group.waits, (size_t)cap * sizeof *grown);
        if (grown == NULL) return remember(TT_ERROR(ncclSystemError, "out of memory in a group"));
        group.waits = grown;
        group.wait_cap = cap;
    }
    group.waits[group.wait_count++] = (struct deferred_wait){.fn = fn, .arg = arg, .tag = tag};
    return ncclSuccess;
}

/* Waits for what the group deferred; the first failure is the group's result. */
static ncclResult_t wait_deferred(void)
{
    ncclResult_t first = ncclSuccess;
    for (int i = 0; i < group.wait_count; i++) {
        ncclResult_t res = group.waits[i].fn(group.waits[i].arg, group.waits[i].tag);
        if (res != ncclSuccess && first == ncclSuccess) first = res;
    }
    group.wait_count = 0;
    return first;
}

/* Ends the group without running anything (error or simulation). */
static void discard(void)
{
    free(group.error_msg);
    group.error_msg = NULL;
    tt_engine_batch_clear(&group.batch);
    group.depth = group_depth_fast = 0;
    free(group.waits);
    group.waits = NULL;
    group.wait_cap = 0;
    free(group.dev);
    group.dev = NULL;
    group.dev_count = group.dev_cap = 0;
}

/* Whether every communicator the group's operations name is still live: another thread may
 * have destroyed or aborted one since the operation was added (this thread was in no call
 * then, so nothing waited for it). Checked inside ncclGroupEnd's call: a communicator found
 * live now stays so until the call ends. */
static ncclResult_t check_comms_live(tt_group_live_fn live)
{
    for (const struct tt_task *t = group.batch.head; t; t = t->next)
        if (live(t->comm, t->comm_id, "ncclGroupEnd") != ncclSuccess)
            return TT_ERROR(ncclInvalidUsage, "ncclGroupEnd: a communicator of the group (%p) "
                            "was destroyed or aborted before the group ended",
                            (void *)t->comm);
    for (int i = 0; i < group.dev_count; i++)
        if (group.dev[i].comm != NULL &&
            live(group.dev[i].comm, group.dev[i].comm_id, "ncclGroupEnd") != ncclSuccess)
            return TT_ERROR(ncclInvalidUsage, "ncclGroupEnd: a communicator of the group (%p) "
                            "was destroyed or aborted before the group ended",
                            (void *)group.dev[i].comm);
    return ncclSuccess;
}

ncclResult_t tt_group_end(tt_group_live_fn live)
{
    if (group.depth == 0)
        return TT_ERROR(ncclInvalidUsage, "ncclGroupEnd called without a matching "
                                          "ncclGroupStart");
    group_depth_fast = --group.depth;
    if (group.depth > 0) return ncclSuccess;
    ncclResult_t res = wait_deferred();
    if (res == ncclSuccess) res = check_comms_live(live);
    if (group.error != ncclSuccess || res != ncclSuccess) {
        ncclResult_t err = group.error != ncclSuccess ? group.error : res;
        char why[TT_REASON_BYTES];
        snprintf(why, sizeof why, "%s",
                 group.error == ncclSuccess ? tt_error_last()
                 : group.error_msg != NULL  ? group.error_msg
                                            : "its message was lost: out of memory");
        discard();
        return TT_ERROR(err, "ncclGroupEnd: the group failed (error %d: %s); none of its "
                             "operations ran", (int)err, why);
    }
    res = stage_device_colls_if_mixed();
    if (res != ncclSuccess) {
        discard();
        return TT_ERROR(res, "ncclGroupEnd: the group failed (error %d); none of its "
                             "operations ran", (int)res);
    }
    /* The device-direct operations before the staged ones, on every rank alike: they wait only
     * for each other, never for staged work queued behind them; Sends and Recvs first, in
     * rounds, then the collectives of the one communicator in issue order. */
    if (group.dev_count > 0) res = tt_coll_device_p2p(group.dev, group.dev_count, group.stream);
    for (int i = 0; i < group.dev_count && res == ncclSuccess; i++)
        if (is_collective(&group.dev[i])) /* neither staged nor queued yet */
            res = tt_coll_device_direct(group.dev[i].comm, &group.dev[i].args);
    if (res != ncclSuccess) {
        discard();
        return res;
    }
    if (group.batch.count == 0) {
        discard();
        return ncclSuccess;
    }
    /* The batch moves out of the thread-local state: a stream or a background queue owns it
     * from here, and a new group may start at once. */
    struct tt_batch *b = malloc(sizeof *b);
    if (b == NULL) {
        discard();
        return TT_ERROR(ncclSystemError, "out of memory ending a group");
    }
    *b = group.batch;
    tt_engine_batch_init(&group.batch);
    cudaStream_t stream = group.stream;
    bool nonblocking = group.any_nonblocking, split = group.multi_stream;
    discard();
    return split ? tt_dispatch_streams(b) : tt_dispatch(b, stream, nonblocking);
}

/* Estimates the group's time with the selection model (a per-byte and a per-step cost for
 * each task) and ends the group without running anything. */
ncclResult_t tt_group_simulate_end(ncclSimInfo_t *sim)
{
    if (group.depth == 0)
        return TT_ERROR(ncclInvalidUsage, "ncclGroupSimulateEnd called without a matching "
                                          "ncclGroupStart");
    group_depth_fast = --group.depth;
    if (group.depth > 0) return ncclSuccess;
    /* What the group started (inits, splits) ends before the group does, as at its end. */
    ncclResult_t waited = wait_deferred();
    /* Checked once the group has ended, as NCCL does: a bad argument ends it too (nothing
     * runs), so that the thread's next calls are not taken into a group left open. */
    if (sim == NULL || sim->magic != 0x74685283u) {
        discard();
        return TT_ERROR(ncclInvalidArgument, "ncclGroupSimulateEnd: simInfo is %s; the group "
                                             "ended and none of its operations ran",
                        sim == NULL ? "NULL" : "not initialised with NCCL_SIM_INFO_INITIALIZER");
    }
    ncclResult_t err = group.error != ncclSuccess ? group.error : waited;
    float estimate_us = 0.0f;
    for (struct tt_task *t = group.batch.head; t; t = t->next)
        estimate_us += tt_task_estimate_us(t);
    discard();
    if (err != ncclSuccess) return err;
    sim->estimatedTime = estimate_us;
    return ncclSuccess;
}
