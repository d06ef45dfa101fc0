/* Argument checks shared by the public entry points. Each check reports a bad argument once,
 * with the name of the public function and of the argument, through TT_ERROR (so the message
 * becomes the thread's ncclGetLastError) and returns NCCL's error code for it. The checks know
 * nothing about communicators: comm itself is checked by the core (tt_comm_check). */
#include "api/api.h"
#include "core/core.h"

#include "util/err.h"

ncclResult_t tt_api_check_ptr(const void *ptr, const char *caller, const char *arg)
{
    if (ptr == NULL) return TT_ERROR(ncclInvalidArgument, "%s: %s is NULL", caller, arg);
    return ncclSuccess;
}

ncclResult_t tt_api_check_dtype(ncclDataType_t dtype, const char *caller)
{
    if ((int)dtype < 0 || (int)dtype >= (int)ncclNumTypes)
        return TT_ERROR(ncclInvalidArgument,
                        "%s: datatype %d is not an ncclDataType_t (valid: 0 to %d)", caller,
                        (int)dtype, (int)ncclNumTypes - 1);
    return ncclSuccess;
}

ncclResult_t tt_api_check_stream(cudaStream_t stream, const char *caller)
{
    return tt_stream_check_op(stream, caller);
}

ncclResult_t tt_api_check_rank(int rank, int nranks, const char *caller, const char *arg)
{
    if (rank < 0 || rank >= nranks)
        return TT_ERROR(ncclInvalidArgument, "%s: %s %d is out of range [0, %d)", caller, arg,
                        rank, nranks);
    return ncclSuccess;
}

ncclResult_t tt_api_check_buffer(const void *buff, size_t count, const char *caller,
                                 const char *arg)
{
    if (buff == NULL && count > 0)
        return TT_ERROR(ncclInvalidArgument, "%s: %s is NULL with count %zu", caller, arg,
                        count);
    return ncclSuccess;
}

