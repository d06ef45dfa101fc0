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
#include "util/err.h"
#include "util/log.h"

static bool coll_reduces(enum tt_coll coll)
{
    return coll == TT_COLL_ALLREDUCE || coll == TT_COLL_REDUCE || coll == TT_COLL_REDUCESCATTER;
}

static bool coll_has_root(enum tt_coll coll)
{
    return coll == TT_COLL_BROADCAST || coll == TT_COLL_REDUCE;
}

static ncclResult_t run_coll(const char *caller, const struct tt_coll_args *args,
                             ncclComm_t comm)
{
    tt_error_clear();
    TT_TRY(tt_comm_check(comm, caller));
    int rank = tt_comm_rank(comm);
    int nranks = tt_comm_nranks(comm);
    tt_log_set_rank(rank);
    TT_TRY(tt_api_check_stream(args->stream, caller));
    TT_TRY(tt_api_check_dtype(args->dtype, caller));
    if (coll_reduces(args->coll)) TT_TRY(tt_api_check_op(args->op, caller));
    if (coll_has_root(args->coll)) TT_TRY(tt_api_check_rank(args->root, nranks, caller, "root"));

    /* AllGather receives, and ReduceScatter sends, one block of count elements per rank. */
    size_t blocks = 1;
    if (args->coll == TT_COLL_ALLGATHER || args->coll == TT_COLL_REDUCESCATTER)
        blocks = (size_t)nranks;
    size_t elem_bytes = tt_dtype_bytes(args->dtype);
    if (args->count > SIZE_MAX / elem_bytes / blocks)
        return TT_ERROR(ncclInvalidArgument,
                        "%s: %zu block(s) of count %zu %s elements overflow the address space",
                        caller, blocks, args->count, tt_dtype_name(args->dtype));
    size_t send_count = args->count, recv_count = args->count;
    if (args->coll == TT_COLL_ALLGATHER) recv_count *= blocks;
    if (args->coll == TT_COLL_REDUCESCATTER) send_count *= blocks;
    if (args->coll != TT_COLL_BROADCAST || rank == args->root)
        TT_TRY(tt_api_check_buffer(args->sendbuff, send_count, caller, "sendbuff"));
    if (args->coll != TT_COLL_REDUCE || rank == args->root)
        TT_TRY(tt_api_check_buffer(args->recvbuff, recv_count, caller, "recvbuff"));

    TT_INFO(TT_SUB_CALL,
            "%s: sendbuff %p recvbuff %p count %zu datatype %s op %d root %d comm %p "
            "[nranks=%d] stream %p",
            tt_coll_name(args->coll), args->sendbuff, args->recvbuff, args->count,
            tt_dtype_name(args->dtype), (int)args->op, args->root, (void *)comm, nranks,
            (void *)args->stream);
    TT_TRY(tt_coll_run(comm, args));
    return ncclSuccess;
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
