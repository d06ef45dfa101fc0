/* Public entry points that need no communicator: the version, the error strings, the thread's
 * last error, group brackets (deferral happens in core/group.c) and Tutti's host streams. */
#include "api/api.h"

#include "core/core.h"
#include "tutti.h"
#include "util/err.h"
#include "util/log.h"

#ifndef TUTTI_VERSION_STRING
#error "TUTTI_VERSION_STRING must be defined by the build (CMakeLists.txt)"
#endif

TT_API ncclResult_t pncclGetVersion(int *version)
{
    TT_CALL_SCOPE;
    TT_TRY(tt_api_check_ptr(version, "ncclGetVersion", "version"));
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
TT_API_ALIAS(ncclGetVersion);

TT_API const char *pncclGetErrorString(ncclResult_t result)
{
    TT_CALL_SCOPE;
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "a CUDA call failed (NCCL_DEBUG=INFO shows which)";
    case ncclSystemError:
        return "a system call failed: memory, socket or file (NCCL_DEBUG=INFO shows which)";
    case ncclInternalError:
        return "internal error in Tutti; please report it with the NCCL_DEBUG=INFO log";
    case ncclInvalidArgument:
        return "invalid argument (ncclGetLastError or the NCCL_DEBUG=WARN log says which)";
    case ncclInvalidUsage:
        return "invalid usage (ncclGetLastError or the NCCL_DEBUG=WARN log says what)";
    case ncclRemoteError: return "a remote rank failed, exited or became unreachable";
    case ncclInProgress: return "operation still in progress";
    case ncclNumResults: break;
    }
    return "unknown result code";
}
TT_API_ALIAS(ncclGetErrorString);

/* The last error is per thread, whatever communicator it concerned, as in NCCL; `comm` is not
 * needed and may be NULL. */
TT_API const char *pncclGetLastError(ncclComm_t comm)
{
    TT_CALL_SCOPE;
    (void)comm;
    return tt_error_last();
}
TT_API_ALIAS(ncclGetLastError);

/* Re-reads NCCL_DEBUG and NCCL_DEBUG_SUBSYS, as NCCL's (deprecated) call does. */
TT_API void pncclResetDebugInit(void) { tt_log_reload(); }
/* The alias must name the function that nccl.h marks deprecated; that use is intended. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TT_API_ALIAS(ncclResetDebugInit);
#pragma GCC diagnostic pop

TT_API ncclResult_t pncclGroupStart(void)
{
    TT_CALL_SCOPE;
    TT_TRACE(TT_SUB_CALL, "ncclGroupStart");
    return tt_group_start();
}
TT_API_ALIAS(ncclGroupStart);

TT_API ncclResult_t pncclGroupEnd(void)
{
    TT_CALL_SCOPE;
    TT_TRACE(TT_SUB_CALL, "ncclGroupEnd");
    return tt_group_end(tt_comm_check_same);
}
TT_API_ALIAS(ncclGroupEnd);

TT_API ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    TT_CALL_SCOPE;
    return tt_group_simulate_end(simInfo);
}
TT_API_ALIAS(ncclGroupSimulateEnd);

TT_API ncclResult_t tuttiStreamCreate(cudaStream_t *stream)
{
    TT_CALL_SCOPE;
    tt_error_clear();
    TT_TRY(tt_api_check_ptr(stream, "tuttiStreamCreate", "stream"));
    return tt_stream_create(stream);
}

TT_API ncclResult_t tuttiStreamDestroy(cudaStream_t stream)
{
    TT_CALL_SCOPE;
    if (stream == NULL)
        return TT_ERROR(ncclInvalidArgument, "tuttiStreamDestroy: stream is NULL");
    TT_TRY(tt_stream_check(stream, "tuttiStreamDestroy"));
    return tt_stream_destroy(stream);
}

TT_API ncclResult_t tuttiStreamSynchronize(cudaStream_t stream)
{
    TT_CALL_SCOPE;
    if (stream == NULL) return ncclSuccess; /* NULL-stream work is complete on return */
    TT_TRY(tt_stream_check(stream, "tuttiStreamSynchronize"));
    return tt_stream_synchronize(stream);
}

TT_API ncclResult_t tuttiStreamQuery(cudaStream_t stream)
{
    TT_CALL_SCOPE;
    if (stream == NULL) return ncclSuccess;
    TT_TRY(tt_stream_check(stream, "tuttiStreamQuery"));
    return tt_stream_query(stream);
}

TT_API ncclResult_t tuttiCommDump(ncclComm_t comm)
{
    TT_CALL_SCOPE;
    tt_error_clear();
    TT_TRY(tt_comm_check(comm, "tuttiCommDump"));
    return tt_comm_dump(comm);
}

TT_API ncclResult_t tuttiCommStats(ncclComm_t comm, tuttiCommStat_t *rows, int maxRows,
                                   int *nrows)
{
    TT_CALL_SCOPE;
    tt_error_clear();
    TT_TRY(tt_comm_check(comm, "tuttiCommStats"));
    TT_TRY(tt_api_check_ptr(nrows, "tuttiCommStats", "nrows"));
    if (maxRows < 0)
        return TT_ERROR(ncclInvalidArgument, "tuttiCommStats: maxRows is %d", maxRows);
    if (maxRows > 0) TT_TRY(tt_api_check_ptr(rows, "tuttiCommStats", "rows"));
    return tt_comm_stats(comm, rows, maxRows, nrows);
}

TT_API ncclResult_t tuttiEventCreate(tuttiEvent_t *event)
{
    TT_CALL_SCOPE;
    tt_error_clear();
    TT_TRY(tt_api_check_ptr(event, "tuttiEventCreate", "event"));
    return tt_event_create(event);
}

TT_API ncclResult_t tuttiEventDestroy(tuttiEvent_t event)
{
    TT_CALL_SCOPE; /* keeps the last error: a destroy during cleanup must not hide why */
    TT_TRY(tt_event_check(event, "tuttiEventDestroy"));
    return tt_event_destroy(event);
}

TT_API ncclResult_t tuttiEventRecord(tuttiEvent_t event, ncclComm_t comm, cudaStream_t stream)
{
    TT_CALL_SCOPE;
    tt_error_clear();
    TT_TRY(tt_event_check(event, "tuttiEventRecord"));
    TT_TRY(tt_comm_check(comm, "tuttiEventRecord"));
    TT_TRY(tt_stream_check(stream, "tuttiEventRecord"));
    return tt_event_record(event, comm, stream);
}

TT_API ncclResult_t tuttiEventQuery(tuttiEvent_t event)
{
    TT_CALL_SCOPE;
    TT_TRY(tt_event_check(event, "tuttiEventQuery"));
    return tt_event_query(event);
}

TT_API ncclResult_t tuttiEventSynchronize(tuttiEvent_t event)
{
    TT_CALL_SCOPE;
    TT_TRY(tt_event_check(event, "tuttiEventSynchronize"));
    return tt_event_synchronize(event);
}

TT_API ncclResult_t tuttiEventWait(tuttiEvent_t event, int64_t timeoutUs)
{
    TT_CALL_SCOPE;
    TT_TRY(tt_event_check(event, "tuttiEventWait"));
    return tt_event_wait(event, timeoutUs);
}

TT_API const char *tuttiVersionString(void) { return TUTTI_VERSION_STRING; }
