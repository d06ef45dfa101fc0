#include <stdio.h>
#include <nccl.h>
#include <tutti.h>

int main(void)
{
    ncclComm_t comm;
    /* RANK, WORLD_SIZE and NCCL_COMM_ID come from tutti-run (or mpirun, srun, torchrun). */
    if (tuttiCommInitFromEnv(&comm) != ncclSuccess) {
        fprintf(stderr, "init failed: %s\n", ncclGetLastError(NULL));
        return 1;
    }
    int rank, nranks;
    ncclCommUserRank(comm, &rank);
    ncclCommCount(comm, &nranks);
    float x[4] = {rank, rank, rank, rank};
    /* stream NULL on host memory: returns when the result is in x on this rank. */
    ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, comm, NULL);
    printf("rank %d of %d: sum of ranks = %g\n", rank, nranks, x[0]);
    ncclCommDestroy(comm);
    return 0;
}
