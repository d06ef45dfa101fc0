/* Public entry points of the communicator's life: the unique id, init, destroy and abort, and
 * the queries. Each checks its arguments once, reports the first bad one, sets the logging rank
 * and forwards to the core (src/core/core.h), which trusts what it is given.
 *
 * Nonblocking communicators (config.blocking = 0) initialise on a thread of their own:
 * ncclCommInitRankConfig returns ncclInProgress, and ncclCommGetAsyncError says so until the
 * communicator is ready (core/comm.c, docs/semantics.md). */
#include <string.h>

#include "api/api.h"
#include "api/api_config.h"
#include "bootstrap/bootstrap.h"
#include "core/core.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

TT_API ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId)
{
    TT_CALL_SCOPE;
    tt_error_clear();
    TT_TRY(tt_api_check_ptr(uniqueId, "ncclGetUniqueId", "uniqueId"));
    /* As in NCCL, NCCL_COMM_ID names the root for every rank, so the id is derived from it and
     * no root is started here (rank 0 starts it in ncclCommInitRank). */
    const char *comm_id = tt_param_comm_id();
    if (comm_id[0] != '\0') {
        TT_INFO(TT_SUB_INIT | TT_SUB_BOOTSTRAP, "ncclGetUniqueId: from NCCL_COMM_ID=%s", comm_id);
        TT_TRY(tt_bootstrap_id_from_string(comm_id, uniqueId));
        return ncclSuccess;
    }
    TT_TRY(tt_bootstrap_get_unique_id(uniqueId));
    return ncclSuccess;
}
TT_API_ALIAS(ncclGetUniqueId);

/* The checks and the call shared by ncclCommInitRank and ncclCommInitRankConfig. */
static ncclResult_t init_rank(const char *caller, ncclComm_t *comm, int nranks,
                              const ncclUniqueId *id, int rank, const ncclConfig_t *config)
{
    tt_error_clear();
    TT_TRY(tt_api_check_ptr(comm, caller, "comm"));
    *comm = NULL;
    if (nranks < 1)
        return TT_ERROR(ncclInvalidArgument, "%s: nranks %d must be at least 1", caller, nranks);
    TT_TRY(tt_api_check_rank(rank, nranks, caller, "rank"));
    ncclConfig_t cfg;
    TT_TRY(tt_api_read_config(config, caller, &cfg));
    tt_log_set_rank(rank);
    TT_INFO(TT_SUB_CALL, "%s: rank %d nranks %d%s%s%s", caller, rank, nranks,
            cfg.commName != NULL ? " name " : "", cfg.commName != NULL ? cfg.commName : "",
            cfg.blocking == 0 ? " nonblocking" : "");
    return tt_comm_init_rank(comm, nranks, id, rank, &cfg);
}

TT_API ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                      int rank)
{
    TT_CALL_SCOPE;
    return init_rank("ncclCommInitRank", comm, nranks, &commId, rank, NULL);
}
TT_API_ALIAS(ncclCommInitRank);

TT_API ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                            int rank, ncclConfig_t *config)
{
    TT_CALL_SCOPE;
    return init_rank("ncclCommInitRankConfig", comm, nranks, &commId, rank, config);
}
TT_API_ALIAS(ncclCommInitRankConfig);

/* Destroy and abort accept NULL as a no-op, as NCCL does. */
TT_API ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
    TT_CALL_SCOPE;
    tt_error_clear();
    if (comm == NULL) return ncclSuccess;
    TT_TRY(tt_comm_check(comm, "ncclCommDestroy"));
    tt_log_set_rank(tt_comm_rank(comm));
    TT_INFO(TT_SUB_CALL, "ncclCommDestroy: comm %p", (void *)comm);
    ncclResult_t res = tt_comm_destroy(comm, TT_CALL_OUTERMOST);
    tt_log_set_rank(-1);
    return res;
}
TT_API_ALIAS(ncclCommDestroy);

TT_API ncclResult_t pncclCommAbort(ncclComm_t comm)
{
    TT_CALL_SCOPE;
    tt_error_clear();
    if (comm == NULL) return ncclSuccess;
    TT_TRY(tt_comm_check(comm, "ncclCommAbort"));
    tt_log_set_rank(tt_comm_rank(comm));
    TT_INFO(TT_SUB_CALL, "ncclCommAbort: comm %p", (void *)comm);
    ncclResult_t res = tt_comm_abort(comm, TT_CALL_OUTERMOST);
    tt_log_set_rank(-1);
    return res;
}
TT_API_ALIAS(ncclCommAbort);

/* The queries below neither clear nor set the last error when they succeed, so that
 * ncclGetLastError still describes the operation that failed before them. */

TT_API ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
    TT_CALL_SCOPE;
    TT_TRY(tt_comm_check(comm, "ncclCommCount"));
    tt_log_set_rank(tt_comm_rank(comm));
    TT_TRY(tt_api_check_ptr(count, "ncclCommCount", "count"));
    *count = tt_comm_nranks(comm);
    return ncclSuccess;
}
TT_API_ALIAS(ncclCommCount);

TT_API ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
    TT_CALL_SCOPE;
    TT_TRY(tt_comm_check(comm, "ncclCommUserRank"));
    tt_log_set_rank(tt_comm_rank(comm));
    TT_TRY(tt_api_check_ptr(rank, "ncclCommUserRank", "rank"));
    *rank = tt_comm_rank(comm);
    return ncclSuccess;
}
TT_API_ALIAS(ncclCommUserRank);

/* The CUDA device current on the thread that made the communicator; -1 for host processes
 * (and every communicator of a host build). */
TT_API ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device)
{
    TT_CALL_SCOPE;
    TT_TRY(tt_comm_check(comm, "ncclCommCuDevice"));
    tt_log_set_rank(tt_comm_rank(comm));
    TT_TRY(tt_api_check_ptr(device, "ncclCommCuDevice", "device"));
    *device = tt_comm_cuda_device(comm);
    return ncclSuccess;
}
TT_API_ALIAS(ncclCommCuDevice);

TT_API ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    TT_CALL_SCOPE;
    TT_TRY(tt_comm_check(comm, "ncclCommGetAsyncError"));
    tt_log_set_rank(tt_comm_rank(comm));
    TT_TRY(tt_api_check_ptr(asyncError, "ncclCommGetAsyncError", "asyncError"));
    *asyncError = tt_comm_async_error(comm);
    if (*asyncError != ncclSuccess && *asyncError != ncclInProgress) {
        const char *why = tt_comm_fail_reason(comm);
        tt_error_note("rank %d's communicator failed: %s", tt_comm_rank(comm),
                      why[0] ? why : "(no reason recorded; see the WARN lines on stderr)");
    }
    return ncclSuccess;
}
TT_API_ALIAS(ncclCommGetAsyncError);

TT_API ncclResult_t pncclCommFinalize(ncclComm_t comm)
{
    TT_CALL_SCOPE;
    tt_error_clear();
    TT_TRY(tt_comm_check(comm, "ncclCommFinalize"));
    tt_log_set_rank(tt_comm_rank(comm));
    TT_INFO(TT_SUB_CALL, "ncclCommFinalize: comm %p", (void *)comm);
    return tt_comm_finalize(comm);
}
TT_API_ALIAS(ncclCommFinalize);

TT_API ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    TT_CALL_SCOPE;
    tt_error_clear();
    TT_TRY(tt_comm_check(comm, "ncclCommRevoke"));
    tt_log_set_rank(tt_comm_rank(comm));
    if (revokeFlags != NCCL_REVOKE_DEFAULT)
        return TT_ERROR(ncclInvalidArgument, "ncclCommRevoke: unknown revokeFlags %d",
                        revokeFlags);
    TT_INFO(TT_SUB_CALL, "ncclCommRevoke: comm %p", (void *)comm);
    return tt_comm_revoke(comm);
}
TT_API_ALIAS(ncclCommRevoke);
