/* Public entry points for communicators made from communicators (split, shrink, grow, init all,
 * scalable init), user-defined reduction operators, and memory (ncclMemAlloc, registrations,
 * windows). Each checks its arguments once, in NCCL's order (the communicator first where there
 * is one, then the other arguments in the order NCCL checks them), reports the first bad one,
 * sets the logging rank and forwards to the core (src/core/core.h), which trusts what it gets.
 *
 * Whether a communicator is ready for the call (initialised, not failed, not finalized) is the
 * core's check. Host-specific choices, each stated where it applies: ncclCommInitAll ignores
 * devlist (host ranks have no device); ncclRedOpCreatePreMulSum takes host scalars only. */
#include <stdbool.h>
#include <stdlib.h>

#include "api/api.h"
#include "api/api_config.h"
#include "core/core.h"
#include "reduce/reduce.h"
#include "util/err.h"
#include "util/log.h"

/* Checks `comm` and makes its rank this thread's logging rank. */
static ncclResult_t enter_comm(ncclComm_t comm, const char *caller)
{
    TT_TRY(tt_comm_check(comm, caller));
    tt_log_set_rank(tt_comm_rank(comm));
    return ncclSuccess;
}

/* ---- communicators made from communicators ------------------------------------------------- */

/* The colour is checked by the core once every rank's is known, so that a bad colour fails the
 * split on every rank instead of leaving the others waiting. */
TT_API ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                                   ncclConfig_t *config)
{
    TT_CALL_SCOPE;
    static const char caller[] = "ncclCommSplit";
    tt_error_clear();
    TT_TRY(enter_comm(comm, caller));
    TT_TRY(tt_api_check_ptr(newcomm, caller, "newcomm"));
    *newcomm = NULL;
    /* A NULL config takes the defaults (NCCL inherits the parent's, which holds nothing else
     * here). */
    ncclConfig_t cfg;
    TT_TRY(tt_api_read_config(config, caller, &cfg));
    TT_INFO(TT_SUB_CALL, "ncclCommSplit: comm %p color %d key %d%s", (void *)comm, color, key,
            cfg.blocking == 0 ? " nonblocking" : "");
    return tt_comm_split(comm, color, key, newcomm, config != NULL ? &cfg : NULL);
}
TT_API_ALIAS(ncclCommSplit);

/* Only the ranks that stay call shrink; every one of them passes the same exclude list. */
TT_API ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList,
                                    int excludeRanksCount, ncclComm_t *newcomm,
                                    ncclConfig_t *config, int shrinkFlags)
{
    TT_CALL_SCOPE;
    static const char caller[] = "ncclCommShrink";
    ncclResult_t res = ncclSuccess;
    bool *seen = NULL;
    tt_error_clear();
    TT_TRY(enter_comm(comm, caller));
    TT_TRY(tt_api_check_ptr(newcomm, caller, "newcomm"));
    *newcomm = NULL;
    if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
        return TT_ERROR(ncclInvalidArgument,
                        "%s: shrinkFlags 0x%x is neither NCCL_SHRINK_DEFAULT nor "
                        "NCCL_SHRINK_ABORT",
                        caller, (unsigned)shrinkFlags);
    int rank = tt_comm_rank(comm), nranks = tt_comm_nranks(comm);
    if (excludeRanksCount < 0)
        return TT_ERROR(ncclInvalidArgument, "%s: excludeRanksCount %d is negative", caller,
                        excludeRanksCount);
    if (excludeRanksCount > 0) TT_TRY(tt_api_check_ptr(excludeRanksList, caller,
                                                       "excludeRanksList"));
    TT_TRY(TT_CALLOC(&seen, (size_t)nranks));
    for (int i = 0; i < excludeRanksCount; i++) {
        int r = excludeRanksList[i];
        if (r < 0 || r >= nranks) {
            res = TT_ERROR(ncclInvalidArgument,
                           "%s: excludeRanksList[%d] = %d is not a rank of the parent [0, %d)",
                           caller, i, r, nranks);
            goto out;
        }
        if (seen[r]) {
            res = TT_ERROR(ncclInvalidArgument, "%s: rank %d is listed twice in excludeRanksList",
                           caller, r);
            goto out;
        }
        if (r == rank) {
            res = TT_ERROR(ncclInvalidArgument,
                           "%s: rank %d excludes itself (excludeRanksList[%d]); excluded ranks "
                           "must not call ncclCommShrink",
                           caller, r, i);
            goto out;
        }
        seen[r] = true;
    }
    ncclConfig_t cfg;
    TT_TRY_GOTO(tt_api_read_config(config, caller, &cfg), res, out);
    TT_INFO(TT_SUB_CALL, "ncclCommShrink: comm %p excluding %d of %d ranks, flags 0x%x",
            (void *)comm, excludeRanksCount, nranks, (unsigned)shrinkFlags);
    res = tt_comm_shrink(comm, excludeRanksList, excludeRanksCount, newcomm,
                         config != NULL ? &cfg : NULL, shrinkFlags);
out:
    free(seen);
    return res;
}
TT_API_ALIAS(ncclCommShrink);

TT_API ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId)
{
    TT_CALL_SCOPE;
    static const char caller[] = "ncclCommGetUniqueId";
    tt_error_clear();
    TT_TRY(enter_comm(comm, caller));
    TT_TRY(tt_api_check_ptr(uniqueId, caller, "uniqueId"));
    TT_INFO(TT_SUB_CALL, "ncclCommGetUniqueId: comm %p", (void *)comm);
    return tt_comm_get_unique_id(comm, uniqueId);
}
TT_API_ALIAS(ncclCommGetUniqueId);

/* Existing ranks (comm set) and new ranks (comm NULL) take different arguments. A new rank
 * cannot know the parent's size, so its rank is only checked to lie in [1, nRanks) (rank 0
 * always exists); a rank that collides with an existing one fails at the rendezvous. Whether
 * exactly one existing rank passed the id is the core's check, made on every existing rank. */
TT_API ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId,
                                  int rank, ncclComm_t *newcomm, ncclConfig_t *config)
{
    TT_CALL_SCOPE;
    static const char caller[] = "ncclCommGrow";
    tt_error_clear();
    if (comm != NULL) TT_TRY(enter_comm(comm, caller));
    TT_TRY(tt_api_check_ptr(newcomm, caller, "newcomm"));
    *newcomm = NULL;
    if (comm != NULL) {
        int size = tt_comm_nranks(comm);
        if (nRanks <= size)
            return TT_ERROR(ncclInvalidArgument,
                            "%s: nRanks %d must exceed the parent's %d ranks", caller, nRanks,
                            size);
        if (rank != -1)
            return TT_ERROR(ncclInvalidArgument,
                            "%s: rank %d: an existing rank keeps its rank and passes -1", caller,
                            rank);
    } else {
        if (nRanks < 2)
            return TT_ERROR(ncclInvalidArgument,
                            "%s: nRanks %d must be at least 2 (the parent's ranks and a new one)",
                            caller, nRanks);
        if (rank < 1 || rank >= nRanks)
            return TT_ERROR(ncclInvalidArgument,
                            "%s: a new rank (comm NULL) must pass its rank in [1, %d) beyond the "
                            "parent's ranks, not %d",
                            caller, nRanks, rank);
        TT_TRY(tt_api_check_ptr(uniqueId, caller, "uniqueId"));
        tt_log_set_rank(rank);
    }
    ncclConfig_t cfg;
    TT_TRY(tt_api_read_config(config, caller, &cfg));
    TT_INFO(TT_SUB_CALL, "ncclCommGrow: comm %p nRanks %d rank %d%s", (void *)comm, nRanks, rank,
            uniqueId != NULL ? " with id" : "");
    /* A new rank has no parent to inherit from: NULL config means the defaults. */
    return tt_comm_grow(comm, nRanks, uniqueId, rank, newcomm,
                        config != NULL || comm == NULL ? &cfg : NULL);
}
TT_API_ALIAS(ncclCommGrow);

/* Host ranks have no device, so devlist is ignored (it may be NULL, as in NCCL). */
TT_API ncclResult_t pncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    TT_CALL_SCOPE;
    static const char caller[] = "ncclCommInitAll";
    tt_error_clear();
    TT_TRY(tt_api_check_ptr(comm, caller, "comm"));
    if (ndev < 1)
        return TT_ERROR(ncclInvalidArgument, "%s: ndev %d must be at least 1", caller, ndev);
    TT_INFO(TT_SUB_CALL, "ncclCommInitAll: %d ranks in this process (devlist %p ignored)", ndev,
            (const void *)devlist);
    return tt_comm_init_all(comm, ndev);
}
TT_API_ALIAS(ncclCommInitAll);

TT_API ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank,
                                              int nId, ncclUniqueId *commIds,
                                              ncclConfig_t *config)
{
    TT_CALL_SCOPE;
    static const char caller[] = "ncclCommInitRankScalable";
    tt_error_clear();
    TT_TRY(tt_api_check_ptr(newcomm, caller, "newcomm"));
    *newcomm = NULL;
    if (nranks < 1)
        return TT_ERROR(ncclInvalidArgument, "%s: nranks %d must be at least 1", caller, nranks);
    TT_TRY(tt_api_check_rank(myrank, nranks, caller, "myrank"));
    if (nId < 1 || nId > nranks)
        return TT_ERROR(ncclInvalidArgument, "%s: nId %d must lie in [1, nranks = %d]", caller,
                        nId, nranks);
    TT_TRY(tt_api_check_ptr(commIds, caller, "commIds"));
    ncclConfig_t cfg;
    TT_TRY(tt_api_read_config(config, caller, &cfg));
    tt_log_set_rank(myrank);
    TT_INFO(TT_SUB_CALL, "%s: rank %d nranks %d nId %d", caller, myrank, nranks, nId);
    return tt_comm_init_rank_scalable(newcomm, nranks, myrank, nId, commIds, &cfg);
}
TT_API_ALIAS(ncclCommInitRankScalable);

/* ---- user-defined reduction operators ------------------------------------------------------ */

TT_API ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
                                              ncclDataType_t datatype,
                                              ncclScalarResidence_t residence, ncclComm_t comm)
{
    TT_CALL_SCOPE;
    static const char caller[] = "ncclRedOpCreatePreMulSum";
    tt_error_clear();
    TT_TRY(enter_comm(comm, caller));
    TT_TRY(tt_api_check_ptr(op, caller, "op"));
    TT_TRY(tt_api_check_ptr(scalar, caller, "scalar"));
    TT_TRY(tt_api_check_dtype(datatype, caller));
    if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
        return TT_ERROR(ncclInvalidArgument,
                        "%s: residence %d is neither ncclScalarDevice nor "
                        "ncclScalarHostImmediate",
                        caller, (int)residence);
    TT_INFO(TT_SUB_CALL, "%s: datatype %s residence %d comm %p", caller,
            tt_dtype_name(datatype), (int)residence, (void *)comm);
    return tt_redop_create_premulsum(comm, op, scalar, datatype, residence);
}
TT_API_ALIAS(ncclRedOpCreatePreMulSum);

TT_API ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    TT_CALL_SCOPE;
    static const char caller[] = "ncclRedOpDestroy";
    tt_error_clear();
    if ((int)op >= 0 && (int)op < (int)ncclNumOps)
        return TT_ERROR(ncclInvalidArgument, "%s: op %d is a built-in operator", caller,
                        (int)op);
    if ((int)op < 0)
        return TT_ERROR(ncclInvalidArgument, "%s: op %d is not an ncclRedOp_t", caller,
                        (int)op);
    TT_TRY(enter_comm(comm, caller));
    TT_INFO(TT_SUB_CALL, "%s: op %d comm %p", caller, (int)op, (void *)comm);
    return tt_redop_destroy(comm, op);
}
TT_API_ALIAS(ncclRedOpDestroy);

/* ---- memory ------------------------------------------------------------------------------- */

/* ncclMemAlloc and tuttiMemAllocHost: the same checks, then device or host memory. */
static ncclResult_t mem_alloc(void **ptr, size_t size, const char *caller, bool host)
{
    tt_error_clear();
    TT_TRY(tt_api_check_ptr(ptr, caller, "ptr"));
    if (size == 0) return TT_ERROR(ncclInvalidArgument, "%s: size is 0", caller);
    return host ? tt_mem_alloc_host(ptr, size) : tt_mem_alloc(ptr, size);
}

TT_API ncclResult_t pncclMemAlloc(void **ptr, size_t size)
{
    TT_CALL_SCOPE;
    return mem_alloc(ptr, size, "ncclMemAlloc", false);
}
TT_API_ALIAS(ncclMemAlloc);

TT_API ncclResult_t tuttiMemAllocHost(void **ptr, size_t size)
{
    TT_CALL_SCOPE;
    return mem_alloc(ptr, size, "tuttiMemAllocHost", true);
}

TT_API ncclResult_t pncclMemFree(void *ptr)
{
    TT_CALL_SCOPE;
    tt_error_clear();
    TT_TRY(tt_api_check_ptr(ptr, "ncclMemFree", "ptr"));
    return tt_mem_free(ptr);
}
TT_API_ALIAS(ncclMemFree);

TT_API ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size,
                                      void **handle)
{
    TT_CALL_SCOPE;
    static const char caller[] = "ncclCommRegister";
    tt_error_clear();
    TT_TRY(enter_comm(comm, caller));
    TT_TRY(tt_api_check_ptr(buff, caller, "buff"));
    if (size == 0) return TT_ERROR(ncclInvalidArgument, "%s: size is 0", caller);
    TT_TRY(tt_api_check_ptr(handle, caller, "handle"));
    TT_INFO(TT_SUB_CALL, "%s: buff %p size %zu comm %p", caller, buff, size, (void *)comm);
    return tt_mem_register(comm, buff, size, handle);
}
TT_API_ALIAS(ncclCommRegister);

TT_API ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle)
{
    TT_CALL_SCOPE;
    static const char caller[] = "ncclCommDeregister";
    tt_error_clear();
    TT_TRY(enter_comm(comm, caller));
    TT_TRY(tt_api_check_ptr(handle, caller, "handle"));
    TT_INFO(TT_SUB_CALL, "%s: handle %p comm %p", caller, handle, (void *)comm);
    return tt_mem_deregister(comm, handle);
}
TT_API_ALIAS(ncclCommDeregister);

/* A window is collective in NCCL, and here too: the ranks settle whether every one of them put
 * it in shareable memory (core/mem.c). */
TT_API ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size,
                                            ncclWindow_t *win, int winFlags)
{
    TT_CALL_SCOPE;
    static const char caller[] = "ncclCommWindowRegister";
    tt_error_clear();
    TT_TRY(enter_comm(comm, caller));
    TT_TRY(tt_api_check_ptr(buff, caller, "buff"));
    if (size == 0) return TT_ERROR(ncclInvalidArgument, "%s: size is 0", caller);
    TT_TRY(tt_api_check_ptr(win, caller, "win"));
    if ((winFlags & ~(NCCL_WIN_DEFAULT | NCCL_WIN_COLL_SYMMETRIC)) != 0)
        return TT_ERROR(ncclInvalidArgument,
                        "%s: winFlags 0x%x has bits other than NCCL_WIN_COLL_SYMMETRIC (0x%x)",
                        caller, (unsigned)winFlags, (unsigned)NCCL_WIN_COLL_SYMMETRIC);
    TT_INFO(TT_SUB_CALL, "%s: buff %p size %zu flags 0x%x comm %p", caller, buff, size,
            (unsigned)winFlags, (void *)comm);
    return tt_mem_window_register(comm, buff, size, win, winFlags);
}
TT_API_ALIAS(ncclCommWindowRegister);

TT_API ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    TT_CALL_SCOPE;
    static const char caller[] = "ncclCommWindowDeregister";
    tt_error_clear();
    TT_TRY(enter_comm(comm, caller));
    TT_TRY(tt_api_check_ptr(win, caller, "win"));
    TT_INFO(TT_SUB_CALL, "%s: win %p comm %p", caller, (void *)win, (void *)comm);
    return tt_mem_window_deregister(comm, win);
}
TT_API_ALIAS(ncclCommWindowDeregister);
