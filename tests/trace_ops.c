/* The workload of the trace test (tests/test_trace.sh), run by tutti-run with TUTTI_TRACE_FILE
 * set: a few collectives of different sizes (so that the timeline shows several algorithms and
 * their steps) and a ring of sends and receives in a group, each result checked bit for bit
 * (small integers in floats: every sum is exact). The trace file is written by
 * ncclCommDestroy. */
#include <stdio.h>
#include <stdlib.h>

#include "nccl.h"
#include "tutti.h"
#include "check.h"

#define BIG 65536

int main(void)
{
    ncclComm_t comm;
    if (!CHECK(tuttiCommInitFromEnv(&comm) == ncclSuccess, "init: %s", ncclGetLastError(NULL)))
        return 1;
    int rank, nranks;
    ncclCommUserRank(comm, &rank);
    ncclCommCount(comm, &nranks);
    check_rank = rank;
    float *x = malloc(BIG * sizeof *x), *y = malloc(BIG * (size_t)nranks * sizeof *y);
    if (!CHECK(x != NULL && y != NULL, "out of memory")) return 1;
    int sum = nranks * (nranks - 1) / 2;

    /* AllReduce at three sizes: the ranks' numbers plus the index, summed. */
    size_t counts[] = {2, 1024, BIG};
    for (int c = 0; c < 3; c++) {
        for (size_t i = 0; i < counts[c]; i++) x[i] = (float)(rank + (int)(i % 7));
        CHECK_RES(ncclAllReduce(x, y, counts[c], ncclFloat32, ncclSum, comm, NULL), ncclSuccess);
        for (size_t i = 0; i < counts[c]; i++)
            if (!CHECK_EQ_MSG(y[i], (float)(sum + nranks * (int)(i % 7)), "allreduce %zu [%zu]",
                              counts[c], i))
                break;
    }
    /* Broadcast from the last rank. */
    for (size_t i = 0; i < 1024; i++) x[i] = rank == nranks - 1 ? (float)i : -1.0f;
    CHECK_RES(ncclBroadcast(x, x, 1024, ncclFloat32, nranks - 1, comm, NULL), ncclSuccess);
    for (size_t i = 0; i < 1024; i++)
        if (!CHECK_EQ_MSG(x[i], (float)i, "broadcast [%zu]", i)) break;
    /* AllGather: block r holds r. */
    for (size_t i = 0; i < 4096; i++) x[i] = (float)rank;
    CHECK_RES(ncclAllGather(x, y, 4096, ncclFloat32, comm, NULL), ncclSuccess);
    for (size_t i = 0; i < 4096 * (size_t)nranks; i++)
        if (!CHECK_EQ_MSG(y[i], (float)(i / 4096), "allgather [%zu]", i)) break;
    /* A ring of sends and receives: each rank sends its number right, receives from the left. */
    int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
    for (size_t i = 0; i < 1024; i++) x[i] = (float)rank;
    CHECK_RES(ncclGroupStart(), ncclSuccess);
    CHECK_RES(ncclSend(x, 1024, ncclFloat32, right, comm, NULL), ncclSuccess);
    CHECK_RES(ncclRecv(y, 1024, ncclFloat32, left, comm, NULL), ncclSuccess);
    CHECK_RES(ncclGroupEnd(), ncclSuccess);
    for (size_t i = 0; i < 1024; i++)
        if (!CHECK_EQ_MSG(y[i], (float)left, "recv [%zu]", i)) break;

    CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
    free(x);
    free(y);
    if (check_failures == 0) printf("rank %d: trace_ops ok\n", rank);
    return check_failures ? 1 : 0;
}
