/* tune_memo: the algorithm a thread chose for its last collective is reused only for the same
 * element size too. Tree's limit is whole elements per slot, so with slots of 15 bytes
 * (NCCL_BUFFSIZE=120) it takes 56 bytes of int8 but only 32 of float64; a choice remembered for
 * 56 bytes of int8 once ran 56 bytes of float64 as Tree, which needs more free slots than the
 * FIFO had after the int8 operations (their credits not yet returned): both ranks stalled in
 * their opening sends until TUTTI_TIMEOUT_MS.
 *
 * Run as every rank of 2 under tutti-run with NCCL_BUFFSIZE=120 and NCCL_ALGO=Tree (tune.cmake):
 * AllReduces of int8 x 30, int8 x 56, float64 x 7 (56 bytes), then the same again, each checked
 * exactly. Exit 1 on a failure. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nccl.h"
#include "tutti.h"

#include "world.h"

static int rank, nranks;

static void run(ncclComm_t comm, ncclDataType_t dtype, size_t count)
{
    int8_t i8[64];
    double f64[8];
    void *buf = dtype == ncclInt8 ? (void *)i8 : (void *)f64;
    for (size_t i = 0; i < count; i++) {
        if (dtype == ncclInt8) i8[i] = (int8_t)(rank + 1 + (int)(i % 5));
        else f64[i] = (double)(rank + 1) * 0.5 + (double)i;
    }
    if (!CHECK_RES(ncclAllReduce(buf, buf, count, dtype, ncclSum, comm, NULL), ncclSuccess))
        return;
    int sum_ranks = nranks * (nranks + 1) / 2;
    for (size_t i = 0; i < count; i++) {
        if (dtype == ncclInt8) {
            if (!CHECK_EQ_MSG(i8[i], sum_ranks + nranks * (int)(i % 5), "int8 x %zu, element %zu",
                              count, i))
                return;
        } else {
            double want = (double)sum_ranks * 0.5 + (double)nranks * (double)i;
            if (!CHECK(f64[i] == want, "float64 x %zu, element %zu: %g, want %g", count, i,
                       f64[i], want))
                return;
        }
    }
}

int main(void)
{
    ncclComm_t comm = world_open("tune_memo", &rank, &nranks);
    if (comm == NULL) return 1;
    for (int round = 0; round < 2; round++) {
        run(comm, ncclInt8, 30);
        run(comm, ncclInt8, 56);
        run(comm, ncclFloat64, 7);
    }
    ncclCommDestroy(comm);
    printf("tune_memo rank %d: %s\n", rank, check_failures ? "FAILED" : "passed");
    return check_failures != 0;
}
