/* The workload of the trace test (tests/test_trace.sh), run by tutti-run with TUTTI_TRACE_FILE
 * set: a few collectives of different sizes (so that the timeline shows several algorithms and
 * their steps) and a ring of sends and receives in a group, each result checked bit for bit
 * (small integers in floats: every sum is exact), and then the counters of tuttiCommStats (with
 * TUTTI_STATS=1 or a trace; without either it must refuse). The trace file is written by
 * ncclCommDestroy. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

    /* The counters: with TUTTI_STATS=1 or a trace, exactly what ran above; else none. */
    tuttiCommStat_t rows[16];
    int nrows = -1;
    const char *stats = getenv("TUTTI_STATS"), *trace = getenv("TUTTI_TRACE_FILE");
    bool counting = (stats != NULL && strcmp(stats, "1") == 0) || (trace != NULL && *trace);
    if (!counting) {
        CHECK_RES(tuttiCommStats(comm, rows, 16, &nrows), ncclInvalidUsage);
    } else if (CHECK_RES(tuttiCommStats(comm, rows, 16, &nrows), ncclSuccess)) {
        static const struct { const char *coll; unsigned long long ops, bytes; } want[] = {
            {"AllReduce", 3, (2 + 1024 + BIG) * sizeof(float)},
            {"Broadcast", 1, 1024 * sizeof(float)},
            {"AllGather", 1, 4096 * sizeof(float)},
            {"Send", 1, 1024 * sizeof(float)},
            {"Recv", 1, 1024 * sizeof(float)},
        };
        for (size_t w = 0; w < sizeof want / sizeof want[0]; w++) {
            unsigned long long ops = 0, bytes = 0;
            for (int i = 0; i < nrows && i < 16; i++) {
                if (strcmp(rows[i].collective, want[w].coll) != 0) continue;
                ops += rows[i].ops;
                bytes += rows[i].bytes;
                CHECK(rows[i].timeNs > 0, "%s/%s: no time", rows[i].collective,
                      rows[i].algorithm);
            }
            CHECK_EQ_MSG(ops, want[w].ops, "tuttiCommStats: %s operations", want[w].coll);
            CHECK_EQ_MSG(bytes, want[w].bytes, "tuttiCommStats: %s bytes", want[w].coll);
        }
        /* Nothing else: the rows' operations add up to the 7 issued (a collective may have
         * rows for several algorithms, one per size). */
        unsigned long long total = 0;
        for (int i = 0; i < nrows && i < 16; i++) total += rows[i].ops;
        CHECK(nrows >= 5 && nrows <= 16, "tuttiCommStats: %d rows", nrows);
        CHECK_EQ_MSG(total, 7, "tuttiCommStats: operations in all rows");
        int none = -1;
        CHECK_RES(tuttiCommStats(comm, NULL, 0, &none), ncclSuccess);
        CHECK_EQ(none, nrows);
    }
    CHECK_RES(tuttiCommStats(comm, rows, 16, NULL), ncclInvalidArgument);

    /* TRACE_OPS_EXIT_ALIVE=1: exit with the communicator alive, as a program that ends
     * abruptly does (its trace is written at exit: the trace_at_exit test). */
    const char *alive = getenv("TRACE_OPS_EXIT_ALIVE");
    if (alive == NULL || strcmp(alive, "1") != 0) CHECK_RES(ncclCommDestroy(comm), ncclSuccess);
    free(x);
    free(y);
    if (check_failures == 0) printf("rank %d: trace_ops ok\n", rank);
    return check_failures ? 1 : 0;
}
