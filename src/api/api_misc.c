/* Public entry points that need no communicator: the version, the error strings, the thread's
 * last error and group brackets.
 *
 * Groups: the core does not defer operations yet, so every call between ncclGroupStart and
 * ncclGroupEnd runs at once, as if it were alone. The brackets are still checked: a per-thread
 * depth counts open groups, and ncclGroupEnd without a matching ncclGroupStart is
 * ncclInvalidUsage. Until the core defers grouped operations, a group that needs them to
 * progress together (one thread initialising or driving several ranks, or matching
 * ncclSend/ncclRecv pairs) cannot complete; single operations per rank inside a group work. */
#include "api/api.h"

#include "tutti.h"
#include "util/err.h"
#include "util/log.h"

#ifndef TUTTI_VERSION_STRING
#error "TUTTI_VERSION_STRING must be defined by the build (CMakeLists.txt)"
#endif

/* Open ncclGroupStart calls of this thread. */
static _Thread_local int group_depth;

TT_API ncclResult_t pncclGetVersion(int *version)
{
    TT_TRY(tt_api_check_ptr(version, "ncclGetVersion", "version"));
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
TT_API_ALIAS(ncclGetVersion);

TT_API const char *pncclGetErrorString(ncclResult_t result)
{
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
    (void)comm;
    return tt_error_last();
}
TT_API_ALIAS(ncclGetLastError);

/* The logging variables are read once per process (src/util/log.c) and cannot be re-read yet;
 * NCCL itself deprecates this call. Being void, it can only report that. */
TT_API void pncclResetDebugInit(void)
{
    tt_api_not_implemented("ncclResetDebugInit");
}
/* The alias must name the function that nccl.h marks deprecated; that use is intended. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TT_API_ALIAS(ncclResetDebugInit);
#pragma GCC diagnostic pop

TT_API ncclResult_t pncclGroupStart(void)
{
    group_depth++;
    TT_TRACE(TT_SUB_CALL, "ncclGroupStart: depth %d", group_depth);
    return ncclSuccess;
}
TT_API_ALIAS(ncclGroupStart);

TT_API ncclResult_t pncclGroupEnd(void)
{
    if (group_depth == 0)
        return TT_ERROR(ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart is open on this "
                                          "thread");
    TT_TRACE(TT_SUB_CALL, "ncclGroupEnd: depth %d", group_depth);
    group_depth--;
    return ncclSuccess;
}
TT_API_ALIAS(ncclGroupEnd);

TT_API const char *tuttiVersionString(void) { return TUTTI_VERSION_STRING; }
