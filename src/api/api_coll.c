/* Public entry points of the collectives. Every one funnels into run_coll, which checks the
 * arguments in NCCL's order (communicator, stream, datatype, operator, root, sizes, buffers),
 * logs the call at INFO (NCCL_DEBUG_SUBSYS=CALL) and hands a struct tt_coll_args to the core.
 *
 * Buffer rules follow NCCL: with count 0 any buffer may be NULL; Broadcast reads sendbuff at
 * the root only and Reduce writes recvbuff at the root only, so those may be NULL elsewhere.
 * AllGather's receive buffer and ReduceScatter's send buffer hold nranks * count elements,
 * whose size in bytes must fit in size_t. */
#include <stdint.h>

#include "api/api.h"
#include "core/core.h"
#include "reduce/reduce.h"
#include "tutti.h"
#include "util/err.h"
#include "util/log.h"

static bool coll_has_root(enum tt_coll coll)
{
    return coll == TT_COLL_BROADCAST || coll == TT_COLL_REDUCE || coll == TT_COLL_GATHER ||
           coll == TT_COLL_SCATTER;
}

static ncclResult_t check_and_run(const char *caller, const struct tt_coll_args *args,
                                  ncclComm_t comm)
{
    tt_error_clear();
    TT_TRY(tt_comm_check(comm, caller));
    int rank = tt_comm_rank(comm);
    int nranks = tt_comm_nranks(comm);
    tt_log_set_rank(rank);
    TT_TRY(tt_api_check_stream(args->stream, caller));
    TT_TRY(tt_api_check_dtype(args->dtype, caller));
    /* The reduction operator (built-in or user-created) is checked where it is resolved, once,
     * when the core builds the operation's task (core/engine.c), with the same error. */
    if (coll_has_root(args->coll)) TT_TRY(tt_api_check_rank(args->root, nranks, caller, "root"));

    if (args->coll == TT_COLL_SEND || args->coll == TT_COLL_RECV)
        TT_TRY(tt_api_check_rank(args->peer, nranks, caller, "peer"));

    /* Some collectives use nranks blocks of count elements; their size must fit in size_t. */
    size_t elem_bytes = tt_dtype_bytes(args->dtype), total;
    if (__builtin_mul_overflow(args->count, elem_bytes, &total) ||
        __builtin_mul_overflow(total, (size_t)nranks, &total))
        return TT_ERROR(ncclInvalidArgument,
                        "%s: %d block(s) of count %zu %s elements overflow the address space",
                        caller, nranks, args->count, tt_dtype_name(args->dtype));
    size_t send_count, recv_count;
    tt_task_buffer_counts(args, rank, nranks, &send_count, &recv_count);
    if (send_count > 0)
        TT_TRY(tt_api_check_buffer(args->sendbuff, send_count, caller, "sendbuff"));
    if (recv_count > 0)
        TT_TRY(tt_api_check_buffer(args->recvbuff, recv_count, caller, "recvbuff"));
    /* Every block of an AlltoAll is read by one peer while another writes it: in place cannot
     * work without a full copy, so it is refused rather than silently corrupted. */
    if (args->coll == TT_COLL_ALLTOALL && nranks > 1 && args->count > 0) {
        const char *s0 = args->sendbuff, *r0 = args->recvbuff;
        size_t bytes = args->count * (size_t)nranks * elem_bytes;
        if (s0 < r0 + bytes && r0 < s0 + bytes)
            return TT_ERROR(ncclInvalidArgument,
                            "%s: sendbuff and recvbuff overlap; AlltoAll needs distinct "
                            "buffers", caller);
    }

    TT_INFO(TT_SUB_CALL,
            "%s: sendbuff %p recvbuff %p count %zu datatype %s op %d root %d comm %p "
            "[nranks=%d] stream %p",
            tt_coll_name(args->coll), args->sendbuff, args->recvbuff, args->count,
            tt_dtype_name(args->dtype), (int)args->op, args->root, (void *)comm, nranks,
            (void *)args->stream);
    return tt_coll_run(comm, args);
}

/* Inside a group, an argument error also fails the group (NCCL's rule), so it is noted there. */
/* Every collective entry point is a tail call into this, which marks the thread in a call
 * (core/state.h) once for all of them. */
static ncclResult_t run_coll(const char *caller, const struct tt_coll_args *args,
                             ncclComm_t comm)
{
    TT_CALL_SCOPE;
    ncclResult_t res = check_and_run(caller, args, comm);
    if (res != ncclSuccess && res != ncclInProgress) tt_group_note_error(res);
    return res;
}

TT_API ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                   ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                   cudaStream_t stream)
{
    struct tt_coll_args args = {.coll = TT_COLL_ALLREDUCE, .sendbuff = sendbuff,
                                .recvbuff = recvbuff, .count = count, .dtype = datatype,
                                .op = op, .root = 0, .stream = stream};
    return run_coll("ncclAllReduce", &args, comm);
}
TT_API_ALIAS(ncclAllReduce);

TT_API ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                   ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream)
{
    struct tt_coll_args args = {.coll = TT_COLL_BROADCAST, .sendbuff = sendbuff,
                                .recvbuff = recvbuff, .count = count, .dtype = datatype,
                                .op = ncclSum, .root = root, .stream = stream};
    return run_coll("ncclBroadcast", &args, comm);
}
TT_API_ALIAS(ncclBroadcast);

/* The in-place broadcast: one buffer is both source (at the root) and destination. */
TT_API ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                               ncclComm_t comm, cudaStream_t stream)
{
    struct tt_coll_args args = {.coll = TT_COLL_BROADCAST, .sendbuff = buff, .recvbuff = buff,
                                .count = count, .dtype = datatype, .op = ncclSum, .root = root,
                                .stream = stream};
    return run_coll("ncclBcast", &args, comm);
}
TT_API_ALIAS(ncclBcast);

TT_API ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                                ncclDataType_t datatype, ncclRedOp_t op, int root,
                                ncclComm_t comm, cudaStream_t stream)
{
    struct tt_coll_args args = {.coll = TT_COLL_REDUCE, .sendbuff = sendbuff,
                                .recvbuff = recvbuff, .count = count, .dtype = datatype,
                                .op = op, .root = root, .stream = stream};
    return run_coll("ncclReduce", &args, comm);
}
TT_API_ALIAS(ncclReduce);

TT_API ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    struct tt_coll_args args = {.coll = TT_COLL_ALLGATHER, .sendbuff = sendbuff,
                                .recvbuff = recvbuff, .count = sendcount, .dtype = datatype,
                                .op = ncclSum, .root = 0, .stream = stream};
    return run_coll("ncclAllGather", &args, comm);
}
TT_API_ALIAS(ncclAllGather);

TT_API ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                       ncclDataType_t datatype, ncclRedOp_t op,
                                       ncclComm_t comm, cudaStream_t stream)
{
    struct tt_coll_args args = {.coll = TT_COLL_REDUCESCATTER, .sendbuff = sendbuff,
                                .recvbuff = recvbuff, .count = recvcount, .dtype = datatype,
                                .op = op, .root = 0, .stream = stream};
    return run_coll("ncclReduceScatter", &args, comm);
}
TT_API_ALIAS(ncclReduceScatter);

TT_API ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    struct tt_coll_args args = {.coll = TT_COLL_ALLTOALL, .sendbuff = sendbuff,
                                .recvbuff = recvbuff, .count = count, .dtype = datatype,
                                .op = ncclSum, .stream = stream};
    return run_coll("ncclAlltoAll", &args, comm);
}
TT_API_ALIAS(ncclAlltoAll);

TT_API ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count,
                                ncclDataType_t datatype, int root, ncclComm_t comm,
                                cudaStream_t stream)
{
    struct tt_coll_args args = {.coll = TT_COLL_GATHER, .sendbuff = sendbuff,
                                .recvbuff = recvbuff, .count = count, .dtype = datatype,
                                .op = ncclSum, .root = root, .stream = stream};
    return run_coll("ncclGather", &args, comm);
}
TT_API_ALIAS(ncclGather);

TT_API ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                                 ncclDataType_t datatype, int root, ncclComm_t comm,
                                 cudaStream_t stream)
{
    struct tt_coll_args args = {.coll = TT_COLL_SCATTER, .sendbuff = sendbuff,
                                .recvbuff = recvbuff, .count = count, .dtype = datatype,
                                .op = ncclSum, .root = root, .stream = stream};
    return run_coll("ncclScatter", &args, comm);
}
TT_API_ALIAS(ncclScatter);

TT_API ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype,
                              int peer, ncclComm_t comm, cudaStream_t stream)
{
    struct tt_coll_args args = {.coll = TT_COLL_SEND, .sendbuff = sendbuff, .count = count,
                                .dtype = datatype, .op = ncclSum, .peer = peer,
                                .stream = stream};
    return run_coll("ncclSend", &args, comm);
}
TT_API_ALIAS(ncclSend);

TT_API ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                              ncclComm_t comm, cudaStream_t stream)
{
    struct tt_coll_args args = {.coll = TT_COLL_RECV, .recvbuff = recvbuff, .count = count,
                                .dtype = datatype, .op = ncclSum, .peer = peer,
                                .stream = stream};
    return run_coll("ncclRecv", &args, comm);
}
TT_API_ALIAS(ncclRecv);

/* What every vector variant checks of one block before anything is issued: its end, in bytes,
 * fits in size_t, and a buffer it has elements in is not NULL (`buf` NULL: not this rank's). */
static ncclResult_t check_block(const char *caller, const char *name, const void *buf,
                                size_t count, size_t displ, size_t elem, int peer)
{
    size_t end;
    if (__builtin_add_overflow(displ, count, &end) || __builtin_mul_overflow(end, elem, &end))
        return TT_ERROR(ncclInvalidArgument,
                        "%s: the count and displacement of %s for rank %d overflow the address "
                        "space", caller, name, peer);
    if (count > 0) TT_TRY(tt_api_check_buffer(buf, 1, caller, name));
    return ncclSuccess;
}

/* An argument error of a vector variant, found before its group: noted in an enclosing group
 * too, which then fails (NCCL's rule, as run_coll's), so no rank issues part of it. */
static ncclResult_t vector_error(ncclResult_t res)
{
    if (res != ncclSuccess && res != ncclInProgress) tt_group_note_error(res);
    return res;
}

/* The checks every vector variant starts with; sets *nranks. */
static ncclResult_t check_vector(const char *caller, ncclComm_t comm, cudaStream_t stream,
                                 ncclDataType_t datatype, int *nranks)
{
    tt_error_clear();
    TT_TRY(tt_comm_check(comm, caller));
    *nranks = tt_comm_nranks(comm);
    tt_log_set_rank(tt_comm_rank(comm));
    TT_TRY(tt_api_check_stream(stream, caller));
    return tt_api_check_dtype(datatype, caller);
}

/* Issues the n operations a vector variant is made of as one group (joining an enclosing one);
 * `make` fills operation p's arguments and says whether it has any. An operation's argument
 * error fails the group, so an error issues nothing. */
static ncclResult_t run_grouped(const char *caller, ncclComm_t comm, int n, int per_peer,
                                bool (*make)(const void *ctx, int p, int k,
                                             struct tt_coll_args *args),
                                const void *ctx)
{
    TT_TRY(tt_group_start());
    ncclResult_t res = ncclSuccess;
    for (int p = 0; p < n && res == ncclSuccess; p++) {
        for (int k = 0; k < per_peer && res == ncclSuccess; k++) {
            struct tt_coll_args args = {.op = ncclSum};
            if (make(ctx, p, k, &args)) res = check_and_run(caller, &args, comm);
        }
    }
    if (res != ncclSuccess && res != ncclInProgress) tt_group_note_error(res);
    ncclResult_t end = tt_group_end(tt_comm_check_same);
    return res != ncclSuccess ? res : end;
}

struct vector_args {
    const char *sendbuff;
    char *recvbuff;
    const size_t *sendcounts, *sdispls, *recvcounts, *rdispls;
    ncclDataType_t dtype;
    ncclRedOp_t op;
    size_t elem;
    int rank;
    cudaStream_t stream;
};

/* AlltoAllV's operations: a Send (k 0) and a Recv (k 1) per peer. */
static bool make_alltoallv(const void *ctx, int p, int k, struct tt_coll_args *args)
{
    const struct vector_args *v = ctx;
    args->dtype = v->dtype;
    args->stream = v->stream;
    args->peer = p;
    if (k == 0) {
        args->coll = TT_COLL_SEND;
        args->count = v->sendcounts[p];
        args->sendbuff = v->sendbuff + v->sdispls[p] * v->elem;
    } else {
        args->coll = TT_COLL_RECV;
        args->count = v->recvcounts[p];
        args->recvbuff = v->recvbuff + v->rdispls[p] * v->elem;
    }
    return true;
}

/* tuttiAlltoAllV (include/tutti.h): every peer's counts and displacements checked first, then
 * one group of a Send and a Recv per peer through the same checks as ncclSend/ncclRecv. */
TT_API ncclResult_t tuttiAlltoAllV(const void *sendbuff, const size_t sendcounts[],
                                   const size_t sdispls[], void *recvbuff,
                                   const size_t recvcounts[], const size_t rdispls[],
                                   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    TT_CALL_SCOPE;
    const char *caller = "tuttiAlltoAllV";
    int nranks = 0; /* read by the loops below also when check_vector fails */
    ncclResult_t res = check_vector(caller, comm, stream, datatype, &nranks);
    if (res == ncclSuccess) res = tt_api_check_ptr(sendcounts, caller, "sendcounts");
    if (res == ncclSuccess) res = tt_api_check_ptr(sdispls, caller, "sdispls");
    if (res == ncclSuccess) res = tt_api_check_ptr(recvcounts, caller, "recvcounts");
    if (res == ncclSuccess) res = tt_api_check_ptr(rdispls, caller, "rdispls");
    size_t elem = tt_dtype_bytes(datatype);
    size_t send_end = 0, recv_end = 0; /* bytes from each buffer's start its blocks reach */
    for (int p = 0; p < nranks && res == ncclSuccess; p++) {
        res = check_block(caller, "sendbuff", sendbuff, sendcounts[p], sdispls[p], elem, p);
        if (res == ncclSuccess)
            res = check_block(caller, "recvbuff", recvbuff, recvcounts[p], rdispls[p], elem, p);
        if (res == ncclSuccess && sendcounts[p] > 0 &&
            (sdispls[p] + sendcounts[p]) * elem > send_end)
            send_end = (sdispls[p] + sendcounts[p]) * elem;
        if (res == ncclSuccess && recvcounts[p] > 0 &&
            (rdispls[p] + recvcounts[p]) * elem > recv_end)
            recv_end = (rdispls[p] + recvcounts[p]) * elem;
    }
    /* As ncclAlltoAll: a block a peer reads while another writes it cannot work in place. The
     * spans from each buffer's start to its last block's end are compared (blocks interleaved
     * without overlapping are refused too). */
    const char *s0 = sendbuff, *r0 = recvbuff;
    if (res == ncclSuccess && nranks > 1 && send_end > 0 && recv_end > 0 &&
        s0 < r0 + recv_end && r0 < s0 + send_end)
        res = TT_ERROR(ncclInvalidArgument,
                       "%s: the blocks of sendbuff and recvbuff overlap; AlltoAllV needs "
                       "distinct buffers", caller);
    if (res != ncclSuccess) return vector_error(res);
    struct vector_args v = {.sendbuff = sendbuff, .recvbuff = recvbuff,
                            .sendcounts = sendcounts, .sdispls = sdispls,
                            .recvcounts = recvcounts, .rdispls = rdispls, .dtype = datatype,
                            .elem = elem, .stream = stream};
    return run_grouped(caller, comm, nranks, 2, make_alltoallv, &v);
}

/* AllGatherV's operations: a Broadcast rooted at each rank with a nonzero count, from this
 * rank's sendbuff when it is the root. */
static bool make_allgatherv(const void *ctx, int p, int k, struct tt_coll_args *args)
{
    const struct vector_args *v = ctx;
    (void)k;
    *args = (struct tt_coll_args){.coll = TT_COLL_BROADCAST, .count = v->recvcounts[p],
                                  .sendbuff = p == v->rank ? v->sendbuff : NULL,
                                  .recvbuff = v->recvbuff + v->rdispls[p] * v->elem,
                                  .dtype = v->dtype, .op = ncclSum, .root = p,
                                  .stream = v->stream};
    return args->count > 0;
}

/* ReduceScatterV's operations: a Reduce of block p rooted at rank p, into recvbuff there. */
static bool make_reducescatterv(const void *ctx, int p, int k, struct tt_coll_args *args)
{
    const struct vector_args *v = ctx;
    (void)k;
    *args = (struct tt_coll_args){.coll = TT_COLL_REDUCE, .count = v->recvcounts[p],
                                  .sendbuff = v->sendbuff + v->sdispls[p] * v->elem,
                                  .recvbuff = p == v->rank ? v->recvbuff : NULL,
                                  .dtype = v->dtype, .op = v->op, .root = p,
                                  .stream = v->stream};
    return args->count > 0;
}

/* The checks tuttiAllGatherV and tuttiReduceScatterV share, then their group. `gathered` is
 * the buffer holding every rank's block (AllGatherV's recvbuff, ReduceScatterV's sendbuff);
 * `own` the one holding this rank's block alone. */
static ncclResult_t run_rooted_v(const char *caller, struct vector_args *v, const void *own,
                                 const char *own_name, const void *gathered,
                                 const char *gathered_name, ncclComm_t comm,
                                 bool (*make)(const void *ctx, int p, int k,
                                              struct tt_coll_args *args))
{
    int nranks = 0; /* read by the loops below also when check_vector fails */
    ncclResult_t res = check_vector(caller, comm, v->stream, v->dtype, &nranks);
    if (res == ncclSuccess) res = tt_api_check_ptr(v->recvcounts, caller, "counts");
    if (res == ncclSuccess) res = tt_api_check_ptr(v->rdispls, caller, "displs");
    if (res != ncclSuccess) return vector_error(res);
    v->rank = tt_comm_rank(comm);
    v->elem = tt_dtype_bytes(v->dtype);
    for (int p = 0; p < nranks && res == ncclSuccess; p++)
        res = check_block(caller, gathered_name, gathered, v->recvcounts[p], v->rdispls[p],
                          v->elem, p);
    if (res == ncclSuccess)
        res = check_block(caller, own_name, own, v->recvcounts[v->rank], 0, v->elem, v->rank);
    if (res != ncclSuccess) return vector_error(res);
    return run_grouped(caller, comm, nranks, 1, make, v);
}

TT_API ncclResult_t tuttiAllGatherV(const void *sendbuff, void *recvbuff, const size_t counts[],
                                    const size_t displs[], ncclDataType_t datatype,
                                    ncclComm_t comm, cudaStream_t stream)
{
    TT_CALL_SCOPE;
    struct vector_args v = {.sendbuff = sendbuff, .recvbuff = recvbuff, .recvcounts = counts,
                            .rdispls = displs, .dtype = datatype, .op = ncclSum,
                            .stream = stream};
    return run_rooted_v("tuttiAllGatherV", &v, sendbuff, "sendbuff", recvbuff, "recvbuff", comm,
                        make_allgatherv);
}

TT_API ncclResult_t tuttiReduceScatterV(const void *sendbuff, void *recvbuff,
                                        const size_t counts[], const size_t displs[],
                                        ncclDataType_t datatype, ncclRedOp_t op,
                                        ncclComm_t comm, cudaStream_t stream)
{
    TT_CALL_SCOPE;
    /* ReduceScatterV reads its blocks from sendbuff at the displacements. */
    struct vector_args v = {.sendbuff = sendbuff, .recvbuff = recvbuff, .recvcounts = counts,
                            .sdispls = displs, .rdispls = displs, .dtype = datatype, .op = op,
                            .stream = stream};
    return run_rooted_v("tuttiReduceScatterV", &v, recvbuff, "recvbuff", sendbuff, "sendbuff",
                        comm, make_reducescatterv);
}
