/* Issuing operations: expand the API's operation into tasks, then hand them to a group, a
 * host stream, a nonblocking communicator's background queue, or run them right here.
 *
 * AlltoAll, Gather and Scatter are sets of sends and receives, plus a local copy of the rank's
 * own block (skipped when in place), as in NCCL. A blocking single-task operation, the common
 * case, lives on the stack: no allocation on that path.
 *
 * Device buffers (CUDA builds) are swapped for pinned host copies before the operation is
 * expanded, and the operation is ordered on its device stream (core/stream.c), so everything
 * below sees host memory. */
#include <stdlib.h>
#include <string.h>

#include "core/coll.h"

#include "core/comm.h"
#include "core/dispatch.h"
#include "core/group.h"
#include "core/mem.h"
#include "core/redop.h"
#include "core/stream.h"
#include "core/task.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/trace.h"

static const char *at(const void *base, size_t elements, size_t elt_bytes)
{
    return (const char *)base + elements * elt_bytes;
}

static ncclResult_t add_task(struct tt_batch *b, struct ncclComm *comm,
                             const struct tt_coll_args *args, int peer)
{
    struct tt_task *task;
    TT_TRY(tt_task_create(comm, args, peer, &task));
    tt_engine_batch_add(b, task);
    return ncclSuccess;
}

static ncclResult_t add_p2p(struct tt_batch *b, struct ncclComm *comm, enum tt_coll coll,
                            const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t dtype, int peer)
{
    struct tt_coll_args a = {.coll = coll, .sendbuff = sendbuff, .recvbuff = recvbuff,
                             .count = count, .dtype = dtype, .op = ncclSum, .peer = peer};
    return add_task(b, comm, &a, peer);
}

/* Appends the tasks of one operation to `b`. */
static ncclResult_t expand(struct tt_batch *b, struct ncclComm *comm,
                           const struct tt_coll_args *args)
{
    size_t elt = tt_dtype_bytes(args->dtype);
    int n = comm->st.nranks, me = comm->st.rank;
    size_t count = args->count;
    switch ((int)args->coll) {
    case TT_COLL_ALLTOALL:
        if (tt_task_alltoall_path(comm, args->sendbuff, args->recvbuff, count * elt) !=
            TT_ALLTOALL_P2P)
            return add_task(b, comm, args, -1);
        for (int p = 0; p < n; p++) {
            const void *src = at(args->sendbuff, (size_t)p * count, elt);
            void *dst = (void *)at(args->recvbuff, (size_t)p * count, elt);
            if (p == me) {
                TT_TRY(add_p2p(b, comm, TT_COLL_COPY, src, dst, count, args->dtype, p));
            } else {
                TT_TRY(add_p2p(b, comm, TT_COLL_SEND, src, NULL, count, args->dtype, p));
                TT_TRY(add_p2p(b, comm, TT_COLL_RECV, NULL, dst, count, args->dtype, p));
            }
        }
        return ncclSuccess;
    case TT_COLL_GATHER:
        if (me != args->root)
            return add_p2p(b, comm, TT_COLL_SEND, args->sendbuff, NULL, count, args->dtype,
                           args->root);
        for (int p = 0; p < n; p++) {
            void *dst = (void *)at(args->recvbuff, (size_t)p * count, elt);
            if (p != me)
                TT_TRY(add_p2p(b, comm, TT_COLL_RECV, NULL, dst, count, args->dtype, p));
            else if (dst != args->sendbuff)
                TT_TRY(add_p2p(b, comm, TT_COLL_COPY, args->sendbuff, dst, count, args->dtype,
                               p));
        }
        return ncclSuccess;
    case TT_COLL_SCATTER:
        if (me != args->root)
            return add_p2p(b, comm, TT_COLL_RECV, NULL, args->recvbuff, count, args->dtype,
                           args->root);
        for (int p = 0; p < n; p++) {
            const void *src = at(args->sendbuff, (size_t)p * count, elt);
            if (p != me)
                TT_TRY(add_p2p(b, comm, TT_COLL_SEND, src, NULL, count, args->dtype, p));
            else if (src != args->recvbuff)
                TT_TRY(add_p2p(b, comm, TT_COLL_COPY, src, args->recvbuff, count, args->dtype,
                               p));
        }
        return ncclSuccess;
    default:
        return add_task(b, comm, args, args->peer);
    }
}

static bool expands(enum tt_coll coll)
{
    return coll == TT_COLL_ALLTOALL || coll == TT_COLL_GATHER || coll == TT_COLL_SCATTER;
}

/* Replaces the device buffers of `args` by pinned host copies in `staged` (the copies to make
 * in *stages) and says in *device whether the operation goes through a device stream: it has
 * device buffers, or its stream is not a host stream. */
static ncclResult_t stage_device(const struct ncclComm *comm, const struct tt_coll_args *args,
                                 struct tt_coll_args *staged, struct tt_device_stage **stages,
                                 bool *device)
{
    *staged = *args;
    *stages = NULL;
    size_t send_count, recv_count, elt = tt_dtype_bytes(args->dtype);
    tt_task_buffer_counts(args, comm->st.rank, comm->st.nranks, &send_count, &recv_count);
    TT_TRY(tt_device_stage_buffers(stages, &staged->sendbuff, send_count * elt,
                                   &staged->recvbuff, recv_count * elt));
    bool host_stream = tt_stream_is_host(args->stream);
    if (*stages != NULL && host_stream) {
        tt_device_stage_free(*stages);
        *stages = NULL;
        return TT_ERROR(ncclInvalidUsage,
                        "%s: device buffers on Tutti host stream %p: use a CUDA stream (or "
                        "NULL, CUDA's default stream) for device buffers",
                        tt_coll_name(args->coll), (void *)args->stream);
    }
    *device = *stages != NULL || (args->stream != NULL && !host_stream);
    return ncclSuccess;
}

/* Whether a collective's buffers both lie in symmetric windows on device memory: NCCL's contract
 * for such windows is that every rank passes window buffers, at the same offsets, so every rank
 * takes the window path alike (device/device.h, "Symmetric windows"). */
static bool window_pair(ncclComm_t comm, const struct tt_coll_args *args, size_t send_bytes,
                        size_t recv_bytes, const struct tt_device_window **ws, size_t *send_off,
                        const struct tt_device_window **wr, size_t *recv_off)
{
    return tt_mem_device_window(comm, args->sendbuff, send_bytes, ws, send_off) &&
           tt_mem_device_window(comm, args->recvbuff, recv_bytes, wr, recv_off);
}

/* The device-direct path (device/device.h, core/setup.c): a collective on device buffers and a
 * CUDA stream (or NULL), on a communicator whose ranks are all GPU ranks of this host, is queued
 * on the stream as GPU work that reads the peers' device scratch (or symmetric windows)
 * directly; the host engine never sees it, and the statistics count it under algorithm "Device"
 * with no time. Inside a group it waits for the group's end (core/group.c). Every rank must
 * pass device buffers (as NCCL requires); a rank that passes host buffers while the others pass
 * device buffers takes the staged path alone and both sides wait for each other forever. */
static bool is_p2p(enum tt_coll coll)
{
    return coll == TT_COLL_SEND || coll == TT_COLL_RECV;
}

static bool reduces(enum tt_coll coll)
{
    return coll == TT_COLL_ALLREDUCE || coll == TT_COLL_REDUCE || coll == TT_COLL_REDUCESCATTER;
}

/* The reduction a device-direct collective applies: a built-in operator, or a live PreMulSum of
 * this communicator for this datatype. */
static ncclResult_t device_redop(struct ncclComm *comm, const struct tt_coll_args *args,
                                 struct tt_redop *r)
{
    if ((unsigned)args->op < (unsigned)ncclNumOps)
        return tt_redop_init(r, args->op, args->dtype, comm->st.nranks);
    return tt_redop_resolve(comm, args->op, args->dtype, r);
}

static bool device_direct_eligible(const struct tt_coll_args *args)
{
    if (args->count == 0 || tt_stream_is_host(args->stream) || args->coll == TT_COLL_COPY)
        return false;
    /* Decided on the buffers every rank passes, so that all take one path: a rooted
     * collective's root-only buffer (NULL elsewhere, as NCCL allows) does not count. A Send or
     * Recv decides on its own buffer (NCCL requires device buffers on both sides alike). */
    bool send_dev = tt_device_mem_kind(args->sendbuff) == TT_MEM_DEVICE;
    bool recv_dev = tt_device_mem_kind(args->recvbuff) == TT_MEM_DEVICE;
    switch (args->coll) {
    case TT_COLL_BROADCAST: case TT_COLL_SCATTER: case TT_COLL_RECV: return recv_dev;
    case TT_COLL_REDUCE: case TT_COLL_GATHER: case TT_COLL_SEND: return send_dev;
    default: return send_dev && recv_dev;
    }
}

/* NCCL_ALGO's say over device-direct AllReduce: a list that allows Ring but neither OneShot
 * nor Direct runs the ring through the scratch (symmetric windows too); OneShot alone runs
 * one-shot at every size, Direct alone two-shot; otherwise (unset included) one-shot up to
 * TUTTI_CUDA_ONESHOT_BYTES, two-shot above. */
static bool device_ring(const struct ncclComm *comm)
{
    const bool *allowed = comm->tune.algo_allowed[TT_COLL_ALLREDUCE];
    return allowed[TT_ALGO_RING] && !allowed[TT_ALGO_ONESHOT] && !allowed[TT_ALGO_DIRECT];
}

static size_t device_oneshot_bytes(const struct ncclComm *comm)
{
    const bool *allowed = comm->tune.algo_allowed[TT_COLL_ALLREDUCE];
    if (allowed[TT_ALGO_ONESHOT] && !allowed[TT_ALGO_DIRECT]) return SIZE_MAX;
    if (allowed[TT_ALGO_DIRECT] && !allowed[TT_ALGO_ONESHOT]) return 0;
    return (size_t)tt_param_cuda_oneshot_bytes();
}

/* After a failure the streams may have been released (core/watch.c): no more device work. */
static ncclResult_t device_usable(const struct ncclComm *comm, enum tt_coll coll)
{
    if (!tt_state_usable(&comm->st)) return tt_state_check_usable(&comm->st, tt_coll_name(coll));
    if (comm->st.async_error != ncclSuccess || atomic_load(&comm->dev_released))
        return TT_ERROR(comm->st.async_error != ncclSuccess ? comm->st.async_error
                                                             : ncclRemoteError,
                        "%s: rank %d's communicator failed earlier (ncclCommGetAsyncError says "
                        "why): abort it", tt_coll_name(coll), comm->st.rank);
    return ncclSuccess;
}

/* Work queued while the watchdog or an abort released the team: released too. */
static void release_if_released(struct ncclComm *comm)
{
    if (atomic_load(&comm->dev_released) && comm->dev_release != NULL) comm->dev_release(comm);
}

ncclResult_t tt_coll_device_direct(ncclComm_t comm, const struct tt_coll_args *args)
{
    TT_TRY(device_usable(comm, args->coll));
    bool recv_dev = tt_device_mem_kind(args->recvbuff) == TT_MEM_DEVICE;
    ncclResult_t res;
    struct tt_device_team *team = comm->dev_team;
    switch (args->coll) {
    case TT_COLL_BROADCAST:
        res = tt_device_team_broadcast(team, args->stream, args->sendbuff, args->recvbuff,
                                       args->count, args->dtype, args->root);
        goto queued;
    case TT_COLL_GATHER:
        res = tt_device_team_gather(team, args->stream, args->sendbuff, args->recvbuff,
                                    args->count, args->dtype, args->root);
        goto queued;
    case TT_COLL_SCATTER:
        res = tt_device_team_scatter(team, args->stream, args->sendbuff, args->recvbuff,
                                     args->count, args->dtype, args->root);
        goto queued;
    case TT_COLL_ALLTOALL:
        res = tt_device_team_alltoall(team, args->stream, args->sendbuff, args->recvbuff,
                                      args->count, args->dtype);
        goto queued;
    default:
        break;
    }
    const struct tt_device_window *ws = NULL, *wr = NULL;
    size_t send_off = 0, recv_off = 0;
    size_t bytes = args->count * tt_dtype_bytes(args->dtype);
    size_t all = bytes * (size_t)comm->st.nranks;
    if (args->coll == TT_COLL_ALLGATHER) {
        if (window_pair(comm, args, bytes, all, &ws, &send_off, &wr, &recv_off))
            res = tt_device_team_all_gather_window(comm->dev_team, args->stream, ws, send_off, wr,
                                                   recv_off, args->count, args->dtype);
        else
            res = tt_device_team_all_gather(comm->dev_team, args->stream, args->sendbuff,
                                            args->recvbuff, args->count, args->dtype);
        goto queued;
    }
    struct tt_redop r;
    TT_TRY(device_redop(comm, args, &r));
    static const enum tt_device_red reds[] = {
        [TT_RED_SUM] = TT_DEVICE_RED_SUM,           [TT_RED_PROD] = TT_DEVICE_RED_PROD,
        [TT_RED_MAX] = TT_DEVICE_RED_MAX,           [TT_RED_MIN] = TT_DEVICE_RED_MIN,
        [TT_RED_PREMULSUM] = TT_DEVICE_RED_PREMULSUM, [TT_RED_SUMPOSTDIV] = TT_DEVICE_RED_SUMDIV,
    };
    struct tt_device_redop op = {.dtype = args->dtype, .red = reds[r.kind],
                                 .scalar_f = r.scalar.f, .scalar_u = r.scalar.u,
                                 .divisor = r.divisor};
    if (!tt_dtype_is_float(args->dtype)) op.scalar_f = 0.0;
    else op.scalar_u = 0;
    if (args->coll == TT_COLL_REDUCE)
        res = tt_device_team_reduce(team, args->stream, args->sendbuff, args->recvbuff,
                                    args->count, &op, args->root, recv_dev);
    else if (args->coll == TT_COLL_REDUCESCATTER &&
             window_pair(comm, args, all, bytes, &ws, &send_off, &wr, &recv_off))
        res = tt_device_team_reduce_scatter_window(comm->dev_team, args->stream, ws, send_off,
                                                   wr, recv_off, args->count, &op);
    else if (args->coll == TT_COLL_REDUCESCATTER)
        res = tt_device_team_reduce_scatter(comm->dev_team, args->stream, args->sendbuff,
                                            args->recvbuff, args->count, &op);
    else if (device_ring(comm))
        res = tt_device_team_allreduce_ring(team, args->stream, args->sendbuff, args->recvbuff,
                                            args->count, &op);
    else if (window_pair(comm, args, bytes, bytes, &ws, &send_off, &wr, &recv_off))
        res = tt_device_team_allreduce_window(comm->dev_team, args->stream, ws, send_off, wr,
                                              recv_off, args->count, &op);
    else
        res = tt_device_team_allreduce(comm->dev_team, args->stream, args->sendbuff,
                                       args->recvbuff, args->count, &op,
                                       device_oneshot_bytes(comm));
queued:
    if (res != ncclSuccess) {
        tt_state_fail(&comm->st, res);
        release_if_released(comm);
        return res;
    }
    release_if_released(comm);
    if (comm->trace != NULL) /* its time is the GPU's: not measured here */
        tt_trace_count(comm->trace, tt_coll_name(args->coll), "Device",
                       args->count * tt_dtype_bytes(args->dtype), 0);
    if (!comm->dev_team_logged) {
        comm->dev_team_logged = true;
        TT_INFO(TT_SUB_COLL, "%s of %zu elements runs device-direct (the first on this "
                             "communicator)", tt_coll_name(args->coll), args->count);
    }
    return ncclSuccess;
}

ncclResult_t tt_coll_group_staged(ncclComm_t comm, const struct tt_coll_args *args)
{
    struct tt_coll_args staged;
    struct tt_device_stage *stages = NULL;
    bool device = false;
    if (tt_device_active()) {
        TT_TRY(stage_device(comm, args, &staged, &stages, &device));
        args = &staged;
    }
    return tt_group_add(comm, args, expand, stages, device);
}

ncclResult_t tt_coll_device_p2p(struct tt_coll_deferred *ops, int n, cudaStream_t stream)
{
    /* Each communicator's operations, in the device layer's terms, gathered in issue order. */
    struct tt_device_p2p *p2p = malloc((size_t)n * sizeof *p2p);
    struct tt_device_p2p **starts = malloc((size_t)n * sizeof *starts);
    struct ncclComm **comms = malloc((size_t)n * sizeof *comms);
    int *counts = malloc((size_t)n * sizeof *counts);
    ncclResult_t res = ncclSuccess;
    if (p2p == NULL || starts == NULL || comms == NULL || counts == NULL) {
        res = TT_ERROR(ncclSystemError, "out of memory queueing device sends and receives");
        goto out;
    }
    int ncomms = 0, k = 0;
    for (int i = 0; i < n; i++) {
        struct ncclComm *comm = ops[i].comm;
        if (comm == NULL || !is_p2p(ops[i].args.coll)) continue; /* or taken with an earlier */
        res = device_usable(comm, ops[i].args.coll);
        if (res != ncclSuccess) goto out;
        comms[ncomms] = comm;
        starts[ncomms] = p2p + k;
        counts[ncomms] = 0;
        for (int j = i; j < n; j++) {
            const struct tt_coll_args *a = &ops[j].args;
            if (ops[j].comm != comm || !is_p2p(a->coll)) continue;
            bool send = a->coll == TT_COLL_SEND;
            p2p[k++] = (struct tt_device_p2p){
                .send = send, .peer = a->peer,
                .buff = send ? (void *)a->sendbuff : a->recvbuff,
                .bytes = a->count * tt_dtype_bytes(a->dtype)};
            counts[ncomms]++;
            ops[j].comm = NULL;
        }
        ncomms++;
    }
    for (size_t round = 0; ncomms > 0; round++) {
        bool more = false;
        for (int phase = 0; phase < 2; phase++) /* every send of the round, then every receive */
            for (int c = 0; c < ncomms; c++) {
                bool any;
                res = tt_device_team_p2p_round(comms[c]->dev_team, stream, starts[c], counts[c],
                                               round, phase == 0, &any);
                if (res != ncclSuccess) {
                    tt_state_fail(&comms[c]->st, res);
                    goto out;
                }
                more = more || any;
            }
        if (!more) break;
    }
    for (int c = 0; c < ncomms; c++) release_if_released(comms[c]);
    for (int c = 0; c < ncomms; c++)
        for (int i = 0; comms[c]->trace != NULL && i < counts[c]; i++)
            tt_trace_count(comms[c]->trace,
                           tt_coll_name(starts[c][i].send ? TT_COLL_SEND : TT_COLL_RECV),
                           "Device", starts[c][i].bytes, 0);
out:
    free(p2p);
    free(starts);
    free(comms);
    free(counts);
    return res;
}

ncclResult_t tt_coll_run(ncclComm_t comm, const struct tt_coll_args *args)
{
    if (!tt_state_usable(&comm->st))
        return tt_state_check_usable(&comm->st, tt_coll_name(args->coll));
    if (comm->dev_team != NULL && device_direct_eligible(args)) {
        if (tt_group_depth() > 0) {
            /* The operator is checked now, as the staged path's is: at the group's end part
             * of the group may already be queued on the device stream. */
            struct tt_redop r;
            ncclResult_t res = reduces(args->coll) ? device_redop(comm, args, &r) : ncclSuccess;
            if (res != ncclSuccess) {
                tt_group_note_error(res);
                return res;
            }
            return tt_group_add_device(comm, args);
        }
        if (!is_p2p(args->coll)) return tt_coll_device_direct(comm, args);
        struct tt_coll_deferred one = {.comm = comm, .comm_id = comm->id, .args = *args};
        return tt_coll_device_p2p(&one, 1, args->stream);
    }
    if (tt_group_depth() > 0) return tt_coll_group_staged(comm, args);
    struct tt_coll_args staged;
    struct tt_device_stage *stages = NULL;
    bool device = false;
    if (tt_device_active()) {
        TT_TRY(stage_device(comm, args, &staged, &stages, &device));
        args = &staged;
    }

    bool async = device || args->stream != NULL || !comm->blocking;
    if (!async && !expands(args->coll)) {
        /* The blocking fast path: one task on the stack. */
        struct tt_task task;
        TT_TRY(tt_task_init(&task, comm, args, args->peer));
        return tt_dispatch_task(&task);
    }
    struct tt_batch *b = malloc(sizeof *b);
    if (b == NULL) {
        tt_device_stage_free(stages);
        return TT_ERROR(ncclSystemError, "out of memory for an operation");
    }
    tt_engine_batch_init(b);
    b->device = device;
    b->stages = stages;
    ncclResult_t res = expand(b, comm, args);
    if (res != ncclSuccess) {
        tt_engine_batch_clear(b);
        free(b);
        return res;
    }
    return tt_dispatch(b, args->stream, !comm->blocking && args->stream == NULL);
}
