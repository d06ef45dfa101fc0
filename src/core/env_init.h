/* Launcher environment detection, behind tuttiCommInitFromEnv: which rank this process is, how
 * many ranks the job has and where they meet, read from the variables that tutti-run, torchrun,
 * Open MPI, MPICH's Hydra and Slurm set (docs/launch.md lists them). tt_env_detect only reads
 * variables; it touches neither network nor files. A single-host mpirun or srun job that names
 * no address meets through a rendezvous file: rank 0 publishes 127.0.0.1:port in it atomically,
 * the other ranks wait for it with a deadline (TUTTI_TIMEOUT_MS). Not thread-safe (getenv). */
#ifndef TT_CORE_ENV_INIT_H
#define TT_CORE_ENV_INIT_H

#include <limits.h>

#include "nccl.h"

#define TT_ENV_ADDR_BYTES 256

/* The launcher whose variables gave rank and size. */
enum tt_env_launcher {
    TT_ENV_LAUNCHER_NONE,  /* none found: a job of one rank */
    TT_ENV_LAUNCHER_RANK,  /* RANK/WORLD_SIZE: tutti-run, torchrun */
    TT_ENV_LAUNCHER_OMPI,  /* OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE: Open MPI */
    TT_ENV_LAUNCHER_PMI,   /* PMI_RANK/PMI_SIZE: MPICH's Hydra, Intel MPI */
    TT_ENV_LAUNCHER_SLURM, /* SLURM_PROCID/SLURM_NTASKS: srun */
};

/* Where the ranks meet. */
enum tt_env_rdzv {
    TT_ENV_RDZV_COMM_ID, /* NCCL_COMM_ID: rank 0's ncclCommInitRank starts the root */
    TT_ENV_RDZV_MASTER,  /* MASTER_ADDR:MASTER_PORT+1 (torchrun): the caller starts the root */
    TT_ENV_RDZV_FILE,    /* single-host job: rank 0 picks an address and publishes it */
    TT_ENV_RDZV_ALONE,   /* a job of one rank: a fresh unique id, no address needed */
};

struct tt_env_job {
    int rank;
    int nranks;
    enum tt_env_launcher launcher;
    const char *launcher_name; /* for messages: "tutti-run/torchrun", "Open MPI", ... */
    const char *rank_var;      /* the variables rank and nranks came from (NULL when none) */
    const char *nranks_var;
    enum tt_env_rdzv rdzv;
    char addr[TT_ENV_ADDR_BYTES]; /* host:port; for FILE, known once picked or read */
    char rdzv_path[PATH_MAX];     /* FILE only */
};

/* Fills `out` from the environment. ncclInvalidArgument, with a message naming the variable,
 * when a value does not parse, a rank is not below the size, a variable lacks its partner, or
 * a job of several ranks has no address and is not a single-host mpirun/srun job. */
ncclResult_t tt_env_detect(struct tt_env_job *out);

/* FILE, rank 0: picks a free port on 127.0.0.1 into job->addr. */
ncclResult_t tt_env_rdzv_pick(struct tt_env_job *job);
/* FILE, rank 0: publishes job->addr in job->rdzv_path (write a private file, then rename). */
ncclResult_t tt_env_rdzv_publish(const struct tt_env_job *job);
/* FILE, other ranks: waits up to TUTTI_TIMEOUT_MS for the file, then reads job->addr. */
ncclResult_t tt_env_rdzv_wait(struct tt_env_job *job);
/* FILE, rank 0, once every rank has joined (or init failed): removes the file. */
void tt_env_rdzv_remove(const struct tt_env_job *job);

#endif
