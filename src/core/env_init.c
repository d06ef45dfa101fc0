/* tuttiCommInitFromEnv: a communicator built from what the launcher put in the environment, so
 * that one program runs unchanged under tutti-run, torchrun, mpirun or srun. tt_env_detect
 * (env_detect.c) says who this rank is and where the ranks meet; this file turns that into a
 * unique id shared by every rank and calls the core's init. The bootstrap root is started
 * exactly once, on rank 0: by tt_comm_init_rank when NCCL_COMM_ID is set, here otherwise. */
#include <stdio.h>

#include "bootstrap/bootstrap.h"
#include "core/lifecycle.h"
#include "core/env_init.h"
#include "tutti.h"
#include "util/err.h"
#include "util/log.h"

/* The unique id every rank of `job` shares. Rank 0 starts the root where init will not. */
static ncclResult_t make_id(struct tt_env_job *job, ncclUniqueId *id)
{
    switch (job->rdzv) {
    case TT_ENV_RDZV_COMM_ID:
        TT_TRY(tt_bootstrap_id_from_string(job->addr, id));
        return ncclSuccess;
    case TT_ENV_RDZV_MASTER:
        TT_TRY(tt_bootstrap_id_from_string(job->addr, id));
        if (job->rank == 0) TT_TRY(tt_bootstrap_root_start(id));
        return ncclSuccess;
    case TT_ENV_RDZV_FILE:
        /* Rank 0 listens before it publishes, so a rank that reads the file finds the root. */
        if (job->rank == 0) {
            TT_TRY(tt_env_rdzv_pick(job));
            TT_TRY(tt_bootstrap_id_from_string(job->addr, id));
            TT_TRY(tt_bootstrap_root_start(id));
            TT_TRY(tt_env_rdzv_publish(job));
        } else {
            TT_TRY(tt_env_rdzv_wait(job));
            TT_TRY(tt_bootstrap_id_from_string(job->addr, id));
        }
        return ncclSuccess;
    case TT_ENV_RDZV_ALONE:
        TT_TRY(tt_bootstrap_get_unique_id(id));
        return ncclSuccess;
    }
    return TT_ERROR(ncclInternalError, "unknown rendezvous kind %d", (int)job->rdzv);
}

static const char *rdzv_name(enum tt_env_rdzv rdzv)
{
    switch (rdzv) {
    case TT_ENV_RDZV_COMM_ID: return "NCCL_COMM_ID";
    case TT_ENV_RDZV_MASTER: return "MASTER_ADDR:MASTER_PORT+1";
    case TT_ENV_RDZV_FILE: return "rendezvous file";
    case TT_ENV_RDZV_ALONE: return "none (one rank)";
    }
    return "?";
}

__attribute__((visibility("default"))) ncclResult_t tuttiCommInitFromEnv(ncclComm_t *comm)
{
    tt_error_clear();
    if (comm == NULL) return TT_ERROR(ncclInvalidArgument, "tuttiCommInitFromEnv: comm is NULL");
    *comm = NULL;
    struct tt_env_job job;
    ncclUniqueId id;
    ncclResult_t res = ncclSuccess;
    TT_TRY(tt_env_detect(&job));
    TT_TRY_GOTO(make_id(&job, &id), res, out);
    TT_INFO(TT_SUB_INIT | TT_SUB_ENV, "tuttiCommInitFromEnv: rank %d of %d from %s/%s (%s), "
            "rendezvous %s via %s", job.rank, job.nranks, job.rank_var ? job.rank_var : "-",
            job.nranks_var ? job.nranks_var : "-", job.launcher_name,
            job.addr[0] ? job.addr : "-", rdzv_name(job.rdzv));
    TT_TRY_GOTO(tt_comm_init_rank(comm, job.nranks, &id, job.rank, NULL), res, out);
out:
    /* Once init has returned every rank has read the file (or never will). */
    if (job.rank == 0) tt_env_rdzv_remove(&job);
    return res;
}
