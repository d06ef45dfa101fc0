/* Public entry points of the communicator's life: the unique id, init, destroy and abort, and
 * the queries. Each checks its arguments once, reports the first bad one, sets the logging rank
 * and forwards to the core (src/core/core.h), which trusts what it is given.
 *
 * Nonblocking communicators (config.blocking = 0) are accepted but initialised blocking for
 * now: ncclCommInitRankConfig returns ncclSuccess once the communicator is ready, which NCCL's
 * contract allows (a nonblocking call may complete before it returns), and
 * ncclCommGetAsyncError then reports ncclSuccess. */
#include <string.h>

#include "api/api.h"
#include "bootstrap/bootstrap.h"
#include "core/core.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

#define CONFIG_MAGIC 0xcafebeefu
/* The oldest ncclConfig_t (NCCL 2.14) ends after netName; later versions only append fields. */
#define CONFIG_MIN_VERSION NCCL_VERSION(2, 14, 0)
#define CONFIG_MIN_BYTES (offsetof(ncclConfig_t, netName) + sizeof(const char *))

TT_API ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId)
{
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

/* A boolean field of ncclConfig_t: unset, 0 or 1. */
static ncclResult_t check_config_flag(int value, const char *caller, const char *field)
{
    if (value != NCCL_CONFIG_UNDEF_INT && value != 0 && value != 1)
        return TT_ERROR(ncclInvalidArgument, "%s: config->%s is %d; it must be 0 or 1", caller,
                        field, value);
    return ncclSuccess;
}

/* Validates a user's ncclConfig_t into `out`, a full current-layout copy. A config compiled
 * against an older (smaller) or newer (larger) ncclConfig_t is accepted: the fields this
 * library knows are read when they lie within config->size, the others keep their defaults.
 * The GPU-only fields (CTAs, cgaClusterSize, netName, nvls...) are accepted and ignored. */
static ncclResult_t read_config(const ncclConfig_t *config, const char *caller,
                                ncclConfig_t *out)
{
    const ncclConfig_t defaults = NCCL_CONFIG_INITIALIZER;
    *out = defaults;
    if (config == NULL) return ncclSuccess;
    if (config->magic != CONFIG_MAGIC)
        return TT_ERROR(ncclInvalidArgument,
                        "%s: config was not initialised with NCCL_CONFIG_INITIALIZER (magic "
                        "0x%x, want 0x%x)",
                        caller, config->magic, CONFIG_MAGIC);
    if (config->version < (unsigned)CONFIG_MIN_VERSION)
        return TT_ERROR(ncclInvalidArgument,
                        "%s: config->version %u is older than the first ncclConfig_t (%d)",
                        caller, config->version, CONFIG_MIN_VERSION);
    if (config->size < CONFIG_MIN_BYTES)
        return TT_ERROR(ncclInvalidArgument,
                        "%s: config->size %zu is smaller than any ncclConfig_t (%zu bytes)",
                        caller, config->size, (size_t)CONFIG_MIN_BYTES);
    size_t bytes = config->size < sizeof *out ? config->size : sizeof *out;
    memcpy(out, config, bytes);
    out->size = sizeof *out;
    TT_TRY(check_config_flag(out->blocking, caller, "blocking"));
    TT_TRY(check_config_flag(out->splitShare, caller, "splitShare"));
    TT_TRY(check_config_flag(out->shrinkShare, caller, "shrinkShare"));
    TT_TRY(check_config_flag(out->collnetEnable, caller, "collnetEnable"));
    return ncclSuccess;
}

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
    TT_TRY(read_config(config, caller, &cfg));
    tt_log_set_rank(rank);
    TT_INFO(TT_SUB_CALL, "%s: rank %d nranks %d%s%s%s", caller, rank, nranks,
            cfg.commName != NULL ? " name " : "", cfg.commName != NULL ? cfg.commName : "",
            cfg.blocking == 0 ? " (nonblocking requested; initialising blocking)" : "");
    TT_TRY(tt_comm_init_rank(comm, nranks, id, rank));
    return ncclSuccess;
}

TT_API ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                      int rank)
{
    return init_rank("ncclCommInitRank", comm, nranks, &commId, rank, NULL);
}
TT_API_ALIAS(ncclCommInitRank);

TT_API ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId,
                                            int rank, ncclConfig_t *config)
{
    return init_rank("ncclCommInitRankConfig", comm, nranks, &commId, rank, config);
}
TT_API_ALIAS(ncclCommInitRankConfig);

/* Destroy and abort accept NULL as a no-op, as NCCL does. */
TT_API ncclResult_t pncclCommDestroy(ncclComm_t comm)
{
    tt_error_clear();
    if (comm == NULL) return ncclSuccess;
    TT_TRY(tt_comm_check(comm, "ncclCommDestroy"));
    tt_log_set_rank(tt_comm_rank(comm));
    TT_INFO(TT_SUB_CALL, "ncclCommDestroy: comm %p", (void *)comm);
    ncclResult_t res = tt_comm_destroy(comm);
    tt_log_set_rank(-1);
    return res;
}
TT_API_ALIAS(ncclCommDestroy);

TT_API ncclResult_t pncclCommAbort(ncclComm_t comm)
{
    tt_error_clear();
    if (comm == NULL) return ncclSuccess;
    TT_TRY(tt_comm_check(comm, "ncclCommAbort"));
    tt_log_set_rank(tt_comm_rank(comm));
    TT_INFO(TT_SUB_CALL, "ncclCommAbort: comm %p", (void *)comm);
    ncclResult_t res = tt_comm_abort(comm);
    tt_log_set_rank(-1);
    return res;
}
TT_API_ALIAS(ncclCommAbort);

/* The queries below neither clear nor set the last error when they succeed, so that
 * ncclGetLastError still describes the operation that failed before them. */

TT_API ncclResult_t pncclCommCount(const ncclComm_t comm, int *count)
{
    TT_TRY(tt_comm_check(comm, "ncclCommCount"));
    tt_log_set_rank(tt_comm_rank(comm));
    TT_TRY(tt_api_check_ptr(count, "ncclCommCount", "count"));
    *count = tt_comm_nranks(comm);
    return ncclSuccess;
}
TT_API_ALIAS(ncclCommCount);

TT_API ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank)
{
    TT_TRY(tt_comm_check(comm, "ncclCommUserRank"));
    tt_log_set_rank(tt_comm_rank(comm));
    TT_TRY(tt_api_check_ptr(rank, "ncclCommUserRank", "rank"));
    *rank = tt_comm_rank(comm);
    return ncclSuccess;
}
TT_API_ALIAS(ncclCommUserRank);

/* A communicator of host processes has no CUDA device. */
TT_API ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device)
{
    TT_TRY(tt_comm_check(comm, "ncclCommCuDevice"));
    tt_log_set_rank(tt_comm_rank(comm));
    TT_TRY(tt_api_check_ptr(device, "ncclCommCuDevice", "device"));
    *device = -1;
    return ncclSuccess;
}
TT_API_ALIAS(ncclCommCuDevice);

TT_API ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    TT_TRY(tt_comm_check(comm, "ncclCommGetAsyncError"));
    tt_log_set_rank(tt_comm_rank(comm));
    TT_TRY(tt_api_check_ptr(asyncError, "ncclCommGetAsyncError", "asyncError"));
    *asyncError = tt_comm_async_error(comm);
    return ncclSuccess;
}
TT_API_ALIAS(ncclCommGetAsyncError);
