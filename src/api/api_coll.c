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

/* tuttiAlltoAllV (include/tutti.h): every peer's counts and displacements checked first, then
 * one group of a Send and a Recv per peer through the same checks as ncclSend/ncclRecv. */
TT_API ncclResult_t tuttiAlltoAllV(const void *sendbuff, const size_t sendcounts[],
                                   const size_t sdispls[], void *recvbuff,
                                   const size_t recvcounts[], const size_t rdispls[],
                                   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    TT_CALL_SCOPE;
    const char *caller = "tuttiAlltoAllV";
    tt_error_clear();
    TT_TRY(tt_comm_check(comm, caller));
    int nranks = tt_comm_nranks(comm);
    tt_log_set_rank(tt_comm_rank(comm));
    TT_TRY(tt_api_check_stream(stream, caller));
    TT_TRY(tt_api_check_dtype(datatype, caller));
    TT_TRY(tt_api_check_ptr(sendcounts, caller, "sendcounts"));
    TT_TRY(tt_api_check_ptr(sdispls, caller, "sdispls"));
    TT_TRY(tt_api_check_ptr(recvcounts, caller, "recvcounts"));
    TT_TRY(tt_api_check_ptr(rdispls, caller, "rdispls"));
    size_t elem = tt_dtype_bytes(datatype);
    for (int p = 0; p < nranks; p++) {
        size_t end;
        if (__builtin_add_overflow(sdispls[p], sendcounts[p], &end) ||
            __builtin_mul_overflow(end, elem, &end) ||
            __builtin_add_overflow(rdispls[p], recvcounts[p], &end) ||
            __builtin_mul_overflow(end, elem, &end))
            return TT_ERROR(ncclInvalidArgument,
                            "%s: the counts and displacements for peer %d overflow the address "
                            "space", caller, p);
        if (sendcounts[p] > 0) TT_TRY(tt_api_check_buffer(sendbuff, 1, caller, "sendbuff"));
        if (recvcounts[p] > 0) TT_TRY(tt_api_check_buffer(recvbuff, 1, caller, "recvbuff"));
    }
    TT_TRY(tt_group_start());
    ncclResult_t res = ncclSuccess;
    for (int p = 0; p < nranks && res == ncclSuccess; p++) {
        struct tt_coll_args send = {.coll = TT_COLL_SEND, .count = sendcounts[p],
                                    .sendbuff = (const char *)sendbuff + sdispls[p] * elem,
                                    .dtype = datatype, .op = ncclSum, .peer = p,
                                    .stream = stream};
        struct tt_coll_args recv = {.coll = TT_COLL_RECV, .count = recvcounts[p],
                                    .recvbuff = (char *)recvbuff + rdispls[p] * elem,
                                    .dtype = datatype, .op = ncclSum, .peer = p,
                                    .stream = stream};
        res = check_and_run(caller, &send, comm);
        if (res == ncclSuccess) res = check_and_run(caller, &recv, comm);
    }
    if (res != ncclSuccess && res != ncclInProgress) tt_group_note_error(res);
    ncclResult_t end = tt_group_end(tt_comm_check);
    return res != ncclSuccess ? res : end;
}
