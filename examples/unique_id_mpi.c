/* NCCL's own way to start: rank 0 creates a unique id with ncclGetUniqueId, the program passes
 * it to the other ranks itself (here with MPI_Bcast), and every rank calls ncclCommInitRank.
 * This is the code of an NCCL program, unchanged; only the library it links is Tutti.
 *
 *   mpicc -Iinclude examples/unique_id_mpi.c -Lbuild/release -ltutti \
 *         -Wl,-rpath,"$PWD/build/release" -o unique_id_mpi
 *   mpirun -n 4 ./unique_id_mpi
 *
 * Each rank contributes its rank + 1 to an AllReduce and checks the sum n(n+1)/2. */
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>

#define CHECK_NCCL(call)                                                                       \
    do {                                                                                       \
        ncclResult_t r_ = (call);                                                              \
        if (r_ != ncclSuccess) {                                                               \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, ncclGetErrorString(r_),             \
                    ncclGetLastError(NULL));                                                   \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                      \
        }                                                                                      \
    } while (0)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    ncclUniqueId id;
    if (rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);

    ncclComm_t comm;
    CHECK_NCCL(ncclCommInitRank(&comm, nranks, id, rank));

    double x = rank + 1;
    CHECK_NCCL(ncclAllReduce(&x, &x, 1, ncclFloat64, ncclSum, comm, NULL));
    double want = nranks * (nranks + 1) / 2.0;
    printf("rank %d of %d: sum = %g (expected %g)\n", rank, nranks, x, want);

    CHECK_NCCL(ncclCommDestroy(comm));
    MPI_Finalize();
    return x == want ? 0 : 1;
}
